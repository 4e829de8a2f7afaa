"""Training recipes: named presets of ``TrainConfig`` settings (``train --recipe NAME``).

- ``toolkit``: the toolkit's constants, ``TrainConfig``'s defaults (batch 32, 500,000 iterations,
  lr 0.001 x0.99 every 1,000 iterations).
- ``fast``: fewer, larger batches with a larger learning rate, a short warm-up and a cosine decay to 0
  at the last iteration. Measured against ``toolkit`` in BENCHMARKS.md (``benchmarks/bench_quality.py``).

A recipe sets only the fields it lists; every other field keeps its default, and settings given
explicitly override the recipe's.
"""
import dataclasses

from motion_matching.projector.config import TrainConfig

RECIPES = {
    "toolkit": {},
    "fast": {"batch_size": 512, "iterations": 8000, "lr": 0.003, "schedule": "cosine", "warmup": 200},
}


def recipe_settings(name):
    """The settings recipe ``name`` changes, a dict of ``TrainConfig`` field values; raises KeyError."""
    return dict(RECIPES[name])


def recipe_config(name="toolkit", **overrides):
    """The ``TrainConfig`` of recipe ``name`` with ``overrides`` (field values) applied on top."""
    if name not in RECIPES:
        raise ValueError(f"recipe must be one of {', '.join(RECIPES)}, not {name!r}")
    known = {field.name for field in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown settings: {', '.join(unknown)}")
    return TrainConfig(**{**recipe_settings(name), **overrides, "recipe": name})
