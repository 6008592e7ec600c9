"""What the report's plots show (issue 34): the interval where it can be seen, the
comparison labelled in the plot, headroom above the tallest bar. The figures are inspected
before they are saved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hdp_spark.report import plots

pytest.importorskip("matplotlib")


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    saved: list[Any] = []

    def keep(_plt: Any, fig: Any, path: Path, _digest: str) -> Path:
        saved.append(fig)
        return path

    monkeypatch.setattr(plots, "_save", keep)
    return saved  # figures without pyplot: nothing to close


def test_estimates_have_a_panel_of_plus_minus_per_group(figures: list[Any],
                                                       tmp_path: Path) -> None:
    plots.plot_estimates(tmp_path / "e.png", ["a", "b"],
                         {"x": ([100.0, 50.0], [99.0, 48.0], [101.0, 52.0])},
                         title="t", ylabel="average salary", level="95%")
    top, pm = figures[0].axes
    lo, hi = top.get_ylim()
    assert 40 < lo < 48  # the axis fits the intervals (48 to 101), far from zero...
    assert 101 < hi < 106
    heights = [p.get_height() for p in pm.patches]
    assert heights == pytest.approx([1.0, 2.0])  # ...and each ± is read from zero below
    assert pm.get_ylim()[0] == 0
    assert "±" in pm.get_ylabel()


def test_close_means_have_visible_intervals(figures: list[Any], tmp_path: Path) -> None:
    """Eight region means near 92,000 with ± 2,400: on an axis from 0 they were a flat line
    with invisible intervals; fitted, every interval spans a large part of the axis."""
    means = [93_382.0, 92_729.0, 91_628.0, 92_358.0, 93_393.0, 94_807.0, 92_166.0, 94_640.0]
    half = [2_483.0, 2_418.0, 2_291.0, 2_389.0, 2_530.0, 2_626.0, 2_279.0, 2_205.0]
    plots.plot_estimates(tmp_path / "r.png", [f"r{i}" for i in range(8)],
                         {"x": (means, [m - h for m, h in zip(means, half, strict=True)],
                                [m + h for m, h in zip(means, half, strict=True)])},
                         title="t", ylabel="average salary", level="95%")
    top = figures[0].axes[0]
    lo, hi = top.get_ylim()
    assert lo > 80_000  # zero is far out of range: not on the axis
    assert all(2 * h / (hi - lo) > 0.4 for h in half)  # each interval ≥ 40% of the axis
    assert not [line for line in top.lines if list(line.get_ydata()) == [0.0, 0.0]]


def test_zero_is_on_the_axis_only_when_the_values_reach_it(figures: list[Any],
                                                           tmp_path: Path) -> None:
    plots.plot_estimates(tmp_path / "z.png", ["a", "b"],
                         {"x": ([3.0, -2.0], [1.0, -4.0], [5.0, 0.5])},
                         title="t", ylabel="noisy count", level="95%")
    top = figures[0].axes[0]
    lo, hi = top.get_ylim()
    assert lo < -4.0 < 5.0 < hi
    zero_lines = [line for line in top.lines if list(line.get_ydata()) == [0.0, 0.0]]
    assert len(zero_lines) == 1  # drawn where it is in range


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


# -- a re-run draws nothing it drew before ---------------------------------------------------


def _means(path: Path, shift: float = 0.0) -> Path | None:
    return plots.plot_estimates(path, ["a", "b"],
                                {"x": ([100.0 + shift, 50.0], [99.0, 48.0], [101.0, 52.0])},
                                title="t", ylabel="y", level="95%")


def test_a_plot_with_the_same_inputs_is_not_drawn_again(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    png = tmp_path / "m.png"
    assert _means(png) == png
    first = png.read_bytes()
    assert first.startswith(b"\x89PNG")
    drawn: list[Path] = []
    save = plots._save

    def counting(plt: Any, fig: Any, path: Path, digest: str) -> Path:
        drawn.append(path)
        return save(plt, fig, path, digest)

    monkeypatch.setattr(plots, "_save", counting)
    assert _means(png) == png
    assert drawn == []  # same inputs, same code: the file is kept as it is
    assert png.read_bytes() == first
    _means(png, shift=0.5)  # another estimate: drawn again
    assert drawn == [png]
    assert png.read_bytes() != first
    png.write_bytes(b"\x89PNG\r\n\x1a\n")  # a truncated file holds no digest: redrawn
    _means(png, shift=0.5)
    assert drawn == [png, png]
    png.write_bytes(b"not a png")
    _means(png, shift=0.5)
    assert len(drawn) == 3
    png.unlink()  # gone: redrawn
    _means(png, shift=0.5)
    assert len(drawn) == 4
    assert png.is_file()


def test_the_digest_covers_every_input_and_the_plot_kind() -> None:
    base = plots._digest("plot_levels", ["a"], [1], [2], "t")
    assert base == plots._digest("plot_levels", ["a"], [1], [2], "t")
    assert base != plots._digest("plot_levels", ["a"], [1], [3], "t")
    assert base != plots._digest("plot_levels", ["a"], [1], [2], "u")
    assert base != plots._digest("plot_remaining", ["a"], [1], [2], "t")
    # full precision: values that print alike still differ
    assert plots._digest("k", [0.1]) != plots._digest("k", [0.1 + 1e-15])
    np = pytest.importorskip("numpy")
    long = np.arange(5000, dtype=float)  # numpy's repr elides long arrays; the digest does not
    other = long.copy()
    other[2500] += 1
    assert plots._digest("k", long) != plots._digest("k", other)
