"""kill -9 during training, at random moments after each new checkpoint: projector.bin and the checkpoint are
always complete files, and resuming from the last checkpoint ends byte-identical to an unbroken run.
(benchmarks/kill_training.py does the same with more kills and a larger run.)"""
import os
import random
import subprocess
import sys
import time

import pytest

from motion_matching.projector.config import TrainConfig
from motion_matching.projector.train import train_projector
from motion_matching.toolkit import formats
from motion_matching.training.checkpoint import load_checkpoint

from conftest import write_small_toolkit_files
from train_helpers import assert_identical_states

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX only")
TRAIN = ["train", "--database", "", "--iterations", "400", "--hidden", "32", "--hidden-layers", "1",
         "--checkpoint-every", "20", "--save-every", "5", "--held-out", "0", "--quiet"]


def command(out, *extra):
    return [sys.executable, "-c", "from motion_matching.cli import main; main()", *TRAIN, "--out", out, *extra]


def checkpoint_step(path):
    """The step of the checkpoint at ``path`` (0 if there is none); fails unless it is a complete file."""
    return load_checkpoint(path)["step"] if os.path.exists(path) else 0


def run_killed_after_new_checkpoint(folder, out, rng):
    """Start (or resume) the run and SIGKILL it shortly after it writes a newer checkpoint; returns its
    return code (-9 when killed, 0 when it finished first)."""
    checkpoint = os.path.join(folder, out, "projector_checkpoint.pt")
    start = checkpoint_step(checkpoint)
    extra = ["--resume", checkpoint] if start else []
    child = subprocess.Popen(command(out, *extra), cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = os.stat(checkpoint).st_mtime_ns if start else None
    while child.poll() is None:
        if os.path.exists(checkpoint) and os.stat(checkpoint).st_mtime_ns != seen:
            time.sleep(rng.uniform(0.0, 0.05))  # somewhere in the next iterations, writes of projector.bin included
            child.kill()
            break
        time.sleep(0.005)
    stderr = child.communicate()[1].decode()
    assert child.returncode in (0, -9), stderr
    return child.returncode


def test_kill_9_at_random_moments_then_resume_ends_identical_to_an_unbroken_run(tmp_path):
    features_path, latent_path = write_small_toolkit_files(tmp_path, nframes=400)
    config = TrainConfig(iterations=400, hidden=32, hidden_layers=1, checkpoint_every=20, save_every=5)
    train_projector(config, features_path=features_path, latent_path=latent_path, out_dir=tmp_path / "unbroken",
                    held_out_queries=0)  # what the command line runs, in this process
    rng, kills = random.Random(3), 0
    for _ in range(12):
        code = run_killed_after_new_checkpoint(tmp_path, "broken", rng)
        formats.load_network(tmp_path / "broken" / "projector.bin")  # complete after every kill
        checkpoint_step(tmp_path / "broken" / "projector_checkpoint.pt")
        kills += code == -9
        if code == 0:
            break
        if kills == 3:  # enough: let the last resume finish
            resume = ["--resume", str(tmp_path / "broken" / "projector_checkpoint.pt")]
            assert subprocess.run(command("broken", *resume), cwd=tmp_path, capture_output=True).returncode == 0
            break
    assert kills == 3
    broken, unbroken = tmp_path / "broken", tmp_path / "unbroken"
    assert (broken / "projector.bin").read_bytes() == (unbroken / "projector.bin").read_bytes()
    assert_identical_states(load_checkpoint(tmp_path / "broken" / "projector_checkpoint.pt"),
                            load_checkpoint(tmp_path / "unbroken" / "projector_checkpoint.pt"))
