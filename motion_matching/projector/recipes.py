"""Training recipes: named presets of ``TrainConfig`` settings (``train --recipe NAME``).

- ``toolkit``: the toolkit's constants, ``TrainConfig``'s defaults (batch 32, 500,000 iterations,
  lr 0.001 x0.99 every 1,000 iterations).
- ``fast``: the toolkit's 16 M samples in 15,625 batches of 1,024 (one pass of the default cache), a
  larger learning rate with a short warm-up and a cosine decay to 0 at the last iteration, and the
  matrix products in bfloat16 where the device computes them natively (``precision="auto"``).
  Measured against ``toolkit`` in BENCHMARKS.md (``benchmarks/bench_quality.py``).

A recipe sets only the fields it lists; every other field keeps its default, and settings given
explicitly override the recipe's.
"""
from motion_matching.projector.config import TrainConfig
from motion_matching.training.config import config_with_recipe

RECIPES = {
    "toolkit": {},
    "fast": {"batch_size": 1024, "iterations": 15_625, "lr": 0.006, "schedule": "cosine", "warmup": 300,
             "precision": "auto"},
}


def recipe_settings(name):
    """The settings recipe ``name`` changes, a dict of ``TrainConfig`` field values; raises KeyError."""
    return dict(RECIPES[name])


def recipe_config(name="toolkit", **overrides):
    """The ``TrainConfig`` of recipe ``name`` with ``overrides`` (field values) applied on top."""
    return config_with_recipe(TrainConfig, RECIPES, name, overrides)
