"""How well a stepper predicts its database: rollouts from windows across every clip, in the files' units.

A window is ``WINDOW`` (20) consecutive frames inside one clip of database.bin. From each window's first
frame the stepper.bin steps 19 frames on its own output (``objective.rollout``: training's arithmetic,
which is the runtime's: normalise, the MLP, denormalise, integrate the velocities over 1/60 s). Reported:
the L1 error (mean absolute difference per value) of the stepped features and latent against the database
at each horizon (frames 1..19 after the window's first) and over all of them, and the toolkit's four loss
terms. With a decompressor.bin, every stepped frame is also decoded to a pose (the simulation bone taken
from the database, as the runtime takes it from the simulation) and compared, after forward kinematics,
with the database's pose of the same frame: world joint position error (cm), beside the decompressor's
own error on the database's features and latent of the same frames (what stepping adds to it).
"""
import json
import os

import numpy as np
import torch

from motion_matching.atomic import atomic_write
from motion_matching.decompressor import kinematics as kin
from motion_matching.decompressor.evaluate import load_decompressor
from motion_matching.decompressor.inputs import load_inputs as load_pose_inputs
from motion_matching.decompressor.objective import split_output
from motion_matching.errors import InvalidFile
from motion_matching.stepper.config import EVALUATION_SEED as DEFAULT_SEED
from motion_matching.stepper.config import EVALUATION_WINDOWS as DEFAULT_WINDOWS
from motion_matching.stepper.config import WINDOW
from motion_matching.stepper.inputs import clip_window_starts, load_inputs
from motion_matching.stepper.model import stepper_from_network
from motion_matching.stepper.objective import LossTerms, stepper_losses
from motion_matching.toolkit import formats
from motion_matching.toolkit.overwrite import png_writer, refuse_existing, writer_tag
from motion_matching.training.step import PrecisionForward

REPORT_NAME, PLOT_NAME = "stepper_evaluation.json", "stepper_errors.png"
REPORT_FORMAT = "motion-matching-stepper-evaluation"
WRITER = "evaluate-stepper"
WINDOWS_PER_BLOCK = 512
FRAMES_PER_BLOCK = 8192


def window_starts(ranges, *, window=WINDOW, limit=DEFAULT_WINDOWS, seed=DEFAULT_SEED):
    """``(starts, possible)``: the first frames (int64 numpy, ascending) of the windows to evaluate, and how many
    windows there are (int): every start whose ``window`` frames lie inside one clip of ``ranges`` (``(starts,
    stops)``), or, where there are more than ``limit``, ``limit`` of them evenly spaced from an offset drawn
    with ``seed``."""
    every = clip_window_starts(ranges, window)
    if len(every) <= limit:
        return every, len(every)
    offset = np.random.default_rng(seed).random()
    return every[np.floor((np.arange(limit) + offset) * (len(every) / limit)).astype(np.int64)], len(every)


def _layers(sizes):
    return " -> ".join(str(size) for size in sizes)


def load_stepper(path, *, nfeatures, nlatent):
    """The stepper.bin at ``path`` as a ``Stepper`` (CPU, eval mode); raises ``InvalidFile`` unless its layers
    are a stepper's for frames of ``nfeatures`` features and ``nlatent`` latent values."""
    network, size = formats.load_network(path), nfeatures + nlatent
    sizes = network.sizes
    if len(sizes) != 4 or sizes[1] != sizes[2] or sizes[0] != size or sizes[-1] != size:
        raise InvalidFile(path, f"has layers {_layers(sizes)}; a stepper of these files has {size} -> hidden -> "
                                f"hidden -> {size} ({nfeatures} features + {nlatent} latent)")
    return stepper_from_network(network)


def world_positions(txy, positions, parents):
    """World joint positions (N, B, 3), metres, of local rotations given by their first two matrix columns
    ``txy`` (N, B, 3, 2) and local positions (N, B, 3): forward kinematics as the decompressor's."""
    return kin.matrix_forward_kinematics(kin.matrix_from_two_columns(txy), positions, positions, positions,
                                         parents)[1]


class PoseDecoding:
    """A decompressor.bin and the database's poses: decodes frames and measures their joint positions."""

    def __init__(self, path, *, database_path, features_path, latent):
        self.inputs = load_pose_inputs(database_path, features_path)
        self.module = load_decompressor(path, nfeatures=self.inputs.X.shape[1], nlatent=latent.shape[1],
                                        nbones=self.inputs.nbones)
        arrays, frames = self.inputs.arrays, torch.arange(self.inputs.nframes)
        with torch.no_grad():
            self.truth = torch.cat([world_positions(arrays["Ytxy"][block], arrays["Ypos"][block], self.inputs.parents)
                                    for block in torch.split(frames, FRAMES_PER_BLOCK)])
            self.alone = torch.cat([self.errors_cm(block, self.inputs.X[block], latent[block])
                                    for block in torch.split(frames, FRAMES_PER_BLOCK)]).numpy()

    def errors_cm(self, frames, X, Z):
        """World position error (N, B-1), cm, of each non-root joint of the poses decoded from features ``X``
        (N, nfeatures) and latent ``Z`` (N, nlatent) against the database's frames ``frames`` (N,), whose
        simulation bone the decoded poses take."""
        arrays = self.inputs.arrays
        til = split_output(self.module.decode(X[None], Z[None]), self.inputs.nbones)
        txy = torch.cat([arrays["Ytxy"][frames][:, 0:1], til["txy"][0]], dim=1)
        positions = torch.cat([arrays["Ypos"][frames][:, 0:1], til["pos"][0]], dim=1)
        decoded = world_positions(txy, positions, self.inputs.parents)
        return 100.0 * torch.linalg.norm(decoded - self.truth[frames], dim=-1)[:, 1:]


def stepped_blocks(module, inputs, starts, *, window=WINDOW, precision="float32"):
    """Yield, block by block of windows, ``(frames, Xtil, Ztil, terms)``: the windows' frame indices (n, window)
    tensor, the rollout's features (n, window, nfeatures) and latent (n, window, nlatent), the first frame the
    database's own, and the toolkit's loss terms of the block (a ``LossTerms`` of floats); the matrix products in
    ``precision`` (the runtime's float32 unless asked)."""
    forward = PrecisionForward(precision, "cpu")
    with torch.no_grad():
        for at in range(0, len(starts), WINDOWS_PER_BLOCK):
            frames = torch.from_numpy(starts[at:at + WINDOWS_PER_BLOCK])[:, None] + torch.arange(window)
            terms, (Xtil, Ztil) = stepper_losses(module, inputs.X[frames], inputs.Z[frames], forward)
            yield frames, Xtil, Ztil, LossTerms(*(float(term) for term in terms))


def measure_windows(module, inputs, starts, decoding=None, precision="float32"):
    """The errors of the rollouts from ``starts``: a dict of numpy arrays, ``feature_l1`` and ``latent_l1``
    (N, WINDOW-1): each window's mean absolute error per value at horizons 1..WINDOW-1; with ``decoding`` (a
    ``PoseDecoding``) ``position_cm`` and ``decompressor_cm`` (N, WINDOW-1, B-1): each joint's error decoded from
    the stepped frame and from the database's; and ``loss_terms``, a ``LossTerms`` of floats over the windows."""
    parts = {name: [] for name in ("feature_l1", "latent_l1", "position_cm", "decompressor_cm")}
    sums = np.zeros(len(LossTerms._fields))
    for frames, Xtil, Ztil, terms in stepped_blocks(module, inputs, starts, precision=precision):
        parts["feature_l1"].append(torch.abs(Xtil - inputs.X[frames])[:, 1:].mean(dim=-1).numpy())
        parts["latent_l1"].append(torch.abs(Ztil - inputs.Z[frames])[:, 1:].mean(dim=-1).numpy())
        sums += np.array(terms) * len(frames)
        if decoding is not None:
            stepped, shape = frames[:, 1:].reshape(-1), tuple(frames[:, 1:].shape)
            with torch.no_grad():
                errors = decoding.errors_cm(stepped, Xtil[:, 1:].reshape(len(stepped), -1),
                                            Ztil[:, 1:].reshape(len(stepped), -1))
            parts["position_cm"].append(errors.reshape(shape + (-1,)).numpy())
            parts["decompressor_cm"].append(decoding.alone[stepped.numpy()].reshape(shape + (-1,)))
    arrays = {name: np.concatenate(values) for name, values in parts.items() if values}
    arrays["loss_terms"] = LossTerms(*(sums / len(starts)))
    return arrays


def _by_horizon(values):
    """``{"mean", "by_horizon"}`` of per-window errors (N, horizons)."""
    return {"mean": float(values.mean()), "by_horizon": [float(value) for value in values.mean(axis=0)]}


def _distribution(values):
    """``{"mean", "p95", "max"}`` of every value of ``values``, and with per-horizon values (N, horizons, joints)
    also ``by_horizon`` (means) and ``p95_by_horizon``."""
    flat = np.asarray(values, dtype=np.float64)
    summary = {"mean": float(flat.mean()), "p95": float(np.percentile(flat, 95)), "max": float(flat.max())}
    horizons = flat.transpose(1, 0, 2).reshape(flat.shape[1], -1)
    return {**summary, "by_horizon": [float(value) for value in horizons.mean(axis=1)],
            "p95_by_horizon": [float(value) for value in np.percentile(horizons, 95, axis=1)]}


def evaluate_stepper(stepper_path, *, database_path, features_path, latent_path, decompressor_path=None,
                     windows=DEFAULT_WINDOWS, seed=DEFAULT_SEED):
    """``(report, arrays)``: the report (dict) of the stepper.bin at ``stepper_path`` stepping windows of the
    files it was trained on (``window_starts(limit=windows, seed=seed)``), with ``decompressor_path`` also the
    decoded poses' errors; ``arrays`` holds the windows' ``starts`` and ``measure_windows``'s arrays."""
    inputs = load_inputs(database_path, features_path, latent_path, window=WINDOW)
    module = load_stepper(stepper_path, nfeatures=inputs.X.shape[1], nlatent=inputs.Z.shape[1])
    starts, possible = window_starts(inputs.ranges, limit=windows, seed=seed)
    if not len(starts):
        longest = int(np.max(inputs.ranges[1] - inputs.ranges[0]))
        raise InvalidFile(database_path, f"no clip holds a window of {WINDOW} frames (the longest has {longest})")
    decoding = None if decompressor_path is None else PoseDecoding(
        decompressor_path, database_path=database_path, features_path=features_path, latent=inputs.Z)
    arrays = {"starts": starts, **measure_windows(module, inputs, starts, decoding)}
    report = {"frames": inputs.nframes, "clips": len(inputs.ranges[0]), "window": WINDOW, "windows": len(starts),
              "windows_possible": possible, "seed": seed, "horizons": list(range(1, WINDOW)),
              "feature_l1": _by_horizon(arrays["feature_l1"]), "latent_l1": _by_horizon(arrays["latent_l1"]),
              "loss_terms": arrays["loss_terms"]._asdict()}
    if decoding is not None:
        report["position_error_cm"] = _distribution(arrays["position_cm"])
        report["decompressor_alone_cm"] = _distribution(arrays["decompressor_cm"])
    return report, arrays


def written_by_evaluate(path):
    """True if ``path`` is a report of ``REPORT_FORMAT`` or a PNG evaluate-stepper tagged."""
    if os.path.basename(path) != REPORT_NAME:
        return png_writer(path) == writer_tag(WRITER)
    try:
        with open(path, encoding="utf-8") as stream:
            return json.load(stream).get("format") == REPORT_FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def evaluate_files(stepper_path, *, database_path, features_path, latent_path, out_dir, decompressor_path=None,
                   windows=DEFAULT_WINDOWS, seed=DEFAULT_SEED, plots=True, force=False):
    """Evaluate and write ``stepper_evaluation.json`` (and ``stepper_errors.png``) into ``out_dir``; returns the
    report. Files of those names that it did not write are refused unless ``force``."""
    names = [os.path.join(out_dir, REPORT_NAME)] + ([os.path.join(out_dir, PLOT_NAME)] if plots else [])
    refuse_existing(names, force=force, ours=written_by_evaluate, why=f" (not written by {WRITER})")
    paths = {"stepper": stepper_path, "database": database_path, "features": features_path, "latent": latent_path,
             "decompressor": decompressor_path}
    report, _ = evaluate_stepper(stepper_path, database_path=database_path, features_path=features_path,
                                 latent_path=latent_path, decompressor_path=decompressor_path, windows=windows,
                                 seed=seed)
    report = {"format": REPORT_FORMAT, **report,
              "inputs": {name: os.fspath(path) for name, path in paths.items() if path is not None}}
    os.makedirs(out_dir, exist_ok=True)
    if plots:
        from motion_matching.stepper.plots import plot_horizon_errors  # matplotlib only when asked for
        plot_horizon_errors(report, names[1], writer=writer_tag(WRITER))
    report["files"] = names
    with atomic_write(names[0], mode="w") as stream:
        json.dump(report, stream, indent=2)
        stream.write("\n")
    return report
