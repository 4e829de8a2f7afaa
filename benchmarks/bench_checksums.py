"""What do the cache's Fletcher-32 checksums cost? Reading and streamed training, with and without them.

Builds one cache (format version 2: every chunk checksummed) of the synthetic locomotion features, then
copies its rows into a version-1 file without checksums (today's layout before version 2: same chunks,
same attributes). Each repeat times, in turn and in one process, on both files: a sequential read of
every row through ``open_cache``/``read`` (the worst case: nothing else to do), and offline
``train_projector`` streaming from the cache, at the toolkit's batch 32 and network, and at batch 4096
with a tiny network (a read-bound run). Prints medians and the ratios checksummed / plain (1.00: free);
wall clock and this process's CPU time.

    python benchmarks/bench_checksums.py [--frames 50000] [--queries 1048576] [--steps-small 300]
                                         [--steps-large 200] [--repeats 5] [--json FILE]
"""
import functools
import json
import logging
import os
import statistics
import sys
import tempfile
import time

import click
import h5py
import numpy as np

from motion_matching import cache
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.train import train_projector
from motion_matching.toolkit import formats

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_cache import synthetic_features  # noqa: E402

WARMUP = 10
READ_BLOCK = 1 << 17


def write_inputs(folder, nframes):
    """features.bin (synthetic locomotion) and a random latent.bin in ``folder``; returns their paths."""
    features = synthetic_features(nframes)
    latent = (np.random.default_rng(0).standard_normal((len(features), 32)) * 0.25).astype(np.float32)
    zeros = np.zeros(features.shape[1], np.float32)
    paths = os.path.join(folder, "features.bin"), os.path.join(folder, "latent.bin")
    formats.save_features(paths[0], formats.Features(features, zeros, zeros + 1))
    formats.save_latent(paths[1], latent)
    return paths


def copy_without_checksums(source, target):
    """Write ``source``'s rows and attributes to ``target`` as a version-1 cache (no filters)."""
    with h5py.File(source, "r") as old, h5py.File(target, "w") as new:
        for name in ("queries", "nearest"):
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
            data = old[name]
            new.create_dataset(name, shape=data.shape, dtype=data.dtype, chunks=data.chunks, dcpl=dcpl,
                               fill_time="never", track_times=False)
            for first in range(0, data.shape[0], READ_BLOCK):
                new[name][first:first + READ_BLOCK] = data[first:first + READ_BLOCK]
        for key, value in old.attrs.items():
            new.attrs[key] = value
        new.attrs["format_version"] = np.int64(1)


def read_rate(path, features_path):
    """(wall, CPU) rows/s of reading every row of the cache in order, ``READ_BLOCK`` rows at a time."""
    started = time.perf_counter(), time.process_time()
    with cache.open_cache(path, features_path=features_path) as reader:
        for first in range(0, reader.nqueries, READ_BLOCK):
            reader.read(first, min(first + READ_BLOCK, reader.nqueries))
        rows = reader.nqueries
    return rows / (time.perf_counter() - started[0]), rows / (time.process_time() - started[1])


def train_rate(config, paths, cache_path, out_dir):
    """(wall, CPU) iterations/s of offline ``train_projector`` between iteration ``WARMUP`` and the last."""
    marks = {}

    def progress(report):
        if report.step in (WARMUP, config.iterations):
            marks[report.step] = time.perf_counter(), time.process_time()
    train_projector(config, features_path=paths[0], latent_path=paths[1], out_dir=out_dir, progress=progress,
                    offline_cache=cache_path, held_out_queries=0, force=True)  # each repeat starts over
    first, last = marks[WARMUP], marks[config.iterations]
    return (config.iterations - WARMUP) / (last[0] - first[0]), (config.iterations - WARMUP) / (last[1] - first[1])


def train_case(config, paths, out_dir, cache_path):
    """``train_rate`` with the cache last, so a case is a function of the cache's path alone."""
    return train_rate(config, paths, cache_path, out_dir)


def measure(name, runs, files):
    """A row (dict): medians per file of ``runs`` [(wall, cpu) per file] and the ratios checksummed / plain."""
    row = {"case": name, "runs": runs}
    for clock, index in (("wall", 0), ("cpu", 1)):
        medians = {label: statistics.median(run[label][index] for run in runs) for label in files}
        row.update({f"{label}_{clock}": value for label, value in medians.items()})
        row[f"ratio_{clock}"] = medians["checksummed"] / medians["plain"]
    return row


@click.command()
@click.option("--frames", default=50_000, show_default=True, help="Synthetic locomotion frames.")
@click.option("--queries", "nqueries", default=1 << 20, show_default=True, help="Rows of the cache.")
@click.option("--steps-small", default=300, show_default=True, help="Timed iterations at batch 32 (toolkit network).")
@click.option("--steps-large", default=200, show_default=True, help="Timed iterations at batch 4096 (tiny network).")
@click.option("--repeats", default=5, show_default=True, help="Repeats; medians are reported.")
@click.option("--json", "json_path", default=None, help="Also write the results to this JSON file.")
def main(frames, nqueries, steps_small, steps_large, repeats, json_path):
    """Print the read and training rates from a checksummed and a plain cache, and their ratios."""
    click.echo("command: " + " ".join([os.path.basename(sys.executable), *sys.argv]))
    logging.getLogger("motion_matching.cache").setLevel(logging.ERROR)  # the plain file's version-1 note
    with tempfile.TemporaryDirectory() as folder:
        paths = write_inputs(folder, frames)
        files = {"checksummed": os.path.join(folder, "checksummed.h5"), "plain": os.path.join(folder, "plain.h5")}
        cache.build_cache(paths[0], out=files["checksummed"], nqueries=nqueries)
        copy_without_checksums(files["checksummed"], files["plain"])
        cases = {"read every row": lambda path: read_rate(path, paths[0])}
        for label, batch, steps, network in (("train batch 32, toolkit network", 32, steps_small, {}),
                                             ("train batch 4096, 32x1 network", 4096, steps_large,
                                              {"hidden": 32, "hidden_layers": 1})):
            config = TrainConfig(iterations=WARMUP + steps, batch_size=batch, threads=1, save_every=10 ** 9,
                                 checkpoint_every=10 ** 9, **network)
            cases[label] = functools.partial(train_case, config, paths, os.path.join(folder, "out"))
        rows = []
        for name, case in cases.items():
            runs = [{label: case(path) for label, path in files.items()} for _ in range(repeats)]
            rows.append(measure(name, runs, files))
    click.echo(f"{'case':<34} {'clock':>5} {'checksummed /s':>15} {'plain /s':>12} {'ratio':>6}")
    for row in rows:
        for clock in ("wall", "cpu"):
            click.echo(f"{row['case']:<34} {clock:>5} {row['checksummed_' + clock]:>15,.0f} "
                       f"{row['plain_' + clock]:>12,.0f} {row['ratio_' + clock]:>6.3f}")
    if json_path:
        with open(json_path, "w") as stream:
            json.dump({"frames": frames, "queries": nqueries, "repeats": repeats, "rows": rows}, stream, indent=1)


if __name__ == "__main__":
    main()
