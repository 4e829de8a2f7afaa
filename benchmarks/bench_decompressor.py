"""Decompressor quality against training time: the toolkit recipe and the fast one at equal short budgets.

For each recipe, a short probe run times its step; the measured run then gets the iterations that fit
``--seconds`` of training (so the fast recipe's cosine decay ends inside the budget, and the toolkit
recipe runs its own schedule for as long), and ``decompressor.evaluate`` measures the result over every
frame: world joint position error (cm), local rotation error (degrees), contact accuracy and the
toolkit's loss. Prints a table and writes JSON. The toolkit's whole recipe (500,000 iterations) is the
anchor this is a first step towards; it takes hours and is not run here.

``--bar`` checks the issue's bar on a database small enough to afford it: the fast recipe runs its own
iterations (``--fast-iterations`` to change them), and the toolkit recipe then gets ten times the fast run's
training seconds (its own schedule, for as many iterations as fit): fast must be at least as good on every
measure. ``--data DIR`` trains on DIR's database.bin and features.bin instead of a synthetic database, e.g.
the shared real motion capture (642 frames of LaFAN1, read from ``../shared``, never copied).

    python benchmarks/bench_decompressor.py --frames 10000 --seconds 240 --json benchmarks/results/decompressor.json
    python benchmarks/bench_decompressor.py --data ../shared/fixtures/reference-features --bar \
        --json benchmarks/results/decompressor-bar-lafan.json
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


def step_seconds(recipe, files, folder, **overrides):
    """Seconds per iteration of ``recipe``: the steady steps of a short probe, its setup and first save left out."""
    times = {}
    timed_run(recipe_config(recipe, iterations=PROBE_ITERATIONS, save_every=10 ** 9, **overrides), files,
              f"{folder}/{recipe}_probe",
              on_step=lambda step, module: times.setdefault(step, time.perf_counter()))
    return (times[PROBE_ITERATIONS] - times[10]) / (PROBE_ITERATIONS - 10)


def measure(recipe, files, folder, *, seconds=None, iterations=None, **overrides):
    """One recipe's row: ``iterations``, else as many as fit ``seconds``; training time, the evaluation's
    measures. ``overrides``: config fields on top of the recipe (None values left out)."""
    overrides = {name: value for name, value in overrides.items() if value is not None}
    if iterations is None:
        iterations = max(int(seconds / step_seconds(recipe, files, folder, **overrides)), PROBE_ITERATIONS)
    config = recipe_config(recipe, iterations=iterations, **overrides)
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
@click.option("--data", type=click.Path(exists=True, file_okay=False), default=None,
              help="Train on this folder's database.bin and features.bin instead of a synthetic database.")
@click.option("--bar", is_flag=True, help="Fast at its own iterations, then toolkit with ten times its seconds.")
@click.option("--fast-iterations", type=click.IntRange(min=PROBE_ITERATIONS), default=None,
              help="With --bar: the fast run's iterations [default: the recipe's].")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Threads of the fast recipe [default: its own choice]; the toolkit's step is single-threaded.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write the rows here.")
def main(frames, seconds, recipes, data, bar, fast_iterations, threads, json_path):
    """Train each recipe for the same short budget (or, with --bar, toolkit for ten times fast's) and compare
    their reconstruction quality."""
    with tempfile.TemporaryDirectory() as folder:
        files = ({"database": f"{data}/database.bin", "features": f"{data}/features.bin"} if data
                 else generate.generate_files(folder, nframes=frames))
        if bar:
            fast = measure("fast", files, folder, iterations=fast_iterations or recipe_config("fast").iterations,
                           threads=threads)
            # the toolkit step (the script's arithmetic, one thread) stands for the script's own time; it runs
            # faster than the script, so the toolkit recipe gets more iterations than the script would
            rows = [fast, measure("toolkit", files, folder, seconds=10 * fast["seconds"], step="toolkit")]
        else:
            rows = [measure(recipe, files, folder, seconds=seconds, threads=threads if recipe == "fast" else None)
                    for recipe in recipes]
    print_table(rows)
    verdict = bar_verdict(*rows) if bar else None
    if verdict is not None:
        click.echo(f"fast at {rows[0]['seconds']:.0f} s against toolkit at {rows[1]['seconds']:.0f} s: "
                   + ("at least as good on every measure" if not verdict else "behind on " + ", ".join(verdict)))
    if json_path:
        with open(json_path, "w") as stream:
            json.dump({"data": data or f"synthetic {frames} frames", "budget_seconds": None if bar else seconds,
                       "bar": bar, "behind_on": verdict, "torch": torch.__version__,
                       "machine": platform.processor() or platform.machine(), "rows": rows}, stream, indent=2)
            stream.write("\n")


def bar_verdict(fast, toolkit):
    """The measures (names) on which ``fast`` is worse than ``toolkit``; lower is better except contacts."""
    behind = [f"{group} {stat}" for group in ("position_error_cm", "rotation_error_deg")
              for stat in ("mean", "p95", "max") if fast[group][stat] > toolkit[group][stat]]
    behind += ["contacts"] * bool(fast["contact_accuracy"] < toolkit["contact_accuracy"])
    return behind + ["loss"] * bool(fast["loss"] > toolkit["loss"])


if __name__ == "__main__":
    main()
