"""Checkpoints: an interrupted run leaves good files and resumes to the parameters of an unbroken run."""
import os
import signal
import subprocess
import sys

import pytest

from motion_matching.errors import MismatchedFiles
from motion_matching.projector.export import load_checkpoint_module
from motion_matching.projector.model import module_to_network
from motion_matching.projector.train import TrainingInterrupted, train_projector
from motion_matching.toolkit import formats
from motion_matching.training.checkpoint import load_checkpoint

from conftest import write_small_toolkit_files
from train_helpers import assert_identical_states, replace, small_config


def run(config, files, out_dir, **options):
    features_path, latent_path = files
    return train_projector(config, features_path=features_path, latent_path=latent_path, out_dir=out_dir,
                           held_out_queries=0, **options)


def stop_at(step, action=None):
    """A progress callback that interrupts the run once ``step`` iterations are done."""
    def progress(report):
        if report.step == step:
            if action is None:
                raise KeyboardInterrupt
            action()
    return progress


def assert_network_matches_checkpoint(result):
    saved = formats.load_network(result.network_path)
    expected = module_to_network(load_checkpoint_module(result.checkpoint_path))
    for (weights, bias), (weights2, bias2) in zip(saved.layers, expected.layers):
        assert (weights == weights2).all() and (bias == bias2).all()


@pytest.mark.parametrize("kind", ["fast", "toolkit"])
def test_interrupted_run_resumes_to_the_parameters_of_an_unbroken_run(tmp_path, small_files, kind):
    config = small_config(iterations=60, checkpoint_every=25, lr_decay_every=7, step=kind)
    unbroken = run(config, small_files, tmp_path / "unbroken")
    with pytest.raises(TrainingInterrupted) as stopped:
        run(config, small_files, tmp_path / "broken", progress=stop_at(30))
    assert stopped.value.result.steps == 30
    assert load_checkpoint(stopped.value.result.checkpoint_path)["step"] == 30
    assert_network_matches_checkpoint(stopped.value.result)
    resumed = run(config, small_files, tmp_path / "broken", resume=stopped.value.result.checkpoint_path)
    assert resumed.steps == 60 and resumed.final_loss == unbroken.final_loss
    assert_identical_states(load_checkpoint(unbroken.checkpoint_path), load_checkpoint(resumed.checkpoint_path))
    with open(unbroken.network_path, "rb") as first, open(resumed.network_path, "rb") as second:
        assert first.read() == second.read()


@pytest.fixture
def sigint_raises():
    """Ctrl-C as an interactive Python sees it, even when pytest started with SIGINT ignored (a background
    shell); the handler found is put back afterwards."""
    found = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, found)


def test_ctrl_c_stops_at_the_next_step_boundary_and_saves(tmp_path, small_files, sigint_raises):
    config = small_config(iterations=60)
    with pytest.raises(TrainingInterrupted) as stopped:
        run(config, small_files, tmp_path, progress=stop_at(20, lambda: os.kill(os.getpid(), signal.SIGINT)))
    assert stopped.value.result.steps == 21  # the step under way when the signal came was finished
    assert load_checkpoint(tmp_path / "projector_checkpoint.pt")["step"] == 21
    assert_network_matches_checkpoint(stopped.value.result)
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".partial")]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_run_started_with_sigint_ignored_leaves_it_ignored(tmp_path, small_files):
    found = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert run(small_config(iterations=5), small_files, tmp_path).steps == 5
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, found)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="a child started with SIGINT ignored needs POSIX")
def test_the_ctrl_c_test_passes_when_pytest_starts_with_sigint_ignored():
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k",
                             "ctrl_c_stops_at_the_next_step_boundary"], capture_output=True, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert result.returncode == 0, result.stdout[-2000:]
    assert "1 passed" in result.stdout


def test_resume_extends_a_finished_run(tmp_path, small_files):
    short = run(small_config(iterations=23), small_files, tmp_path / "a")  # stops between two loss reads
    longer = run(small_config(iterations=35), small_files, tmp_path / "a", resume=short.checkpoint_path)
    unbroken = run(small_config(iterations=35), small_files, tmp_path / "b")
    assert_identical_states(load_checkpoint(longer.checkpoint_path), load_checkpoint(unbroken.checkpoint_path))
    assert longer.final_loss == unbroken.final_loss


def test_resume_refuses_other_numeric_settings(tmp_path, small_files):
    first = run(small_config(iterations=10), small_files, tmp_path)
    with pytest.raises(MismatchedFiles, match=r"was written with --batch-size 32, this run has 16; pass the same"):
        run(replace(small_config(iterations=20), batch_size=16), small_files, tmp_path, resume=first.checkpoint_path)


def test_resume_refuses_other_features(tmp_path, small_files):
    first = run(small_config(iterations=10), small_files, tmp_path)
    (tmp_path / "other").mkdir()
    other = write_small_toolkit_files(tmp_path / "other", seed=4)
    with pytest.raises(MismatchedFiles, match=r"was trained on another features\.bin than .*other/features\.bin$"):
        run(small_config(iterations=20), other, tmp_path, resume=first.checkpoint_path)
