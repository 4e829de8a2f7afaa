"""How much of a stepper's rollout error is its arithmetic? One stepper.bin stepped in float32 and in bfloat16.

Each ``--stepper`` (a stepper.bin, as ``NAME=PATH`` or ``PATH``) steps the same windows that ``evaluate-stepper``
steps (every 20-frame window inside one clip of the database, or an evenly spaced sample of them), once with its
matrix products in float32 (the runtime's arithmetic and the evaluation's) and once under bfloat16 autocast
(the arithmetic the ``fast`` recipe trains in on CPUs that multiply bfloat16 natively). The difference is the
floor bfloat16 training puts under the error: a network that has learned its database closer than bfloat16's
rounding (8 bits of mantissa, about 0.4% of each value) cannot be trained further by a bfloat16 rollout, whose
own error stays about that of the second column.

Prints a table (features L1, latent L1 and the toolkit's loss for each precision); ``--json`` writes it.

    python benchmarks/bench_stepper_precision.py --database D --features F --latent L \\
        --stepper anchor=benchmarks/anchors/stepper-lafan/outputs/stepper.bin [--stepper ...] [--json FILE]
"""
import json
import os
import platform
import sys

import click

from motion_matching.stepper.config import WINDOW
from motion_matching.stepper.evaluate import load_stepper, measure_windows, window_starts
from motion_matching.stepper.inputs import load_inputs

PRECISIONS = ("float32", "bfloat16")


def rollout_errors(module, inputs, starts, precision):
    """``{"feature_l1", "latent_l1", "loss"}`` (floats) of ``module`` stepping the windows from ``starts`` with
    its products in ``precision``, measured as evaluate-stepper measures."""
    measured = measure_windows(module, inputs, starts, precision=precision)
    return {"feature_l1": float(measured["feature_l1"].mean()), "latent_l1": float(measured["latent_l1"].mean()),
            "loss": float(measured["loss_terms"].loss)}


def named(value):
    name, _, path = value.rpartition("=")
    return name or os.path.basename(os.path.dirname(os.path.abspath(path))), path


@click.command()
@click.option("--database", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--features", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--latent", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--stepper", "steppers", required=True, multiple=True, help="stepper.bin, as NAME=PATH or PATH")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the results here")
def main(database, features, latent, steppers, json_path):
    inputs = load_inputs(database, features, latent, window=WINDOW)
    starts, possible = window_starts(inputs.ranges)
    rows = []
    for name, path in map(named, steppers):
        module = load_stepper(path, nfeatures=inputs.X.shape[1], nlatent=inputs.Z.shape[1])
        rows.append({"stepper": name, "path": path,
                     **{precision: rollout_errors(module, inputs, starts, precision) for precision in PRECISIONS}})
    print(f"{len(starts)} windows of {WINDOW} frames ({possible} possible), {inputs.nframes} frames")
    print(f"{'stepper':<16}" + "".join(f"{precision + ' ' + measure:>22}" for precision in PRECISIONS
                                       for measure in ("features", "latent", "loss")))
    for row in rows:
        print(f"{row['stepper']:<16}" + "".join(f"{row[precision][measure]:>22.3g}" for precision in PRECISIONS
                                                for measure in ("feature_l1", "latent_l1", "loss")))
    if json_path:
        command = " ".join(["python", "benchmarks/bench_stepper_precision.py"] + sys.argv[1:])
        with open(json_path, "w", encoding="utf-8") as stream:
            json.dump({"benchmark": "stepper-precision", "command": command,
                       "inputs": {"database": database, "features": features, "latent": latent},
                       "windows": len(starts), "frames": inputs.nframes, "machine": platform.processor(),
                       "rows": rows}, stream, indent=1)


if __name__ == "__main__":
    main()
