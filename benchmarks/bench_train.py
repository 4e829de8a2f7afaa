"""How much does the data path cost training? Offline and online loops against the bare model step.

On the synthetic locomotion database (``generate_database.py``'s 50,000 frames: features.bin and the
stand-in latent.bin), for each training step (``--step toolkit``: the script's AdamW and per-step loss
read, one thread; ``--step fast``, the default: fused AdamW, losses read every 10 steps, every core),
each repeat times, in turn and in one process: the pure model step (``TrainStep`` on a pool of
ready-made batches), ``train_projector`` from a cache (offline) and ``train_projector`` with BallTree
searches (online), at batch 32 and batch 1024, with the toolkit's network and settings. Rates skip the
first 10 iterations (warm-up). Prints medians and the ratios offline / pure (1.00: the data path is
free) and offline / online, by wall clock and by this process's CPU time (the CPU clock is the steadier
one on a shared machine for one thread; with several threads it also counts their waiting). Then, in
subprocesses, the peak resident memory of offline training from a larger cache: after one iteration,
and after a whole pass streamed and preloaded (streaming should stay flat).

    python benchmarks/bench_train.py [--frames 50000] [--steps-small 300] [--steps-large 20] [--repeats 3]
                                     [--steps toolkit,fast] [--memory-queries 1000000] [--threads T]
                                     [--json FILE]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import click
import torch

from motion_matching import cache
from motion_matching.data import generate
from motion_matching.neighbours import queries
from motion_matching.neighbours.search import make_searcher
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.objective import make_projector
from motion_matching.projector.step import TrainStep
from motion_matching.projector.train import train_projector
from motion_matching.toolkit import formats
from motion_matching.training.step import RollingLoss, resolved_threads

WARMUP = 10  # iterations left out of every rate (allocations, first save of projector.bin)


def synthetic_inputs(folder, nframes):
    """Write the synthetic locomotion database's features.bin and latent.bin into ``folder``; returns their paths."""
    paths = generate.generate_files(folder, seed=0, nframes=nframes)
    return paths["features"], paths["latent"]


def pure_rate(X, Z, config, *, steps):
    """(wall, CPU) iterations/s of the bare model step on ready-made batches (tensors made once)."""
    torch.set_num_threads(resolved_threads(config))
    Xhat, _ = queries.generate_queries(X, seed=config.seed, start=0, stop=16 * config.batch_size)
    nearest = make_searcher(X, backend="balltree").nearest(Xhat)
    size = config.batch_size
    batches = [(torch.from_numpy(Xhat[i * size:(i + 1) * size]), torch.from_numpy(nearest[i * size:(i + 1) * size]))
               for i in range(16)]
    module = make_projector(X, Z, config)
    trainer = TrainStep(module, torch.from_numpy(X), torch.from_numpy(Z), config)
    losses = RollingLoss(read_every=10 if config.step == "fast" else 1)
    for step in range(WARMUP + steps):
        if step == WARMUP:
            losses.read()
            started = time.perf_counter(), time.process_time()
        losses.add(step, trainer.step(*batches[step % 16]))
    losses.read()
    return steps / (time.perf_counter() - started[0]), steps / (time.process_time() - started[1])


def train_rate(config, paths, out_dir, *, offline_cache=None):
    """(wall, CPU) iterations/s of ``train_projector`` between iteration ``WARMUP`` and the last."""
    marks = {}

    def progress(report):
        if report.step == WARMUP or report.step == config.iterations:
            marks[report.step] = time.perf_counter(), time.process_time()
    train_projector(config, features_path=paths[0], latent_path=paths[1], out_dir=out_dir, progress=progress,
                    offline_cache=offline_cache, held_out_queries=0, force=True)  # each repeat starts over
    first, last = marks[WARMUP], marks[config.iterations]
    return (config.iterations - WARMUP) / (last[0] - first[0]), (config.iterations - WARMUP) / (last[1] - first[1])


MEMORY_SCRIPT = """
import sys
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.train import train_projector
features, latent, cache_path, out, mode, iterations = sys.argv[1:7]
config = TrainConfig(iterations=int(iterations), batch_size=4096, hidden=32, hidden_layers=1, save_every=10**9,
                     checkpoint_every=10**9)
train_projector(config, features_path=features, latent_path=latent, out_dir=out, held_out_queries=0,
                offline_cache=cache_path, preload=mode == "preload")
with open("/proc/self/status") as status:  # VmHWM restarts at exec; ru_maxrss keeps the parent's peak
    print(next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024)
"""


def peak_memory_mib(paths, cache_path, out_dir, *, mode, nqueries):
    """Peak resident MiB of a subprocess training one pass over the cache (tiny network, batch 4096).

    ``mode``: "stream", "preload", or "one-step" (streamed, a single iteration: the first two blocks).
    """
    iterations = 1 if mode == "one-step" else nqueries // 4096 + 1
    arguments = [*paths, cache_path, out_dir, mode, str(iterations)]
    output = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, *arguments], check=True, capture_output=True,
                            text=True).stdout
    return float(output.split()[-1])


def speed_rows(paths, folder, *, steps_small, steps_large, repeats, threads, kinds):
    """Table rows (dicts) of median rates and ratios at batch 32 and 1024, for each step kind."""
    features, latent = formats.load_features_and_latent(*paths)
    cache_path = os.path.join(folder, "speed.h5")
    cache.build_cache(paths[0], out=cache_path, nqueries=max(32 * steps_small, 1024 * steps_large) + 1024)
    rows = []
    for batch, steps in ((32, steps_small), (1024, steps_large)):
        configs = {kind: TrainConfig(iterations=WARMUP + steps, batch_size=batch, threads=threads, step=kind)
                   for kind in kinds}
        rates = {(kind, name): [] for kind in kinds for name in ("pure", "offline", "online")}
        for _ in range(repeats):  # side by side, so machine noise hits every entry alike
            for kind, config in configs.items():
                rates[kind, "pure"].append(pure_rate(features.features, latent, config, steps=steps))
                rates[kind, "offline"].append(train_rate(config, paths, os.path.join(folder, "off"),
                                                         offline_cache=cache_path))
                rates[kind, "online"].append(train_rate(config, paths, os.path.join(folder, "on")))
        for kind, config in configs.items():
            row = {"batch": batch, "step": kind, "threads": resolved_threads(config), "iterations": steps,
                   "repeats": repeats, "runs": {name: rates[kind, name] for name in ("pure", "offline", "online")}}
            for clock, index in (("wall", 0), ("cpu", 1)):
                median = {name: statistics.median(value[index] for value in values)
                          for name, values in row["runs"].items()}
                row.update({f"{name}_it_s_{clock}": value for name, value in median.items()})
                row[f"offline_over_pure_{clock}"] = median["offline"] / median["pure"]
                row[f"offline_over_online_{clock}"] = median["offline"] / median["online"]
            rows.append(row)
    return rows


def memory_row(paths, folder, *, nqueries):
    """A dict: cache size and peak resident memory streaming vs preloading (MiB)."""
    cache_path = os.path.join(folder, "memory.h5")
    cache.build_cache(paths[0], out=cache_path, nqueries=nqueries)
    out_dir = os.path.join(folder, "memory")
    row = {"cache_queries": nqueries, "cache_mib": os.path.getsize(cache_path) / 2 ** 20}
    for mode in ("one-step", "stream", "preload"):
        row[f"{mode}_peak_rss_mib"] = peak_memory_mib(paths, cache_path, out_dir, mode=mode, nqueries=nqueries)
    return row


@click.command()
@click.option("--frames", default=50_000, show_default=True, help="Frames of the synthetic locomotion database.")
@click.option("--steps-small", default=300, show_default=True, help="Timed iterations at batch 32.")
@click.option("--steps-large", default=20, show_default=True, help="Timed iterations at batch 1024.")
@click.option("--repeats", default=3, show_default=True, help="Repeats; medians are reported.")
@click.option("--memory-queries", default=1_000_000, show_default=True,
              help="Rows of the memory test's cache (0: skip).")
@click.option("--threads", type=int, default=None,
              help="Torch threads [default: each step's own: 1 for toolkit, every core for fast].")
@click.option("--steps", "kinds", default="toolkit,fast", show_default=True, help="Step kinds, comma-separated.")
@click.option("--json", "json_path", default=None, help="Also write the results to this JSON file.")
def main(frames, steps_small, steps_large, repeats, memory_queries, threads, kinds, json_path):
    """Print the training-speed table and the memory row."""
    click.echo("command: " + " ".join([os.path.basename(sys.executable), *sys.argv]))
    with tempfile.TemporaryDirectory() as folder:
        paths = synthetic_inputs(folder, frames)
        rows = speed_rows(paths, folder, steps_small=steps_small, steps_large=steps_large, repeats=repeats,
                          threads=threads, kinds=[kind for kind in kinds.split(",") if kind])
        memory = memory_row(paths, folder, nqueries=memory_queries) if memory_queries else None
    click.echo(f"{'batch':>5} {'step':>7} {'threads':>7} {'clock':>5} {'pure it/s':>10} {'offline it/s':>13} "
               f"{'online it/s':>12} {'offline/pure':>13} {'offline/online':>15}")
    for row in rows:
        for clock in ("wall", "cpu"):
            click.echo(f"{row['batch']:>5} {row['step']:>7} {row['threads']:>7} {clock:>5} "
                       f"{row['pure_it_s_' + clock]:>10.1f} "
                       f"{row['offline_it_s_' + clock]:>13.1f} {row['online_it_s_' + clock]:>12.1f} "
                       f"{row['offline_over_pure_' + clock]:>13.3f} {row['offline_over_online_' + clock]:>15.2f}")
    if memory:
        click.echo(f"memory: cache of {memory['cache_queries']:,} queries = {memory['cache_mib']:.0f} MiB; peak RSS: "
                   f"one iteration {memory['one-step_peak_rss_mib']:.0f} MiB, a whole pass streamed "
                   f"{memory['stream_peak_rss_mib']:.0f} MiB, preloaded {memory['preload_peak_rss_mib']:.0f} MiB")
    if json_path:
        with open(json_path, "w") as stream:
            json.dump({"frames": frames, "speed": rows, "memory": memory}, stream, indent=1)


if __name__ == "__main__":
    main()
