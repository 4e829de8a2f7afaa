"""The stepper's ``small`` recipe: ``fast``'s schedule in float32 at a quarter of its batch, on clip windows, for a
database the stepper learns by heart; offered per network by retrain."""
import dataclasses
import pathlib
import subprocess
import sys

import pytest
from stepper_helpers import FRAMES

from motion_matching.data import generate
from motion_matching.pipeline.settings import RetrainSettings, network_recipes
from motion_matching.stepper.config import SMALL_DATABASE_FRAMES, recipe_config, recipe_note

REPOSITORY = pathlib.Path(__file__).resolve().parents[1]

# window_ramp: the 75% small was measured with, fast's until session 36
DIFFERENCES = {"batch_size": 128, "iterations": 16_000, "precision": "float32", "clip_windows": True,
               "window_ramp": 0.75}


def test_small_is_fast_in_float32_at_a_quarter_of_its_batch_on_clip_windows():
    small, fast = recipe_config("small"), recipe_config("fast")
    changed = {item.name for item in dataclasses.fields(small) if getattr(small, item.name) != getattr(fast, item.name)}
    assert changed == set(DIFFERENCES) | {"recipe"}
    assert {name: getattr(small, name) for name in DIFFERENCES} == DIFFERENCES
    assert fast.batch_size == 4 * small.batch_size and fast.precision == "auto" and not fast.clip_windows


def test_retrain_trains_the_stepper_with_it_when_asked_and_no_other_network_has_it():
    assert "small" in network_recipes("stepper")
    assert "small" not in network_recipes("decompressor") and "small" not in network_recipes("projector")
    settings = RetrainSettings(recipes={"stepper": "small"})
    assert settings.config("stepper") == recipe_config("small")
    assert settings.config("decompressor") == RetrainSettings().config("decompressor")


def test_a_fast_run_on_a_small_database_says_small_is_ahead_there_and_nothing_else_does():
    fast, small, toolkit = recipe_config("fast"), recipe_config("small"), recipe_config("toolkit")
    assert recipe_note(fast, "database.bin", SMALL_DATABASE_FRAMES) is None
    assert recipe_note(fast, "x/database.bin", SMALL_DATABASE_FRAMES - 1) == (
        f"x/database.bin: {SMALL_DATABASE_FRAMES - 1:,} frames, fewer than {SMALL_DATABASE_FRAMES:,}: the stepper's "
        "'small' recipe is ahead of 'fast' on every measure there, in a quarter to a half of its time "
        "(docs/stepper.md, \"Where small overtakes fast\")")
    assert recipe_note(small, "database.bin", 600) is None and recipe_note(toolkit, "database.bin", 600) is None


def test_train_stepper_py_says_it_before_training_and_trains_the_recipe_it_was_given(tmp_path):
    pytest.importorskip("torch", reason="the script trains a network, which needs torch")
    generate.generate_files(tmp_path, nframes=FRAMES)
    outputs = {}
    for recipe in ("fast", "small"):
        done = subprocess.run([sys.executable, str(REPOSITORY / "train_stepper.py"), "--recipe", recipe, "--hidden",
                               "64", "--batch-size", "8", "--iterations", "2", "--threads", "1", "--quiet", "--out",
                               recipe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        outputs[recipe] = done.stderr
    assert f"database.bin: {FRAMES:,} frames, fewer than 2,500: the stepper's 'small' recipe" in outputs["fast"]
    assert "recipe is ahead" not in outputs["small"]
    from motion_matching.training.checkpoint import load_checkpoint
    trained = {recipe: load_checkpoint(tmp_path / recipe / "stepper_checkpoint.pt")["config"] for recipe in outputs}
    assert [(config["recipe"], config["clip_windows"]) for config in trained.values()] == [("fast", False),
                                                                                          ("small", True)]
