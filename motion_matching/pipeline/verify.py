"""The verify stage: each runtime network .bin, run by ``tools/nnet_eval.c`` (compiled once per run), against
torch running the trained module of its checkpoint (or, when ``retrain/`` no longer holds it, the .bin's own
weights), on a few frames of the database (as the export tests do).

Without a C compiler (or without the C source, which ships with the repository only) the stage is skipped,
saying why: ``Skipped``.
"""
import os

import numpy as np

from motion_matching.errors import MotionMatchingError
from motion_matching.pipeline.files import work_path
from motion_matching.projector import c_evaluator
from motion_matching.toolkit import formats

TOLERANCE = 1e-4  # relative to each output column's largest magnitude (at least 1), as the export tests
FRAMES = 64  # rows checked, spread over the database


class Skipped(Exception):
    """A stage that cannot run here (not a failure); ``str`` is its one-line reason."""


def _torch_outputs(network, checkpoint_path, X, Z):
    """What torch computes (F, outputs) float32 with the module of ``checkpoint_path`` for ``network``."""
    import torch

    from motion_matching.training.checkpoint import load_checkpoint
    from motion_matching.training.step import PrecisionForward
    state = load_checkpoint(checkpoint_path)["model"]
    X, Z = torch.from_numpy(X), torch.from_numpy(Z)
    with torch.no_grad():
        if network == "decompressor":
            from motion_matching.decompressor.model import autoencoder_from_state_dict
            return autoencoder_from_state_dict(state).decode(X[None], Z[None])[0].numpy()
        if network == "projector":
            from motion_matching.projector.model import module_from_state_dict
            return module_from_state_dict(state).eval()(X).numpy()
        from motion_matching.stepper.model import stepper_from_state_dict, velocities
        return velocities(stepper_from_state_dict(state), X, Z, PrecisionForward("float32", "cpu")).numpy()


def _torch_runtime_outputs(path, inputs):
    """What torch computes (F, outputs) float32 with the weights of the network .bin at ``path`` itself, in the
    runtime's arithmetic (normalise, ReLU after every layer but the last, de-normalise): where no checkpoint is
    left (``retrain/`` deleted), this still checks the C evaluator reads the file as torch does."""
    import torch
    network = formats.load_network(path)
    x = (torch.from_numpy(inputs) - torch.from_numpy(network.mean_in)) / torch.from_numpy(network.std_in)
    for index, (weights, bias) in enumerate(network.layers):
        x = x @ torch.from_numpy(weights) + torch.from_numpy(bias)
        x = torch.relu(x) if index < len(network.layers) - 1 else x
    return (x * torch.from_numpy(network.std_out) + torch.from_numpy(network.mean_out)).numpy()


def _inputs(network, X, Z):
    return X if network == "projector" else np.hstack([X, Z])


def build_evaluator(out_dir):
    """Compile tools/nnet_eval.c into the work folder; returns its path. Raises ``Skipped`` without a compiler
    or without the source."""
    if c_evaluator.find_compiler() is None:
        raise Skipped("no C compiler (cc or $CC): the runtime files were not run by tools/nnet_eval.c")
    if not c_evaluator.SOURCE.is_file():
        raise Skipped(f"no {c_evaluator.SOURCE} (it ships with the repository only): the runtime files were not "
                      "run by the C evaluator")
    os.makedirs(work_path(out_dir), exist_ok=True)
    return c_evaluator.build_c_evaluator(work_path(out_dir))


def verify_networks(out_dir, *, checkpoints):
    """Compare, for each of ``checkpoints`` (network name -> checkpoint path), the C evaluator on its .bin in
    ``out_dir`` with torch; returns the quality line (str). Raises ``MotionMatchingError`` naming the .bin
    where they disagree, ``Skipped`` where the evaluator cannot be built."""
    executable = build_evaluator(out_dir)
    X = formats.load_features(os.path.join(out_dir, "features.bin")).features
    Z = formats.load_latent(os.path.join(out_dir, "latent.bin"))
    rows = np.unique(np.linspace(0, len(X) - 1, FRAMES).astype(np.int64))
    X, Z = np.ascontiguousarray(X[rows]), np.ascontiguousarray(Z[rows])
    worst = 0.0
    for network, checkpoint in checkpoints.items():
        path = os.path.join(out_dir, f"{network}.bin")
        if os.path.isfile(checkpoint):
            expected = _torch_outputs(network, checkpoint, X, Z)
        else:
            checkpoint = path
            expected = _torch_runtime_outputs(path, _inputs(network, X, Z))
        actual = c_evaluator.c_network_outputs(executable, path, _inputs(network, X, Z), workdir=work_path(out_dir))
        if actual.shape != expected.shape:
            raise MotionMatchingError(path, f"gives {actual.shape[1]} outputs in the C evaluator; torch {checkpoint} "
                                            f"gives {expected.shape[1]}")
        error = float((np.abs(actual - expected) / np.maximum(1.0, np.abs(expected).max(axis=0))).max())
        if not error <= TOLERANCE:
            raise MotionMatchingError(path, f"the C evaluator and torch ({checkpoint}) disagree by {error:.2g} "
                                            f"(relative; at most {TOLERANCE:g} expected)")
        worst = max(worst, error)
    return f"C and torch agree within {worst:.1e} on {len(rows)} frames"
