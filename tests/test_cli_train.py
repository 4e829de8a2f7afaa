"""``mm-projector train`` and ``python train_projector.py``: options, outputs, exact error lines."""
import dataclasses
import os
import re

import pytest
from click.testing import CliRunner

import train_projector
from motion_matching.cli import main
from motion_matching.cli import train as train_cli
from motion_matching.projector.config import TrainConfig
from motion_matching.projector.train import TrainingInterrupted, TrainResult

QUICK = ["--iterations", "12", "--hidden", "16", "--hidden-layers", "1", "--held-out", "0", "--quiet"]


@pytest.fixture
def in_files(tmp_path, small_files, monkeypatch):
    """Run in the folder holding features.bin and latent.bin (no database.bin)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("command", [[main, ["train", "--help"]], [train_projector.main, ["--help"]]])
def test_every_setting_is_an_option_with_its_default(command):
    group, arguments = command
    result = CliRunner().invoke(group, arguments)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for field in dataclasses.fields(TrainConfig):
        assert "--" + field.name.replace("_", "-") in text
    for option in ("--features", "--latent", "--database", "--out", "--offline", "--resume", "--plots",
                   "--tensorboard", "--preload"):
        assert option in text
    assert "[default: 500000]" in text and "[default: 1234]" in text


def test_train_command_trains_and_reports(in_files):
    result = CliRunner().invoke(main, ["train", "--database", "", "--out", "out"] + QUICK)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("wrote out/projector.bin and out/projector_checkpoint.pt after 12 iterations "
                                    "(online): rolling loss ")
    assert os.path.isfile(in_files / "out" / "projector.bin")


def test_script_without_a_command_trains_in_the_current_folder(in_files):
    result = CliRunner().invoke(train_projector.main, ["--database", ""] + QUICK)
    assert result.exit_code == 0, result.output
    assert os.path.isfile(in_files / "projector.bin") and os.path.isfile(in_files / "projector_checkpoint.pt")


def test_script_offers_build_cache_and_trains_from_it(in_files):
    runner = CliRunner()
    built = runner.invoke(train_projector.main, ["build-cache", "--queries", "400", "--backend", "balltree",
                                                 "--quiet"])
    assert built.exit_code == 0, built.output
    result = runner.invoke(train_projector.main, ["--database", "", "--offline", "projector_cache.h5"] + QUICK)
    assert result.exit_code == 0, result.output
    assert "(offline)" in result.output


def test_missing_database_is_one_error_line(in_files):
    result = CliRunner().invoke(main, ["train"] + QUICK)
    assert result.exit_code == 1
    assert result.output == "Error: database.bin: no such file\n"


def test_script_missing_features_is_one_error_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(train_projector.main, ["--database", ""] + QUICK)
    assert result.exit_code == 1
    assert result.output == "Error: features.bin: no such file\n"


def test_stale_settings_are_a_usage_error(in_files):
    result = CliRunner().invoke(main, ["train", "--database", "", "--iterations", "0"])
    assert result.exit_code == 2
    assert result.output == "Error: iterations must be at least 1, not 0 (see 'main train --help')\n"


def test_ctrl_c_exits_130_naming_the_checkpoint(in_files, monkeypatch):
    def interrupted(config, **options):
        raise TrainingInterrupted(TrainResult("projector.bin", "projector_checkpoint.pt", 7, 1.0, None, 1.0, "online"))
    monkeypatch.setattr(train_cli, "train_projector", interrupted)
    result = CliRunner().invoke(main, ["train", "--database", "", "--quiet"])
    assert result.exit_code == 130
    assert result.output == ("interrupted after 7 iterations; wrote projector.bin and projector_checkpoint.pt; "
                             "run the same command again to continue\n")


def test_progress_line_shows_rolling_loss_rate_and_eta(in_files):
    arguments = [argument for argument in QUICK if argument != "--quiet"]
    result = CliRunner().invoke(main, ["train", "--database", ""] + arguments)
    assert result.exit_code == 0, result.output
    assert re.search(r"train: 100%\|#+\| 12/12 \[\d\d:\d\d<00:00, +[\d.]+ it/s, loss \d+\.\d{4}, lr 0\.00099\]\n",
                     result.output)
    assert "\r" not in result.output  # not a terminal: plain lines


def test_step_and_threads_options_reach_the_checkpoint(in_files):
    from motion_matching.training.checkpoint import load_checkpoint
    runner = CliRunner()
    default = runner.invoke(main, ["train", "--database", "", "--out", "a"] + QUICK)
    chosen = runner.invoke(main, ["train", "--database", "", "--out", "b", "--step", "toolkit", "--threads", "1"]
                           + QUICK)
    assert default.exit_code == 0 and chosen.exit_code == 0, default.output + chosen.output
    assert {key: load_checkpoint(in_files / "a" / "projector_checkpoint.pt")["config"][key]
            for key in ("step", "threads")} == {"step": "fast", "threads": None}
    assert {key: load_checkpoint(in_files / "b" / "projector_checkpoint.pt")["config"][key]
            for key in ("step", "threads")} == {"step": "toolkit", "threads": 1}
    refused = runner.invoke(main, ["train", "--database", "", "--step", "quick"] + QUICK)
    assert refused.exit_code == 2 and "'quick' is not one of 'fast', 'toolkit'" in refused.output


def test_the_last_line_names_bfloat16_products_and_not_float32():
    from motion_matching.cli.train import describe_result
    from motion_matching.projector.train import TrainResult
    done = dict(network_path="p.bin", checkpoint_path="c.pt", steps=10, final_loss=0.5, held_out=None, seconds=1.0,
                source="offline")
    assert "(offline, bfloat16 matrix products)" in describe_result(TrainResult(**done, precision="bfloat16"))
    assert "(offline):" in describe_result(TrainResult(**done))


def test_the_rate_after_a_resumed_run_counts_only_this_runs_iterations():
    resumed = TrainResult("projector.bin", "projector_checkpoint.pt", 100, 0.5, None, 2.0, "online", resumed_from=80)
    assert train_cli.describe_result(resumed).endswith("; 10.0 it/s in this run")  # 20 iterations in 2 s, not 100
