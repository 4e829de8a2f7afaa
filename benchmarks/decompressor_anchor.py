"""The decompressor's anchor: the toolkit recipe (500,000 iterations, batch 32) run to the end once, resumable
across sessions, with its quality against training time.

``train`` makes the 50,000-frame synthetic database in ``--work`` (once), then trains with ``--exact-toolkit``
(byte-identical to the toolkit's ``train_decompressor.py``: ``tests/test_decompressor_script_parity.py``) into
``--work/run``. Every ``--snapshot-every`` iterations it copies the decompressor.bin and latent.bin the script
writes then into ``--work/snapshots``; at every checkpoint it records the training seconds so far in
``--work/anchor_log.json``. Ctrl-C (or the end of a session) stops it; the same command continues from the
last checkpoint, its seconds counted on from there (set-up and resume time left out). Started in the
background from a script, the process ignores SIGINT (the shell's rule for background jobs): stop it
with ``kill -TERM``; it then continues from its last 10,000-iteration checkpoint.

``report`` evaluates every snapshot over every frame (``decompressor.evaluate``: world joint position error,
local rotation error, contacts, the script's loss) and writes the quality-against-time JSON and PNG.

    python benchmarks/decompressor_anchor.py train --work ~/mm-anchor
    python benchmarks/decompressor_anchor.py report --work ~/mm-anchor \\
        --json benchmarks/results/decompressor-anchor.json --png benchmarks/results/decompressor-anchor.png
"""
import json
import os
import platform
import shutil
import sys
import time

import click

from motion_matching.interrupts import interrupts_exit

ANCHOR_ITERATIONS = 500_000
LOG_NAME = "anchor_log.json"


def _read_log(work):
    path = os.path.join(work, LOG_NAME)
    if not os.path.exists(path):
        return {"seconds_at": {}, "snapshots": {}}
    with open(path, encoding="utf-8") as stream:
        return json.load(stream)


def _write_log(work, log):
    path = os.path.join(work, LOG_NAME)
    with open(path + ".tmp", "w", encoding="utf-8") as stream:
        json.dump(log, stream, indent=1)
    os.replace(path + ".tmp", path)


def _inputs(work, frames):
    """The synthetic database.bin and features.bin in ``work`` (made once); returns their paths."""
    from motion_matching.data import generate

    folder = os.path.join(work, "data")
    paths = {"database": os.path.join(folder, "database.bin"), "features": os.path.join(folder, "features.bin")}
    if not all(os.path.exists(path) for path in paths.values()):
        os.makedirs(folder, exist_ok=True)
        made = generate.generate_files(folder, nframes=frames)
        paths = {"database": made["database"], "features": made["features"]}
    return paths


class Recorder:
    """``on_step``: snapshots of the runtime files and the training seconds at each checkpoint."""

    def __init__(self, work, run_dir, log, *, snapshot_every, checkpoint_every):
        self.work, self.run_dir, self.log = work, run_dir, log
        self.snapshot_every, self.checkpoint_every = snapshot_every, checkpoint_every
        self.base = self.started = None
        self.last = None  # (step, seconds) of the last step: a Ctrl-C checkpoint is written after it

    def interrupted(self):
        """Record the seconds of the step a Ctrl-C checkpoint holds, so the next session counts on from it."""
        if self.last is not None:
            self.log["seconds_at"][str(self.last[0])] = self.last[1]
            _write_log(self.work, self.log)

    def __call__(self, step, module):
        now = time.perf_counter()
        if self.started is None:  # the first step of this session: continue the count of the checkpoint before it
            self.base = self.log["seconds_at"].get(str(step - 1), 0.0)
            self.started = now
        seconds = self.base + now - self.started
        self.last = (step, seconds)
        if (step - 1) % self.snapshot_every == 0:  # the script has just written both files (after iteration step-1)
            folder = os.path.join(self.work, "snapshots", f"{step:07d}")
            os.makedirs(folder, exist_ok=True)
            for name in ("decompressor.bin", "latent.bin"):
                shutil.copyfile(os.path.join(self.run_dir, name), os.path.join(folder, name))
            self.log["snapshots"][str(step)] = seconds
            _write_log(self.work, self.log)
        if step % self.checkpoint_every == 0:
            self.log["seconds_at"][str(step)] = seconds
            _write_log(self.work, self.log)


@click.group()
def main():
    """Run and report the decompressor's toolkit-recipe anchor."""


@main.command()
@click.option("--work", type=click.Path(file_okay=False), required=True, help="Folder for data, run and snapshots.")
@click.option("--frames", type=click.IntRange(min=1200), default=50_000, show_default=True)
@click.option("--iterations", type=click.IntRange(min=1), default=ANCHOR_ITERATIONS, show_default=True)
@click.option("--snapshot-every", type=click.IntRange(min=1000), default=25_000, show_default=True)
def train(work, frames, iterations, snapshot_every):
    """Train (or continue) the anchor run."""
    from motion_matching.cli.progress import ProgressBar, training_note
    from motion_matching.decompressor.config import recipe_config
    from motion_matching.decompressor.train import train_decompressor
    from motion_matching.training.run import TrainingInterrupted

    if snapshot_every % 1000:
        raise click.BadParameter("must be a multiple of the script's save interval, 1,000",
                                 param_hint="--snapshot-every")
    os.makedirs(work, exist_ok=True)
    paths = _inputs(work, frames)
    config = recipe_config("toolkit", exact_toolkit=True, iterations=iterations)
    run_dir = os.path.join(work, "run")
    log = _read_log(work)
    log.update(frames=frames, iterations=iterations, command=" ".join(sys.argv), machine=platform.machine(),
               cpu_count=os.cpu_count())
    recorder = Recorder(work, run_dir, log, snapshot_every=snapshot_every, checkpoint_every=config.checkpoint_every)
    bar = ProgressBar(unit="it", label="anchor ")
    try:
        train_decompressor(config, database_path=paths["database"], features_path=paths["features"], out_dir=run_dir,
                           on_step=recorder, progress=lambda report: bar(report.step, report.iterations,
                                                                         training_note(report)))
    except TrainingInterrupted:
        recorder.interrupted()
        bar.close()
        click.echo("interrupted: run the same command to continue from the last checkpoint", err=True)
        sys.exit(130)
    bar.close()
    log["finished"] = True
    _write_log(work, log)
    click.echo(f"finished: {iterations:,} iterations, snapshots in {os.path.join(work, 'snapshots')}")


@main.command()
@click.option("--work", type=click.Path(file_okay=False, exists=True), required=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), required=True)
@click.option("--png", "png_path", type=click.Path(dir_okay=False), default=None)
def report(work, json_path, png_path):
    """Evaluate every snapshot; quality against training seconds as JSON (and a PNG)."""
    from motion_matching.decompressor.evaluate import evaluate_decompressor

    log = _read_log(work)
    paths = _inputs(work, log.get("frames", 50_000))
    rows = []
    for step, seconds in sorted(log["snapshots"].items(), key=lambda item: int(item[0])):
        folder = os.path.join(work, "snapshots", f"{int(step):07d}")
        measured, _ = evaluate_decompressor(os.path.join(folder, "decompressor.bin"),
                                            os.path.join(folder, "latent.bin"), database_path=paths["database"],
                                            features_path=paths["features"])
        rows.append({"iterations": int(step), "seconds": seconds,
                     **{key: measured[key] for key in ("position_error_cm", "rotation_error_deg", "contact_accuracy")},
                     "loss": measured["loss_terms"]["loss"]})
        row = rows[-1]
        click.echo(f"{int(step):>8,} its {seconds / 3600:6.2f} h  pos {row['position_error_cm']['mean']:.3f} cm "
                   f"(p95 {row['position_error_cm']['p95']:.3f})  rot {row['rotation_error_deg']['mean']:.3f} "
                   f"deg  contacts {row['contact_accuracy']:.4f}  loss {row['loss']:.4f}")
    with open(json_path, "w", encoding="utf-8") as stream:
        json.dump({"recipe": "toolkit (--exact-toolkit)", "frames": log.get("frames"), "finished": log.get("finished",
                   False), "command": log.get("command"), "rows": rows}, stream, indent=2)
        stream.write("\n")
    if png_path and rows:
        _plot(rows, png_path)


def _plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hours = [row["seconds"] / 3600 for row in rows]
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    axes[0].plot(hours, [row["position_error_cm"]["mean"] for row in rows], label="mean")
    axes[0].plot(hours, [row["position_error_cm"]["p95"] for row in rows], label="95th percentile")
    axes[0].set(xlabel="training hours", ylabel="joint position error (cm)", title="decompressor anchor")
    axes[1].plot(hours, [row["rotation_error_deg"]["mean"] for row in rows])
    axes[1].set(xlabel="training hours", ylabel="local rotation error (degrees)")
    axes[0].legend()
    figure.tight_layout()
    figure.savefig(path)


if __name__ == "__main__":
    with interrupts_exit():
        main()
