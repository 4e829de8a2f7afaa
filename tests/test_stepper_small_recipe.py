"""The stepper's ``small`` recipe: ``fast``'s schedule in float32 at a quarter of its batch, on clip windows, for a
database the stepper learns by heart; offered per network by retrain."""
import dataclasses

from motion_matching.pipeline.settings import RetrainSettings, network_recipes
from motion_matching.stepper.config import recipe_config

DIFFERENCES = {"batch_size": 128, "iterations": 16_000, "precision": "float32", "clip_windows": True}


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
