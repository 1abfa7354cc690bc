#!/usr/bin/env bash
# Expert parallelism's cost on one model and batch: Qwen3-MoE debugmodel_moe (TorchTitan's debug
# flavor: 8 layers of 64 experts, top 8) on 4 ranks x 1 thread, fp32, seq 64 x global batch 8,
# 6 steps, at EP 1 (FSDP 4), EP 2 and EP 4 (experts sharded over ep, FSDP over efsdp = 4 / ep).
# Prints, from metrics.jsonl over steps 3-6: tokens/s per rank, the peak live tensor
# memory, the seconds per step this rank waited on the dispatch / combine all-to-alls, forward
# and backward (all_to_all_s: what the shared experts' compute did not hide), and their share of
# the step; then `titan compare` of EP 2 and EP 4 against EP 1.
# About 8 minutes on 2 cores (4 ranks share them: the ratios, not the absolute figures, carry).
#   bench/expert_parallel.sh [output folder [titan flags, e.g. --model.flavor debugmodel_moe_small]]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/titan_expert_parallel}
shift || true
common=(--module qwen3 --config qwen3_moe_debugmodel --training.seq_len 64
        --training.global_batch_size 8 --training.local_batch_size 2
        --lr_scheduler.warmup_steps 2 --training.steps 6 --metrics.log_freq 1
        --training.dataset_path ../shared/data/corpora/tinyshakespeare.txt)
rm -rf "$out"
mkdir -p "$out"
for ep in 1 2 4; do
  OMP_NUM_THREADS=1 NGPU=4 build/titan launch "${common[@]}" --job.dump_folder "$out/ep$ep" \
    --parallelism.expert_parallel_degree "$ep" "$@" > "$out/ep$ep.log" 2>&1
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print(f"{'layout':8} {'tps/rank':>9} {'step s':>7} {'all-to-all s':>13} {'share':>6} {'peak live GiB':>14}")
for ep in (1, 2, 4):
    rows = [json.loads(l) for l in open(f"{out}/ep{ep}/metrics.jsonl")][2:]
    mean = lambda k: sum(r.get(k, 0.0) for r in rows) / len(rows)
    a2a, step = mean("all_to_all_s"), mean("step_time_s")
    peak = max(r["max_active_gib"] for r in rows)
    print(f"EP {ep:<5} {mean('tps'):9.0f} {step:7.3f} {a2a:13.4f} {100 * a2a / step:5.1f}% {peak:14.3f}")
PY
for ep in 2 4; do
  echo "== EP 1 vs EP $ep"
  build/titan compare "$out/ep1" "$out/ep$ep" --rtol 1e-4 | grep -v "^plot:" | tail -1
done
