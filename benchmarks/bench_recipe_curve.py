"""A recipe's quality against training time, beside its network's anchor: is the fast recipe at least as good
as the toolkit's recipe run to the end, on every measure, in a tenth of its time?

``run`` trains one recipe (``--recipe``, default ``fast``; ``--iterations`` and ``--threads`` on top) of the
decompressor or the stepper on the anchor's own inputs (``anchor.py``: the 50,000-frame synthetic database,
checked against the anchor's recorded hashes, database.bin excepted with ``--this-machines-database``; for the
stepper the anchor's latent.bin and decompressor.bin),
copies the runtime files after ``--points`` of its saves, log-spaced, and those it ends with, then measures each copy as
``anchor.py save`` measures the anchor's snapshots. The training seconds start before the training call (reading
the inputs counts) and leave the measuring out. ``compare`` sets a run's last row beside the anchor's last
measured snapshot, measure by measure (lower is better; contact accuracy higher), with the time ratio against
``--anchor-seconds`` (default the anchor's recorded training seconds; the toolkit's own script measured
17.3 ms per decompressor iteration and 21.4 ms per stepper iteration here, 2.4 and 3.0 hours), and draws both
curves.

    python benchmarks/bench_recipe_curve.py run decompressor --work /tmp/curve \
        --json benchmarks/results/decompressor-fast-curve.json
    python benchmarks/bench_recipe_curve.py compare decompressor benchmarks/results/decompressor-fast-curve.json \\
        --png benchmarks/results/decompressor-curves.png
"""
import json
import os
import platform
import shutil
import sys
import time

import click
from anchor import QUALITY_NAME, Network, anchor_data, checked_inputs, read_log, state_folder

from motion_matching.fingerprint import file_sha256
from motion_matching.interrupts import interrupts_exit

LOWER_IS_BETTER = ("mean", "p95", "max")


def _snapshot_steps(iterations, save_every, points):
    """The steps (after a save) whose files are copied: about ``points`` log-spaced saves, and the last."""
    saves = list(range(1, iterations + 1, save_every))
    chosen = {saves[round(len(saves) ** (k / max(1, points - 1))) - 1] for k in range(points)}
    return sorted(chosen | {saves[-1]})


@click.group()
def main():
    """Quality against time of a recipe, beside the anchor."""


@main.command()
@click.argument("network", type=click.Choice(["decompressor", "stepper"]))
@click.option("--work", type=click.Path(file_okay=False), required=True)
@click.option("--state", type=click.Path(file_okay=False), default=None, help="The anchor's state.")
@click.option("--recipe", default="fast", show_default=True)
@click.option("--iterations", type=click.IntRange(min=1), default=None)
@click.option("--threads", type=click.IntRange(min=1), default=None)
@click.option("--points", type=click.IntRange(min=1), default=6, show_default=True)
@click.option("--set", "settings", multiple=True, metavar="NAME=VALUE",
              help="A config field on top of the recipe, e.g. --set batch_size=256 --set lr=0.006 (repeatable).")
@click.option("--this-machines-database", is_flag=True,
              help="Train on the database.bin this CPU makes even where its last bits are not the anchor's "
                   "(features.bin must still be the anchor's); the JSON records its SHA-256.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), required=True)
def run(network, work, state, recipe, iterations, threads, points, settings, this_machines_database, json_path):
    """Train the recipe once, measure it at log-spaced saves and at its end."""
    network, state = Network(network), state_folder(network, state)
    log = read_log(state)
    overrides = {name: value for name, value in (("iterations", iterations), ("threads", threads)) if value}
    config = network.config(recipe, **{**overrides, **_parsed_settings(network.config(recipe), settings)})
    run_dir, copies = os.path.join(work, "run"), os.path.join(work, "snapshots")
    if os.path.exists(run_dir):
        raise click.UsageError(f"{run_dir} exists: give a fresh --work (a curve is one unbroken run)")
    steps, seconds = set(_snapshot_steps(config.iterations, config.save_every, points)), {}
    started = time.perf_counter()
    paths = checked_inputs(work, log, log.get("frames") or 50_000, data=anchor_data(log),
                           tolerated=("database",) if this_machines_database else ())

    def on_step(step, module):
        if step in steps:
            seconds[step] = time.perf_counter() - started
            folder = os.path.join(copies, f"{step:07d}")
            os.makedirs(folder, exist_ok=True)
            for name in network.outputs:
                shutil.copyfile(os.path.join(run_dir, name), os.path.join(folder, name))

    network.train(paths, state, run_dir, config=config, on_step=on_step, progress=None)
    total = time.perf_counter() - started
    steps.add(config.iterations)  # the files training writes at its end, after its last step
    on_step(config.iterations, None)
    seconds[config.iterations] = total
    rows = []
    for step in sorted(seconds):
        quality = network.measure(os.path.join(copies, f"{step:07d}"), paths, state)
        rows.append({"iterations": step, "seconds": seconds[step], **quality})
        click.echo(f"{step:>8,} its {seconds[step]:8.1f} s  {network.describe(quality)}")
    with open(json_path, "w", encoding="utf-8") as stream:
        json.dump({"network": network.name, "recipe": recipe, "config": {key: getattr(config, key) for key in
                   ("iterations", "batch_size", "lr", "schedule", "warmup", "precision", "threads")},
                   "settings": list(settings),
                   "training_seconds": total, "command": " ".join(sys.argv), "machine": platform.machine(),
                   "cpu_count": os.cpu_count(), "database_sha256": file_sha256(paths["database"]),
                   "rows": rows}, stream, indent=2)
        stream.write("\n")
    click.echo(f"{config.iterations:,} iterations in {total:.1f} s (training, inputs read included)")


def _parsed_settings(config, settings):
    """``NAME=VALUE`` strings as field values, each of the type of the recipe's value (or int, float, str)."""
    parsed = {}
    for setting in settings:
        name, equals, text = setting.partition("=")
        if not equals or not hasattr(config, name):
            raise click.BadParameter(f"{setting!r}: give NAME=VALUE with a config field's NAME", param_hint="--set")
        current = getattr(config, name)
        kinds = (type(current),) if current is not None else (int, float, str)
        for kind in kinds:
            try:
                parsed[name] = (text.lower() in ("1", "true", "yes")) if kind is bool else kind(text)
                break
            except ValueError:
                continue
        else:
            raise click.BadParameter(f"{setting!r}: {text!r} is not a {kinds[0].__name__}", param_hint="--set")
    return parsed


def _measures(row):
    """(name, value, lower is better) of every measure in a quality row."""
    for key, value in row.items():
        if key in ("iterations", "seconds"):
            continue
        if isinstance(value, dict):
            yield from ((f"{key} {part}", value[part], True) for part in LOWER_IS_BETTER if part in value)
        else:
            yield key, value, key != "contact_accuracy"


@main.command()
@click.argument("network", type=click.Choice(["decompressor", "stepper"]))
@click.argument("curves", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
@click.option("--state", type=click.Path(file_okay=False), default=None, help="The anchor's state.")
@click.option("--anchor-seconds", type=click.FloatRange(min=0, min_open=True), default=None,
              help="The anchor's whole time [default: its recorded training seconds].")
@click.option("--png", "png_path", type=click.Path(dir_okay=False), default=None)
def compare(network, curves, state, anchor_seconds, png_path):
    """Each curve's last row beside the anchor's last measured snapshot, measure by measure."""
    network, state = Network(network), state_folder(network, state)
    log, quality = read_log(state), read_log(state, QUALITY_NAME)
    anchor_rows = [{"iterations": int(step), "seconds": log["snapshots"][step]["seconds"], **quality[step]}
                   for step in sorted(quality, key=int)]
    if not anchor_rows:
        raise click.ClickException(f"{state}: no measured anchor snapshot yet (run anchor.py save)")
    anchor = anchor_rows[-1]
    anchor_seconds = anchor_seconds or anchor["seconds"]
    finished = "finished" if log.get("finished") else f"NOT finished: {anchor['iterations']:,} iterations"
    click.echo(f"anchor: {network.name} toolkit recipe, {finished}, {anchor_seconds:,.0f} s")
    for path in curves:
        with open(path, encoding="utf-8") as stream:
            curve = json.load(stream)
        last = curve["rows"][-1]
        click.echo(f"{path}: {curve['recipe']} {last['iterations']:,} iterations, {curve['training_seconds']:,.0f} s "
                   f"= {curve['training_seconds'] / anchor_seconds:.3f} of the anchor's")
        anchor_values = {name: value for name, value, _ in _measures(anchor)}
        for name, value, lower in _measures(last):
            reference = anchor_values[name]
            better = value <= reference if lower else value >= reference
            click.echo(f"   {name:<24} {value:10.4f}  anchor {reference:10.4f}  {'ok' if better else 'WORSE'}")
    if png_path:
        _plot(network, anchor_rows, curves, png_path)


def _plot(network, anchor_rows, curves, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [("toolkit recipe (anchor)", anchor_rows)]
    for curve_path in curves:
        with open(curve_path, encoding="utf-8") as stream:
            curve = json.load(stream)
        name = os.path.splitext(os.path.basename(curve_path))[0]  # two runs of one recipe read apart
        series.append((f"{curve['recipe']} ({curve['rows'][-1]['iterations']:,} its): {name}", curve["rows"]))
    names = [name for name, _, _ in _measures(anchor_rows[-1])]
    columns = 3
    rows_needed = -(-len(names) // columns)
    figure, axes = plt.subplots(rows_needed, columns, figsize=(4 * columns, 3 * rows_needed), squeeze=False)
    for axis, name in zip(axes.flat, names):
        for label, rows in series:
            points = [(row["seconds"] / 60, dict((n, v) for n, v, _ in _measures(row))[name]) for row in rows
                      if row["seconds"] > 0]
            axis.plot(*zip(*points), marker="o", markersize=3, label=label)
        axis.set(xscale="log", yscale="log", xlabel="training minutes", title=name)
    for axis in list(axes.flat)[len(names):]:
        axis.axis("off")
    axes.flat[0].legend(fontsize=7)
    figure.suptitle(f"{network.name}: quality against training time")
    figure.tight_layout()
    figure.savefig(path)


if __name__ == "__main__":
    with interrupts_exit():
        main()
