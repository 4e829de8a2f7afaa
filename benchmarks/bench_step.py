"""How close is a training step to the machine's limit? The toolkit step and the fast step against the floor.

For the toolkit's projector (27 -> 512 x 4 -> 59) on the synthetic locomotion features, at each batch
size and thread count, each repeat times in turn and in one process (entries interleaved, so machine
noise hits them alike):

- ``toolkit``: the step as the toolkit's script computes it (``--step toolkit``): single-tensor AdamW,
  the loss read on the host after every step;
- ``fast``: the default step (``--step fast``): fused AdamW, losses read every 10 steps, neighbours
  gathered into reused buffers;
- ``floor``: the step's matrix products alone at their shapes (forward, weight-gradient and
  input-gradient GEMMs of every layer, into preallocated outputs): the arithmetic no step can skip;
- ``adamw``: the fused AdamW update alone (it is memory-bound, not in the floor).

``--precision bfloat16`` times the fast step with ``--precision bfloat16`` (autocast) against the floor
of the same GEMMs in bfloat16; the toolkit step stays float32, as the script computes it.

Every step trains on a fresh batch from a pool of real query batches with their exact neighbours.
Prints medians (ms per step) and the ratios toolkit / fast and fast / floor, by wall clock and by this
process's CPU time (with one thread the steadier clock on a shared machine; with more it also counts
the threads' waiting), and fast / floor paired: the median [lowest, highest] of each repeat's own
ratio of the two entries, timed back to back, so that a spell in which the machine is slower hits both
sides of a ratio. Then, where both were measured, each step as its command runs it: the toolkit
step on 1 thread (``--exact-toolkit``, as the script runs) against the fast step on every core
(``train``'s default), as the median of the two entries' ratios within each repeat, so a machine that
slows for a while slows both sides of a pair alike.

    python benchmarks/bench_step.py [--frames 50000] [--batches 32,256,1024] [--threads 1,2] [--repeats 9]
                                    [--device cpu] [--precision float32] [--backend cells] [--json FILE]
"""
import json
import os
import statistics
import sys
import time

import click
import numpy as np
import torch

from motion_matching.data import features as features_module
from motion_matching.data.synthetic import locomotion as synthetic
from motion_matching.neighbours import queries
from motion_matching.neighbours.search import BACKENDS, DEFAULT_BACKEND, make_searcher
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.objective import make_projector
from motion_matching.projector.step import TrainStep
from motion_matching.training.step import RollingLoss, make_optimizer, resolved_threads

POOL_QUERIES = 16_384  # queries drawn once; steps cycle through their batches
TARGET_SECONDS = 0.25  # rough time of each timed entry per repeat (the step count follows from a probe)
ENTRIES = ("toolkit", "fast", "floor", "adamw")


def synthetic_inputs(nframes, *, nlatent=32, seed=0):
    """Features (F, 27) of the synthetic locomotion database and a random latent (F, nlatent), float32."""
    database = synthetic.generate_synthetic_database(seed=seed, nframes=nframes)
    X = np.ascontiguousarray(features_module.compute_features(database).features, dtype=np.float32)
    Z = (np.random.default_rng(seed).standard_normal((len(X), nlatent)) * 0.25).astype(np.float32)
    return X, Z


def query_pool(X, *, seed=1234, backend=DEFAULT_BACKEND):
    """(queries (POOL_QUERIES, 27) float32, nearest (POOL_QUERIES,) int64): the training stream's start."""
    Xhat, _ = queries.generate_queries(X, seed=seed, start=0, stop=POOL_QUERIES)
    return Xhat, make_searcher(X, backend=backend).nearest(Xhat).astype(np.int64)


def synchronise(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class StepEntry:
    """A training step of ``kind`` ("toolkit" or "fast") with its loss bookkeeping, on a pool of batches."""

    def __init__(self, kind, X, Z, pool, batch, device, precision="float32"):
        self.config = TrainConfig(batch_size=batch, step=kind, precision=precision)
        self.module = make_projector(X, Z, self.config).to(device)
        self.trainer = TrainStep(self.module, torch.from_numpy(X).to(device), torch.from_numpy(Z).to(device),
                                 self.config)
        self.losses = RollingLoss(read_every=10 if kind == "fast" else 1)
        count = len(pool[0]) // batch
        self.batches = [(torch.from_numpy(pool[0][i * batch:(i + 1) * batch]).to(device),
                         torch.from_numpy(pool[1][i * batch:(i + 1) * batch]).to(device)) for i in range(count)]
        self.position = 0

    def __call__(self):
        queries_batch, nearest = self.batches[self.position % len(self.batches)]
        self.losses.add(self.position, self.trainer.step(queries_batch, nearest))
        self.position += 1

    def finish(self):
        self.losses.read()


class FloorEntry:
    """The step's GEMMs alone: per layer forward (B, a) x (a, b), weight gradient, input gradient (not layer 0)."""

    def __init__(self, batch, device, sizes=(27, 512, 512, 512, 512, 59), dtype=torch.float32):
        generator = torch.Generator().manual_seed(0)
        self.products = []
        for index, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            x, weight, grad = (torch.randn(shape, generator=generator).to(device=device, dtype=dtype)
                               for shape in ((batch, a), (b, a), (batch, b)))
            self.products.append((x, weight.t(), torch.empty(batch, b, device=device, dtype=dtype)))
            self.products.append((grad.t(), x, torch.empty(b, a, device=device, dtype=dtype)))
            if index > 0:
                self.products.append((grad, weight, torch.empty(batch, a, device=device, dtype=dtype)))
        self.flops = sum(2 * left.shape[0] * left.shape[1] * right.shape[1] for left, right, _ in self.products)

    def __call__(self):
        for left, right, out in self.products:
            torch.mm(left, right, out=out)

    def finish(self):
        pass


class AdamEntry:
    """The fused AdamW update alone on the projector's parameters (gradients made once)."""

    def __init__(self, X, Z, device):
        module = make_projector(X, Z).to(device)
        for parameter in module.parameters():
            parameter.grad = torch.randn_like(parameter) * 1e-3
        self.optimizer = make_optimizer(module, TrainConfig())  # the fast step's

    def __call__(self):
        self.optimizer.step()

    def finish(self):
        pass


def time_entry(entry, steps, device):
    """(wall, CPU) milliseconds per call of ``entry`` over ``steps`` calls (after 3 warm-up calls)."""
    for _ in range(3):
        entry()
    entry.finish()
    synchronise(device)
    started = time.perf_counter(), time.process_time()
    for _ in range(steps):
        entry()
    entry.finish()
    synchronise(device)
    return (time.perf_counter() - started[0]) / steps * 1000, (time.process_time() - started[1]) / steps * 1000


def settings_of(batches, threads, device):
    """The (batch, threads) pairs to measure: threads only matter on the CPU."""
    return [(batch, count) for batch in batches for count in (threads if device.type == "cpu" else [1])]


def measure(X, Z, pool, *, batches, threads, repeats, device, precision="float32"):
    """``(rows, pairs)``: rows (dicts) of the median ms per step of every entry at every (batch, threads),
    and the ratios; pairs from ``as_run_pairs``.

    ``precision`` is the fast step's and the floor's (the toolkit step is always float32)."""
    settings = settings_of(batches, threads, device)
    entries, steps, times = {}, {}, {}
    for batch, count in settings:
        torch.set_num_threads(count)
        made = {"toolkit": StepEntry("toolkit", X, Z, pool, batch, device),
                "fast": StepEntry("fast", X, Z, pool, batch, device, precision),
                "floor": FloorEntry(batch, device, dtype=getattr(torch, precision)), "adamw": AdamEntry(X, Z, device)}
        for name, entry in made.items():
            probe = time_entry(entry, 5, device)[0]
            steps[batch, count, name] = max(10, int(TARGET_SECONDS * 1000 / max(probe, 1e-3)))
            times[batch, count, name] = []
        entries[batch, count] = made
    for _ in range(repeats):
        for batch, count in settings:
            torch.set_num_threads(count)
            for name in ENTRIES:
                times[batch, count, name].append(time_entry(entries[batch, count][name], steps[batch, count, name],
                                                            device))
    rows = []
    for batch, count in settings:
        row = {"batch": batch, "threads": count, "device": str(device), "precision": precision, "repeats": repeats,
               "steps": {name: steps[batch, count, name] for name in ENTRIES}}
        for clock, index in (("wall", 0), ("cpu", 1)):
            median = {name: statistics.median(run[index] for run in times[batch, count, name]) for name in ENTRIES}
            row.update({f"{name}_ms_{clock}": median[name] for name in ENTRIES})
            row.update({f"{name}_runs_ms_{clock}": [run[index] for run in times[batch, count, name]]
                        for name in ENTRIES})
            row[f"toolkit_over_fast_{clock}"] = median["toolkit"] / median["fast"]
            row[f"fast_over_floor_{clock}"] = median["fast"] / median["floor"]
            paired = paired_ratios([run[index] for run in times[batch, count, "fast"]],
                                   [run[index] for run in times[batch, count, "floor"]])
            row.update({f"fast_over_floor_paired_{key}_{clock}": value for key, value in paired.items()})
            row[f"toolkit_over_floor_{clock}"] = median["toolkit"] / median["floor"]
            row[f"floor_gflop_s_{clock}"] = entries[batch, count]["floor"].flops / median["floor"] / 1e6
        rows.append(row)
    return rows, as_run_pairs(times, settings, repeats)


def paired_ratios(slow, quick):
    """``{"median", "min", "max"}`` of the per-repeat ratios ``slow[i] / quick[i]`` of two entries' times."""
    if len(slow) != len(quick):
        raise ValueError(f"{len(slow)} times against {len(quick)}: the entries must be timed in the same repeats")
    ratios = [numerator / denominator for numerator, denominator in zip(slow, quick)]
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}


def as_run_pairs(times, settings, repeats):
    """Per batch: the toolkit step on 1 thread against the fast step on every core, paired within repeats.

    Dicts with both medians (wall ms) and the median, lowest and highest of the per-repeat ratios."""
    default_threads = resolved_threads(TrainConfig(step="fast"))  # train's default for the fast step
    pairs = []
    for batch in sorted({batch for batch, _ in settings}):
        if (batch, 1) not in settings or (batch, default_threads) not in settings:
            continue
        toolkit = [run[0] for run in times[batch, 1, "toolkit"]]
        fast = [run[0] for run in times[batch, default_threads, "fast"]]
        ratios = paired_ratios(toolkit, fast)
        pairs.append({"batch": batch, "toolkit_threads": 1, "fast_threads": default_threads, "repeats": repeats,
                      "toolkit_ms": statistics.median(toolkit), "fast_ms": statistics.median(fast),
                      **{f"ratio_{key}": value for key, value in ratios.items()}})
    return pairs


def print_table(rows):
    click.echo(f"{'batch':>5} {'threads':>7} {'clock':>5} {'toolkit ms':>10} {'fast ms':>8} {'floor ms':>8} "
               f"{'adamw ms':>8} {'toolkit/fast':>12} {'fast/floor':>10} {'floor GFLOP/s':>13} "
               f"{'fast/floor paired':>17} {'range':>13}")
    for row in rows:
        for clock in ("wall", "cpu"):
            ms = {name: row[f"{name}_ms_{clock}"] for name in ENTRIES}
            paired = {key: row[f"fast_over_floor_paired_{key}_{clock}"] for key in ("median", "min", "max")}
            click.echo(f"{row['batch']:>5} {row['threads']:>7} {clock:>5} {ms['toolkit']:>10.2f} {ms['fast']:>8.2f} "
                       f"{ms['floor']:>8.2f} {ms['adamw']:>8.2f} {row['toolkit_over_fast_' + clock]:>12.2f} "
                       f"{row['fast_over_floor_' + clock]:>10.2f} {row['floor_gflop_s_' + clock]:>13.1f} "
                       f"{paired['median']:>17.2f} {format_range(paired):>13}")


def format_range(ratios):
    return f"[{ratios['min']:.2f}, {ratios['max']:.2f}]"


def print_pairs(pairs):
    if not pairs:
        return
    click.echo("as the commands run them (wall clock): toolkit step on 1 thread, fast step on every core; "
               "ratio: median [lowest, highest] of the repeats' own ratios")
    click.echo(f"{'batch':>5} {'toolkit ms':>10} {'fast ms':>8} {'fast threads':>12} {'toolkit/fast':>12} "
               f"{'range':>13}")
    for pair in pairs:
        click.echo(f"{pair['batch']:>5} {pair['toolkit_ms']:>10.2f} {pair['fast_ms']:>8.2f} "
                   f"{pair['fast_threads']:>12} {pair['ratio_median']:>12.2f} "
                   f"{format_range({'min': pair['ratio_min'], 'max': pair['ratio_max']}):>13}")


def parse_list(text):
    return [int(item) for item in text.split(",") if item]


@click.command()
@click.option("--frames", default=50_000, show_default=True, help="Frames of the synthetic database.")
@click.option("--batches", default="32,256,1024", show_default=True, help="Batch sizes, comma-separated.")
@click.option("--threads", default="1,2", show_default=True, help="Torch thread counts (CPU), comma-separated.")
@click.option("--repeats", default=9, show_default=True, help="Repeats; medians are reported.")
@click.option("--device", default="cpu", show_default=True, help="Torch device: cpu or cuda.")
@click.option("--precision", default="float32", show_default=True, type=click.Choice(["float32", "bfloat16"]),
              help="Arithmetic of the fast step and of the floor (the toolkit step is float32).")
@click.option("--backend", default=DEFAULT_BACKEND, show_default=True, type=click.Choice(sorted(BACKENDS)),
              help="Exact search backend that finds the pool's neighbours (balltree needs no faiss).")
@click.option("--json", "json_path", default=None, help="Also write the results to this JSON file.")
def main(frames, batches, threads, repeats, device, precision, backend, json_path):
    """Print ms per step of the toolkit step, the fast step, the GEMM floor and AdamW alone."""
    click.echo("command: " + " ".join([os.path.basename(sys.executable), *sys.argv]))
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise click.UsageError("--device cuda: torch sees no CUDA device")
    X, Z = synthetic_inputs(frames)
    pool = query_pool(X, backend=backend)
    previous = torch.get_num_threads()
    try:
        rows, pairs = measure(X, Z, pool, batches=parse_list(batches), threads=parse_list(threads),
                              repeats=repeats, device=device, precision=precision)
    finally:
        torch.set_num_threads(previous)
    click.echo(f"torch {torch.__version__}; {len(X)} frames; fast step and floor in {precision}; medians of "
               f"{repeats} repeats")
    print_table(rows)
    print_pairs(pairs)
    if json_path:
        with open(json_path, "w") as stream:
            json.dump({"frames": len(X), "torch": torch.__version__, "precision": precision, "rows": rows,
                       "as_run": pairs}, stream, indent=1)


if __name__ == "__main__":
    main()
