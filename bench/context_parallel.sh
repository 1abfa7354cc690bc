#!/usr/bin/env bash
# Context parallelism's memory and time on one model and batch: llama3 debugmodel at a long
# sequence (seq 4096 x global batch 1 by default, where the activations dominate a rank's
# memory), fp32, 3 steps, at CP 1 (1 rank), CP 2 and CP 4 (2 and 4 ranks x 1 thread), each CP
# degree with both rotate methods (allgather, alltoall: the ring). FSDP shards over dp_shard x
# cp, so parameters and optimizer state fall with cp too. Prints, from metrics.jsonl over
# steps 2-3: the peak live tensor memory per rank and its ratio to CP 1, the step time and
# tokens/s per rank; then `titan compare` of each layout against CP 1.
# About 10 minutes on 2 cores (the ranks share them: the memory ratios carry, the times less).
#   bench/context_parallel.sh [output folder [titan flags, e.g. --training.seq_len 8192]]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/titan_context_parallel}
shift || true
common=(--module llama3 --config llama3_debugmodel --training.seq_len 4096
        --training.global_batch_size 1 --training.local_batch_size 1
        --lr_scheduler.warmup_steps 1 --training.steps 3 --metrics.log_freq 1
        --training.dataset_path ../shared/data/corpora/tinyshakespeare.txt)
rm -rf "$out"
mkdir -p "$out"
layouts=(cp1)
OMP_NUM_THREADS=1 NGPU=1 build/titan launch "${common[@]}" --job.dump_folder "$out/cp1" "$@" \
  > "$out/cp1.log" 2>&1
for cp in 2 4; do
  for rotate in allgather alltoall; do
    name=cp${cp}_$rotate
    layouts+=("$name")
    OMP_NUM_THREADS=1 NGPU=$cp build/titan launch "${common[@]}" --job.dump_folder "$out/$name" \
      --parallelism.context_parallel_degree "$cp" \
      --parallelism.context_parallel_rotate_method "$rotate" "$@" > "$out/$name.log" 2>&1
  done
done
python3 - "$out" "${layouts[@]}" <<'PY'
import json, sys
out, layouts = sys.argv[1], sys.argv[2:]
print(f"{'layout':16} {'peak live GiB':>14} {'vs CP 1':>8} {'step s':>7} {'tps/rank':>9}")
base = None
for name in layouts:
    rows = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl")][1:]
    peak = max(r["max_active_gib"] for r in rows)
    base = base or peak
    step = sum(r["step_time_s"] for r in rows) / len(rows)
    tps = sum(r["tps"] for r in rows) / len(rows)
    print(f"{name:16} {peak:14.3f} {peak / base:8.2f} {step:7.2f} {tps:9.0f}")
PY
for name in "${layouts[@]:1}"; do
  echo "== CP 1 vs $name"
  build/titan compare "$out/cp1" "$out/$name" --rtol 1e-4 | grep -v "^plot:" | tail -1
done
