"""Decompressor quality against training time: the toolkit recipe and the fast one at equal short budgets.

For each recipe, a short probe run times its step; the measured run then gets the iterations that fit
``--seconds`` of training (so the fast recipe's cosine decay ends inside the budget, and the toolkit
recipe runs its own schedule for as long), and ``decompressor.evaluate`` measures the result over every
frame: world joint position error (cm), local rotation error (degrees), contact accuracy and the
toolkit's loss. Prints a table and writes JSON. The toolkit's whole recipe (500,000 iterations) is the
anchor this is a first step towards; it takes hours and is not run here.

    python benchmarks/bench_decompressor.py --frames 10000 --seconds 240 --json benchmarks/results/decompressor.json
"""
import json
import platform
import tempfile
import time

import click
import torch

from motion_matching.data import generate
from motion_matching.decompressor.config import recipe_config
from motion_matching.decompressor.evaluate import evaluate_decompressor
from motion_matching.decompressor.train import train_decompressor

PROBE_ITERATIONS = 40


def timed_run(config, files, out_dir, *, on_step=None):
    """Train ``config`` into ``out_dir``; returns the wall seconds of training."""
    started = time.perf_counter()
    train_decompressor(config, database_path=files["database"], features_path=files["features"], out_dir=out_dir,
                       on_step=on_step)
    return time.perf_counter() - started


def step_seconds(recipe, files, folder):
    """Seconds per iteration of ``recipe``: the steady steps of a short probe, its setup and first save left out."""
    times = {}
    timed_run(recipe_config(recipe, iterations=PROBE_ITERATIONS, save_every=10 ** 9), files, f"{folder}/{recipe}_probe",
              on_step=lambda step, module: times.setdefault(step, time.perf_counter()))
    return (times[PROBE_ITERATIONS] - times[10]) / (PROBE_ITERATIONS - 10)


def measure(recipe, files, folder, *, seconds):
    """One recipe's row: iterations fitted to ``seconds``, training time, the evaluation's measures."""
    iterations = max(int(seconds / step_seconds(recipe, files, folder)), PROBE_ITERATIONS)
    config = recipe_config(recipe, iterations=iterations)
    wall = timed_run(config, files, f"{folder}/{recipe}")
    report, _ = evaluate_decompressor(f"{folder}/{recipe}/decompressor.bin", f"{folder}/{recipe}/latent.bin",
                                      database_path=files["database"], features_path=files["features"])
    return {"recipe": recipe, "batch": config.batch_size, "iterations": iterations, "seconds": wall,
            "threads": torch.load(f"{folder}/{recipe}/decompressor_checkpoint.pt", weights_only=False)["threads"],
            **{key: report[key] for key in
                                                    ("position_error_cm", "rotation_error_deg", "contact_accuracy")},
            "loss": report["loss_terms"]["loss"]}


def print_table(rows):
    click.echo(f"{'recipe':>8} {'batch':>5} {'iters':>7} {'train s':>8} {'pos cm mean/p95/max':>22} "
               f"{'rot deg mean/p95':>17} {'contacts':>8} {'loss':>7}")
    for row in rows:
        pos, rot = row["position_error_cm"], row["rotation_error_deg"]
        click.echo(f"{row['recipe']:>8} {row['batch']:>5} {row['iterations']:>7,} {row['seconds']:>8.1f} "
                   f"{pos['mean']:>6.2f}/{pos['p95']:>6.2f}/{pos['max']:>7.2f} {rot['mean']:>7.2f}/{rot['p95']:>7.2f} "
                   f"{row['contact_accuracy']:>8.4f} {row['loss']:>7.4f}")


@click.command()
@click.option("--frames", type=click.IntRange(min=1200), default=10_000, show_default=True,
              help="Frames of the synthetic database.")
@click.option("--seconds", type=click.FloatRange(min=1), default=240, show_default=True,
              help="Training budget per recipe (wall seconds).")
@click.option("--recipe", "recipes", multiple=True, default=("toolkit", "fast"), show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write the rows here.")
def main(frames, seconds, recipes, json_path):
    """Train each recipe for the same short budget and compare their reconstruction quality."""
    with tempfile.TemporaryDirectory() as folder:
        files = generate.generate_files(folder, nframes=frames)
        rows = [measure(recipe, files, folder, seconds=seconds) for recipe in recipes]
    print_table(rows)
    if json_path:
        with open(json_path, "w") as stream:
            json.dump({"frames": frames, "budget_seconds": seconds, "torch": torch.__version__,
                       "machine": platform.processor() or platform.machine(), "rows": rows}, stream, indent=2)
            stream.write("\n")


if __name__ == "__main__":
    main()
