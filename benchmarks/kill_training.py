"""Does training killed at random moments (SIGKILL, mid-write included) always resume to the same network?

Trains a reference run without interruption, then runs ``mm-projector train`` in a subprocess and, once
it has written a new checkpoint, kills it with SIGKILL at a random moment (up to a third of the training
time later), again and again, each time resuming from the last checkpoint, until one run completes.
After every kill it loads projector.bin and the checkpoint (each must be a complete file) and counts the
temporary files the kills left behind. Checks that the result's projector.bin is byte-identical to the
reference's and that the checkpoints hold identical tensors. POSIX only.

    python benchmarks/kill_training.py [--frames 2000] [--iterations 3000] [--hidden 64] [--trials 3]
                                       [--seed 0] [--json FILE]
"""
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import click
import torch

from motion_matching.toolkit import formats
from motion_matching.training.checkpoint import load_checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_checksums import write_inputs  # noqa: E402


def train_arguments(out, *, iterations, hidden, resume=None):
    arguments = [sys.executable, "-c", "from motion_matching.cli import main; main()", "train", "--database", "",
                 "--iterations", str(iterations), "--hidden", str(hidden), "--hidden-layers", "2",
                 "--checkpoint-every", "100", "--save-every", "20", "--held-out", "0", "--quiet", "--out", out]
    return arguments + (["--resume", resume] if resume else [])


def same_tensors(first, second):
    """True if two checkpoints hold the same step and bit-identical model and optimiser tensors."""
    def flat(state, prefix=""):
        if isinstance(state, torch.Tensor):
            yield prefix, state
        elif isinstance(state, dict):
            for key, value in state.items():
                yield from flat(value, f"{prefix}.{key}")
        elif isinstance(state, (list, tuple)):
            for index, value in enumerate(state):
                yield from flat(value, f"{prefix}.{index}")
    a = dict(flat({"model": first["model"], "optimizer": first["optimizer"]}))
    b = dict(flat({"model": second["model"], "optimizer": second["optimizer"]}))
    return first["step"] == second["step"] and a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def wait_for_new_checkpoint(child, checkpoint, seen):
    """Poll until the child writes a checkpoint other than ``seen`` (mtime) or exits; returns True if it wrote one."""
    while child.poll() is None:
        if os.path.exists(checkpoint) and os.stat(checkpoint).st_mtime_ns != seen:
            return True
        time.sleep(0.005)
    return False


def killed_run(folder, out, rng, *, iterations, hidden, window):
    """Train, and after each new checkpoint SIGKILL the run at a random moment within ``window`` seconds,
    then resume it, until a run finishes; returns a dict of counts."""
    checkpoint = os.path.join(folder, out, "projector_checkpoint.pt")
    kills = runs = 0
    while True:
        runs += 1
        seen = os.stat(checkpoint).st_mtime_ns if os.path.exists(checkpoint) else None
        resume = checkpoint if seen is not None else None
        child = subprocess.Popen(train_arguments(out, iterations=iterations, hidden=hidden, resume=resume),
                                 cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if wait_for_new_checkpoint(child, checkpoint, seen):
            try:  # a random moment after the run made progress: mid-step, mid-write of either file
                child.wait(timeout=rng.uniform(0.0, window))
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGKILL)
                kills += 1
        stderr = child.communicate()[1].decode()
        if os.path.exists(os.path.join(folder, out, "projector.bin")):
            formats.load_network(os.path.join(folder, out, "projector.bin"))
        if os.path.exists(checkpoint):
            load_checkpoint(checkpoint)
        if child.returncode == 0:
            leftovers = [name for name in os.listdir(os.path.join(folder, out)) if name.endswith(".partial")]
            return {"kills": kills, "runs": runs, "leftover_temporary_files": len(leftovers)}
        if child.returncode != -signal.SIGKILL:
            raise RuntimeError(f"training failed with exit code {child.returncode}: {stderr[-2000:]}")


def timed_run(folder, out, *, iterations, hidden):
    """Seconds (float) of an uninterrupted training subprocess writing into ``folder/out``."""
    started = time.perf_counter()
    finished = subprocess.run(train_arguments(out, iterations=iterations, hidden=hidden), cwd=folder,
                              capture_output=True, text=True)
    if finished.returncode:
        raise RuntimeError(finished.stderr[-2000:])
    return time.perf_counter() - started


@click.command()
@click.option("--frames", default=2000, show_default=True, help="Synthetic locomotion frames.")
@click.option("--iterations", default=3000, show_default=True)
@click.option("--hidden", default=64, show_default=True)
@click.option("--trials", default=3, show_default=True)
@click.option("--seed", default=0, show_default=True, help="Seed of the random kill delays.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None)
def main(frames, iterations, hidden, trials, seed, json_path):
    """Kill training at random moments; check every resumed result against an uninterrupted run."""
    rng = random.Random(seed)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        write_inputs(folder, frames)
        startup = timed_run(folder, "startup", iterations=1, hidden=hidden)
        full = timed_run(folder, "reference", iterations=iterations, hidden=hidden)
        expected = load_checkpoint(os.path.join(folder, "reference", "projector_checkpoint.pt"))
        network = open(os.path.join(folder, "reference", "projector.bin"), "rb").read()
        for trial in range(trials):
            out = f"trial{trial}"
            # kills land up to a third of the training time after each new checkpoint
            counts = killed_run(folder, out, rng, iterations=iterations, hidden=hidden,
                                window=max(full - startup, 1.0) / 3)
            got = load_checkpoint(os.path.join(folder, out, "projector_checkpoint.pt"))
            counts["identical_projector_bin"] = open(os.path.join(folder, out, "projector.bin"), "rb").read() == network
            counts["identical_checkpoint_tensors"] = same_tensors(got, expected)
            results.append(counts)
            click.echo(f"trial {trial}: {counts['kills']} SIGKILLs in {counts['runs']} runs; projector.bin identical: "
                       f"{counts['identical_projector_bin']}; checkpoint tensors identical: "
                       f"{counts['identical_checkpoint_tensors']}; temporary files left by kills: "
                       f"{counts['leftover_temporary_files']}")
    click.echo(f"uninterrupted run: {full:.1f} s for {iterations:,} iterations, of which about {startup:.1f} s "
               "process start")
    if json_path:
        with open(json_path, "w", encoding="utf-8") as stream:
            json.dump({"frames": frames, "iterations": iterations, "hidden": hidden, "uninterrupted_seconds": full,
                       "startup_seconds": startup, "trials": results}, stream, indent=2)


if __name__ == "__main__":
    main()
