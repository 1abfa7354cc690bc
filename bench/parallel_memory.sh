#!/usr/bin/env bash
# Per-rank memory and step time of the parallel layouts, measured (llama3 debug model, fp32,
# seq_len 512, local batch 4): parameter bytes and parameters + gradients + AdamW state under
# FSDP 1, 2 and 4 (expect ~1/N plus the padding) and under TP 1, 2 and 4 (the same global batch
# of 4; the attention/FFN matrices and the vocab-parallel embedding and output divide by TP, the
# norms do not), and the peak of live tensor bytes under each activation-checkpointing mode.
# Prints one table; run after ./run_tests.sh or a build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
titan="$root/build/titan"
data="${DATA:-$root/../shared/data/corpora/tinyshakespeare.txt}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

run() {  # run NGPU NAME args...
  local ngpu=$1 name=$2
  shift 2
  NGPU=$ngpu "$titan" launch --module llama3 --config llama3_debugmodel --training.steps 4 \
    --training.seq_len 512 --training.local_batch_size 4 --metrics.log_freq 1 \
    --training.dataset_path "$data" --job.dump_folder "$tmp/$name" "$@" > "$tmp/$name.out" 2>&1
  local state params step_time peak
  state=$(grep -o 'parameters [0-9.]* MiB, gradients [0-9.]* MiB, optimizer [0-9.]* MiB' \
    "$tmp/$name/logs/rank_0.log" | awk '{s = $2 + $5 + $8} END {printf "%.2f", s}')
  params=$(grep -o 'parameters [0-9.]* MiB, gradients' "$tmp/$name/logs/rank_0.log" | awk '{print $2}')
  step_time=$(tail -1 "$tmp/$name/metrics.jsonl" | sed 's/.*"step_time_s":\([0-9.]*\).*/\1/')
  peak=$(tail -1 "$tmp/$name/metrics.jsonl" | sed 's/.*"memory_gib":\([0-9.e-]*\).*/\1/')
  printf "%-20s %6s %12s %22s %16.1f %8.3f\n" "$name" "$ngpu" "$params" "$state" \
    "$(echo "$peak * 1024" | bc -l)" "$step_time"
}

printf "%-20s %6s %12s %22s %16s %8s\n" "run" "ranks" "params MiB" "params+grads+opt MiB" \
  "peak live MiB" "step s"
run 1 fsdp1
run 2 fsdp2
run 4 fsdp4
run 2 tp2 --parallelism.tensor_parallel_degree 2
run 4 tp4 --parallelism.tensor_parallel_degree 4
for mode in none full "selective 2" "selective op"; do
  set -- $mode
  run 2 "ac_${1}${2:-}" --activation_checkpoint.mode "$1" \
    ${2:+--activation_checkpoint.selective_ac_option $2}
done
