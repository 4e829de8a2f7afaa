"""The toolkit-recipe anchors of the decompressor and the stepper: each network's toolkit recipe (500,000
iterations, batch 32) run to the end once with ``--exact-toolkit`` (byte-identical to the toolkit's scripts:
``tests/test_decompressor_script_parity.py``, ``tests/test_stepper_script_parity.py``), resumable across sessions
and machines, with its quality against training time.

A session's machine keeps no file outside the repository, and a session may be cut off at any moment, so an
anchor's state lives in it (``--state``, default ``benchmarks/anchors/<network>``) and the training process keeps
it current: ``anchor_log.json`` (the training seconds at each checkpoint and snapshot, the inputs' SHA-256),
``anchor_quality.json`` (each snapshot's quality, measured as soon as the snapshot is taken, its seconds not
counted as training), the last ``checkpoint.pt`` (copied at each of the run's checkpoints, on Ctrl-C and at the
end) with, in ``outputs/``, the runtime files the run had written by then (the script writes them only every
1,000 iterations, so a run continued in a new ``--work`` could not make them again) and, for the stepper, the
``latent.bin`` and ``decompressor.bin`` it trains on. ``--work`` (any folder) holds the 50,000-frame synthetic
database (made again where missing, and refused if its hashes differ from the state's), the run and the
snapshots (the script's files, copied every ``--snapshot-every`` iterations and after the script's last save).
``--data`` trains on a folder's own database.bin and features.bin instead (the shared LaFAN1 motion capture:
``--data ../shared/fixtures/reference-features --state benchmarks/anchors/stepper-lafan``); the state keeps the
folder, relative to the repository, and the files' hashes.

    python benchmarks/anchor.py train decompressor --work /tmp/anchor     # Ctrl-C (kill -TERM) stops it
    python benchmarks/anchor.py save decompressor --work /tmp/anchor      # measure any snapshot left unmeasured
    python benchmarks/anchor.py report decompressor \\
        --json benchmarks/results/decompressor-anchor.json --png benchmarks/results/decompressor-anchor.png

``train`` continues from the run's checkpoint in ``--work``, else from the state's; a state that records
training but keeps no checkpoint (a run from before the state kept one) starts over. It treats SIGTERM as Ctrl-C
(a background job ignores SIGINT, the shell's rule): ``kill -TERM`` writes a checkpoint at the step it is on.
The stepper's anchor is given its latent once (``--latent`` and ``--decompressor``, kept in its state): the
decompressor the pipeline pairs it with, so the fast stepper is judged on the same inputs.
"""
import json
import os
import platform
import random
import shutil
import signal
import sys
import time

import click

from motion_matching.fingerprint import file_sha256
from motion_matching.interrupts import interrupted_exit, interrupts_exit

ANCHOR_ITERATIONS = 500_000
LOG_NAME = "anchor_log.json"  # written by the training process only
QUALITY_NAME = "anchor_quality.json"  # apart from the log, which a running anchor rewrites from memory
STATE_CHECKPOINT = "checkpoint.pt"
SAVE_EVERY = 1000  # both scripts write their runtime files after iteration 0 and every 1,000 after it
STATE_OUTPUTS = "outputs"
HERE = os.path.dirname(os.path.abspath(__file__))
REPOSITORY = os.path.dirname(HERE)


class Network:
    """What differs between the two anchors: the trainer, the files it writes and how a snapshot is measured."""

    def __init__(self, name):
        self.name = name
        self.outputs = ("decompressor.bin", "latent.bin") if name == "decompressor" else ("stepper.bin",)
        self.checkpoint_name = f"{name}_checkpoint.pt"
        self.state_inputs = () if name == "decompressor" else ("latent.bin", "decompressor.bin")

    def config(self, recipe, **overrides):
        """The training config of ``recipe`` with ``overrides``."""
        if self.name == "decompressor":
            from motion_matching.decompressor.config import recipe_config
        else:
            from motion_matching.stepper.config import recipe_config
        return recipe_config(recipe, **overrides)

    def train(self, paths, state, run_dir, *, config, on_step, progress):
        if self.name == "decompressor":
            from motion_matching.decompressor.train import train_decompressor

            return train_decompressor(config, database_path=paths["database"], features_path=paths["features"],
                                      out_dir=run_dir, on_step=on_step, progress=progress)
        from motion_matching.stepper.train import train_stepper

        return train_stepper(config, database_path=paths["database"], features_path=paths["features"],
                             latent_path=os.path.join(state, "latent.bin"), out_dir=run_dir, on_step=on_step,
                             progress=progress)

    def measure(self, folder, paths, state):
        """The quality row of the snapshot in ``folder``."""
        if self.name == "decompressor":
            from motion_matching.decompressor.evaluate import evaluate_decompressor

            measured, _ = evaluate_decompressor(os.path.join(folder, "decompressor.bin"),
                                                os.path.join(folder, "latent.bin"), database_path=paths["database"],
                                                features_path=paths["features"])
            return {key: measured[key] for key in ("position_error_cm", "rotation_error_deg", "contact_accuracy")} | {
                "loss": measured["loss_terms"]["loss"]}
        from motion_matching.stepper.evaluate import evaluate_stepper

        measured, _ = evaluate_stepper(os.path.join(folder, "stepper.bin"), database_path=paths["database"],
                                       features_path=paths["features"], latent_path=os.path.join(state, "latent.bin"),
                                       decompressor_path=os.path.join(state, "decompressor.bin"))
        return {"feature_l1": measured["feature_l1"]["mean"], "latent_l1": measured["latent_l1"]["mean"],
                "position_error_cm": {key: measured["position_error_cm"][key] for key in ("mean", "p95", "max")},
                "loss": measured["loss_terms"]["loss"]}

    def describe(self, row):
        if self.name == "decompressor":
            return (f"pos {row['position_error_cm']['mean']:.3f} cm (p95 {row['position_error_cm']['p95']:.3f}, "
                    f"max {row['position_error_cm']['max']:.2f})  rot {row['rotation_error_deg']['mean']:.3f} deg "
                    f"(max {row['rotation_error_deg']['max']:.2f})  contacts {row['contact_accuracy']:.4f}  "
                    f"loss {row['loss']:.4f}")
        return (f"features L1 {row['feature_l1']:.4f}  latent L1 {row['latent_l1']:.4f}  pos "
                f"{row['position_error_cm']['mean']:.3f} cm (p95 {row['position_error_cm']['p95']:.3f}, max "
                f"{row['position_error_cm']['max']:.2f})  loss {row['loss']:.4f}")


def read_log(state, name=LOG_NAME):
    path = os.path.join(state, name)
    if not os.path.exists(path):
        return {"seconds_at": {}, "snapshots": {}} if name == LOG_NAME else {}
    with open(path, encoding="utf-8") as stream:
        return json.load(stream)


def _write_log(state, log, name=LOG_NAME):
    path = os.path.join(state, name)
    with open(path + ".tmp", "w", encoding="utf-8") as stream:
        json.dump(log, stream, indent=1)
        stream.write("\n")
    os.replace(path + ".tmp", path)


def _copy_atomically(source, target):
    shutil.copyfile(source, target + ".tmp")
    os.replace(target + ".tmp", target)


def checked_inputs(work, log, frames, *, data=None, tolerated=()):
    """database.bin and features.bin, checked against the hashes the log recorded (recorded now if it has none);
    returns their paths. They are ``data``'s (a folder of the user's, real motion capture say) where given, else
    the synthetic ones in ``work`` (made where missing). A name in ``tolerated`` ("database") may differ: numpy's
    SIMD paths change the synthetic database.bin's last bits from one CPU to another (docs/data.md)."""
    from motion_matching.data import generate

    folder = data or os.path.join(work, "data")
    paths = {"database": os.path.join(folder, "database.bin"), "features": os.path.join(folder, "features.bin")}
    if data is not None:
        missing = [path for path in paths.values() if not os.path.exists(path)]
        if missing:
            raise click.ClickException(f"{missing[0]}: no such file (--data needs database.bin and features.bin)")
    elif not all(os.path.exists(path) for path in paths.values()):
        os.makedirs(folder, exist_ok=True)
        made = generate.generate_files(folder, nframes=frames)
        paths = {"database": made["database"], "features": made["features"]}
    hashes = {name: file_sha256(path) for name, path in paths.items()}
    recorded = log.setdefault("inputs", hashes)
    for name, digest in hashes.items():
        if recorded.get(name) != digest and name not in tolerated:
            raise click.ClickException(f"{paths[name]}: not the {name} this anchor was trained on (SHA-256 "
                                       f"{digest[:12]}, the state records {recorded.get(name, '?')[:12]})")
    return paths


def _state_inputs(network, state, given):
    """Copy the stepper's latent.bin and decompressor.bin into ``state`` once; refuse others later."""
    for name in network.state_inputs:
        kept, source = os.path.join(state, name), given.get(name)
        if not os.path.exists(kept):
            if source is None:
                raise click.UsageError(f"the stepper's anchor has no {name} yet: give --{name.split('.')[0]}")
            _copy_atomically(source, kept)
        elif source is not None and file_sha256(source) != file_sha256(kept):
            raise click.UsageError(f"{source}: differs from the {kept} this anchor trains on")


def keep_checkpoint(network, run_dir, state):
    """Copy the run's checkpoint and the runtime files it had written by then into ``state`` (atomically);
    returns the kept checkpoint's path, or None where the run has no checkpoint yet."""
    checkpoint = os.path.join(run_dir, network.checkpoint_name)
    if not os.path.exists(checkpoint):
        return None
    os.makedirs(os.path.join(state, STATE_OUTPUTS), exist_ok=True)
    for name in network.outputs:
        if os.path.exists(os.path.join(run_dir, name)):
            _copy_atomically(os.path.join(run_dir, name), os.path.join(state, STATE_OUTPUTS, name))
    kept = os.path.join(state, STATE_CHECKPOINT)
    _copy_atomically(checkpoint, kept)
    return kept


def measure_snapshot(network, folder, paths, state):
    """``network.measure`` leaving the random generators as it found them: inside a training process the
    toolkit's batches draw from numpy's and torch's global streams, which an exact run must not see moved."""
    import numpy as np
    import torch

    saved = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        return network.measure(folder, paths, state)
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
        torch.set_rng_state(saved[2])


class Recorder:
    """``on_step``: at each snapshot the runtime files copied and measured, at each checkpoint the training
    seconds and the checkpoint kept in the state. Measuring does not count as training time."""

    def __init__(self, network, state, run_dir, snapshots, log, paths, *, iterations, snapshot_every,
                 checkpoint_every):
        self.network, self.state, self.run_dir, self.snapshots, self.log = network, state, run_dir, snapshots, log
        self.paths, self.quality = paths, read_log(state, QUALITY_NAME)
        self.iterations, self.snapshot_every, self.checkpoint_every = iterations, snapshot_every, checkpoint_every
        self.base = self.started = None
        self.measuring = 0.0  # seconds this session spent measuring snapshots
        self.last = None  # (step, seconds) of the last step: a Ctrl-C checkpoint is written after it

    def stopped(self):
        """After Ctrl-C or the last step: record the seconds of the step the checkpoint holds, so the next session
        counts on from it, and keep that checkpoint."""
        if self.last is not None:
            self.log["seconds_at"][str(self.last[0])] = self.last[1]
            _write_log(self.state, self.log)
        keep_checkpoint(self.network, self.run_dir, self.state)

    def __call__(self, step, module):
        now = time.perf_counter()
        if self.started is None:  # the first step of this session: continue the count of the checkpoint before it
            self.base = self.log["seconds_at"].get(str(step - 1), 0.0)
            self.started = now
        seconds = self.base + now - self.started - self.measuring
        self.last = (step, seconds)
        last_save = (self.iterations - 1) // SAVE_EVERY * SAVE_EVERY
        if (step - 1) % self.snapshot_every == 0 or step - 1 == last_save:  # the script has just written its files
            folder = os.path.join(self.snapshots, f"{step:07d}")
            os.makedirs(folder, exist_ok=True)
            for name in self.network.outputs:
                shutil.copyfile(os.path.join(self.run_dir, name), os.path.join(folder, name))
            self.log["snapshots"][str(step)] = {"seconds": seconds}
            _write_log(self.state, self.log)
            self.quality[str(step)] = measure_snapshot(self.network, folder, self.paths, self.state)
            _write_log(self.state, self.quality, QUALITY_NAME)
            self.measuring += time.perf_counter() - now
        if step % self.checkpoint_every == 0:
            self.log["seconds_at"][str(step)] = seconds
            _write_log(self.state, self.log)
            keep_checkpoint(self.network, self.run_dir, self.state)


def _state_option(function):
    return click.option("--state", type=click.Path(file_okay=False), default=None,
                        help="The anchor's kept state [default: benchmarks/anchors/NETWORK].")(function)


def _network_argument(function):
    return click.argument("network", type=click.Choice(["decompressor", "stepper"]))(function)


def _data_option(function):
    return click.option("--data", type=click.Path(file_okay=False, exists=True), default=None,
                        help="Train on this folder's database.bin and features.bin instead of the synthetic ones "
                             "(first run only; the state keeps the folder).")(function)


def anchor_data(log, data=None):
    """The data folder (a path) of the anchor whose log is ``log``, or None for the synthetic database: the
    folder it was started on, which ``data`` (given) must be. The log keeps it relative to the repository, so
    ``../shared`` beside any clone finds it again."""
    if log.get("inputs") is None:
        return data
    kept = log.get("data") and os.path.normpath(os.path.join(REPOSITORY, log["data"]))
    if data is not None and (kept is None or os.path.abspath(data) != os.path.abspath(kept)):
        raise click.UsageError(f"--data {data}: this anchor was started on {kept or 'the synthetic database'}")
    return kept


def state_folder(network, state):
    return state or os.path.join(HERE, "anchors", network)


@click.group()
def main():
    """Run, keep and report the toolkit-recipe anchors."""


@main.command()
@_network_argument
@click.option("--work", type=click.Path(file_okay=False), required=True, help="Folder for data, run and snapshots.")
@_state_option
@click.option("--frames", type=click.IntRange(min=1200), default=50_000, show_default=True)
@_data_option
@click.option("--iterations", type=click.IntRange(min=1), default=ANCHOR_ITERATIONS, show_default=True)
@click.option("--snapshot-every", type=click.IntRange(min=1000), default=25_000, show_default=True)
@click.option("--latent", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The stepper's latent.bin (first run only).")
@click.option("--decompressor", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The decompressor.bin of that latent (first run only).")
def train(network, work, state, frames, data, iterations, snapshot_every, latent, decompressor):
    """Train (or continue) an anchor run."""
    from motion_matching.cli.progress import ProgressBar, training_note
    from motion_matching.decompressor.config import recipe_config
    from motion_matching.training.run import TrainingInterrupted

    signal.signal(signal.SIGINT, signal.default_int_handler)  # even in a background job, which ignores it
    if snapshot_every % SAVE_EVERY:
        raise click.BadParameter("must be a multiple of the scripts' save interval, 1,000",
                                 param_hint="--snapshot-every")
    network, state = Network(network), state_folder(network, state)
    os.makedirs(state, exist_ok=True)
    log = read_log(state)
    data = anchor_data(log, data)
    paths = checked_inputs(work, log, frames, data=data)
    _state_inputs(network, state, {"latent.bin": latent, "decompressor.bin": decompressor})
    run_dir = os.path.join(work, "run")
    os.makedirs(run_dir, exist_ok=True)
    checkpoint, kept = os.path.join(run_dir, network.checkpoint_name), os.path.join(state, STATE_CHECKPOINT)
    if not os.path.exists(checkpoint) and os.path.exists(kept):
        for name in network.outputs:
            if os.path.exists(os.path.join(state, STATE_OUTPUTS, name)):
                shutil.copyfile(os.path.join(state, STATE_OUTPUTS, name), os.path.join(run_dir, name))
        shutil.copyfile(kept, checkpoint)
        click.echo(f"continuing from the kept checkpoint {kept}", err=True)
    elif not os.path.exists(checkpoint) and (log["seconds_at"] or log["snapshots"]):
        click.echo(f"{state}: records {max(map(int, log['seconds_at'] or log['snapshots'])):,} iterations but keeps "
                   "no checkpoint: starting over from iteration 0", err=True)
        log.update(seconds_at={}, snapshots={}, finished=False)
        _write_log(state, log)
        _write_log(state, {}, QUALITY_NAME)
    log.update(frames=None if data else frames, data=data and os.path.relpath(os.path.abspath(data), REPOSITORY),
               iterations=iterations, command=" ".join(sys.argv), machine=platform.machine(), cpu_count=os.cpu_count())
    checkpoint_every = recipe_config("toolkit").checkpoint_every
    recorder = Recorder(network, state, run_dir, os.path.join(work, "snapshots"), log, paths,
                        iterations=iterations, snapshot_every=snapshot_every, checkpoint_every=checkpoint_every)
    bar = ProgressBar(unit="it", label="anchor ")
    try:
        network.train(paths, state, run_dir, config=network.config("toolkit", exact_toolkit=True,
                                                                   iterations=iterations), on_step=recorder,
                      progress=lambda report: bar(report.step, report.iterations, training_note(report)))
    except TrainingInterrupted:
        recorder.stopped()
        bar.close()
        click.echo(f"interrupted: run the same command to continue; {state} keeps the checkpoint", err=True)
        sys.exit(interrupted_exit())
    bar.close()
    log["finished"] = True
    recorder.stopped()
    click.echo(f"finished: {iterations:,} iterations, measured and kept in {state}")


@main.command()
@_network_argument
@click.option("--work", type=click.Path(file_okay=False, exists=True), required=True)
@_state_option
def save(network, work, state):
    """Measure the snapshots not yet measured and keep the run's checkpoint (and its runtime files) in the state:
    what ``train`` does as it goes, for a run from before it did."""
    network, state = Network(network), state_folder(network, state)
    log, quality = read_log(state), read_log(state, QUALITY_NAME)
    paths = checked_inputs(work, log, log.get("frames") or 50_000, data=anchor_data(log))
    for step in sorted(log["snapshots"], key=int):
        folder = os.path.join(work, "snapshots", f"{int(step):07d}")
        if step in quality or not os.path.isdir(folder):
            continue
        quality[step] = network.measure(folder, paths, state)
        click.echo(f"{int(step):>8,} its  {network.describe(quality[step])}")
        _write_log(state, quality, QUALITY_NAME)
    kept = keep_checkpoint(network, os.path.join(work, "run"), state)
    if kept is not None:
        click.echo(f"kept {os.path.join(work, 'run', network.checkpoint_name)} as {kept}")


@main.command()
@_network_argument
@_state_option
@click.option("--json", "json_path", type=click.Path(dir_okay=False), required=True)
@click.option("--png", "png_path", type=click.Path(dir_okay=False), default=None)
def report(network, state, json_path, png_path):
    """Quality against training seconds of the measured snapshots, as JSON (and a PNG)."""
    network, state = Network(network), state_folder(network, state)
    log, quality = read_log(state), read_log(state, QUALITY_NAME)
    rows = [{"iterations": int(step), "seconds": entry["seconds"], **quality[step]}
            for step, entry in sorted(log["snapshots"].items(), key=lambda item: int(item[0])) if step in quality]
    for row in rows:
        click.echo(f"{row['iterations']:>8,} its {row['seconds'] / 3600:6.2f} h  {network.describe(row)}")
    with open(json_path, "w", encoding="utf-8") as stream:
        json.dump({"network": network.name, "recipe": "toolkit (--exact-toolkit)", "frames": log.get("frames"),
                   "data": log.get("data"), "finished": log.get("finished", False), "command": log.get("command"),
                   "rows": rows},
                  stream, indent=2)
        stream.write("\n")
    if png_path and rows:
        _plot(network, rows, png_path)


def _plot(network, rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hours = [row["seconds"] / 3600 for row in rows]
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    axes[0].plot(hours, [row["position_error_cm"]["mean"] for row in rows], label="mean")
    axes[0].plot(hours, [row["position_error_cm"]["p95"] for row in rows], label="95th percentile")
    axes[0].set(xlabel="training hours", ylabel="joint position error (cm)", title=f"{network.name} anchor")
    axes[0].legend()
    second = "rotation_error_deg" if network.name == "decompressor" else "feature_l1"
    axes[1].plot(hours, [row[second]["mean"] if isinstance(row[second], dict) else row[second] for row in rows])
    axes[1].set(xlabel="training hours", ylabel="local rotation error (degrees)" if network.name == "decompressor"
                else "feature L1 over 20 frames")
    figure.tight_layout()
    figure.savefig(path)


if __name__ == "__main__":
    with interrupts_exit():
        main()
