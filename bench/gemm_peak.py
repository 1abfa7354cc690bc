"""Measured fp32 GEMM throughput of one process: the MFU denominator of run_throughput.sh.

Square n x n float32 matmuls through PyTorch (the wheel titan builds on: the reference and
titan's LibTorch run the same oneMKL, so this is the roof of both), best of --reps after a
warm-up, on --threads intra-op threads. Prints one JSON line: gflops, ATen's CPU capability in
use ("AVX512", ...), threads, n. Run with the Python of scripts/setup.sh's environment.
"""

import argparse
import json
import os
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    a, b = torch.randn(args.n, args.n), torch.randn(args.n, args.n)
    c = a @ b  # warm-up
    best = 0.0
    for _ in range(args.reps):
        start = time.perf_counter()
        torch.matmul(a, b, out=c)
        best = max(best, 2.0 * args.n ** 3 / (time.perf_counter() - start))
    print(json.dumps({"gflops": best / 1e9, "core": torch.backends.cpu.get_cpu_capability(),
                      "threads": torch.get_num_threads(), "n": args.n}))


if __name__ == "__main__":
    main()
