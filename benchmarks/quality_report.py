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
        done = "" if record.get("finished") else f" (running: {last['step']:,} of {config['iterations']:,})"
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
    """Write a PNG: top-1 match accuracy and held-out loss against training wall time, one curve per record."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, (accuracy, loss) = plt.subplots(1, 2, figsize=(11, 4.4), constrained_layout=True)
    for record in records:
        wall = [point["wall_s"] for point in record["points"]]
        label = f"{record['label']} (batch {record['config']['batch_size']:,})"
        line, = accuracy.plot(wall, [100 * point["top1"] for point in record["points"]], marker=".", label=label)
        loss.plot(wall, [point["loss"] for point in record["points"]], marker=".", color=line.get_color(),
                  label=label)
    for axes, name in ((accuracy, "held-out top-1 match accuracy (%)"), (loss, "held-out loss")):
        axes.set_xscale("log")
        axes.set_xlabel("training wall time (s, log scale)")
        axes.set_ylabel(name)
        axes.grid(True, which="both", alpha=0.3)
    loss.set_yscale("log")
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
