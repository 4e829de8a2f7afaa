"""Projector quality against training time, per recipe: what does each minute of training buy?

``run`` trains one recipe from one exact-neighbour cache and, at log-spaced iterations, evaluates the
network being trained on the same held-out queries for every recipe (``evaluate``'s default stream:
seed 271828, 10,000 queries, exact neighbours searched once): held-out loss (``evaluate.loss_terms``,
the toolkit's loss weights), top-1 and top-5 match accuracy (``evaluate.match_flags``). Evaluation time
is measured and left out of the training wall time (which starts before ``train_projector`` is called,
so reading the inputs and opening the cache count). After each point the JSON is rewritten
atomically, so a long run can be inspected while it goes; ``--resume`` continues an interrupted run
from its last checkpoint (the wall time recorded at that checkpoint carries on).
``steps`` times the training step of several recipes side by side (interleaved repeats, medians),
``report`` draws the PNG and prints the table from any number of ``run`` JSON files.

    python benchmarks/bench_quality.py run --data DIR --cache DIR/cache.h5 --recipe fast --out runs/fast
    python benchmarks/bench_quality.py steps --data DIR --cache DIR/cache.h5 --recipe toolkit --recipe fast
    python benchmarks/bench_quality.py report runs/*/quality.json --png quality.png
"""
import dataclasses
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

from motion_matching.atomic import atomic_write
from motion_matching.fingerprint import file_sha256
from motion_matching.neighbours.queries import HELD_OUT_SEED, generate_queries
from motion_matching.neighbours.search import make_searcher
from motion_matching.projector import evaluate
from motion_matching.projector.recipes import RECIPES, recipe_config
from motion_matching.projector.train import CHECKPOINT_NAME, TrainingInterrupted, train_projector
from motion_matching.toolkit import formats
from motion_matching.training.checkpoint import load_checkpoint
from motion_matching.training.step import with_resolved_precision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quality_report import report_command  # noqa: E402  (a sibling script module)

# benchmark-only presets: (recipe, overrides); "seed" is how the seed project's users trained (on a GPU)
PRESETS = {"seed": ("toolkit", {"batch_size": 1024, "iterations": 50_000})}
JSON_NAME = "quality.json"
STEP_WARMUP = 10  # iterations left out of every step time (allocations, the first projector.bin)


def preset_config(name, overrides):
    """The ``TrainConfig`` of recipe or preset ``name`` with ``overrides`` (dict of field values) on top."""
    recipe, base = PRESETS.get(name, (name, {}))
    return recipe_config(recipe, **{**base, **overrides})


def parse_settings(pairs):
    """``["batch_size=512", "lr=0.002", "amsgrad=false"]`` -> dict of field values (ints, floats, booleans,
    else strings)."""
    settings = {}
    for pair in pairs:
        key, _, text = pair.partition("=")
        if text.strip().lower() in ("true", "false"):
            settings[key.strip()] = text.strip().lower() == "true"
            continue
        for kind in (int, float, str):
            try:
                settings[key.strip()] = kind(text)
                break
            except ValueError:
                continue
    return settings


def machine_description():
    """A dict: CPU model, core count, platform, torch version."""
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as info:
            model = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": model, "cores": os.cpu_count(), "platform": platform.platform(), "torch": torch.__version__,
            "python": platform.python_version()}


class HeldOutQueries:
    """``evaluate``'s held-out queries of one database with their exact nearest frames, searched once."""

    def __init__(self, features, latent, *, nqueries=evaluate.DEFAULT_QUERIES, seed=HELD_OUT_SEED):
        self.X, self.Z = features, latent
        self.Xhat, _ = generate_queries(features, seed=seed, start=0, stop=nqueries)
        self.truth = make_searcher(features, backend=evaluate.DEFAULT_BACKEND).nearest(self.Xhat)
        self.nqueries, self.seed = nqueries, seed

    def measure(self, module):
        """A dict of floats: ``evaluate.loss_terms`` of ``module`` and its ``top1``/``top5`` match rates."""
        output = evaluate.projector_outputs(module, self.Xhat)
        nfeatures = self.X.shape[1]
        Xtil, Ztil = output[:, :nfeatures], output[:, nfeatures:]
        terms = evaluate.loss_terms(self.Xhat, self.X[self.truth], self.Z[self.truth], Xtil, Ztil)
        top1, topk = evaluate.match_flags(self.X, Xtil, self.truth)
        return {**terms, "top1": float(top1.mean()), f"top{evaluate.MATCH_K}": float(topk.mean())}


def evaluation_steps(iterations, points):
    """Sorted iteration counts (list of int) at which to evaluate: log-spaced, ending at ``iterations``."""
    first = max(10, iterations // 1000)
    steps = np.unique(np.round(np.geomspace(first, iterations, max(points, 2))).astype(int))
    return [int(step) for step in steps if 0 < step <= iterations]


class QualityRun:
    """One recipe's training with evaluations at ``steps``; ``record`` is the JSON-ready dict."""

    def __init__(self, record, held_out, json_path, steps, *, stop_after=None):
        self.record, self.held_out, self.json_path, self.steps = record, held_out, json_path, set(steps)
        self.started, self.eval_seconds, self.offset = None, 0.0, record.get("resumed_wall_s", 0.0)
        self.last, self.stop_after = (0, 0.0), stop_after

    def wall(self):
        """Training seconds so far: elapsed since the start, less evaluations, plus earlier sessions."""
        return self.offset + time.perf_counter() - self.started - self.eval_seconds

    def on_step(self, step, module):
        """``train_projector``'s hook: remember the time; evaluate and save at the chosen steps."""
        self.last = (step, self.wall())
        if step % self.record["config"]["checkpoint_every"] == 0:
            self.record["checkpoint_wall_s"][str(step)] = self.last[1]
        if step in self.steps:
            self.evaluate(step, module)
        if step == self.stop_after:  # tests: what Ctrl-C does between two iterations
            raise KeyboardInterrupt

    def evaluate(self, step, module):
        wall, began = self.wall(), time.perf_counter()
        point = {"step": step, "samples": step * self.record["config"]["batch_size"], "wall_s": wall,
                 **self.held_out.measure(module)}
        point["eval_s"] = time.perf_counter() - began
        self.eval_seconds += point["eval_s"]
        self.record["points"].append(point)
        self.save()
        click.echo(f"{self.record['label']}: step {step:>7,} wall {wall:8.1f} s  loss {point['loss']:.4f}  "
                   f"top1 {point['top1']:.2%}  top5 {point['top5']:.2%}  (eval {point['eval_s']:.1f} s)")

    def save(self):
        with atomic_write(self.json_path, mode="w") as stream:
            json.dump(self.record, stream, indent=1)
            stream.write("\n")


def new_record(label, config, *, data, cache, held_out, threads, command):
    """The JSON-ready dict describing a run before its first point."""
    features_path = os.path.join(data, "features.bin")
    return {"label": label, "recipe": config.recipe, "config": with_resolved_precision(config).to_dict(),
            "threads": threads,
            "command": command, "machine": machine_description(),
            "database": {"folder": os.path.abspath(data), "frames": int(held_out.X.shape[0]),
                         "features_sha256": file_sha256(features_path)},
            "cache": {"path": os.path.abspath(cache), "bytes": os.path.getsize(cache)},
            "held_out": {"queries": held_out.nqueries, "seed": held_out.seed, "backend": evaluate.DEFAULT_BACKEND},
            "points": [], "checkpoint_wall_s": {}, "finished": False}


def resume_record(json_path, checkpoint_path):
    """The saved record, cut back to the checkpoint's step, with the wall time to carry on from."""
    with open(json_path) as stream:
        record = json.load(stream)
    step = int(load_checkpoint(checkpoint_path)["step"])
    record["points"] = [point for point in record["points"] if point["step"] <= step]
    record["resumed_wall_s"] = record["checkpoint_wall_s"][str(step)]
    record.setdefault("sessions", []).append({"resumed_at_step": step, "at_wall_s": record["resumed_wall_s"]})
    return record


def train_recipe(config, *, data, cache, out_dir, held_out, label, points, resume=False, command="",
                 stop_after=None):
    """Train ``config`` from ``cache``, evaluating at log-spaced steps; returns the saved record dict.

    Raises ``TrainingInterrupted`` on Ctrl-C (or after iteration ``stop_after``), the record saved.
    """
    json_path, checkpoint_path = os.path.join(out_dir, JSON_NAME), os.path.join(out_dir, CHECKPOINT_NAME)
    os.makedirs(out_dir, exist_ok=True)
    if resume:
        record = resume_record(json_path, checkpoint_path)
    else:
        record = new_record(label, config, data=data, cache=cache, held_out=held_out, threads=config.threads,
                            command=command)
    steps = [step for step in evaluation_steps(config.iterations, points)
             if step > (record["points"][-1]["step"] if record["points"] else 0)]
    run = QualityRun(record, held_out, json_path, steps, stop_after=stop_after)
    run.started = time.perf_counter()
    try:
        result = train_projector(config, features_path=os.path.join(data, "features.bin"),
                                 latent_path=os.path.join(data, "latent.bin"),
                                 database_path=os.path.join(data, "database.bin"), offline_cache=cache,
                                 out_dir=out_dir, held_out_queries=0, on_step=run.on_step,
                                 resume=checkpoint_path if resume else None)
    except TrainingInterrupted:
        record["checkpoint_wall_s"][str(run.last[0])] = run.last[1]
        run.save()
        raise
    record.update(finished=True, total_wall_s=run.wall(), loop_s=result.seconds)
    run.save()
    return record


@click.group()
def main():
    """Quality against training time: run a recipe, time steps side by side, report."""


def data_options(command):
    command = click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
                           help="torch threads, the same for every recipe compared.")(command)
    command = click.option("--cache", required=True, type=click.Path(exists=True, dir_okay=False),
                           help="Exact-neighbour cache of DATA/features.bin (build-cache).")(command)
    return click.option("--data", required=True, type=click.Path(exists=True, file_okay=False),
                        help="Folder of database.bin, features.bin, latent.bin.")(command)


RECIPE_CHOICE = click.Choice(list(RECIPES) + list(PRESETS))


@main.command("run")
@data_options
@click.option("--recipe", type=RECIPE_CHOICE, default="toolkit", show_default=True)
@click.option("--set", "settings", multiple=True, help="Override a setting: FIELD=VALUE (repeatable).")
@click.option("--label", default=None, help="Curve label [default: the recipe name].")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Folder of the run.")
@click.option("--points", default=30, show_default=True, help="Evaluations, log-spaced over the run.")
@click.option("--queries", default=evaluate.DEFAULT_QUERIES, show_default=True, help="Held-out queries.")
@click.option("--resume", is_flag=True, help="Continue OUT's interrupted run from its checkpoint.")
def run_command(data, cache, threads, recipe, settings, label, out_dir, points, queries, resume):
    """Train one recipe, evaluating it as it goes; writes OUT/quality.json."""
    config = preset_config(recipe, {**parse_settings(settings), "threads": threads})
    features, latent = formats.load_features_and_latent(os.path.join(data, "features.bin"),
                                                        os.path.join(data, "latent.bin"))
    held_out = HeldOutQueries(features.features, latent, nqueries=queries)
    command = " ".join([os.path.basename(sys.executable), *sys.argv])
    try:
        record = train_recipe(config, data=data, cache=cache, out_dir=out_dir, held_out=held_out,
                              label=label or recipe, points=points, resume=resume, command=command)
    except TrainingInterrupted as stop:
        click.echo(f"interrupted after {stop.result.steps:,} iterations; continue with the same command and "
                   f"--resume", err=True)
        sys.exit(130)
    click.echo(f"{record['label']}: finished in {record['total_wall_s']:.1f} s of training; "
               f"{os.path.join(out_dir, JSON_NAME)}")


def step_seconds(config, *, data, cache, steps, folder):
    """Seconds per iteration (float) of ``train_projector`` with ``config`` over ``steps`` after a warm-up."""
    marks = {}

    def mark(step, module):
        if step in (STEP_WARMUP, STEP_WARMUP + steps):
            marks[step] = time.perf_counter()
    short = dataclasses.replace(config, iterations=STEP_WARMUP + steps)
    train_projector(short, features_path=os.path.join(data, "features.bin"),
                    latent_path=os.path.join(data, "latent.bin"), offline_cache=cache, out_dir=folder,
                    held_out_queries=0, on_step=mark, force=True)  # each timing starts over
    return (marks[STEP_WARMUP + steps] - marks[STEP_WARMUP]) / steps


@main.command("steps")
@data_options
@click.option("--recipe", "recipes", type=RECIPE_CHOICE, multiple=True)
@click.option("--batch", "batches", type=click.IntRange(min=1), multiple=True,
              help="Also time the toolkit recipe at this batch size (repeatable).")
@click.option("--samples", default=65_536, show_default=True, help="Samples timed per repeat and recipe.")
@click.option("--repeats", default=5, show_default=True, help="Interleaved repeats; medians reported.")
@click.option("--json", "json_path", default=None, help="Write the times to this JSON file.")
def steps_command(data, cache, threads, recipes, batches, samples, repeats, json_path):
    """Time each recipe's training step side by side (interleaved repeats); print medians."""
    configs = {name: preset_config(name, {"threads": threads}) for name in recipes}
    configs.update({f"batch {batch}": preset_config("toolkit", {"threads": threads, "batch_size": batch})
                    for batch in batches})
    recipes = list(configs)
    times = {name: [] for name in recipes}
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(repeats):
            order = list(recipes)[repeat % len(recipes):] + list(recipes)[:repeat % len(recipes)]
            for name in order:
                steps = max(samples // configs[name].batch_size, 20)
                times[name].append(step_seconds(configs[name], data=data, cache=cache, steps=steps, folder=folder))
    rows = []
    for name in recipes:
        config, median = configs[name], statistics.median(times[name])
        rows.append({"recipe": name, "batch_size": config.batch_size, "iterations": config.iterations,
                     "threads": threads, "step_s": times[name], "median_step_s": median,
                     "projected_wall_s": median * config.iterations})
        click.echo(f"{name:>10} batch {config.batch_size:>5}  median step {median * 1000:8.2f} ms  x "
                   f"{config.iterations:>7,} iterations = {median * config.iterations:8.1f} s")
    if json_path:
        with atomic_write(json_path, mode="w") as stream:
            json.dump({"command": " ".join([os.path.basename(sys.executable), *sys.argv]),
                       "machine": machine_description(), "rows": rows}, stream, indent=1)


main.add_command(report_command, "report")

if __name__ == "__main__":
    main()
