#!/usr/bin/env python3
"""Records TorchTitan's learning-rate schedule as a table titan's tests compare against.

Usage: /usr/bin/python3 scripts/record_torchtitan_lr.py TORCHTITAN_CHECKOUT > OUT.json

Loads torchtitan/components/optimizer/lr_scheduler.py from a TorchTitan checkout (its own code,
run unmodified: only the imports that need the rest of TorchTitan are stubbed), builds its
LRSchedulersContainer over a real torch.optim.SGD with lr 1.0 for each case below, and records
the learning rate each training step runs with (the optimizer's lr before the scheduler steps,
as TorchTitan's train loop does). Needs torch (Debian's python3-torch is enough).
"""
import json
import subprocess
import sys
import types
from dataclasses import dataclass

import torch

CASES = [
    # (name, steps, warmup_steps, decay_ratio, decay_type, min_lr_factor)
    ("linear_warmup4_of10", 10, 4, None, "linear", 0.0),
    ("linear_no_warmup", 10, 0, None, "linear", 0.0),
    ("linear_min0.1", 10, 2, None, "linear", 0.1),
    ("sqrt_warmup3", 12, 3, None, "sqrt", 0.0),
    ("cosine_warmup2", 12, 2, None, "cosine", 0.0),
    ("cosine_min0.2", 12, 2, None, "cosine", 0.2),
    ("wsd_linear_decay0.5", 20, 2, 0.5, "linear", 0.0),
    ("wsd_cosine_decay0.25_min0.1", 20, 3, 0.25, "cosine", 0.1),
    ("wsd_sqrt_decay0.3", 20, 5, 0.3, "sqrt", 0.0),
    ("warmup_longer_than_run", 5, 8, None, "linear", 0.0),
    ("constant_decay0", 6, 0, 0.0, "linear", 0.0),
]


def load_module(checkout):
    path = f"{checkout}/torchtitan/components/optimizer/lr_scheduler.py"
    source = open(path).read()

    class Configurable:
        @dataclass(kw_only=True, slots=True)
        class Config:
            pass

    stubs = {
        "torchtitan": types.ModuleType("torchtitan"),
        "torchtitan.config": types.SimpleNamespace(Configurable=Configurable),
        "torchtitan.tools": types.ModuleType("torchtitan.tools"),
        "torchtitan.tools.logging": types.SimpleNamespace(
            logger=types.SimpleNamespace(warning=lambda *a, **k: None)),
        "torchtitan.components.optimizer.optimizer": types.SimpleNamespace(
            OptimizersContainer=list),
        "torch.distributed.checkpoint.stateful": types.SimpleNamespace(
            Stateful=type("Stateful", (), {})),
    }
    sys.modules.update(stubs)
    if not hasattr(torch.optim.lr_scheduler, "LRScheduler"):  # torch < 2.0 names it privately
        torch.optim.lr_scheduler.LRScheduler = torch.optim.lr_scheduler._LRScheduler
    module = types.ModuleType("torchtitan.components.optimizer.lr_scheduler")
    module.__package__ = "torchtitan.components.optimizer"
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def lrs(module, steps, warmup, decay_ratio, decay_type, min_lr_factor):
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=1.0)
    config = module.LRSchedulersContainer.Config(
        warmup_steps=warmup, decay_ratio=decay_ratio, decay_type=decay_type,
        min_lr_factor=min_lr_factor)
    schedulers = config.build(optimizers=[optimizer], training_steps=steps)
    out = []
    for _ in range(steps):
        out.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedulers.step()
    return out


def main():
    checkout = sys.argv[1]
    module = load_module(checkout)
    commit = subprocess.run(["git", "-C", checkout, "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    version = open(f"{checkout}/assets/version.txt").read().strip()
    cases = []
    for name, steps, warmup, ratio, kind, min_lr in CASES:
        cases.append({"name": name, "steps": steps, "warmup_steps": warmup,
                      "decay_ratio": ratio, "decay_type": kind, "min_lr_factor": min_lr,
                      "lr": lrs(module, steps, warmup, ratio, kind, min_lr)})
    json.dump({"provenance": {
        "source": "torchtitan/components/optimizer/lr_scheduler.py (LRSchedulersContainer."
                  "Config.build), run by scripts/record_torchtitan_lr.py with torch "
                  + torch.__version__,
        "torchtitan_version": version, "torchtitan_commit": commit,
        "lr": "optimizer.lr = 1.0; entry i is the lr of training step i + 1"},
        "cases": cases}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
