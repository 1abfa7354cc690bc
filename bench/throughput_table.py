"""The table of bench/run_throughput.sh from its results file (JSON Lines), optionally beside an
earlier results file.

  python bench/throughput_table.py RESULTS.jsonl [--compare OLDER.jsonl]

One row per (config, layout, implementation: titan, titan compile mode, PyTorch eager, PyTorch
under torch.compile): tokens/s per rank over the repetitions (median, min, max), each titan row's
ratio of medians to PyTorch eager and to PyTorch compile, titan compile's ratios to titan eager
(tokens/s and peak memory), MFU of the median against the fp32 GEMM roof
measured in the same run (the best of the measurements taken before every run; each is the
median over the layout's ranks measuring at once), the lowest of those measurements in percent
of the best (well below 100: other work shared the CPUs during some runs), titan's peak live
tensor bytes (its metrics' memory_gib), the seconds per step rank 0 waited on titan's data-parallel
collectives (median; its metrics' fsdp_wait_s: the communication compute did not hide) and the
largest per-rank max RSS (/usr/bin/time) over the repetitions. With --compare, the older file's titan median and the change.
"""

import argparse
import json
import statistics
from collections import defaultdict

IMPLS = {"titan": "titan", "titan-compile": "titan compile", "eager": "PyTorch eager",
         "compile": "PyTorch compile"}


def load(path: str):
    runs, gemm, machine = defaultdict(list), {}, {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r["impl"] == "machine":
                machine[r["event"]] = r
            elif r["impl"] == "gemm":
                gemm.setdefault((r["config"], r["layout"]), []).append(r["gflops_per_rank"])
            else:
                impl = "eager" if r["impl"] == "reference" else r["impl"]  # older files
                runs[(r["config"], r["layout"], impl)].append(r)
    return runs, gemm, machine


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results")
    p.add_argument("--compare", help="an earlier results file")
    args = p.parse_args()
    runs, gemm, machine = load(args.results)
    old_runs = load(args.compare)[0] if args.compare else {}
    start, end = machine.get("start"), machine.get("end")
    if start:
        kernels = start.get("cpu_capability") or start.get("OPENBLAS_CORETYPE") or "?"
        print(f"{start['time']}: titan {start['titan_revision']}, torch {start['torch']}, "
              f"{start['cpu']} x {start['cores']}, CPU kernels {kernels}, OMP_WAIT_POLICY="
              f"{start.get('OMP_WAIT_POLICY') or 'unset'}, {start['steps']} steps (1 warm-up), "
              f"{start.get('competing_load', 0)} competing CPU-bound process(es), "
              f"load average {start['loadavg_1m']:.2f} at start"
              + (f", {end['loadavg_1m']:.2f} at end" if end else "") + "\n")

    header = ["config", "layout", "impl", "reps", "tok/s/rank median", "min", "max",
              "titan/eager", "titan/compile", "vs titan eager: tok/s", "memory",
              "GEMM roof GFLOP/s", "lowest roof %", "MFU %",
              "titan memory GiB", "DP wait s/step", "max RSS GiB"]
    if args.compare:
        header += ["earlier median", "change"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for (config, layout) in sorted({(c, l) for c, l, _ in runs}):
        roofs = gemm.get((config, layout), [])
        roof = max(roofs) if roofs else None
        medians, memory = {}, {}
        for impl in IMPLS:
            rs = runs.get((config, layout, impl))
            if rs:
                medians[impl] = statistics.median(r["tps_per_rank"] for r in rs)
                if impl.startswith("titan"):
                    memory[impl] = max(r["titan_memory_gib"] for r in rs)

        def ratio(impl: str, other: str, of=medians) -> str:
            ok = impl.startswith("titan") and impl != other and impl in of and other in of
            return f"{of[impl] / of[other]:.2f}" if ok else ""

        for impl in IMPLS:
            rs = runs.get((config, layout, impl))
            if not rs:
                continue
            tps = [r["tps_per_rank"] for r in rs]
            med = medians[impl]
            mfu = f"{100 * rs[0]['flops_per_token'] * med / (roof * 1e9):.1f}" if roof else ""
            mem = f"{memory[impl]:.2f}" if impl in memory else ""
            waits = [r["fsdp_wait_s"] for r in rs if "fsdp_wait_s" in r]
            wait = f"{statistics.median(waits):.3f}" if waits else ""
            row = [config, layout, IMPLS[impl], str(len(rs)),
                   f"{med:.1f}", f"{min(tps):.1f}", f"{max(tps):.1f}", ratio(impl, "eager"),
                   ratio(impl, "compile"), ratio(impl, "titan"), ratio(impl, "titan", memory),
                   f"{roof:.1f}" if roof else "",
                   f"{100 * min(roofs) / roof:.0f}" if roof else "", mfu, mem, wait,
                   f"{max(r['max_rss_gib'] for r in rs):.2f}"]
            if args.compare:
                old = old_runs.get((config, layout, impl))
                if old:
                    old_med = statistics.median(r["tps_per_rank"] for r in old)
                    row += [f"{old_med:.1f}", f"{100 * (med / old_med - 1):+.1f}%"]
                else:
                    row += ["", ""]
            print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
