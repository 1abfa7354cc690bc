#!/usr/bin/env python3
"""The time split of one profiled step, from a titan trace (profile_traces/iteration_N/rankR_trace.json).

Prints, per model piece, its forward and backward time (the `layers.<id> forward/backward`,
`output ...`, `loss ...` spans; a forward inside the piece's backward, activation
checkpointing's recompute, is shown as the part of the backward it is); the step's data loading, optimizer and checkpoint save; the
collectives' waits on the training thread by op and group (`<op> [<group>] <bytes> B: <what>`:
the communication compute did not hide) and their time in flight on Gloo's thread
(`gloo:<op>`), with how much of that flight time overlapped a block's forward or backward.

    python3 bench/trace_split.py outputs/profile_traces/iteration_10/rank0_trace.json
"""
import collections
import json
import re
import sys


def spans(events, pattern):
    rx = re.compile(pattern)
    return [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in events
            if e.get("ph") == "X" and rx.fullmatch(e.get("name", ""))]


def overlap(a, intervals):
    """Microseconds of interval a covered by the union of `intervals`."""
    covered, end = 0.0, a[0]
    for s, e, _ in sorted(intervals):
        s, e = max(s, end), min(e, a[1])
        if e > s:
            covered += e - s
            end = e
    return covered


def main(path):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    ms = lambda us: us / 1e3
    pieces = collections.OrderedDict()
    found = sorted(spans(events, r"(layers\.\d+|output|loss) (forward|backward)"))
    backward = collections.defaultdict(list)
    for s, e, name in found:
        if name.endswith(" backward"):
            backward[name.rsplit(" ", 1)[0]].append((s, e))
    for s, e, name in found:
        piece, phase = name.rsplit(" ", 1)
        # A forward inside the piece's own backward is activation checkpointing's recompute.
        if phase == "forward" and any(bs <= s and e <= be for bs, be in backward[piece]):
            phase = "recompute"
        pieces.setdefault(piece, {"forward": 0.0, "backward": 0.0, "recompute": 0.0})[phase] += e - s
    print(f"{'piece':<12} {'forward ms':>11} {'backward ms':>12} {'of it recompute':>16}")
    total = {"forward": 0.0, "backward": 0.0, "recompute": 0.0}
    for piece, t in pieces.items():
        print(f"{piece:<12} {ms(t['forward']):>11.2f} {ms(t['backward']):>12.2f} "
              f"{ms(t['recompute']):>16.2f}")
        for k in total:
            total[k] += t[k]
    print(f"{'all':<12} {ms(total['forward']):>11.2f} {ms(total['backward']):>12.2f} "
          f"{ms(total['recompute']):>16.2f}")
    for name in ("data loading", "optimizer", "checkpoint save"):
        t = sum(e - s for s, e, _ in spans(events, re.escape(name)))
        print(f"{name}: {ms(t):.2f} ms")
    waits = collections.defaultdict(lambda: [0, 0.0, 0])
    for s, e, name in spans(events, r"\w+ \[[^\]]+\] \d+ B: .*"):
        m = re.match(r"(\w+) \[([^\]]+)\] (\d+) B", name)
        w = waits[(m.group(1), m.group(2))]
        w[0] += 1
        w[1] += e - s
        w[2] += int(m.group(3))
    blocks = spans(events, r"layers\.\d+ (forward|backward)")
    flights = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for s, e, name in spans(events, r"gloo:.*"):
        f = flights[name]
        f[0] += 1
        f[1] += e - s
        f[2] += overlap((s, e), blocks)
    print(f"\n{'collective wait':<28} {'count':>6} {'waited ms':>10} {'MiB':>9}")
    for (op, group), (n, t, b) in sorted(waits.items()):
        print(f"{op + ' [' + group + ']':<28} {n:>6} {ms(t):>10.2f} {b / 2**20:>9.2f}")
    print(f"\n{'in flight (Gloo thread)':<28} {'count':>6} {'flight ms':>10} {'under a block ms':>17}")
    for name, (n, t, o) in sorted(flights.items()):
        print(f"{name:<28} {n:>6} {ms(t):>10.2f} {ms(o):>17.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
