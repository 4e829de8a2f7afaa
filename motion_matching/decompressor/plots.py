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
