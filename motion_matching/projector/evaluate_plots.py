"""Toolkit-style prediction plots: one panel per column, ground truth against the projector's output.

Like the toolkit's ``projector_X.png``/``projector_Z.png``: dots for the searched truth (``gnd``), the
prediction (``til``) and, for features, the noisy query (``hat``), over the first ``PLOT_QUERIES``
held-out queries. matplotlib (the ``[plot]`` extra) is imported only here.
"""
import os

from motion_matching.atomic import atomic_write
from motion_matching.errors import MotionMatchingError

PLOT_QUERIES = 125  # the toolkit plots rows [:500:4], i.e. 125 points per panel
_PANEL_HEIGHT = 1.2  # inches


def _pyplot(out_dir):
    try:
        import matplotlib
    except ImportError:
        raise MotionMatchingError(out_dir, "plots need matplotlib: pip install 'motion-matching-projector[plot]' "
                                           "or pass --no-plots") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _plot_columns(plt, path, series, labels):
    """One panel per column of the (rows, columns) arrays in ``series``, each panel on its own y range.

    (The toolkit shares one range across panels; per-panel ranges keep narrow columns readable.)
    """
    columns = series[0].shape[1]
    figure, axes = plt.subplots(columns, sharex=True, squeeze=False,
                                figsize=(12, _PANEL_HEIGHT * columns))
    for column, axis in enumerate(axes[:, 0]):
        for values, label in zip(series, labels):
            axis.plot(values[:, column], marker=".", linestyle="None", label=label)
        axis.set_ylabel(str(column))
    axes[0, 0].legend(loc="upper right", ncol=len(labels))
    # tight_layout doubles the time of a 32-panel figure; fixed margins read as well
    figure.subplots_adjust(left=0.06, right=0.99, top=0.99, bottom=0.01, hspace=0.15)
    with atomic_write(path) as stream:
        figure.savefig(stream, format="png", dpi=60)
    plt.close(figure)


def plot_predictions(arrays, out_dir, *, count=PLOT_QUERIES):
    """Write ``projector_X.png`` and ``projector_Z.png`` into ``out_dir`` from ``evaluate_projector``'s arrays.

    Returns the two paths written.
    """
    plt = _pyplot(out_dir)
    head = {name: values[:count] for name, values in arrays.items()}
    x_path, z_path = os.path.join(out_dir, "projector_X.png"), os.path.join(out_dir, "projector_Z.png")
    _plot_columns(plt, x_path, [head["Xgnd"], head["Xtil"], head["Xhat"]], ["gnd", "til", "hat"])
    _plot_columns(plt, z_path, [head["Zgnd"], head["Ztil"]], ["gnd", "til"])
    return [x_path, z_path]
