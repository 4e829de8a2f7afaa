"""The table and the plot of ``bench_quality.py run`` records (``bench_quality.py report``)."""
import json
import os

import click

COLUMNS = ("recipe", "batch", "iterations", "samples", "wall time", "held-out loss", "top-1", "top-5")


def load_records(paths):
    """The records (dicts) of ``quality.json`` files, in the order given."""
    records = []
    for path in paths:
        with open(path) as stream:
            records.append(json.load(stream))
    return records


def format_seconds(seconds):
    """``'1 h 02 min'``, ``'4 min 31 s'`` or ``'38 s'``."""
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds} s"


def table_rows(records):
    """One row (tuple of str, ``COLUMNS``) per record, from its last point; unfinished runs say so."""
    rows = []
    for record in records:
        last, config = record["points"][-1], record["config"]
        done = "" if record.get("finished") else f" (unfinished: {last['step']:,} of {config['iterations']:,})"
        rows.append((record["label"] + done, f"{config['batch_size']:,}", f"{last['step']:,}",
                     f"{last['samples']:,}", format_seconds(last["wall_s"]), f"{last['loss']:.4f}",
                     f"{last['top1']:.1%}", f"{last['top5']:.1%}"))
    return rows


def markdown_table(records):
    """The table as Markdown lines (list of str)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    return lines + ["| " + " | ".join(row) + " |" for row in table_rows(records)]


def plot_title(records):
    """'<database> on <machine>' from the first record."""
    first = records[0]
    database, machine = first["database"], first["machine"]
    threads = sorted({record["threads"] for record in records})
    return (f"{os.path.basename(database['folder'])}: {database['frames']:,} frames "
            f"(features.bin {database['features_sha256'][:12]})\n{machine['cpu']}, {machine['cores']} cores, "
            f"torch threads {', '.join(map(str, threads))}; {first['held_out']['queries']:,} held-out queries")


def write_plot(records, path):
    """Write a PNG: top-1 and held-out loss against training wall time, and top-1 against samples seen.

    One curve per record. Returns ``path``.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, (accuracy, loss, by_samples) = plt.subplots(1, 3, figsize=(14, 4.6), constrained_layout=True)
    for record in records:
        points = record["points"]
        wall, samples = [p["wall_s"] for p in points], [p["samples"] for p in points]
        top1 = [100 * p["top1"] for p in points]
        label = f"{record['label']} (batch {record['config']['batch_size']:,})"
        line, = accuracy.plot(wall, top1, marker=".", label=label)
        loss.plot(wall, [p["loss"] for p in points], marker=".", color=line.get_color(), label=label)
        by_samples.plot(samples, top1, marker=".", color=line.get_color(), label=label)
    for axes, x_name, y_name in ((accuracy, "training wall time (s)", "held-out top-1 match accuracy (%)"),
                                 (loss, "training wall time (s)", "held-out loss"),
                                 (by_samples, "training samples (queries seen)", "held-out top-1 match accuracy (%)")):
        axes.set_xscale("log")
        axes.set_xlabel(x_name + ", log scale")
        axes.set_ylabel(y_name)
        axes.grid(True, which="both", alpha=0.3)
    accuracy.legend(loc="upper left", fontsize=8)
    figure.suptitle(plot_title(records), fontsize=9)
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


@click.command("report")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--png", default=None, help="Write the plot to this PNG.")
def report_command(paths, png):
    """Print the Markdown table of the runs PATHS (quality.json files) and draw their plot."""
    records = load_records(paths)
    for line in markdown_table(records):
        click.echo(line)
    if png:
        click.echo(f"wrote {write_plot(records, png)}")
