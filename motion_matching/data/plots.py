"""A PNG of a few matching-feature columns and the toe contacts over time (matplotlib, imported lazily)."""
import numpy as np

from motion_matching.atomic import atomic_write
from motion_matching.data.features import FEATURE_NAMES

DEFAULT_COLUMNS = ("left_foot_position_z", "right_foot_position_z", "hip_velocity_z",
                   "trajectory_position_60_x", "trajectory_direction_60_x")


def plot_features(path, database, features, *, start=0, nframes=600, columns=DEFAULT_COLUMNS, fps=60):
    """Write a PNG to ``path``: the named raw feature columns and contacts for frames start..start+nframes.

    Raw (unnormalised) values are plotted, so the axes read in metres and metres/second.
    Returns ``path``.
    """
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot

    stop = min(start + nframes, features.features.shape[0])
    raw = features.features[start:stop] * features.scale + features.offset
    seconds = np.arange(start, stop) / fps
    figure, axes = pyplot.subplots(len(columns) + 1, 1, figsize=(10, 1.6 * (len(columns) + 1)), sharex=True)
    for axis, name in zip(axes, columns):
        axis.plot(seconds, raw[:, FEATURE_NAMES.index(name)], linewidth=1)
        axis.set_ylabel(name.replace("_", " "), fontsize=7, rotation=0, ha="right")
    contacts = database.contact_states[start:stop].astype(np.float32)
    axes[-1].step(seconds, contacts[:, 0] + 1.2, label="left toe", linewidth=1)
    axes[-1].step(seconds, contacts[:, 1], label="right toe", linewidth=1)
    axes[-1].set_ylabel("contacts", fontsize=7, rotation=0, ha="right")
    axes[-1].legend(fontsize=7, loc="upper right")
    axes[-1].set_xlabel("seconds")
    figure.tight_layout()
    with atomic_write(path) as stream:  # PNG whatever the name ends with, and never half-written
        figure.savefig(stream, format="png", dpi=80)
    pyplot.close(figure)
    return path
