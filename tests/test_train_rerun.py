"""Rerunning ``train``: the same command continues its run; another run's files are kept unless --force."""
import os
import shlex
import sys

import pytest
from click.testing import CliRunner

from motion_matching.cli import main
from motion_matching.cli import train as train_cli
from motion_matching.projector.train import TrainingInterrupted, train_projector
from motion_matching.training.checkpoint import load_checkpoint

from train_helpers import assert_identical_states, small_config

QUICK = ["--database", "", "--hidden", "32", "--save-every", "10", "--held-out", "0", "--quiet"]


@pytest.fixture
def in_files(tmp_path, small_files, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def train(*arguments):
    return CliRunner().invoke(main, ["train", *QUICK, *arguments])


def interrupt_at(step):
    def progress(report):
        if report.step == step:
            raise KeyboardInterrupt
    return progress


def test_rerunning_an_interrupted_run_continues_it_to_the_unbroken_result(in_files):
    config = small_config(iterations=40)
    with pytest.raises(TrainingInterrupted):
        train_projector(config, features_path="features.bin", latent_path="latent.bin", out_dir="run",
                        held_out_queries=0, progress=interrupt_at(20))
    assert load_checkpoint("run/projector_checkpoint.pt")["step"] == 20
    result = train("--iterations", "40", "--out", "run")
    assert result.exit_code == 0, result.output
    assert "after 40 iterations" in result.output
    assert train("--iterations", "40", "--out", "unbroken").exit_code == 0
    assert_identical_states(load_checkpoint("run/projector_checkpoint.pt"),
                            load_checkpoint("unbroken/projector_checkpoint.pt"))


def test_rerunning_a_finished_run_trains_nothing_and_rewrites_nothing(in_files):
    assert train("--iterations", "20", "--out", "run").exit_code == 0
    before = {name: os.stat(f"run/{name}").st_mtime_ns for name in ("projector.bin", "projector_checkpoint.pt")}
    result = train("--iterations", "20", "--out", "run")
    assert result.exit_code == 0, result.output
    assert result.output == ("run/projector.bin is already trained (20 iterations, checkpoint "
                             "run/projector_checkpoint.pt); nothing to do (a larger --iterations continues it, "
                             "another --out trains anew)\n")
    assert before == {name: os.stat(f"run/{name}").st_mtime_ns for name in before}


def test_another_runs_checkpoint_is_refused_and_kept_unless_forced(in_files):
    assert train("--iterations", "20", "--out", "run").exit_code == 0
    saved = open("run/projector_checkpoint.pt", "rb").read()
    result = train("--iterations", "20", "--out", "run", "--batch-size", "16")
    assert result.exit_code == 1
    assert result.output == ("Error: run/projector_checkpoint.pt: is another run's: it was written with --batch-size "
                             "32, this run has 16; pass the same value to resume, or choose another --out, or pass "
                             "--force to replace it\n")
    assert open("run/projector_checkpoint.pt", "rb").read() == saved
    forced = train("--iterations", "20", "--out", "run", "--batch-size", "16", "--force")
    assert forced.exit_code == 0, forced.output
    assert load_checkpoint("run/projector_checkpoint.pt")["config"]["batch_size"] == 16


def test_a_network_without_a_checkpoint_is_not_overwritten_unless_forced(in_files):
    os.mkdir("run")
    with open("run/projector.bin", "wb") as stream:
        stream.write(b"the toolkit's trained projector")
    result = train("--iterations", "10", "--out", "run")
    assert result.exit_code == 1
    assert result.output == ("Error: run/projector.bin: is another run's (no projector_checkpoint.pt beside it to "
                             "continue from); choose another --out, or pass --force to replace it\n")
    assert open("run/projector.bin", "rb").read() == b"the toolkit's trained projector"
    assert train("--iterations", "10", "--out", "run", "--force").exit_code == 0
    assert os.path.getsize("run/projector.bin") > 1000


def test_a_checkpoint_of_more_iterations_than_asked_is_refused(in_files):
    assert train("--iterations", "20", "--out", "run").exit_code == 0
    result = train("--iterations", "10", "--out", "run")
    assert result.exit_code == 1
    assert result.output == ("Error: run/projector_checkpoint.pt: holds a run of 20 iterations, more than "
                             "--iterations 10; choose another --out, or pass --force to replace it\n")


def interrupting_cli_at(monkeypatch, step):
    """Make the next ``train`` command (not --quiet) stop as Ctrl-C does once ``step`` iterations are done."""
    monkeypatch.setattr(train_cli, "training_progress", lambda bar: interrupt_at(step))


def recording_results(monkeypatch):
    """Record the ``TrainResult`` of every ``train`` command run from now on; returns the list."""
    results, real = [], train_cli.train_projector

    def recorded(config, **options):
        results.append(real(config, **options))
        return results[-1]
    monkeypatch.setattr(train_cli, "train_projector", recorded)
    return results


def loud(*arguments):
    return CliRunner().invoke(main, ["train", *[word for word in QUICK if word != "--quiet"], *arguments])


def test_force_continues_its_own_interrupted_run_instead_of_starting_over(in_files, monkeypatch):
    line = ["--iterations", "40", "--out", "run", "--force"]
    with monkeypatch.context() as patch:
        interrupting_cli_at(patch, 20)
        stopped = loud(*line)
    assert stopped.exit_code == 130
    assert stopped.output.endswith("interrupted after 20 iterations; wrote run/projector.bin and "
                                   "run/projector_checkpoint.pt; run the same command again to continue\n")
    results = recording_results(monkeypatch)
    again = train(*line)  # the line from the shell's history, --force and all
    assert again.exit_code == 0, again.output
    assert (results[-1].resumed_from, results[-1].steps) == (20, 40)  # iterations 0..19 were not redone
    assert train("--iterations", "40", "--out", "unbroken").exit_code == 0
    assert_identical_states(load_checkpoint("run/projector_checkpoint.pt"),
                            load_checkpoint("unbroken/projector_checkpoint.pt"))
    assert open("run/projector.bin", "rb").read() == open("unbroken/projector.bin", "rb").read()


def test_force_over_its_own_finished_run_trains_nothing_and_rewrites_nothing(in_files):
    assert train("--iterations", "20", "--out", "run").exit_code == 0
    before = {name: os.stat(f"run/{name}").st_mtime_ns for name in ("projector.bin", "projector_checkpoint.pt")}
    result = train("--iterations", "20", "--out", "run", "--force")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("run/projector.bin is already trained (20 iterations, ")
    assert before == {name: os.stat(f"run/{name}").st_mtime_ns for name in before}


def test_force_with_other_settings_replaces_an_interrupted_run_and_says_so(in_files, monkeypatch, caplog):
    with monkeypatch.context() as patch:
        interrupting_cli_at(patch, 20)
        assert loud("--iterations", "40", "--out", "run").exit_code == 130
    results = recording_results(monkeypatch)
    forced = loud("--iterations", "40", "--out", "run", "--batch-size", "16", "--force")
    assert forced.exit_code == 0, forced.output
    assert (results[-1].resumed_from, results[-1].steps) == (0, 40)
    assert load_checkpoint("run/projector_checkpoint.pt")["config"]["batch_size"] == 16
    assert ("run/projector_checkpoint.pt: replacing it (--force): it was trained with other --batch-size"
            in caplog.text)


def test_an_interrupted_resume_prints_the_exact_command_that_continues(in_files, monkeypatch):
    assert train("--iterations", "10", "--out", "first").exit_code == 0
    line = ["--iterations", "40", "--out", "run", "--resume", "first/projector_checkpoint.pt"]
    monkeypatch.setattr(sys, "argv", ["mm-projector", "train", *QUICK[:-1], *line])
    with monkeypatch.context() as patch:
        interrupting_cli_at(patch, 20)
        stopped = CliRunner().invoke(main, ["train", *QUICK[:-1], *line], prog_name="mm-projector")
    assert stopped.exit_code == 130
    advice = stopped.output.splitlines()[-1].split("; ", 3)[-1]
    assert advice == ("continue with: mm-projector train --database '' --hidden 32 --save-every 10 --held-out 0 "
                      "--iterations 40 --out run (without --resume, which would go back to "
                      "first/projector_checkpoint.pt)")
    results = recording_results(monkeypatch)
    command = shlex.split(advice.split(": ", 1)[1].split(" (")[0])
    assert CliRunner().invoke(main, command[1:] + ["--quiet"]).exit_code == 0
    assert (results[-1].resumed_from, results[-1].steps) == (20, 40)
