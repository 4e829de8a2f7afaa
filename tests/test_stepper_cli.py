"""train-stepper and train_stepper.py: files of another run refused, reruns continue, Ctrl-C keeps the work,
bad inputs refused in one line, previews behind --plots."""
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from stepper_helpers import FRAMES

from motion_matching.cli import main
from motion_matching.cli import train as train_cli
from motion_matching.data import generate
from motion_matching.toolkit import formats

pytest.importorskip("torch", reason="the command trains a network, which needs torch")

QUICK = ["--hidden", "64", "--threads", "1", "--quiet"]
REPOSITORY = __import__("pathlib").Path(__file__).resolve().parents[1]


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    """A FRAMES-frame synthetic database, its features and stand-in latent in the current (temporary) folder."""
    generate.generate_files(tmp_path, nframes=FRAMES)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def train(*arguments):
    return CliRunner().invoke(main, ["train-stepper", *QUICK, *arguments])


def test_a_stepper_bin_of_another_run_is_refused_and_kept(inputs):
    (inputs / "stepper.bin").write_bytes(b"the user's own stepper")
    result = train("--iterations", "5")
    assert result.exit_code == 1
    assert result.output == ("Error: ./stepper.bin: is another run's (no stepper_checkpoint.pt beside it to "
                             "continue from); choose another --out, or pass --force to replace it\n")
    assert (inputs / "stepper.bin").read_bytes() == b"the user's own stepper"
    forced = train("--iterations", "5", "--force")
    assert forced.exit_code == 0, forced.output
    assert formats.load_network(inputs / "stepper.bin").sizes == [59, 64, 64, 59]


def test_rerun_does_nothing_and_a_larger_iterations_continues(inputs):
    assert train("--iterations", "8", "--out", "run").exit_code == 0
    again = train("--iterations", "8", "--out", "run")
    assert again.exit_code == 0 and again.output.startswith("run/stepper.bin is already trained (8 iterations")
    more = train("--iterations", "16", "--out", "run")
    straight = train("--iterations", "16", "--out", "straight")
    assert more.exit_code == straight.exit_code == 0, more.output + straight.output
    # one thread, resumed exactly: the same bytes
    assert (inputs / "run" / "stepper.bin").read_bytes() == (inputs / "straight" / "stepper.bin").read_bytes()


def test_ctrl_c_keeps_the_work_and_the_same_command_continues(inputs, monkeypatch):
    def interrupt_at(step):
        def progress(report):
            if report.step == step:
                raise KeyboardInterrupt
        return progress
    line = [word for word in QUICK if word != "--quiet"] + ["--iterations", "30", "--out", "run"]
    with monkeypatch.context() as patch:
        patch.setattr(train_cli, "training_progress", lambda bar: interrupt_at(20))
        stopped = CliRunner().invoke(main, ["train-stepper", *line])
    assert stopped.exit_code == 130
    assert stopped.output.splitlines()[-1].startswith("interrupted after 20 iterations; wrote run/stepper.bin")
    finished = train("--iterations", "30", "--out", "run")
    straight = train("--iterations", "30", "--out", "straight")
    assert finished.exit_code == straight.exit_code == 0, finished.output
    assert (inputs / "run" / "stepper.bin").read_bytes() == (inputs / "straight" / "stepper.bin").read_bytes()


def test_a_latent_of_other_frames_is_refused_in_one_line(inputs):
    formats.save_latent(inputs / "short.bin", np.zeros((FRAMES - 1, 32), np.float32))
    result = train("--iterations", "2", "--latent", "short.bin", "--out", "run")
    assert result.exit_code == 1
    assert result.output == f"Error: short.bin: has {FRAMES - 1} frames but features.bin has {FRAMES}\n"
    assert not (inputs / "run").exists()


def test_a_constant_latent_is_refused_in_one_line(inputs):
    formats.save_latent(inputs / "flat.bin", np.ones((FRAMES, 32), np.float32))
    result = train("--iterations", "2", "--latent", "flat.bin", "--out", "run")
    assert result.exit_code == 1
    assert result.output == ("Error: flat.bin: has the same value everywhere (or a non-finite one): it cannot be "
                             "normalised\n")


def test_plots_write_the_previews_and_refuse_pictures_of_others(inputs):
    (inputs / "run").mkdir()
    (inputs / "run" / "stepper_X.png").write_bytes(b"someone's picture")
    refused = train("--iterations", "2", "--out", "run", "--plots")
    assert refused.exit_code == 1 and refused.output.startswith("Error: run/stepper_X.png: exists")
    assert (inputs / "run" / "stepper_X.png").read_bytes() == b"someone's picture"
    done = train("--iterations", "2", "--out", "fresh", "--plots")
    assert done.exit_code == 0, done.output
    for name in ("stepper_X.png", "stepper_Z.png"):
        assert (inputs / "fresh" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (inputs / "plain").exists() and train("--iterations", "2", "--out", "plain").exit_code == 0
    assert not (inputs / "plain" / "stepper_X.png").exists()


def test_train_stepper_py_is_the_toolkits_script_name(inputs):
    done = subprocess.run([sys.executable, str(REPOSITORY / "train_stepper.py"), *QUICK, "--iterations", "3"],
                          cwd=inputs, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert formats.load_network(inputs / "stepper.bin").sizes == [59, 64, 64, 59]
    assert (inputs / "stepper_checkpoint.pt").exists()
