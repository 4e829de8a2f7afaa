"""The toolkit's prediction plots, ``projector_X.png`` and ``projector_Z.png`` (matplotlib, imported lazily).

One panel per column: dots for the searched truth (``gnd``), the prediction (``til``) and, for features,
the noisy query (``hat``). Training draws them as the toolkit does (every 4th of the first 500 of up to
1,000 noisy copies of consecutive frames of the third clip, one y range per figure); ``evaluate`` draws
its first ``PLOT_QUERIES`` held-out queries, one y range per panel. ``draw_predictions`` draws both.
"""
import os

import numpy as np
import torch

from motion_matching.atomic import atomic_write
from motion_matching.errors import MotionMatchingError
from motion_matching.neighbours.queries import noise_scale
from motion_matching.toolkit.overwrite import WRITER_KEY, writer_tag

PLOT_QUERIES = 125  # the toolkit plots rows [:500:4], i.e. 125 points per panel
PLOT_NAMES = ("projector_X.png", "projector_Z.png")
_PANEL_HEIGHT = 1.2  # inches
_DPI = 60


def _pyplot(out_dir, without):
    try:
        import matplotlib
    except ImportError:
        raise MotionMatchingError(out_dir, "plots need matplotlib: pip install 'motion-matching-projector[plot]' "
                                           f"or {without}") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


LABELS = {"gnd": "nearest database frame (exact search: the target)", "til": "projector output",
          "hat": "noisy query (the input)"}
TITLES = {"feature": "Projected matching features: the output should sit on the nearest frame's",
          "latent": "Projected latent: the output should sit on the nearest frame's"}
_TITLE_HEIGHT = 1.0  # inches above the panels: the title's line, then the legend's below it


def prediction_figure(plt, series, names, *, column_name, xlabel, shared_range=None):
    """A figure of one panel per column of the (rows, columns) arrays in ``series`` (``names``: keys of
    ``LABELS``), with a title, axis labels and one legend; ``shared_range`` (low, high) or one y range per
    panel. Returns the matplotlib figure."""
    columns = series[0].shape[1]
    height = _PANEL_HEIGHT * columns + _TITLE_HEIGHT
    figure, axes = plt.subplots(columns, sharex=True, squeeze=False, figsize=(12, height))
    for column, axis in enumerate(axes[:, 0]):
        for values, name in zip(series, names):
            axis.plot(values[:, column], marker=".", linestyle="None", label=LABELS[name])
        if shared_range is not None:
            axis.set_ylim(*shared_range)
        axis.set_ylabel(f"{column_name} {column}", rotation=0, ha="right", va="center")
    axes[-1, 0].set_xlabel(xlabel)
    # placed in inches from the top, so that the legend sits below the title at any figure height
    figure.suptitle(TITLES[column_name], y=1.0 - 0.08 / height, va="top")
    figure.legend(*axes[0, 0].get_legend_handles_labels(), loc="upper center", ncol=len(names),
                  bbox_to_anchor=(0.5, 1.0 - 0.4 / height))
    # tight_layout doubles the time of a 32-panel figure; fixed margins read as well
    figure.subplots_adjust(left=0.1, right=0.99, top=1.0 - 0.9 / height, bottom=0.5 / height, hspace=0.15)
    return figure


def _plot_columns(plt, path, series, names, *, writer, **labels):
    figure = prediction_figure(plt, series, names, **labels)
    with atomic_write(path) as stream:
        figure.savefig(stream, format="png", dpi=_DPI, metadata={WRITER_KEY: writer})
    plt.close(figure)


def draw_predictions(arrays, out_dir, *, writer, ranges=(None, None), without="pass --no-plots",
                     xlabel="held-out query, in stream order"):
    """Write ``projector_X.png`` and ``projector_Z.png`` into ``out_dir`` (atomically); returns both paths.

    ``arrays`` maps ``Xhat, Xgnd, Xtil`` (rows, nfeatures) and ``Zgnd, Ztil`` (rows, nlatent) to the
    points to plot. ``ranges`` gives each figure one (low, high) y range, or None for one range per
    panel. ``without`` ends the error raised when matplotlib is missing (how to run without plots);
    ``xlabel`` says what the points along x are; ``writer`` (``overwrite.writer_tag``) is stored in the PNGs,
    so that the command that wrote them may replace them unasked.
    """
    plt = _pyplot(out_dir, without)
    x_path, z_path = (os.path.join(out_dir, name) for name in PLOT_NAMES)
    x_range, z_range = ranges
    _plot_columns(plt, x_path, [arrays["Xgnd"], arrays["Xtil"], arrays["Xhat"]], ["gnd", "til", "hat"],
                  writer=writer, column_name="feature", xlabel=xlabel, shared_range=x_range)
    _plot_columns(plt, z_path, [arrays["Zgnd"], arrays["Ztil"]], ["gnd", "til"], writer=writer,
                  column_name="latent", xlabel=xlabel, shared_range=z_range)
    return [x_path, z_path]


def plot_predictions(arrays, out_dir, *, count=PLOT_QUERIES):
    """``draw_predictions`` of the first ``count`` rows of ``evaluate_projector``'s arrays, tagged as evaluate's;
    returns both paths."""
    return draw_predictions({name: values[:count] for name, values in arrays.items()}, out_dir,
                            writer=writer_tag("evaluate"))


def plot_frames(ranges, nframes):
    """``(start, stop)`` frame span to plot: clip 2 as in the toolkit, else the first clip or frames."""
    if ranges is None:
        return 0, min(nframes, 1000)
    starts, stops = ranges
    clip = 2 if len(starts) > 2 else 0
    return int(starts[clip]), int(min(starts[clip] + 1000, stops[clip]))


def write_prediction_plots(module, X, Z, *, out_dir, searcher, ranges=None, seed=0, draws=None):
    """Training's plots: noisy copies of the ``plot_frames`` frames, projected; returns both paths written.

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
    arrays = {"Xhat": Xhat, "Xgnd": X[nearest], "Xtil": output[:, :X.shape[1]], "Zgnd": Z[nearest],
              "Ztil": output[:, X.shape[1]:]}
    ranges = [(arrays[name].min(), arrays[name].max()) for name in ("Xhat", "Zgnd")]  # the toolkit's
    return draw_predictions({name: values[:500:4] for name, values in arrays.items()}, out_dir, ranges=ranges,
                            writer=writer_tag("train"),
                            without="leave out --plots",
                            xlabel="noisy copy of a frame (every 4th of 500 consecutive frames of one clip)")
