"""Prints PyTorch's pipeline schedule orders (torch.distributed.pipelining.schedules) as JSON.

Usage: torch_schedule_orders.py NAME:PP:STAGES_PER_RANK:MICROBATCHES ...
Output: {"NAME:PP:STAGES_PER_RANK:MICROBATCHES": {"0": ["0F0", "0F1", ...], "1": [...]}, ...}:
each pp rank's compute actions in order, the idle slots and gradient-reduction bookkeeping left
out. The orders come from the schedules'
own generators, called on a stand-in object with the attributes they read, so no process group
is needed.
"""
import json
import sys
import types

from torch.distributed.pipelining import schedules as s

COMPUTE = {"F", "B", "I", "W"}


def orders(name, pp, stages_per_rank, microbatches):
    fake = types.SimpleNamespace(
        _num_stages=pp * stages_per_rank,
        num_stages=pp * stages_per_rank,
        _n_microbatches=microbatches,
        pp_group_size=pp,
        n_local_stages=stages_per_rank,
    )
    if name in ("GPipe", "1F1B"):
        cls = s.ScheduleGPipe if name == "GPipe" else s.Schedule1F1B
        per_rank = cls._get_pipeline_order(fake)
    else:
        cls = s.ScheduleInterleaved1F1B if name == "Interleaved1F1B" else s.ScheduleZBVZeroBubble
        rounds = max(1, microbatches // pp)
        fake.number_of_rounds = rounds
        fake.microbatches_per_round = microbatches // rounds
        per_rank = {r: cls._calculate_single_rank_operations(fake, r) for r in range(pp)}
    return {
        str(r): [str(a) for a in acts if a is not None and a.computation_type.value in COMPUTE]
        for r, acts in per_rank.items()
    }


if __name__ == "__main__":
    out = {}
    for case in sys.argv[1:]:
        name, pp, spr, mb = case.split(":")
        out[case] = orders(name, int(pp), int(spr), int(mb))
    print(json.dumps(out))
