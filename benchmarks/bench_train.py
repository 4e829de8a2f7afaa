"""How much does the data path cost training? Offline and online loops against the bare model step.

For synthetic clustered features (30,000 frames, 27 features, 32 latent), each repeat times, in turn
and in one process: the pure model step (forward, losses, backward, AdamW on one ready-made batch),
``train_projector`` from a cache (offline) and ``train_projector`` with BallTree searches (online), at
batch 32 and batch 1024, with the toolkit's network and settings. Rates skip the first 10 iterations
(warm-up). Prints medians and the ratios offline / pure (1.00: the data path is free) and
offline / online, by wall clock and by this process's CPU time (the CPU clock is the steadier one on a
shared machine, as other processes' load does not count against it). Then, in subprocesses, the peak
resident memory of offline training from a larger cache: after one iteration, and after a whole pass
streamed and preloaded (streaming should stay flat).

    python benchmarks/bench_train.py [--frames 30000] [--steps-small 300] [--steps-large 20] [--repeats 3]
                                     [--memory-queries 1000000] [--threads 1] [--json FILE]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import click
import numpy as np
import torch

from motion_matching import cache
from motion_matching.neighbours import queries
from motion_matching.neighbours.search import make_searcher
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.objective import make_projector, projector_losses
from motion_matching.projector.train import train_projector
from motion_matching.toolkit import formats

WARMUP = 10  # iterations left out of every rate (allocations, first save of projector.bin)


def synthetic_inputs(folder, nframes, *, nfeatures=27, nlatent=32, seed=0):
    """Write clustered random-walk features.bin and latent.bin into ``folder``; returns their paths."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(nframes // 100, 1), nfeatures))
    walk = np.cumsum(rng.standard_normal((nframes, nfeatures)) * 0.05, axis=0)
    X = (centres[rng.integers(0, len(centres), nframes)] + walk - walk.mean(0)).astype(np.float32)
    Z = (rng.standard_normal((nframes, nlatent)) * 0.25).astype(np.float32)
    paths = os.path.join(folder, "features.bin"), os.path.join(folder, "latent.bin")
    zeros = np.zeros(nfeatures, np.float32)
    formats.save_features(paths[0], formats.Features(X, zeros, zeros + 1))
    formats.save_latent(paths[1], Z)
    return paths


def pure_rate(X, Z, config, *, steps):
    """(wall, CPU) iterations/s of the bare model step on one ready-made batch (tensors made once)."""
    torch.set_num_threads(config.threads)
    Xhat, _ = queries.generate_queries(X, seed=config.seed, start=0, stop=config.batch_size)
    nearest = make_searcher(X, backend="balltree").nearest(Xhat)
    Xhat, Xgnd, Zgnd = torch.from_numpy(Xhat), torch.from_numpy(X[nearest]), torch.from_numpy(Z[nearest])
    module = make_projector(X, Z, config)
    optimizer = torch.optim.AdamW(module.parameters(), lr=config.lr, amsgrad=True, weight_decay=config.weight_decay)
    for step in range(WARMUP + steps):
        if step == WARMUP:
            started = time.perf_counter(), time.process_time()
        optimizer.zero_grad()
        projector_losses(module, Xhat, Xgnd, Zgnd, config).loss.backward()
        optimizer.step()
    return steps / (time.perf_counter() - started[0]), steps / (time.process_time() - started[1])


def train_rate(config, paths, out_dir, *, offline_cache=None):
    """(wall, CPU) iterations/s of ``train_projector`` between iteration ``WARMUP`` and the last."""
    marks = {}

    def progress(report):
        if report.step == WARMUP or report.step == config.iterations:
            marks[report.step] = time.perf_counter(), time.process_time()
    train_projector(config, features_path=paths[0], latent_path=paths[1], out_dir=out_dir, progress=progress,
                    offline_cache=offline_cache, held_out_queries=0)
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


def speed_rows(paths, folder, *, steps_small, steps_large, repeats, threads):
    """Table rows (dicts) of median rates and ratios at batch 32 and 1024."""
    features, latent = formats.load_features_and_latent(*paths)
    cache_path = os.path.join(folder, "speed.h5")
    cache.build_cache(paths[0], out=cache_path, nqueries=max(32 * steps_small, 1024 * steps_large) + 1024)
    rows = []
    for batch, steps in ((32, steps_small), (1024, steps_large)):
        config = TrainConfig(iterations=WARMUP + steps, batch_size=batch, threads=threads)
        rates = {"pure": [], "offline": [], "online": []}
        for _ in range(repeats):  # side by side, so machine noise hits all three alike
            rates["pure"].append(pure_rate(features.features, latent, config, steps=steps))
            rates["offline"].append(train_rate(config, paths, os.path.join(folder, "off"), offline_cache=cache_path))
            rates["online"].append(train_rate(config, paths, os.path.join(folder, "on")))
        row = {"batch": batch, "iterations": steps, "repeats": repeats, "threads": threads, "runs": rates}
        for clock, index in (("wall", 0), ("cpu", 1)):
            median = {name: statistics.median(value[index] for value in values) for name, values in rates.items()}
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
@click.option("--frames", default=30_000, show_default=True, help="Synthetic frames.")
@click.option("--steps-small", default=300, show_default=True, help="Timed iterations at batch 32.")
@click.option("--steps-large", default=20, show_default=True, help="Timed iterations at batch 1024.")
@click.option("--repeats", default=3, show_default=True, help="Repeats; medians are reported.")
@click.option("--memory-queries", default=1_000_000, show_default=True,
              help="Rows of the memory test's cache (0: skip).")
@click.option("--threads", default=1, show_default=True, help="torch threads (the toolkit uses 1).")
@click.option("--json", "json_path", default=None, help="Also write the results to this JSON file.")
def main(frames, steps_small, steps_large, repeats, memory_queries, threads, json_path):
    """Print the training-speed table and the memory row."""
    click.echo("command: " + " ".join([os.path.basename(sys.executable), *sys.argv]))
    with tempfile.TemporaryDirectory() as folder:
        paths = synthetic_inputs(folder, frames)
        rows = speed_rows(paths, folder, steps_small=steps_small, steps_large=steps_large, repeats=repeats,
                          threads=threads)
        memory = memory_row(paths, folder, nqueries=memory_queries) if memory_queries else None
    click.echo(f"{'batch':>5} {'clock':>5} {'pure it/s':>10} {'offline it/s':>13} {'online it/s':>12} "
               f"{'offline/pure':>13} {'offline/online':>15}")
    for row in rows:
        for clock in ("wall", "cpu"):
            click.echo(f"{row['batch']:>5} {clock:>5} {row['pure_it_s_' + clock]:>10.1f} "
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
