"""Which stepper recipe for a database of this size? ``fast`` against ``small``, side by side, on synthetic databases.

For each ``--frames N``: ``generate_database.py`` writes a synthetic database of N frames into ``WORK/N``,
``train-decompressor --recipe preview`` its latent.bin, then ``train-stepper --recipe fast`` and ``--recipe small``
run at once, one thread each (so that both see the same busy machine), and ``evaluate-stepper --decompressor``
measures each on every window inside a clip (up to evaluate-stepper's default). A rerun of the same command
keeps what finished (each stepper's seconds are kept beside it) and continues the rest.

Prints a table (wall seconds, features and latent L1, decoded cm mean / p95 / max, loss; which recipe is ahead
on how many of the six) and the recipe ``mm-projector retrain --recipe fast`` trains there
(``stepper.config.recipe_for_database``); ``--json`` writes it.

    python benchmarks/bench_stepper_size.py --work W --frames 1500 [--frames 5000] [--json FILE]
"""
import concurrent.futures
import functools
import json
import os
import platform
import subprocess
import sys
import time

import click

from motion_matching.stepper.config import SMALL_DATABASE_FRAMES, recipe_for_database

RECIPES = ("fast", "small")
MEASURES = (("features L1", ("feature_l1", "mean")), ("latent L1", ("latent_l1", "mean")),
            ("cm mean", ("position_error_cm", "mean")), ("cm p95", ("position_error_cm", "p95")),
            ("cm max", ("position_error_cm", "max")), ("loss", ("loss_terms", "loss")))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def command(*arguments):
    """``mm-projector ARGUMENTS`` in this interpreter."""
    return [sys.executable, "-c", "from motion_matching.cli import main; main()", *arguments]


def inputs(folder):
    return ["--database", os.path.join(folder, "database.bin"), "--features", os.path.join(folder, "features.bin")]


def prepare(folder, frames):
    """The database of ``frames`` frames and the preview decompressor's latent in ``folder``."""
    if not os.path.isfile(os.path.join(folder, "database.bin")):
        subprocess.run([sys.executable, os.path.join(ROOT, "generate_database.py"), "--out", folder, "--frames",
                        str(frames)], check=True)
    subprocess.run(command("train-decompressor", *inputs(folder), "--recipe", "preview", "--threads", "2",
                           "--out", os.path.join(folder, "dec"), "--quiet"), check=True)


def train_stepper(folder, recipe):
    """Train ``recipe`` on one thread into ``folder/recipe``; its wall seconds are kept in seconds.json."""
    kept = os.path.join(folder, recipe, "seconds.json")
    if not os.path.isfile(kept):
        started = time.perf_counter()
        subprocess.run(command("train-stepper", *inputs(folder), "--latent", os.path.join(folder, "dec", "latent.bin"),
                               "--recipe", recipe, "--threads", "1", "--out", os.path.join(folder, recipe), "--quiet"),
                       check=True)
        with open(kept, "w") as file:
            json.dump({"seconds": time.perf_counter() - started}, file)
    with open(kept) as file:
        return json.load(file)["seconds"]


def train_steppers(folder):
    """Train every recipe at once, one thread each; returns {recipe: wall seconds}."""
    with concurrent.futures.ThreadPoolExecutor(len(RECIPES)) as pool:
        return dict(zip(RECIPES, pool.map(functools.partial(train_stepper, folder), RECIPES)))


def evaluate(folder, recipe):
    """evaluate-stepper's report (dict) of ``recipe``'s stepper.bin, decoded with the preview decompressor."""
    out = os.path.join(folder, recipe, "eval")
    subprocess.run(command("evaluate-stepper", "--stepper", os.path.join(folder, recipe, "stepper.bin"),
                           *inputs(folder), "--latent", os.path.join(folder, "dec", "latent.bin"),
                           "--decompressor", os.path.join(folder, "dec", "decompressor.bin"), "--out", out,
                           "--no-plots", "--force"), check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "stepper_evaluation.json")) as file:
        return json.load(file)


def measures(report):
    return {name: float(report[group][key]) for name, (group, key) in MEASURES}


@click.command()
@click.option("--work", required=True, type=click.Path(file_okay=False), help="Folder for the databases and runs")
@click.option("--frames", "sizes", required=True, multiple=True, type=click.IntRange(min=100),
              help="Frames of a synthetic database (repeat for several)")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the results here")
def main(work, sizes, json_path):
    rows = []
    for frames in sizes:
        folder = os.path.join(work, str(frames))
        prepare(folder, frames)
        seconds = train_steppers(folder)
        results = {recipe: {"seconds": seconds[recipe], **measures(evaluate(folder, recipe))} for recipe in RECIPES}
        small_ahead = sum(results["small"][name] < results["fast"][name] for name, _ in MEASURES)
        rows.append({"frames": frames, "results": results, "small_ahead_of_fast": small_ahead,
                     "measures": len(MEASURES), "retrain_trains": recipe_for_database("fast", frames)})
    print(f"{'frames':>7} {'recipe':<6} {'seconds':>8}" + "".join(f"{name:>12}" for name, _ in MEASURES))
    for row in rows:
        for recipe in RECIPES:
            values = row["results"][recipe]
            print(f"{row['frames']:>7} {recipe:<6} {values['seconds']:>8.0f}"
                  + "".join(f"{values[name]:>12.6f}" for name, _ in MEASURES))
        print(f"{'':>7} small ahead of fast on {row['small_ahead_of_fast']} of {row['measures']}; "
              f"retrain --recipe fast trains {row['retrain_trains']!r} (below {SMALL_DATABASE_FRAMES:,} frames: small)")
    if json_path:
        with open(json_path, "w") as file:
            json.dump({"benchmark": "stepper-size", "machine": platform.processor() or platform.machine(),
                       "cpus": os.cpu_count(), "command": " ".join(sys.argv), "rows": rows}, file, indent=1)


if __name__ == "__main__":
    main()
