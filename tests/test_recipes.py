"""Recipes and learning-rate schedules: values, the toolkit's schedule kept bit for bit, options over presets."""
import dataclasses
import math

import pytest
import torch
from click.testing import CliRunner

from motion_matching.cli import main
from motion_matching.errors import MismatchedFiles
from motion_matching.projector.config import TrainConfig, numeric_differences
from motion_matching.projector.recipes import RECIPES, recipe_config
from motion_matching.projector.train import TrainingInterrupted, train_projector
from motion_matching.training.checkpoint import load_checkpoint
from motion_matching.training.schedule import LearningRateSchedule, learning_rate, schedule_note
from motion_matching.training.step import with_resolved_precision

from train_helpers import build_balltree_cache, small_config


def rates_of(config, steps):
    """Learning rates (list of float) the schedule gives iterations 0 .. steps - 1, read from the optimiser."""
    optimizer = torch.optim.AdamW([torch.zeros(1, requires_grad=True)], lr=config.lr)
    schedule = LearningRateSchedule(optimizer, config)
    rates = []
    for step in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        schedule.after_step(step)
    return rates


@pytest.mark.filterwarnings(r"ignore:Detected call of `lr_scheduler.step\(\)` before")
def test_toolkit_schedule_is_torch_exponential_lr_stepped_as_the_toolkit_does():
    config = TrainConfig(lr_decay_every=10)
    optimizer = torch.optim.AdamW([torch.zeros(1, requires_grad=True)], lr=config.lr)
    reference = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=config.lr_decay)
    expected = []
    for step in range(35):
        expected.append(optimizer.param_groups[0]["lr"])
        if step % 10 == 0:
            reference.step()
    assert rates_of(config, 35) == expected  # bit for bit
    assert [learning_rate(config, step) for step in (0, 1, 10, 11, 21)] == pytest.approx(
        [0.001, 0.001 * 0.99, 0.001 * 0.99, 0.001 * 0.99 ** 2, 0.001 * 0.99 ** 3])


@pytest.mark.parametrize("schedule", ["cosine", "linear"])
def test_decaying_schedules_warm_up_then_fall_to_zero_at_the_last_iteration(schedule):
    config = TrainConfig(iterations=100, lr=0.01, schedule=schedule, warmup=10)
    rates = rates_of(config, 100)
    assert rates[:10] == pytest.approx([0.01 * (step + 1) / 10 for step in range(10)])
    assert rates[9] == pytest.approx(0.01)
    assert rates[10] == rates[9] and all(later < earlier for earlier, later in zip(rates[10:], rates[11:]))
    assert rates[-1] == pytest.approx(0.01 * (1 / 90 if schedule == "linear" else (1 - math.cos(math.pi / 90)) / 2))
    assert learning_rate(config, 100) == pytest.approx(0.0, abs=1e-12)
    middle = 0.01 * 0.5
    assert learning_rate(config, 55) == pytest.approx(middle)


def test_bad_schedule_settings_are_refused():
    with pytest.raises(ValueError, match="schedule must be one of toolkit, cosine, linear, not 'step'"):
        TrainConfig(schedule="step")
    with pytest.raises(ValueError, match="warmup must be at least 0, not -1"):
        TrainConfig(warmup=-1)
    with pytest.raises(ValueError, match="recipe must be one of"):
        recipe_config("slow")


def test_recipes_set_only_their_fields_and_overrides_win():
    assert recipe_config("toolkit") == TrainConfig()
    fast = recipe_config("fast")
    assert {name: getattr(fast, name) for name in RECIPES["fast"]} == RECIPES["fast"] and fast.recipe == "fast"
    assert fast.weight_latent == TrainConfig().weight_latent and fast.hidden == TrainConfig().hidden
    changed = recipe_config("fast", batch_size=64, seed=7)
    assert changed == dataclasses.replace(fast, batch_size=64, seed=7)


def test_decaying_schedule_makes_the_iteration_count_a_resume_setting():
    cosine = TrainConfig(schedule="cosine", iterations=100)
    assert numeric_differences(cosine, dataclasses.replace(cosine, iterations=200)) == ["iterations"]
    assert numeric_differences(TrainConfig(), TrainConfig(iterations=7)) == []


def test_schedule_lands_in_the_checkpoint_and_a_resume_keeps_it(tmp_path, small_files):
    features_path, latent_path = small_files
    config = small_config(iterations=30, schedule="linear", warmup=5, lr=0.004, recipe="fast", checkpoint_every=20)
    train_projector(config, features_path=features_path, latent_path=latent_path, out_dir=tmp_path,
                    held_out_queries=0)
    state = load_checkpoint(tmp_path / "projector_checkpoint.pt")
    assert state["config"]["schedule"] == "linear" and state["config"]["warmup"] == 5
    assert state["config"]["recipe"] == "fast"
    assert state["optimizer"]["param_groups"][0]["lr"] == pytest.approx(learning_rate(config, 30), abs=1e-12)
    with pytest.raises(MismatchedFiles, match="was written with --iterations 30, this run has 40"):
        train_projector(dataclasses.replace(config, iterations=40), features_path=features_path,
                        latent_path=latent_path, out_dir=tmp_path / "again", held_out_queries=0,
                        resume=tmp_path / "projector_checkpoint.pt")


def test_cli_recipe_fills_settings_and_explicit_options_override_it(tmp_path, small_files, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tiny = ["--hidden", "16", "--hidden-layers", "1", "--held-out", "0", "--quiet", "--database", ""]
    result = CliRunner().invoke(main, ["train", "--recipe", "fast", "--iterations", "6", "--batch-size", "8",
                                       "--out", "fast"] + tiny)
    assert result.exit_code == 0, result.output
    saved = load_checkpoint(tmp_path / "fast" / "projector_checkpoint.pt")["config"]
    expected = dataclasses.replace(recipe_config("fast"), iterations=6, batch_size=8, hidden=16, hidden_layers=1)
    assert expected.precision == "auto" and saved["precision"] in ("float32", "bfloat16")  # resolved for the device
    assert saved == with_resolved_precision(expected).to_dict()
    assert saved["lr"] == RECIPES["fast"]["lr"] and saved["schedule"] == RECIPES["fast"]["schedule"]
    explicit = CliRunner().invoke(main, ["train", "--recipe", "fast", "--iterations", "6", "--lr", "0.001",
                                         "--schedule", "toolkit", "--out", "mixed"] + tiny)
    assert explicit.exit_code == 0, explicit.output
    saved = load_checkpoint(tmp_path / "mixed" / "projector_checkpoint.pt")["config"]
    assert saved["lr"] == 0.001 and saved["schedule"] == "toolkit"  # given explicitly: equal to the default
    assert saved["batch_size"] == RECIPES["fast"]["batch_size"]


def test_cli_refuses_an_unknown_recipe(tmp_path, small_files, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["train", "--recipe", "slow"])
    assert result.exit_code == 2 and "Invalid value for '--recipe': 'slow' is not one of" in result.output


def test_a_recipe_shortened_into_its_warm_up_says_so_in_one_line():
    assert schedule_note(recipe_config("fast", iterations=200)) == (
        "200 iterations stop inside the 300-iteration warm-up: the learning rate ends at 0.004, below its peak "
        "0.006, and never decays (more iterations, or a shorter warm-up, fit it)")
    for iterations in (300, 301):
        assert schedule_note(recipe_config("fast", iterations=iterations)) == (
            f"{iterations} iterations end at the peak learning rate 0.006, right after the 300-iteration "
            "warm-up: no cosine decay is left (more iterations, or a shorter warm-up, fit it)")
    assert schedule_note(recipe_config("fast", iterations=302)) is None  # its last iteration is decayed
    # retrain says it too, and takes neither --iterations nor --warmup: the note names no option
    assert "--" not in schedule_note(recipe_config("fast", iterations=200))
    assert schedule_note(recipe_config("fast")) is None and schedule_note(recipe_config("toolkit")) is None


def test_a_run_rereading_its_cache_says_so_first_then_its_warm_up_then_where_it_continues(tmp_path, small_files,
                                                                                          caplog):
    features_path, latent_path = small_files
    cache_path = build_balltree_cache(tmp_path / "cache.h5", features_path, nqueries=400)
    config = small_config(iterations=20, schedule="cosine", warmup=30, checkpoint_every=10)  # draws 640 rows

    def run(**options):
        return train_projector(config, features_path=features_path, latent_path=latent_path, out_dir=tmp_path / "run",
                               offline_cache=cache_path, held_out_queries=0, **options)

    def stop_at_10(report):
        if report.step == 10:
            raise KeyboardInterrupt
    caplog.set_level("INFO", logger="motion_matching")
    with pytest.raises(TrainingInterrupted):
        run(progress=stop_at_10)
    caplog.clear()
    assert run().resumed_from == 10
    assert [record.getMessage() for record in caplog.records][:3] == [
        f"{cache_path} holds 400 queries and this run draws 640 (1.6 passes): rows are read more than once, after "
        "the first pass in a shuffled chunk order", schedule_note(config),
        f"{tmp_path / 'run' / 'projector_checkpoint.pt'}: continuing the run it holds at iteration 10 (another "
        "--out starts a new run)"]
    caplog.clear()
    assert run().steps == 20 and not caplog.records  # finished: nothing to train, nothing to say
