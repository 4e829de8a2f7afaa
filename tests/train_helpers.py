"""Helpers shared by the training tests: small settings, caches, databases, state comparison."""
import dataclasses

import numpy as np
import torch

from motion_matching.projector.config import TrainConfig
from motion_matching.toolkit import formats


def small_config(**changes):
    """A quick config: a narrow network, few iterations, files written often."""
    values = dict(iterations=40, hidden=32, save_every=10, checkpoint_every=1000)
    values.update(changes)
    return TrainConfig(**values)


def build_balltree_cache(path, features_path, *, nqueries, seed=1234, chunk_rows=256):
    """Build a cache with the BallTree backend (the online path's searcher); returns its path."""
    from motion_matching.cache import build_cache
    build_cache(features_path, out=path, nqueries=nqueries, seed=seed, backend="balltree", chunk_rows=chunk_rows)
    return path


def write_database(path, nframes, *, nclips=3):
    """A minimal valid database.bin of ``nframes`` frames, one bone, ``nclips`` clips."""
    cuts = np.linspace(0, nframes, nclips + 1).astype(np.int32)
    zeros3 = np.zeros((nframes, 1, 3), np.float32)
    rotations = np.tile(np.array([1, 0, 0, 0], np.float32), (nframes, 1, 1))
    formats.save_database(path, formats.Database(zeros3, zeros3, rotations, zeros3, np.array([-1], np.int32),
                                                 cuts[:-1].copy(), cuts[1:].copy(), np.zeros((nframes, 2), np.uint8)))
    return path


def tensors_of(state):
    """Every tensor of a nested state dict, flattened to {dotted key: tensor}."""
    flat = {}

    def visit(prefix, value):
        if isinstance(value, torch.Tensor):
            flat[prefix] = value
        elif isinstance(value, dict):
            for key, item in value.items():
                visit(f"{prefix}.{key}", item)
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                visit(f"{prefix}.{index}", item)
    visit("", state)
    return flat


def assert_identical_states(first, second):
    """Assert two checkpoints hold bit-identical model and optimiser tensors and the same step."""
    assert first["step"] == second["step"]
    for part in ("model", "optimizer"):
        a, b = tensors_of(first[part]), tensors_of(second[part])
        assert a.keys() == b.keys()
        different = [key for key in a if not torch.equal(a[key], b[key])]
        assert not different, f"{part} tensors differ: {different[:5]}"


def replace(config, **changes):
    return dataclasses.replace(config, **changes)
