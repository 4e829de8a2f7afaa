"""The picture of a decompressor evaluation: where in the database the reconstruction goes wrong."""
import numpy as np

from motion_matching.atomic import atomic_write
from motion_matching.toolkit.overwrite import WRITER_KEY, writer_tag


def plot_errors(errors, path):
    """Write a PNG to ``path``: the mean and worst joint position error of every frame (cm) over the
    database, and the distribution of local rotation errors (degrees); ``errors`` from ``frame_errors``."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    position = errors["position_cm"][:, 1:]
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(11, 7))
    frames = np.arange(position.shape[0])
    top.plot(frames, position.max(axis=1), linewidth=0.5, color="tab:red", label="worst joint")
    top.plot(frames, position.mean(axis=1), linewidth=0.7, color="tab:blue", label="mean over joints")
    top.set(xlabel="frame", ylabel="world position error (cm)",
            title="Decompressed pose against the database, every frame (after forward kinematics)")
    top.legend(loc="upper right")
    bottom.hist(errors["rotation_deg"].ravel(), bins=100, color="tab:green")
    bottom.set(xlabel="local rotation error (degrees)", ylabel="bones x frames", yscale="log")
    figure.tight_layout()
    with atomic_write(path) as stream:
        figure.savefig(stream, format="png", dpi=80, metadata={WRITER_KEY: writer_tag("evaluate-decompressor")})
    plt.close(figure)


PREVIEW_FRAMES = 500  # the toolkit plots the first 500 frames of range 2


def preview_frames(ranges, *, count=PREVIEW_FRAMES):
    """The frames (slice) the previews show: the first ``count`` of clip 2 as the toolkit's, or of the last clip
    when there are fewer than three."""
    starts, stops = ranges
    clip = min(2, len(starts) - 1)
    return slice(int(starts[clip]), min(int(starts[clip]) + count, int(stops[clip])))


def plot_columns(values, path, *, title, writer):
    """Write a PNG to ``path``: every column of ``values`` (T, n) over the T frames, one stacked line each, on
    one shared scale (as the toolkit's previews share their y-range), tagged by ``writer``."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    spread = float(values.max() - values.min()) or 1.0
    figure, axes = plt.subplots(figsize=(12, 0.25 * values.shape[1] + 2))
    for column in range(values.shape[1]):
        axes.plot(values[:, column] - column * spread, linewidth=0.6)
    axes.set_yticks([-column * spread for column in range(values.shape[1])], [str(c) for c in range(values.shape[1])])
    axes.set(xlabel="frame of the clip", ylabel="column", title=title)
    figure.tight_layout()
    with atomic_write(path) as stream:
        figure.savefig(stream, format="png", dpi=70, metadata={WRITER_KEY: writer})
    plt.close(figure)
