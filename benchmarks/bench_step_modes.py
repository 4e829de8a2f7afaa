"""Which mode is the machine in? The fast step against its floor, sampled over time, with the probes that tell.

On this project's 2-vCPU machine a 2-thread step at batch 256 swings between about 1.25x and 1.6x its
GEMM floor for a minute or more at a time (BENCHMARKS.md, "The training step"). For ``--seconds``, each
sample times in turn, in one process:

- ``floor``: the step's GEMMs alone (``bench_step.FloorEntry``), and ``step``: the fast step
  (``bench_step.StepEntry``), ``--calls`` each, ms per call;
- ``adamw after backward`` and ``adamw again``: a forward and backward pass of the projector, then two
  fused AdamW steps timed apart (the first finds the gradients where the backward pass left them, the
  second finds everything where the first left it);
- ``stream GB/s``: fused AdamW over ``--stream-mb`` MB of parameters, far more than the caches hold:
  the memory's own speed.

A sample is in the slow mode where its first AdamW takes more than ``SLOW_ADAMW`` times its second.
Prints one row per sample, then the medians of each mode, and writes them all to ``--json``.

    python benchmarks/bench_step_modes.py [--seconds 100] [--batch 256] [--threads 2] [--json FILE]
"""
import json
import os
import statistics
import sys
import time

import bench_step
import click
import torch

from motion_matching.neighbours.search import BACKENDS, DEFAULT_BACKEND
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.objective import make_projector, projector_losses
from motion_matching.training.step import make_optimizer

SLOW_ADAMW = 2.0  # first AdamW after the backward pass against the second, above which a sample is "slow"
COLUMNS = ("floor_ms", "step_ms", "ratio", "adamw_after_backward_ms", "adamw_again_ms", "stream_gb_s")


class AdamProbe:
    """A projector and its fused AdamW: ``()`` times (ms) the two AdamW steps after one backward pass."""

    def __init__(self, X, Z, batch):
        self.module = make_projector(X, Z)
        self.optimizer = make_optimizer(self.module, TrainConfig())  # the fast step's
        rows = torch.arange(batch) % len(X)
        self.queries, self.Xgnd, self.Zgnd = (torch.from_numpy(X)[rows] + 0.1, torch.from_numpy(X)[rows],
                                              torch.from_numpy(Z)[rows])

    def __call__(self):
        self.optimizer.zero_grad(set_to_none=True)
        projector_losses(self.module, self.queries, self.Xgnd, self.Zgnd).loss.backward()
        started = time.perf_counter()
        self.optimizer.step()
        first = time.perf_counter()
        self.optimizer.step()
        return (first - started) * 1000, (time.perf_counter() - first) * 1000


class StreamProbe:
    """Fused AdamW over ``megabytes`` MB of parameters: ``()`` gives the GB/s it reads and writes."""

    STREAMS = 9  # AMSGrad AdamW reads parameter, gradient and three moments, and writes all but the gradient

    def __init__(self, megabytes):
        count = max(1, megabytes * 2**20 // 4 // 8)
        parameters = torch.nn.ParameterList(torch.nn.Parameter(torch.randn(count)) for _ in range(8))
        for parameter in parameters:
            parameter.grad = torch.randn_like(parameter) * 1e-3
        self.optimizer = make_optimizer(parameters, TrainConfig())
        self.optimizer.step()
        self.bytes = self.STREAMS * 4 * count * len(parameters)

    def __call__(self):
        started = time.perf_counter()
        self.optimizer.step()
        return self.bytes / (time.perf_counter() - started) / 1e9


def sample(floor, step, adam, stream, calls, device):
    """One row: the floor and the step (ms per call), the AdamW probe's medians of 5, the stream's GB/s."""
    floor_ms = bench_step.time_entry(floor, calls, device)[0]
    step_ms = bench_step.time_entry(step, calls, device)[0]
    after, again = median_pair([adam() for _ in range(5)])
    return dict(zip(COLUMNS, (floor_ms, step_ms, step_ms / floor_ms, after, again, stream())))


def median_pair(pairs):
    """The medians of the first and of the second members of ``pairs``."""
    return statistics.median(first for first, _ in pairs), statistics.median(second for _, second in pairs)


def is_slow(row):
    return row["adamw_after_backward_ms"] > SLOW_ADAMW * row["adamw_again_ms"]


def mode_medians(rows):
    """``{"quiet": {...}, "slow": {...}}``: count and the median of every column, per mode (absent if none)."""
    modes = {}
    for name, members in (("quiet", [row for row in rows if not is_slow(row)]),
                          ("slow", [row for row in rows if is_slow(row)])):
        if members:
            modes[name] = {"samples": len(members),
                           **{column: statistics.median(row[column] for row in members) for column in COLUMNS}}
    return modes


def print_rows(rows, modes):
    header = (f"{'time s':>6} {'floor ms':>8} {'step ms':>8} {'step/floor':>10} {'adamw after backward ms':>23} "
              f"{'adamw again ms':>14} {'stream GB/s':>11} {'mode':>5}")
    click.echo(header)
    for row in rows:
        click.echo(f"{row['time_s']:>6.1f} {row['floor_ms']:>8.2f} {row['step_ms']:>8.2f} {row['ratio']:>10.2f} "
                   f"{row['adamw_after_backward_ms']:>23.2f} {row['adamw_again_ms']:>14.2f} "
                   f"{row['stream_gb_s']:>11.1f} {'slow' if is_slow(row) else 'quiet':>5}")
    click.echo("medians by mode")
    click.echo(f"{'mode':>6} {'samples':>8} {'floor ms':>8} {'step ms':>8} {'step/floor':>10} "
               f"{'adamw after backward ms':>23} {'adamw again ms':>14} {'stream GB/s':>11}")
    for name, medians in modes.items():
        click.echo(f"{name:>6} {medians['samples']:>8} {medians['floor_ms']:>8.2f} {medians['step_ms']:>8.2f} "
                   f"{medians['ratio']:>10.2f} {medians['adamw_after_backward_ms']:>23.2f} "
                   f"{medians['adamw_again_ms']:>14.2f} {medians['stream_gb_s']:>11.1f}")


@click.command()
@click.option("--seconds", default=100.0, show_default=True, help="How long to sample.")
@click.option("--batch", default=256, show_default=True, help="Batch size of the step and the floor.")
@click.option("--threads", default=2, show_default=True, help="Torch threads.")
@click.option("--calls", default=20, show_default=True, help="Floor calls and steps per sample.")
@click.option("--frames", default=20_000, show_default=True, help="Frames of the synthetic database.")
@click.option("--stream-mb", default=100, show_default=True, help="Parameters (MB) of the memory-speed probe.")
@click.option("--backend", default=DEFAULT_BACKEND, show_default=True, type=click.Choice(sorted(BACKENDS)),
              help="Exact search backend that finds the pool's neighbours.")
@click.option("--json", "json_path", default=None, help="Also write the samples and medians to this JSON file.")
def main(seconds, batch, threads, calls, frames, stream_mb, backend, json_path):
    """Sample the fast step against its floor, and the AdamW probes that tell the machine's mode."""
    click.echo("command: " + " ".join([os.path.basename(sys.executable), *sys.argv]))
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        device = torch.device("cpu")
        X, Z = bench_step.synthetic_inputs(frames)
        pool = bench_step.query_pool(X, backend=backend)
        floor, step = bench_step.FloorEntry(batch, device), bench_step.StepEntry("fast", X, Z, pool, batch, device)
        adam, stream = AdamProbe(X, Z, batch), StreamProbe(stream_mb)
        rows, started = [], time.perf_counter()
        while not rows or time.perf_counter() - started < seconds:
            rows.append({"time_s": time.perf_counter() - started,
                         **sample(floor, step, adam, stream, calls, device)})
    finally:
        torch.set_num_threads(previous)
    modes = mode_medians(rows)
    click.echo(f"torch {torch.__version__}; batch {batch}; {threads} threads; {len(rows)} samples")
    print_rows(rows, modes)
    if json_path:
        with open(json_path, "w") as stream_file:
            json.dump({"torch": torch.__version__, "batch": batch, "threads": threads, "calls": calls,
                       "slow_adamw": SLOW_ADAMW, "samples": rows, "modes": modes}, stream_file, indent=1)


if __name__ == "__main__":
    main()
