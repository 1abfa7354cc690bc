"""Prints every scalar of a TensorBoard run folder as JSON {tag: [[step, value], ...]}, read by
TensorBoard's own event accumulator (the reader behind its UI), which checks each record's CRCs."""
import json
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

accumulator = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
accumulator.Reload()
print(json.dumps({tag: [[e.step, e.value] for e in accumulator.Scalars(tag)]
                  for tag in accumulator.Tags()["scalars"]}))
