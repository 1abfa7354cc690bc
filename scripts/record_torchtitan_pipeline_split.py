#!/usr/bin/env python3
"""Records TorchTitan's default pipeline split as a table titan's tests compare against.

Usage: python3 scripts/record_torchtitan_pipeline_split.py TORCHTITAN_CHECKOUT > OUT.json

Takes _generate_llm_fqn_per_model_part from torchtitan/distributed/pipeline_parallel.py of a
TorchTitan checkout (its own code, run unmodified: only that function is compiled, since the
module's imports need a current torch) and records the module names of every stage for each
case below, or that the split is refused (ValueError). Needs no torch.
"""
import ast
import json
import subprocess
import sys

CASES = [
    # (num_stages, num_layers, input_weight, output_weight)
    (1, 6, 1, 1),
    (2, 2, 1, 1),
    (2, 3, 1, 1),
    (2, 6, 1, 1),
    (3, 6, 1, 1),
    (4, 6, 1, 1),
    (4, 8, 1, 1),
    (8, 6, 1, 1),
    (4, 6, 2, 2),
    (2, 3, 2, 2),
    (3, 7, 0, 0),
    (4, 16, 1, 2),
    (16, 126, 1, 1),
    (9, 6, 1, 1),   # more stages than effective layers
    (4, 2, 1, 1),   # exactly as many stages as effective layers
    (6, 6, 2, 1),   # the embedding outweighs a stage
    (0, 6, 1, 1),
]


def load_function(checkout):
    path = f"{checkout}/torchtitan/distributed/pipeline_parallel.py"
    tree = ast.parse(open(path).read(), path)
    fn = next(n for n in tree.body
              if isinstance(n, ast.FunctionDef) and n.name == "_generate_llm_fqn_per_model_part")
    scope = {}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), path, "exec"), scope)
    return scope[fn.name]


def main():
    checkout = sys.argv[1]
    split = load_function(checkout)
    rows = []
    for stages, layers, input_weight, output_weight in CASES:
        row = {"num_stages": stages, "num_layers": layers, "input_weight": input_weight,
               "output_weight": output_weight}
        try:
            row["stages"] = split(stages, layers, input_weight, output_weight)
        except ValueError as e:
            row["error"] = str(e)
        rows.append(row)
    commit = subprocess.run(["git", "-C", checkout, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print('{"source": "torchtitan/distributed/pipeline_parallel.py '
          '_generate_llm_fqn_per_model_part",')
    print(f' "torchtitan_commit": "{commit}",')
    print(' "cases": [')
    print(",\n".join("  " + json.dumps(row) for row in rows))
    print(" ]}")


if __name__ == "__main__":
    main()
