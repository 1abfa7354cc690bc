#!/usr/bin/env bash
# Setup memory: a rank builds the model on the meta device, parallelizes it, then allocates and
# initialises only its own pieces (src/titan/distributed/model_part.h), so its peak while doing
# so is about its shard plus one initialisation chunk, never the whole model.
#  1. llama3 3B (3.2B parameters, 12.8 GB in fp32) under FSDP 4 on this machine: write the seed
#     checkpoint (setup only; the seed checkpoint is model-only, so no optimizer state is
#     allocated) and print each rank's peak live tensor bytes and peak RSS at the end of setup
#     next to its parameter shard.
#  2. The fake-backend dry run of llama3_70b for 64 ranks: the process's peak RSS.
# Run after ./run_tests.sh or a build. About 3-5 minutes on 2 cores; needs ~20 GB of memory and
# ~13 GB of disk under $TMPDIR.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
titan="$root/build/titan"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "== llama3 3B, FSDP 4, seed checkpoint (setup only)"
start=$(date +%s)
NGPU=4 OMP_NUM_THREADS=1 LOG_RANK=all "$titan" launch --module llama3 --config llama3_debugmodel \
  --model.flavor 3B --training.seq_len 2048 --checkpoint.enable --checkpoint.last_save_model_only \
  --checkpoint.create_seed_checkpoint --job.dump_folder "$tmp/3b" > "$tmp/3b.out" 2>&1 ||
  { tail -20 "$tmp/3b.out"; exit 1; }
printf "%-6s %18s %18s %14s\n" "rank" "shard GiB" "peak live GiB" "peak RSS GiB"
for r in 0 1 2 3; do
  grep -o 'peak live tensors [0-9.]* GiB, peak RSS [0-9.]* GiB; this rank.s parameters [0-9.]* GiB' \
    "$tmp/3b/logs/rank_$r.log" |
    awk -v r="$r" '{printf "%-6s %18s %18s %14s\n", r, $13, $4, $8}'
done
echo "whole model: $(grep -o 'Model llama3 3B: [0-9,]* parameters' "$tmp/3b/logs/rank_0.log")" \
  "($(( $(date +%s) - start )) s)"

echo "== llama3_70b dry run for 64 ranks (COMM_MODE=fake_backend)"
COMM_MODE=fake_backend NGPU=64 /usr/bin/time -f "peak RSS %M KiB, %e s" "$titan" launch \
  --module llama3 --config llama3_70b 2>&1 | grep -E "model:|parameters per rank|memory per rank|peak RSS"
