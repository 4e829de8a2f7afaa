"""Milliseconds per step of the decompressor's fast step: its loss as it is computed now and as it was.

Each entry is a whole fast optimiser step (compressor and decompressor forward, loss, backward, fused
AdamW) at the ``fast`` recipe's batch, on windows drawn from a synthetic database, differing only in the loss:

- ``script``: ``objective.decompressor_losses`` with the script's bone-by-bone forward kinematics (the
  toolkit step's arithmetic, here under the fast step's optimiser);
- ``level``: the same objective with ``level_kinematics.level_forward_kinematics``;
- ``before``: (with ``--before REV``) the same objective with ``level_kinematics.py`` as it was at git
  revision REV, read with ``git show``, and its batches gathered array by array (``values[batch]``), as
  ``WindowBatches`` gathered them before it kept one row per frame: the fast step before ``fast_objective``;
- ``fast``: ``fast_objective.fast_decompressor_losses``, what the fast step computes now.

In each repeat every entry runs ``--steps`` steps in turn, in one process, so a spell in which the busy
machine is slower hits them alike; the table gives the median ms per step over the repeats and, per
entry, the median [lowest, highest] of each repeat's own ratio entry / ``fast``.

    python benchmarks/bench_decompressor_step.py [--frames 50000] [--batch 128] [--threads 1]
        [--precision bfloat16 --precision float32] [--repeats 7] [--steps 20] [--before REV] [--json FILE]
"""
import importlib.util
import json
import pathlib
import platform
import statistics
import subprocess
import tempfile
import time

import click
import torch

from motion_matching.data import generate
from motion_matching.decompressor.batches import TRAINED_ON, WindowBatches
from motion_matching.decompressor.config import recipe_config
from motion_matching.decompressor.fast_objective import fast_decompressor_losses
from motion_matching.decompressor.inputs import load_inputs
from motion_matching.decompressor.kinematics import matrix_forward_kinematics
from motion_matching.decompressor.level_kinematics import level_forward_kinematics
from motion_matching.decompressor.objective import decompressor_losses
from motion_matching.decompressor.train import make_autoencoder
from motion_matching.training.step import OptimiserStep, PrecisionForward

LEVEL_MODULE = "motion_matching/decompressor/level_kinematics.py"
WARM_STEPS = 5


def kinematics_at(revision):
    """``level_forward_kinematics`` as ``level_kinematics.py`` defined it at git ``revision``."""
    root = pathlib.Path(__file__).resolve().parent.parent
    source = subprocess.run(["git", "show", f"{revision}:{LEVEL_MODULE}"], cwd=root, check=True,
                            capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader(f"level_kinematics_{revision}", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{revision}:{LEVEL_MODULE}", "exec"), module.__dict__)
    return module.level_forward_kinematics


class ArrayBatches(WindowBatches):
    """``WindowBatches`` gathering each array of the same windows on its own, as it used to."""

    def __init__(self, inputs, *, batch_size):
        super().__init__(inputs, batch_size=batch_size)
        self.arrays, self.X = {name: inputs.arrays[name] for name in TRAINED_ON}, inputs.X

    def next(self):
        batch = self.indices()
        return {name: values[batch] for name, values in self.arrays.items()}, self.X[batch], batch


def loss_functions(before):
    """Entry name -> ``losses(module, gnd, X, parents, forward)`` returning ``(LossTerms, Zgnd)``."""
    entries = {"script": lambda *args: decompressor_losses(*args, kinematics=matrix_forward_kinematics),
               "level": lambda *args: decompressor_losses(*args, kinematics=level_forward_kinematics)}
    if before:
        old = kinematics_at(before)
        entries["before"] = lambda *args: decompressor_losses(*args, kinematics=old)
    entries["fast"] = fast_decompressor_losses
    return entries


class TimedStep:
    """One entry's model, optimiser and batches; ``run(steps)`` returns the seconds ``steps`` steps took."""

    def __init__(self, losses, inputs, config, *, batches=WindowBatches):
        self.losses, self.parents = losses, inputs.parents
        self.module = make_autoencoder(inputs, config)
        self.update = OptimiserStep(self.module, config)
        self.forward = PrecisionForward(config.precision, "cpu")
        self.source = batches(inputs, batch_size=config.batch_size)

    def run(self, steps):
        started = time.perf_counter()
        for _ in range(steps):
            gnd, X, _ = self.source.next()
            terms, _ = self.losses(self.module, gnd, X, self.parents, self.forward)
            self.update(terms.loss)
        return time.perf_counter() - started


def measure(inputs, *, precision, batch, repeats, steps, before):
    """One precision's rows: per entry the median ms per step and the paired ratios to ``fast``."""
    # the networks' iterations: the fast recipe's last tenth (each frame's latent) is another step
    config = recipe_config("fast", batch_size=batch, precision=precision, latent_share=0.0)
    entries = {name: TimedStep(losses, inputs, config, batches=ArrayBatches if name == "before" else WindowBatches)
               for name, losses in loss_functions(before).items()}
    for entry in entries.values():
        entry.run(WARM_STEPS)
    times = {name: [] for name in entries}
    for _ in range(repeats):
        for name, entry in entries.items():
            times[name].append(entry.run(steps) / steps * 1000)
    rows = []
    for name, values in times.items():
        ratios = [value / fast for value, fast in zip(values, times["fast"])]
        rows.append({"precision": precision, "entry": name, "ms": statistics.median(values),
                     "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
                     "ms_repeats": values})
    return rows


def print_table(rows, *, batch, threads):
    click.echo(f"batch {batch}, {threads} thread(s); ms per step (median), entry / fast paired per repeat")
    click.echo(f"{'precision':>9} {'entry':>7} {'ms':>7} {'/ fast median [min, max]':>26}")
    for row in rows:
        click.echo(f"{row['precision']:>9} {row['entry']:>7} {row['ms']:>7.2f} {row['ratio_median']:>11.2f} "
                   f"[{row['ratio_min']:.2f}, {row['ratio_max']:.2f}]")


@click.command()
@click.option("--frames", type=click.IntRange(min=1200), default=50_000, show_default=True,
              help="Frames of the synthetic database (ignored with --data).")
@click.option("--data", type=click.Path(exists=True, file_okay=False), default=None,
              help="A folder holding database.bin and features.bin to draw from instead.")
@click.option("--batch", type=click.IntRange(min=1), default=128, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--precision", "precisions", multiple=True, type=click.Choice(["bfloat16", "float32"]),
              default=("bfloat16", "float32"), show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=7, show_default=True)
@click.option("--steps", type=click.IntRange(min=1), default=20, show_default=True, help="Steps per entry per repeat.")
@click.option("--before", default=None, help="A git revision whose level_kinematics.py is timed as 'before'.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write the rows here.")
def main(frames, data, batch, threads, precisions, repeats, steps, before, json_path):
    """Time the decompressor's fast step with each loss, interleaved, and print the medians and ratios."""
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as folder:
        if data is None:
            files = generate.generate_files(folder, nframes=frames)
        else:
            files = {"database": pathlib.Path(data) / "database.bin", "features": pathlib.Path(data) / "features.bin"}
        inputs = load_inputs(files["database"], files["features"])
    rows = [row for precision in precisions
            for row in measure(inputs, precision=precision, batch=batch, repeats=repeats, steps=steps, before=before)]
    print_table(rows, batch=batch, threads=threads)
    if json_path:
        with open(json_path, "w") as stream:
            json.dump({"frames": inputs.nframes, "batch": batch, "threads": threads, "repeats": repeats,
                       "steps": steps, "before": before, "torch": torch.__version__,
                       "machine": platform.processor() or platform.machine(), "rows": rows}, stream, indent=2)
            stream.write("\n")


if __name__ == "__main__":
    main()
