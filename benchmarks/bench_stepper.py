"""Stepper quality against training time: the toolkit recipe and the fast candidate at equal short budgets.

For each recipe, a short probe times its step; the measured run then gets the iterations that fit
``--seconds`` of training (so the fast recipe's cosine decay ends inside the budget, and the toolkit recipe
runs its own schedule for as long), and ``stepper.evaluate`` measures the result on windows of 20 frames
across the database: the L1 error of the stepped features and latent (mean over frames 1..19, and at frame
19) and the toolkit's loss. With ``--decompressor-seconds`` a decompressor is trained first (its fast
recipe, for that long): the steppers then learn its latent.bin instead of the synthetic stand-in, and the
evaluation also decodes the stepped frames (joint position error, cm). Prints a table and writes JSON. The
toolkit's whole recipe (500,000 iterations) is the anchor this is a first step towards; it takes hours and
is not run here.

``--bar`` checks the issue's bar on a database small enough to afford it: the fast recipe runs its own
iterations (``--fast-iterations`` to change them), and the toolkit recipe then gets ten times the fast run's
training seconds (the toolkit step, one thread, its own schedule): fast must be at least as good on every
measure. ``--data DIR`` trains on DIR's database.bin and features.bin (and its latent.bin, unless
``--decompressor-seconds`` trains one there) instead of a synthetic database, e.g. the shared real motion
capture (642 frames of LaFAN1, read from ``../shared``, never copied).

    python benchmarks/bench_stepper.py --frames 10000 --seconds 120 --decompressor-seconds 120 \
        --json benchmarks/results/stepper.json
    python benchmarks/bench_stepper.py --data ../shared/fixtures/reference-features --decompressor-seconds 120 \
        --bar --json benchmarks/results/stepper-bar-lafan.json
"""
import dataclasses
import json
import os
import platform
import tempfile
import time

import click
import torch

from motion_matching.data import generate
from motion_matching.decompressor.config import recipe_config as decompressor_recipe
from motion_matching.decompressor.train import train_decompressor
from motion_matching.stepper.config import recipe_config
from motion_matching.stepper.evaluate import evaluate_stepper
from motion_matching.stepper.train import train_stepper

PROBE_ITERATIONS = 40


def stepper_run(files):
    """A function training a stepper ``config`` on ``files`` into a folder."""
    def run(config, out_dir, on_step=None):
        train_stepper(config, database_path=files["database"], features_path=files["features"],
                      latent_path=files["latent"], out_dir=out_dir, on_step=on_step)
    return run


def decompressor_run(files):
    """A function training a decompressor ``config`` on ``files`` into a folder."""
    def run(config, out_dir, on_step=None):
        train_decompressor(config, database_path=files["database"], features_path=files["features"],
                           out_dir=out_dir, on_step=on_step)
    return run


def step_seconds(run, config, folder):
    """Seconds per iteration of ``config`` under ``run``: the steady steps of a short probe, its setup and first
    save left out."""
    times = {}
    run(dataclasses.replace(config, iterations=PROBE_ITERATIONS, save_every=10 ** 9), folder,
        on_step=lambda step, module: times.setdefault(step, time.perf_counter()))
    return (times[PROBE_ITERATIONS] - times[10]) / (PROBE_ITERATIONS - 10)


def fitted_run(run, config, folder, *, seconds=None):
    """Train ``config`` with the iterations that fit ``seconds`` (None: its own); returns ``(config, wall
    seconds)``."""
    if seconds is not None:
        iterations = max(int(seconds / step_seconds(run, config, f"{folder}_probe")), PROBE_ITERATIONS)
        config = dataclasses.replace(config, iterations=iterations)
    started = time.perf_counter()
    run(config, folder)
    return config, time.perf_counter() - started


def parse_candidate(text):
    """``"batch_size=128,lr=0.003"`` -> ``{"batch_size": 128, "lr": 0.003}`` (ints, floats, else strings)."""
    overrides = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        for kind in (int, float, str):
            try:
                overrides[name.strip()] = kind(value)
                break
            except ValueError:
                continue
    return overrides


def measure(recipe, files, folder, *, seconds, decompressor=None, overrides=None):
    """One recipe's row (with ``overrides`` of its settings): iterations fitted to ``seconds`` (None: the
    settings' own), training time, the evaluation's measures."""
    label = recipe + (f" {','.join(f'{k}={v}' for k, v in overrides.items())}" if overrides else "")
    run_dir = f"{folder}/{recipe}{len(os.listdir(folder))}"
    config, wall = fitted_run(stepper_run(files), recipe_config(recipe, **(overrides or {})), run_dir,
                              seconds=seconds)
    report, _ = evaluate_stepper(f"{run_dir}/stepper.bin", database_path=files["database"],
                                 features_path=files["features"], latent_path=files["latent"],
                                 decompressor_path=decompressor)
    row = {"recipe": label, "batch": config.batch_size, "iterations": config.iterations, "seconds": wall,
           "lr": config.lr, "warmup": config.warmup, "schedule": config.schedule,
           "threads": torch.load(f"{run_dir}/stepper_checkpoint.pt", weights_only=False)["threads"],
           "windows": report["windows"], "loss": report["loss_terms"]["loss"]}
    for name in ("feature_l1", "latent_l1", "position_error_cm", "decompressor_alone_cm"):
        if name in report:
            row[name] = report[name]
    return row


def prepare_files(folder, *, frames, decompressor_seconds, data=None):
    """The synthetic files (or ``data``'s), and the decompressor.bin path (or None): with
    ``decompressor_seconds``, a fast decompressor trained for that long, its latent.bin the one the steppers
    learn."""
    files = ({name: os.path.join(data, f"{name}.bin") for name in ("database", "features", "latent")} if data
             else generate.generate_files(folder, nframes=frames))
    if not decompressor_seconds:
        return files, None, None
    config, wall = fitted_run(decompressor_run(files), decompressor_recipe("fast"), f"{folder}/decompressor",
                              seconds=decompressor_seconds)
    files = {**files, "latent": f"{folder}/decompressor/latent.bin"}
    return files, f"{folder}/decompressor/decompressor.bin", {"iterations": config.iterations, "seconds": wall}


def print_table(rows):
    decoded = any("position_error_cm" in row for row in rows)
    width = max(8, *(len(row["recipe"]) for row in rows))
    click.echo(f"{'recipe':>{width}} {'batch':>5} {'iters':>7} {'train s':>8} {'feat L1 mean/f19':>17} "
               f"{'lat L1 mean/f19':>16} {'loss':>7}" + (f" {'pos cm mean/p95/max':>22}" if decoded else ""))
    for row in rows:
        features, latent = row["feature_l1"], row["latent_l1"]
        line = (f"{row['recipe']:>{width}} {row['batch']:>5} {row['iterations']:>7,} {row['seconds']:>8.1f} "
                f"{features['mean']:>8.4f}/{features['by_horizon'][-1]:>8.4f} "
                f"{latent['mean']:>7.4f}/{latent['by_horizon'][-1]:>8.4f} {row['loss']:>7.4f}")
        if "position_error_cm" in row:
            pos = row["position_error_cm"]
            line += f" {pos['mean']:>6.2f}/{pos['p95']:>6.2f}/{pos['max']:>7.2f}"
        click.echo(line)
    if decoded:
        alone = rows[0]["decompressor_alone_cm"]
        click.echo(f"the decompressor alone on the same frames: {alone['mean']:.2f}/{alone['p95']:.2f}/"
                   f"{alone['max']:.2f} cm")


@click.command()
@click.option("--frames", type=click.IntRange(min=1200), default=10_000, show_default=True,
              help="Frames of the synthetic database.")
@click.option("--seconds", type=click.FloatRange(min=1), default=120, show_default=True,
              help="Training budget per stepper recipe (wall seconds).")
@click.option("--decompressor-seconds", type=click.FloatRange(min=0), default=0, show_default=True,
              help="Train a fast decompressor this long first, for its latent.bin and the decoded poses (0: the "
                   "synthetic stand-in latent, no poses).")
@click.option("--recipe", "recipes", multiple=True, default=("toolkit", "fast"), show_default=True)
@click.option("--candidate", "candidates", multiple=True,
              help="Also the fast recipe with these settings, e.g. batch_size=128,lr=0.003 (repeatable).")
@click.option("--data", type=click.Path(exists=True, file_okay=False), default=None,
              help="Train on this folder's database.bin, features.bin (and latent.bin) instead of synthetic ones.")
@click.option("--bar", is_flag=True, help="Fast at its own iterations, then toolkit with ten times its seconds.")
@click.option("--fast-iterations", type=click.IntRange(min=PROBE_ITERATIONS), default=None,
              help="With --bar: the fast run's iterations [default: the recipe's].")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="With --bar: threads of the fast recipe [default: its own choice].")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write the rows here.")
def main(frames, seconds, decompressor_seconds, recipes, candidates, data, bar, fast_iterations, threads, json_path):
    """Train each stepper recipe for the same short budget (or, with --bar, toolkit for ten times fast's) and
    compare their rollout quality."""
    runs = [(recipe, None) for recipe in recipes] + [("fast", parse_candidate(text)) for text in candidates]
    with tempfile.TemporaryDirectory() as folder:
        files, decompressor, trained = prepare_files(folder, frames=frames, decompressor_seconds=decompressor_seconds,
                                                     data=data)
        if bar:
            fast_settings = {name: value for name, value in (("iterations", fast_iterations), ("threads", threads))
                             if value is not None}
            fast = measure("fast", files, folder, seconds=None, decompressor=decompressor, overrides=fast_settings)
            # the toolkit step (the script's arithmetic, one thread) stands for the script's own time; it runs
            # faster than the script, so the toolkit recipe gets more iterations than the script would
            rows = [fast, measure("toolkit", files, folder, seconds=10 * fast["seconds"], decompressor=decompressor,
                                  overrides={"step": "toolkit"})]
        else:
            rows = [measure(recipe, files, folder, seconds=seconds, decompressor=decompressor, overrides=overrides)
                    for recipe, overrides in runs]
    print_table(rows)
    behind = bar_verdict(*rows) if bar else None
    if bar:
        click.echo(f"fast at {rows[0]['seconds']:.0f} s against toolkit at {rows[1]['seconds']:.0f} s: "
                   + ("at least as good on every measure" if not behind else "behind on " + ", ".join(behind)))
    if json_path:
        with open(json_path, "w") as stream:
            json.dump({"data": data or f"synthetic {frames} frames", "budget_seconds": None if bar else seconds,
                       "bar": bar, "behind_on": behind, "decompressor": trained, "torch": torch.__version__,
                       "machine": platform.processor() or platform.machine(), "rows": rows}, stream, indent=2)
            stream.write("\n")


def bar_verdict(fast, toolkit):
    """The measures (names) on which ``fast`` is worse than ``toolkit`` (all lower-is-better)."""
    behind = []
    for name in ("feature_l1", "latent_l1"):
        behind += [f"{name} mean"] * bool(fast[name]["mean"] > toolkit[name]["mean"])
        behind += [f"{name} frame 19"] * bool(fast[name]["by_horizon"][-1] > toolkit[name]["by_horizon"][-1])
    if "position_error_cm" in fast:
        behind += [f"position {stat}" for stat in ("mean", "p95", "max")
                   if fast["position_error_cm"][stat] > toolkit["position_error_cm"][stat]]
    return behind + ["loss"] * bool(fast["loss"] > toolkit["loss"])


if __name__ == "__main__":
    main()
