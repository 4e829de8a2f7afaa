"""Where does the stepper's fast step spend its time? Its matrix products against everything else.

One process trains the stepper with the ``fast`` recipe's batch, optimiser step and precision (auto resolved
here) on windows of ``--window`` frames of the synthetic locomotion database's features and latent (``--data``:
a folder with database.bin, features.bin and latent.bin; default: the 50,000-frame database with the
generator's stand-in latent), and reports, each the median of ``--repeats`` rounds of ``--steps`` iterations:

- ``step``: one iteration as training runs it (rollout, losses, backward, fused AdamW);
- ``matrix products alone``: the same products on tensors of the same shapes and precision, nothing else
  (per stepped frame: three layers forward; backward, each layer's input and weight gradients), the floor
  that fusing or dropping the other work could reach;
- ``one autocast region``: the step with the whole rollout inside one ``torch.autocast`` (weights cast once
  per iteration rather than once per frame), alternated with ``step`` for a paired ratio;
- from ``torch.profiler`` over ``--steps`` more iterations, the share of the step's CPU time in the
  products (``aten::mm``, ``aten::addmm``) and the other operations that take the most.

Idle only: this explains the step, it does not claim a speed (busy machines: ``bench_stepper_compiled.py``,
``bench_contention.py``). Prints a table; ``--json`` writes everything.

    python benchmarks/bench_stepper_profile.py [--window 20] [--threads 2] [--repeats 5] [--steps 8] [--json FILE]
"""
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import click
import torch
from torch.profiler import ProfilerActivity, profile

from motion_matching.data import generate
from motion_matching.stepper.batches import WindowBatches
from motion_matching.stepper.config import recipe_config
from motion_matching.stepper.inputs import load_inputs
from motion_matching.stepper.objective import stepper_losses
from motion_matching.stepper.train import make_stepper
from motion_matching.training.step import OptimiserStep, PrecisionForward, with_resolved_precision

PRODUCTS = ("aten::mm", "aten::addmm")


class Trainer:
    """The fast step of a stepper on ``frames``-frame windows; ``(outer)`` times one iteration, the rollout
    inside one autocast region when ``outer``."""

    def __init__(self, inputs, config, frames):
        self.module = make_stepper(inputs, config)
        self.update = OptimiserStep(self.module, config)
        self.forward = PrecisionForward(config.precision, "cpu")
        self.precision, self.frames = config.precision, frames
        self.batches = WindowBatches(inputs, batch_size=config.batch_size, window=config.window)

    def __call__(self, outer=False):
        Xgnd, Zgnd = (values[:, :self.frames].contiguous() for values in self.batches.next())
        region = (torch.autocast("cpu", dtype=getattr(torch, self.precision))
                  if outer and self.precision != "float32" else contextlib.nullcontext())
        started = time.perf_counter()
        with region:
            terms, _ = stepper_losses(self.module, Xgnd, Zgnd, self.forward)
        self.update(terms.loss)
        return time.perf_counter() - started


def products_alone(module, *, batch_size, frames, dtype):
    """A function timing (seconds) the matrix products of one iteration on ``frames``-frame windows, alone."""
    layers = module.layers()
    weights = [layer.weight.detach().to(dtype) for layer in layers]
    biases = [layer.bias.detach().to(dtype) for layer in layers]
    inputs = [torch.randn(batch_size, weight.shape[1], dtype=dtype) for weight in weights]
    grads = [torch.randn(batch_size, weight.shape[0], dtype=dtype) for weight in weights]

    def run():
        started = time.perf_counter()
        for _ in range(frames - 1):
            for x, weight, bias in zip(inputs, weights, biases):
                torch.addmm(bias, x, weight.t())
            for x, g, weight in zip(inputs, grads, weights):
                torch.mm(g, weight)  # the input's gradient: the rollout back-propagates through every frame
                torch.mm(g.t(), x)  # the weight's
        return time.perf_counter() - started
    return run


def median_ms(function, *, repeats, steps):
    """Median over ``repeats`` rounds of the median ms of ``steps`` calls of ``function`` (returns seconds)."""
    return statistics.median(1000 * statistics.median(function() for _ in range(steps)) for _ in range(repeats))


def profile_shares(trainer, steps, top=6):
    """(share of the products, [(operation, share)] of the ``top`` others) of ``steps`` iterations' self CPU time."""
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for _ in range(steps):
            trainer()
    events = profiler.key_averages()
    total = sum(event.self_cpu_time_total for event in events)
    products = sum(event.self_cpu_time_total for event in events if event.key in PRODUCTS) / total
    others = sorted((event for event in events if event.key not in PRODUCTS),
                    key=lambda event: -event.self_cpu_time_total)
    return products, [(event.key, event.self_cpu_time_total / total) for event in others[:top]]


def measure(trainer, *, repeats, steps):
    """The report's numbers (a dict) for ``trainer``."""
    for _ in range(3):  # warm-up: the allocator, oneDNN's kernels
        trainer()
        trainer(outer=True)
    step_ms, outer_ms = [], []
    for repeat in range(repeats):
        for outer in ((False, True) if repeat % 2 == 0 else (True, False)):
            (outer_ms if outer else step_ms).append(1000 * statistics.median(trainer(outer) for _ in range(steps)))
    dtype = getattr(torch, trainer.precision)
    alone = products_alone(trainer.module, batch_size=trainer.batches.batch_size, frames=trainer.frames, dtype=dtype)
    alone()
    products_ms = median_ms(alone, repeats=repeats, steps=steps)
    share, others = profile_shares(trainer, steps)
    return {"step_ms": statistics.median(step_ms), "one_autocast_region_ms": statistics.median(outer_ms),
            "step_over_one_region": statistics.median(s / o for s, o in zip(step_ms, outer_ms)),
            "products_alone_ms": products_ms, "products_alone_share": products_ms / statistics.median(step_ms),
            "profiled_products_share": share, "profiled_others": others}


def table(report):
    lines = ["| measure | value |", "|---|---|",
             f"| step | {report['step_ms']:.1f} ms |",
             f"| matrix products alone | {report['products_alone_ms']:.1f} ms "
             f"({100 * report['products_alone_share']:.0f}% of the step) |",
             f"| one autocast region | {report['one_autocast_region_ms']:.1f} ms (step / it "
             f"{report['step_over_one_region']:.2f}) |",
             f"| profiled share of the products | {100 * report['profiled_products_share']:.0f}% |"]
    lines += [f"| profiled {name} | {100 * share:.1f}% |" for name, share in report["profiled_others"]]
    return "\n".join(lines)


@click.command()
@click.option("--data", type=click.Path(exists=True, file_okay=False), default=None,
              help="A folder with database.bin, features.bin and latent.bin [default: the 50,000-frame synthetic "
                   "database, made in a temporary folder].")
@click.option("--window", type=click.IntRange(min=2), default=20, show_default=True, help="Frames per window.")
@click.option("--threads", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--steps", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None)
def main(data, window, threads, repeats, steps, json_path):
    torch.set_num_threads(threads)
    config = with_resolved_precision(recipe_config("fast", threads=threads))
    with tempfile.TemporaryDirectory() as folder:
        if data is None:
            data = folder
            generate.generate_files(folder, nframes=50_000)
        inputs = load_inputs(*(os.path.join(data, name) for name in ("database.bin", "features.bin", "latent.bin")),
                             window=config.window)
        report = measure(Trainer(inputs, config, window), repeats=repeats, steps=steps)
    click.echo(f"fast step, batch {config.batch_size}, {config.precision}, {window}-frame windows, {threads} threads")
    click.echo(table(report))
    if json_path:
        with open(json_path, "w") as handle:
            json.dump({"command": " ".join(["python", "benchmarks/bench_stepper_profile.py", *sys.argv[1:]]),
                       "precision": config.precision, "batch_size": config.batch_size, "window": window,
                       "threads": threads, **report,
                       "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, {os.cpu_count()} cores",
                       "python": platform.python_version(), "torch": torch.__version__}, handle, indent=1)
            handle.write("\n")


if __name__ == "__main__":
    main()
