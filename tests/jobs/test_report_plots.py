"""What the report's plots show (issue 34): the interval where it can be seen, the
comparison labelled in the plot, headroom above the tallest bar. The figures are inspected
before they are saved."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hdp_spark.report import plots

pytest.importorskip("matplotlib")


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    import matplotlib.pyplot as plt

    saved: list[Any] = []

    def keep(_plt: Any, fig: Any, path: Path) -> Path:
        saved.append(fig)
        return path

    monkeypatch.setattr(plots, "_save", keep)
    yield saved
    for fig in saved:
        plt.close(fig)


def test_estimates_have_a_panel_of_plus_minus_per_group(figures: list[Any],
                                                       tmp_path: Path) -> None:
    plots.plot_estimates(tmp_path / "e.png", ["a", "b"],
                         {"x": ([100.0, 50.0], [99.0, 48.0], [101.0, 52.0])},
                         title="t", ylabel="average salary", level="95%")
    top, pm = figures[0].axes
    assert top.get_ylim()[0] == 0  # honest: values from zero...
    heights = [p.get_height() for p in pm.patches]
    assert heights == pytest.approx([1.0, 2.0])  # ...and each ± where it can be seen
    assert pm.get_ylim()[0] == 0
    assert "±" in pm.get_ylabel()


def test_the_single_eps_comparison_is_labelled_in_the_plot(figures: list[Any],
                                                          tmp_path: Path) -> None:
    plots.plot_comparison(tmp_path / "c.png", ["a"], [10.0], ([9.0], [11.0]), ([5.0], [15.0]),
                          title="t", ylabel="y", level="95%", baseline_label="one ε for all")
    (ax,) = figures[0].axes
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "not a release" in texts
    assert ax.get_ylim()[1] > 15.0  # room for the note above the bars


def test_the_tallest_privacy_level_bar_does_not_touch_the_frame(figures: list[Any],
                                                               tmp_path: Path) -> None:
    plots.plot_levels(tmp_path / "l.png", ["0.1", "1"], [700, 100], [0, 1100], title="t")
    (ax,) = figures[0].axes
    assert ax.get_ylim()[1] >= 1.1 * 1200
