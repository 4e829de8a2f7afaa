"""The stepper's previews: the database against the stepper's rollout, restarted from the database every
window, over the first frames of clip 2 (the toolkit's ``stepper_X.png`` and ``stepper_Z.png``)."""
import os

import numpy as np
import torch

from motion_matching.atomic import atomic_write
from motion_matching.stepper.objective import rollout
from motion_matching.toolkit.overwrite import WRITER_KEY
from motion_matching.training.step import PrecisionForward

PREVIEW_FRAMES = 500  # the toolkit plots the first 500 frames of range 2


def preview_frames(ranges):
    """The frames (slice) the previews show: the first ``PREVIEW_FRAMES`` of clip 2 (of the last clip when
    there are fewer than three)."""
    starts, stops = ranges
    clip = min(2, len(starts) - 1)
    return slice(int(starts[clip]), min(int(starts[clip]) + PREVIEW_FRAMES, int(stops[clip])))


def restarted_rollout(module, X, Z, *, window):
    """The stepper's rollout of frames ``X`` (T, nfeatures), ``Z`` (T, nlatent), restarted from the database at
    every ``window``-th frame: ``(Xtil, Ztil)`` float32 numpy (T, ...)."""
    parts = [[], []]
    device = next(module.parameters()).device
    with torch.no_grad():
        for start in range(0, len(X), window):
            frames = min(window, len(X) - start)
            Xtil, Ztil = rollout(module, X[start:start + 1].to(device), Z[start:start + 1].to(device),
                                 frames=frames, forward=PrecisionForward("float32", device.type))
            parts[0].append(Xtil[0].cpu().numpy())
            parts[1].append(Ztil[0].cpu().numpy())
    return np.concatenate(parts[0]), np.concatenate(parts[1])


def plot_against(truth, stepped, path, *, title, writer):
    """Write a PNG to ``path``: each column of ``truth`` (T, n) and of ``stepped`` over it, one stacked pair
    of lines a column on one shared scale, tagged by ``writer``."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    spread = float(truth.max() - truth.min()) or 1.0
    figure, axes = plt.subplots(figsize=(12, 0.25 * truth.shape[1] + 2))
    for column in range(truth.shape[1]):
        axes.plot(truth[:, column] - column * spread, linewidth=0.6, color="tab:blue")
        axes.plot(stepped[:, column] - column * spread, linewidth=0.6, color="tab:orange")
    axes.set_yticks([-column * spread for column in range(truth.shape[1])], [str(c) for c in range(truth.shape[1])])
    axes.set(xlabel="frame of the clip", ylabel="column (blue: database, orange: stepper)", title=title)
    figure.tight_layout()
    with atomic_write(path) as stream:
        figure.savefig(stream, format="png", dpi=70, metadata={WRITER_KEY: writer})
    plt.close(figure)


def write_previews(module, inputs, out_dir, *, names, window, writer, title):
    """Write the two previews ``names`` (features, latent) of ``module`` on ``inputs`` into ``out_dir``."""
    frames = preview_frames(inputs.ranges)
    X, Z = inputs.X[frames], inputs.Z[frames]
    Xtil, Ztil = restarted_rollout(module, X, Z, window=window)
    for name, truth, stepped, what in ((names[0], X, Xtil, "features"), (names[1], Z, Ztil, "latent")):
        plot_against(truth.numpy(), stepped, os.path.join(out_dir, name), writer=writer,
                     title=f"{what} of frames {frames.start}-{frames.stop - 1}, {title}")


def plot_horizon_errors(report, path, *, writer):
    """Write a PNG to ``path``, tagged by ``writer``: an ``evaluate-stepper`` report's rollout error against the
    frames stepped (features and latent L1; with a decompressor, beside it the decoded joint positions' error in
    cm and the decompressor's own error on the database's frames)."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    decoded = "position_error_cm" in report
    figure, axes = plt.subplots(1, 2 if decoded else 1, figsize=(13 if decoded else 7, 4.8), squeeze=False)
    horizons, stepped = report["horizons"], "frames stepped from a database frame (60 frames = 1 s)"
    left = axes[0][0]
    for name, label in (("feature_l1", "features (features.bin's units)"), ("latent_l1", "latent (latent.bin's)")):
        left.plot(horizons, report[name]["by_horizon"], marker="o", markersize=3, label=f"{label}: mean")
    left.set(xlabel=stepped, ylabel="absolute error per value",
             title=f"Stepper against the database: {report['windows']:,} windows of {report['window']} frames")
    if decoded:
        right, position = axes[0][1], report["position_error_cm"]
        right.plot(horizons, position["by_horizon"], marker="o", markersize=3, color="tab:red",
                   label="decoded from the stepper's frames: mean")
        right.plot(horizons, position["p95_by_horizon"], linestyle="--", color="tab:red", label="... 95th percentile")
        right.axhline(report["decompressor_alone_cm"]["mean"], linestyle=":", color="tab:gray",
                      label="decoded from the database's own frames: mean")
        right.set(xlabel=stepped, ylabel="world joint position error (cm)",
                  title="The decompressor's poses of the stepped frames")
    for axis in axes[0]:
        axis.set_xticks(sorted({1, *range(5, horizons[-1], 5), horizons[-1]}))
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
        axis.legend(loc="best")
    figure.tight_layout()
    with atomic_write(path) as stream:
        figure.savefig(stream, format="png", dpi=80, metadata={WRITER_KEY: writer})
    plt.close(figure)
