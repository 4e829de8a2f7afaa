"""The toolkit's prediction plots: projector_X.png and projector_Z.png (matplotlib, imported lazily).

For up to 1,000 consecutive frames of one clip (the third, as the toolkit picks, when the database is
known), noisy queries are projected; every 4th of the first 500 is plotted, one panel per column:
searched truth, prediction and (for features) the query itself.
"""
import io
import os

import numpy as np
import torch

from motion_matching.atomic import atomic_write
from motion_matching.neighbours.queries import noise_scale


def plot_frames(ranges, nframes):
    """``(start, stop)`` frame span to plot: clip 2 as in the toolkit, else the first clip or frames."""
    if ranges is None:
        return 0, min(nframes, 1000)
    starts, stops = ranges
    clip = 2 if len(starts) > 2 else 0
    return int(starts[clip]), int(min(starts[clip] + 1000, stops[clip]))


def _figure(columns, *, title_limits):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(columns[0]), sharex=True, figsize=(12, 2 * len(columns[0])))
    axes = np.atleast_1d(axes)
    low, high = title_limits
    for index, axis in enumerate(axes):
        for series in columns:
            axis.plot(series[index][:500:4], marker=".", linestyle="None")
        axis.set_ylim(low, high)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


def write_prediction_plots(module, X, Z, *, out_dir, searcher, ranges=None, seed=0, draws=None):
    """Write ``projector_X.png`` and ``projector_Z.png`` into ``out_dir`` (atomically); returns both paths.

    ``draws`` (nsigma (P, 1), noise (P, n), scale (n,) float32), the toolkit stream's preview, replace
    the noise drawn from ``seed``.
    """
    start, stop = plot_frames(ranges, X.shape[0])
    if draws is None:
        rng = np.random.default_rng(seed)
        draws = (rng.random((stop - start, 1), dtype=np.float32),
                 rng.standard_normal((stop - start, X.shape[1]), dtype=np.float32), noise_scale(X))
    nsigma, noise, scale = draws
    Xhat = X[start:stop] + scale * nsigma * noise
    nearest = searcher.nearest(Xhat)
    with torch.no_grad():
        output = module(torch.from_numpy(Xhat).to(module.mean_in.device)).cpu().numpy()
    Xtil, Ztil = output[:, :X.shape[1]], output[:, X.shape[1]:]
    Xgnd, Zgnd = X[nearest], Z[nearest]
    pictures = {
        "projector_X.png": _figure([Xgnd.T, Xtil.T, Xhat.T], title_limits=(Xhat.min(), Xhat.max())),
        "projector_Z.png": _figure([Zgnd.T, Ztil.T], title_limits=(Zgnd.min(), Zgnd.max())),
    }
    paths = []
    for name, data in pictures.items():
        paths.append(os.path.join(out_dir, name))
        with atomic_write(paths[-1]) as stream:
            stream.write(data)
    return paths
