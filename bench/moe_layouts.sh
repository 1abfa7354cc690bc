#!/usr/bin/env bash
# Issue 16's layout check on TorchTitan's own Qwen3-MoE debug flavor (debugmodel_moe: 8 layers of
# 64 experts of width 768, top 8; 315.8M parameters), too slow for the CI suite on 2 cores (which
# runs the same layouts on debugmodel_moe_small, tests/integration/moe_test.cpp): FSDP 2,
# TP 2 x FSDP 2 and PP 2 (1F1B) for 20 fp32 steps at seq 32 x global batch 8, each compared to
# FSDP 2 with `titan compare --rtol 1e-4`. About 15 minutes on 2 cores.
#   bench/moe_layouts.sh [output folder]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/titan_moe_layouts}
common=(--module qwen3 --config qwen3_moe_debugmodel --training.seq_len 32
        --training.global_batch_size 8 --lr_scheduler.warmup_steps 2 --training.steps 20
        --metrics.log_freq 1 --training.dataset_path ../shared/data/corpora/tinyshakespeare.txt)
run() {
  local name=$1 ngpu=$2
  shift 2
  local start=$SECONDS
  OMP_NUM_THREADS=1 NGPU=$ngpu build/titan launch "${common[@]}" --job.dump_folder "$out/$name" \
    "$@" > "$out/$name.log" 2>&1
  echo "$name: $((SECONDS - start)) s"
}
rm -rf "$out"
mkdir -p "$out"
run fsdp2 2 --training.local_batch_size 4
run tp2_fsdp2 4 --training.local_batch_size 4 --parallelism.tensor_parallel_degree 2
run pp2 2 --training.local_batch_size 8 --parallelism.pipeline_parallel_degree 2 \
  --parallelism.pipeline_parallel_schedule 1F1B
for layout in tp2_fsdp2 pp2; do
  echo "== fsdp2 vs $layout"
  build/titan compare "$out/fsdp2" "$out/$layout" --rtol 1e-4
done
