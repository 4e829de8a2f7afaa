"""Training checkpoints: one torch file holding the model, optimiser, schedule, step and config.

Layout (a dict saved with ``torch.save``): ``format`` = CHECKPOINT_FORMAT, ``version``, ``model`` (the
``NormalisedMLP`` state dict, normalisation buffers included, so it alone rebuilds the network),
``optimizer``, ``scheduler``, ``step`` (iterations done), ``config`` (a plain dict of the training
settings), ``rng`` (generator states) and ``inputs`` (e.g. the SHA-256 of features.bin).
"""
import os

import torch

from motion_matching.atomic import atomic_write
from motion_matching.errors import InvalidFile, MissingFile
from motion_matching.projector.model import module_from_state_dict

CHECKPOINT_FORMAT = "mm-projector-checkpoint"
CHECKPOINT_VERSION = 1


def save_checkpoint(path, **contents):
    """Write ``contents`` (model, optimizer, scheduler, step, config, rng, inputs) atomically to ``path``."""
    payload = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, **contents}
    with atomic_write(path) as stream:
        torch.save(payload, stream)


def load_checkpoint(path):
    """Read a checkpoint written by ``save_checkpoint``; returns its dict, or raises naming the file."""
    if not os.path.isfile(path):
        raise MissingFile(path, "no such checkpoint file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as error:  # torch raises many types for damaged files
        raise InvalidFile(path, f"not a readable checkpoint ({type(error).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise InvalidFile(path, "not an mm-projector checkpoint")
    if payload.get("version") != CHECKPOINT_VERSION:
        raise InvalidFile(path, f"checkpoint version {payload.get('version')} is not {CHECKPOINT_VERSION}; "
                                "upgrade mm-projector")
    return payload


def load_checkpoint_module(path):
    """The trained ``NormalisedMLP`` (CPU, eval mode) held by the checkpoint at ``path``."""
    module = module_from_state_dict(load_checkpoint(path)["model"])
    return module.eval()
