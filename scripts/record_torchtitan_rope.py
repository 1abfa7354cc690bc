#!/usr/bin/env python3
"""Records TorchTitan's Llama 3 RoPE frequencies as a table titan's tests compare against.

Usage: python3 scripts/record_torchtitan_rope.py TORCHTITAN_0.3.0 TORCHTITAN_0.2.2 > OUT.json

Each argument is an unpacked TorchTitan wheel or checkout (`pip download --no-deps
torchtitan==0.3.0`, then unzip). The recorder runs TorchTitan's own code, unmodified; only the
imports that need the rest of TorchTitan are stubbed:
- 0.3.0: `ComplexRoPE._precompute_cache` of torchtitan/models/common/rope.py with the config
  its llama3 flavors use (`scaling="llama"`, theta 500000, the Config's scaling defaults);
- 0.2.2: `precompute_freqs_cis` of torchtitan/models/llama3/model/model.py with the default
  `RoPEScalingArgs()` of its args.py, as every 0.2.2 llama3 flavor.
The frequencies are the second argument of the `torch.outer(positions, freqs)` call both make.
TorchTitan computes them in float32 (`.float()`); the recorder runs the same code a second time
with `Tensor.float` answering float64, which records the formula itself at float64 precision.
Needs torch (titan's Python environment has it).
"""
import ast
import json
import math
import sys
import types
from dataclasses import dataclass

import torch
from torch import nn

# TorchTitan 0.3.0's models/llama3/__init__.py: dim and n_heads of each flavor (head_dim =
# dim // n_heads), all with theta 500000 and scaling "llama".
FLAVORS = {"debugmodel": (256, 16), "8B": (4096, 32), "70B": (8192, 64)}
THETA = 500000.0


class Capture:
    """Records the frequencies passed to torch.outer, in the precision asked for."""

    def __init__(self, float64):
        self.float64 = float64
        self.freqs = None

    def __enter__(self):
        self.outer, self.to_float = torch.outer, torch.Tensor.float

        def outer(t, freqs):
            self.freqs = freqs.clone()
            return self.outer(t, freqs)

        torch.outer = outer
        if self.float64:
            torch.Tensor.float = lambda x, *a, **k: x.double()
        return self

    def __exit__(self, *exc):
        torch.outer, torch.Tensor.float = self.outer, self.to_float


def load_030(root):
    class Module(nn.Module):
        @dataclass(kw_only=True, slots=True)
        class Config:
            pass

    class Spmd(types.ModuleType):  # type annotations and decorators: each one a no-op
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return lambda *args, **kwargs: (lambda f: f)

    sys.modules.update({
        "spmd_types": Spmd("spmd_types"),
        "torchtitan": types.ModuleType("torchtitan"),
        "torchtitan.protocols": types.ModuleType("torchtitan.protocols"),
        "torchtitan.protocols.module": types.SimpleNamespace(Module=Module),
    })
    module = types.ModuleType("torchtitan.models.common.rope")
    path = f"{root}/torchtitan/models/common/rope.py"
    exec(compile(open(path).read(), path, "exec"), module.__dict__)
    return module.ComplexRoPE


def load_022(root):
    """precompute_freqs_cis and RoPEScalingArgs, taken out of their files by name."""
    namespace = {"torch": torch, "math": math, "dataclass": dataclass}
    for path, name in [(f"{root}/torchtitan/models/llama3/model/args.py", "RoPEScalingArgs"),
                       (f"{root}/torchtitan/models/llama3/model/model.py",
                        "precompute_freqs_cis")]:
        tree = ast.parse(open(path).read(), path)
        node = next(n for n in tree.body if getattr(n, "name", None) == name)
        exec(compile(ast.Module([node], []), path, "exec"), namespace)
    return namespace["precompute_freqs_cis"], namespace["RoPEScalingArgs"]


def main():
    rope_030 = load_030(sys.argv[1])
    precompute_022, scaling_022 = load_022(sys.argv[2])
    out = {"torchtitan": ["0.3.0", "0.2.2"], "torch": torch.__version__, "flavors": {}}
    for flavor, (dim, n_heads) in FLAVORS.items():
        config = rope_030.Config(dim=dim // n_heads, max_seq_len=2, theta=THETA, scaling="llama")
        entry = {"head_dim": dim // n_heads, "theta": THETA,
                 "scaling": {"factor": config.scaling_factor,
                             "low_freq_factor": config.low_freq_factor,
                             "high_freq_factor": config.high_freq_factor,
                             "original_max_position_embeddings":
                                 config.original_max_position_embeddings}}
        for float64 in (False, True):
            key = "inv_freq_float64" if float64 else "inv_freq_float32"
            with Capture(float64) as new:
                rope_030(config)
            with Capture(float64) as old:
                precompute_022(dim // n_heads, 2, THETA, scaling_022())
            if not torch.equal(new.freqs, old.freqs):
                sys.exit(f"{flavor}: TorchTitan 0.3.0 and 0.2.2 disagree ({key})")
            entry[key] = new.freqs.double().tolist()
        out["flavors"][flavor] = entry
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
