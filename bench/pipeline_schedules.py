#!/usr/bin/env python3
"""Pipeline schedules on one model and batch: step time, peak memory per stage, bubble.

Runs titan's llama3 debugmodel (fp32) once per schedule under pipeline parallelism, and once
as the FSDP baseline on the same number of ranks, all with the same global batch, and prints
per schedule: the median step time (steps 2..N), each pipeline rank's peak memory (its step
line's `memory:`, the live tensors' high-water mark on the CPU), the fraction of its
forward-backward time each rank waited for its peers (the measured bubble plus the transfers,
from the line titan logs at the end) and the schedule's simulated bubble (every forward 1,
backward 2, transfers free), next to (p - 1) / (m + p - 1).

ZBVZeroBubble runs twice: with the even split (TorchTitan's: the first and last stages one block
fewer; in the V both sit on rank 0, which then holds 2 of the 6 blocks and the output) and with
the split that gives each rank Interleaved1F1B's even split's work (3 blocks on one rank, 3 and
the output on the other), so that the two schedules compare at the same balance.

Usage: bench/pipeline_schedules.py [--pp 2] [--seq-len 512] [--local-batch 8]
           [--microbatch 1] [--steps 6] [--titan build/titan] [--out results.jsonl]
           [--runs "Interleaved1F1B,ZBV balanced"]
Standard library only; one process per rank, one thread each (OMP_NUM_THREADS=1).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

SCHEDULES = ["GPipe", "1F1B", "Interleaved1F1B", "ZBVZeroBubble"]
# llama3 debugmodel's 6 blocks in a V of 4 stages, rank 0 (stages 0 and 3) with 3 blocks and the
# output, rank 1 with 3 blocks: Interleaved1F1B's balance under its even split, mirrored.
ZBV_BALANCED = ("tok_embeddings,layers.0,layers.1;layers.2,layers.3;layers.4;"
                "layers.5,norm,output")
MEMORY = re.compile(r"step: (\d+)(?:/\d+)? .* memory: ([0-9.]+)GiB")
WAITED = re.compile(r"Pipeline rank (\d+): waited for its peers ([0-9.]+) s of ([0-9.]+) s .* "
                    r"simulated bubble is ([0-9.]+)%")


def run(args, name, extra):
    dump = tempfile.mkdtemp(prefix=f"titan_pp_bench_{name}_")
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "../../shared/data/corpora/tinyshakespeare.txt")
    ngpu = args.pp
    cmd = [args.titan, "launch", "--module", "llama3", "--config", "llama3_debugmodel",
           "--training.seq_len", str(args.seq_len), "--training.steps", str(args.steps),
           "--training.global_batch_size", str(args.local_batch),
           "--metrics.log_freq", "1", "--training.dataset_path", data,
           "--job.dump_folder", dump] + extra
    env = dict(os.environ, NGPU=str(ngpu), OMP_NUM_THREADS="1", LOG_RANK="all")
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    with open(os.path.join(dump, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    step_time = statistics.median(r["step_time_s"] for r in records[1:])
    ranks = []
    for r in range(ngpu):
        with open(os.path.join(dump, "logs", f"rank_{r}.log")) as f:
            text = f.read()
        memory = max(float(m.group(2)) for m in MEMORY.finditer(text))
        waited = WAITED.search(text)
        ranks.append({
            "rank": r, "memory_gib": memory,
            "waited_pct": 100 * float(waited.group(2)) / float(waited.group(3)) if waited else None,
            "simulated_bubble_pct": float(waited.group(4)) if waited else None,
        })
    return {"schedule": name, "step_time_s": step_time, "loss": records[-1]["loss"],
            "ranks": ranks}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pp", type=int, default=2)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--local-batch", type=int, default=8)
    p.add_argument("--microbatch", type=int, default=1)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--titan", default="build/titan")
    p.add_argument("--runs", help="comma-separated run names to keep (default: all)")
    p.add_argument("--out")
    args = p.parse_args()
    m = args.local_batch // args.microbatch
    results = [run(args, "FSDP", ["--training.local_batch_size",
                                  str(args.local_batch // args.pp)])]
    runs = [(s, s, []) for s in SCHEDULES]
    if args.pp == 2:
        runs.append(("ZBV balanced", "ZBVZeroBubble",
                     ["--parallelism.module_fqns_per_model_part", ZBV_BALANCED]))
    if args.runs:
        runs = [r for r in runs if r[0] in args.runs.split(",")]
    for name, s, extra in runs:
        results.append(run(args, name, [
            "--training.local_batch_size", str(args.local_batch),
            "--parallelism.pipeline_parallel_degree", str(args.pp),
            "--parallelism.pipeline_parallel_schedule", s,
            "--parallelism.pipeline_parallel_microbatch_size", str(args.microbatch)] + extra))
    theory = 100 * (args.pp - 1) / (m + args.pp - 1)
    print(f"llama3 debugmodel, seq {args.seq_len}, global batch {args.local_batch}, "
          f"{args.pp} ranks, {m} microbatches of {args.microbatch}; (p-1)/(m+p-1) = "
          f"{theory:.1f}%")
    print(f"{'run':16} {'step s':>7} {'vs FSDP':>7} {'final loss':>10}  per rank: memory GiB, "
          f"waited %, simulated bubble %")
    base = results[0]["step_time_s"]
    for r in results:
        per_rank = "  ".join(
            f"r{x['rank']} {x['memory_gib']:.2f}" +
            (f" {x['waited_pct']:.1f} {x['simulated_bubble_pct']:.1f}"
             if x["waited_pct"] is not None else "")
            for x in r["ranks"])
        print(f"{r['schedule']:16} {r['step_time_s']:7.3f} {r['step_time_s'] / base:7.2f} "
              f"{r['loss']:10.4f}  {per_rank}")
    if args.out:
        with open(args.out, "w") as f:
            for r in results:
                f.write(json.dumps(dict(r, seq_len=args.seq_len, microbatches=m,
                                        theory_bubble_pct=theory)) + "\n")


if __name__ == "__main__":
    sys.exit(main())
