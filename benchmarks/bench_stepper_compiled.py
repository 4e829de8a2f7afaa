"""How much does ``--compiled-rollout`` save? The stepper's fast step, eager against compiled, side by side.

One process trains two steppers (the same initialisation) on windows of the synthetic locomotion database's
features and latent (``--data``: a folder with database.bin, features.bin and latent.bin; default: the
50,000-frame database with the generator's stand-in latent), with the ``fast`` recipe's batch, optimiser
step and precision (auto resolved here): ``eager`` steps each window's frames with ``next_frame`` as it is,
``compiled`` with it compiled by ``torch.compile`` (``training.compiled``). For each number of busy
processes beside it (``--busy``: pure-Python loops, one per core for a busy machine) and each window length,
``--repeats`` rounds alternate the two, ``--steps`` iterations each, after a warm-up. Prints the median ms
per iteration, and the median and range of the paired ratio eager / compiled (each round's own, so a
slower spell of the machine hits both); then the ``fast`` recipe's seconds, the window lengths of its
32,000 iterations interpolated between the measured ones. Writes everything to ``--json``.

    python benchmarks/bench_stepper_compiled.py [--windows 2,8,14,20] [--busy 0,2] [--threads 2]
                                                [--repeats 5] [--steps 5] [--json FILE]
"""
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import click
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_contention import BusyProcesses  # noqa: E402 - the benchmarks' own busy loops

from motion_matching.data import generate  # noqa: E402
from motion_matching.stepper.batches import WindowBatches  # noqa: E402
from motion_matching.stepper.config import recipe_config  # noqa: E402
from motion_matching.stepper.inputs import load_inputs  # noqa: E402
from motion_matching.stepper.objective import next_frame, stepper_losses  # noqa: E402
from motion_matching.stepper.train import make_stepper  # noqa: E402
from motion_matching.training.compiled import compiled, compiler_ready  # noqa: E402
from motion_matching.training.step import OptimiserStep, PrecisionForward, with_resolved_precision  # noqa: E402

MODES = ("eager", "compiled")


class Trainer:
    """A stepper, its fast step and its way of advancing frames: ``(W)`` times one iteration on W frames."""

    def __init__(self, inputs, config, advance):
        self.module = make_stepper(inputs, config)
        self.update = OptimiserStep(self.module, config)
        self.forward = PrecisionForward(config.precision, "cpu")
        self.advance = advance
        self.batches = WindowBatches(inputs, batch_size=config.batch_size, window=config.window)

    def __call__(self, frames):
        Xgnd, Zgnd = self.batches.next()
        started = time.perf_counter()
        terms, _ = stepper_losses(self.module, Xgnd[:, :frames].contiguous(), Zgnd[:, :frames].contiguous(),
                                  self.forward, self.advance)
        self.update(terms.loss)
        return time.perf_counter() - started


def make_data(folder):
    """The 50,000-frame synthetic database's files in ``folder``; returns ``folder``."""
    generate.generate_files(folder, nframes=50_000)
    return folder


def recipe_seconds(config, ms_by_window):
    """Seconds of ``config``'s iterations at ``ms_by_window`` (window frames -> ms), interpolated."""
    frames = np.array([config.window_at(step) for step in range(config.iterations)])
    windows = sorted(ms_by_window)
    return float(np.interp(frames, windows, [ms_by_window[w] for w in windows]).sum() / 1000)


def measure(trainers, *, windows, busy_counts, repeats, steps, echo):
    """{busy: {window: {mode: [ms per iteration of each round]}}}."""
    results = {}
    for busy in busy_counts:
        with BusyProcesses(busy):
            for window in windows:
                for trainer in trainers.values():  # warm-up: caches, the allocator, a compiled graph's guards
                    for _ in range(2):
                        trainer(window)
                rows = results.setdefault(busy, {}).setdefault(window, {mode: [] for mode in MODES})
                for repeat in range(repeats):
                    for mode in (MODES if repeat % 2 == 0 else MODES[::-1]):
                        rows[mode].append(1000 * statistics.median(trainers[mode](window) for _ in range(steps)))
                echo(f"{busy} busy, {window} frames: eager {statistics.median(rows['eager']):.1f} ms, compiled "
                     f"{statistics.median(rows['compiled']):.1f} ms")
    return results


def summary(results, config):
    """Rows (dicts) of the table: per busy count and window, then the recipe's estimated seconds."""
    rows = []
    for busy, by_window in results.items():
        for window, by_mode in by_window.items():
            ratios = [eager / fast for eager, fast in zip(by_mode["eager"], by_mode["compiled"])]
            rows.append({"busy": busy, "window": window, "eager_ms": statistics.median(by_mode["eager"]),
                         "compiled_ms": statistics.median(by_mode["compiled"]),
                         "ratio": statistics.median(ratios), "ratio_range": [min(ratios), max(ratios)]})
        seconds = {mode: recipe_seconds(config, {w: statistics.median(m[mode]) for w, m in by_window.items()})
                   for mode in MODES}
        rows.append({"busy": busy, "window": "fast recipe (s)", "eager_ms": seconds["eager"],
                     "compiled_ms": seconds["compiled"], "ratio": seconds["eager"] / seconds["compiled"],
                     "ratio_range": None})
    return rows


def table(rows):
    lines = ["| busy processes | window frames | eager ms | compiled ms | eager / compiled [range] |",
             "|---|---|---|---|---|"]
    for row in rows:
        spread = f" [{row['ratio_range'][0]:.2f}, {row['ratio_range'][1]:.2f}]" if row["ratio_range"] else ""
        lines.append(f"| {row['busy']} | {row['window']} | {row['eager_ms']:.1f} | {row['compiled_ms']:.1f} | "
                     f"{row['ratio']:.2f}{spread} |")
    return "\n".join(lines)


@click.command()
@click.option("--data", type=click.Path(exists=True, file_okay=False), default=None,
              help="A folder with database.bin, features.bin and latent.bin [default: the 50,000-frame synthetic "
                   "database, made in a temporary folder].")
@click.option("--windows", default="2,8,14,20", show_default=True, help="Window lengths (frames), comma-separated.")
@click.option("--busy", "busy_counts", default="0,2", show_default=True,
              help="Busy processes beside the run, comma-separated counts.")
@click.option("--threads", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--steps", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None)
def main(data, windows, busy_counts, threads, repeats, steps, json_path):
    if not compiler_ready(torch.device("cpu")):
        raise click.ClickException("torch.compile finds no C++ compiler here: there is nothing to compare")
    torch.set_num_threads(threads)
    windows = [int(value) for value in windows.split(",")]
    busy_counts = [int(value) for value in busy_counts.split(",")]
    config = with_resolved_precision(recipe_config("fast", threads=threads))
    with tempfile.TemporaryDirectory() as folder:
        data = data or make_data(folder)
        inputs = load_inputs(*(os.path.join(data, name) for name in ("database.bin", "features.bin", "latent.bin")),
                             window=config.window)
        trainers = {"eager": Trainer(inputs, config, next_frame),
                    "compiled": Trainer(inputs, config, compiled(next_frame, "--compiled-rollout"))}
        started = time.perf_counter()
        trainers["compiled"](config.window)
        compile_seconds = time.perf_counter() - started
        click.echo(f"first compiled iteration (kernels built or read from inductor's cache): {compile_seconds:.1f} s")
        results = measure(trainers, windows=windows, busy_counts=busy_counts, repeats=repeats, steps=steps,
                          echo=click.echo)
    rows = summary(results, config)
    click.echo(table(rows))
    if json_path:
        with open(json_path, "w") as handle:
            json.dump({"command": " ".join(["python", "benchmarks/bench_stepper_compiled.py", *sys.argv[1:]]),
                       "precision": config.precision, "batch_size": config.batch_size, "threads": threads,
                       "first_compiled_iteration_seconds": compile_seconds, "rows": rows,
                       "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, {os.cpu_count()} cores",
                       "python": platform.python_version(), "torch": torch.__version__}, handle, indent=1)
            handle.write("\n")


if __name__ == "__main__":
    main()
