"""The prediction plots: the title, the legend and the first panel each have their own room (the legend once
covered the title of projector_X.png)."""
import numpy as np
import pytest

from motion_matching.projector import plots

matplotlib = pytest.importorskip("matplotlib", reason="the plots need matplotlib (the 'plot' extra)")


def overlap(one, other):
    """Whether two display-space bounding boxes share any area."""
    return one.x0 < other.x1 and other.x0 < one.x1 and one.y0 < other.y1 and other.y0 < one.y1


@pytest.mark.parametrize("columns, names, kind", [(27, ["gnd", "til", "hat"], "feature"),
                                                  (32, ["gnd", "til"], "latent"),
                                                  (2, ["gnd", "til", "hat"], "feature")])
def test_legend_title_and_panels_do_not_cover_each_other(columns, names, kind):
    plt = plots._pyplot(".", "pass --no-plots")
    series = [np.random.default_rng(index).standard_normal((125, columns)) for index in range(len(names))]
    figure = plots.prediction_figure(plt, series, names, column_name=kind, xlabel="query")
    try:
        renderer = figure.canvas.get_renderer()
        title = figure._suptitle.get_window_extent(renderer)
        legend = figure.legends[0].get_window_extent(renderer)
        panel = figure.axes[0].get_tightbbox(renderer)
        page = figure.bbox
        assert not overlap(title, legend) and not overlap(legend, panel) and not overlap(title, panel)
        assert title.y0 > legend.y1 and title.y1 <= page.y1  # the title above the legend, inside the figure
    finally:
        plt.close(figure)
