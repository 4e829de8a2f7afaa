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


LABELS = {"gnd": "nearest database frame (exact search: the target)", "til": "projector output",
          "hat": "noisy query (the input)"}


def prediction_figure(plt, series, names, *, title, column_name):
    """A figure with one panel per column of the (rows, columns) arrays in ``series`` (``names``: keys of
    ``LABELS``), each panel on its own y range, a title, axis labels and a legend; returns the figure.

    (The toolkit shares one range across panels; per-panel ranges keep narrow columns readable.)
    """
    columns = series[0].shape[1]
    figure, axes = plt.subplots(columns, sharex=True, squeeze=False,
                                figsize=(12, _PANEL_HEIGHT * columns + 1.0))
    for column, axis in enumerate(axes[:, 0]):
        for values, name in zip(series, names):
            axis.plot(values[:, column], marker=".", linestyle="None", label=LABELS[name])
        axis.set_ylabel(f"{column_name} {column}", rotation=0, ha="right", va="center")
    axes[-1, 0].set_xlabel(f"held-out query (the first {series[0].shape[0]}, in stream order)")
    figure.suptitle(title)
    figure.legend(*axes[0, 0].get_legend_handles_labels(), loc="upper center", ncol=len(names),
                  bbox_to_anchor=(0.5, 1.0 - 0.45 / figure.get_figheight()))
    # tight_layout doubles the time of a 32-panel figure; fixed margins read as well
    top = 1.0 - 0.9 / figure.get_figheight()
    figure.subplots_adjust(left=0.1, right=0.99, top=top, bottom=0.5 / figure.get_figheight(), hspace=0.15)
    return figure


def _plot_columns(plt, path, series, names, *, title, column_name):
    figure = prediction_figure(plt, series, names, title=title, column_name=column_name)
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
    _plot_columns(plt, x_path, [head["Xgnd"], head["Xtil"], head["Xhat"]], ["gnd", "til", "hat"],
                  title="Projected matching features: the projector's output should sit on the nearest frame's",
                  column_name="feature")
    _plot_columns(plt, z_path, [head["Zgnd"], head["Ztil"]], ["gnd", "til"],
                  title="Projected latent: the projector's output should sit on the nearest frame's",
                  column_name="latent")
    return [x_path, z_path]
