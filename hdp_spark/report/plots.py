"""PNG plots of the report (matplotlib, Agg backend; skipped when matplotlib is missing).

Rules that keep the plots honest: every interval is drawn as an error bar and the plot says
its level; counts and shares start at zero, and so does any non-negative quantity (a mean
salary axis spanning 89k–97k would make small differences look large); titles are words,
not ids.

A re-run that draws the same plot again skips it: every PNG carries a digest of what it
draws (its inputs, this module's code and matplotlib's version) in a ``tEXt`` chunk, and a
plot whose file already holds the same digest is neither drawn nor is matplotlib imported
(a re-published job's report then costs no plotting at all).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import itertools
import json
import math
import os
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hdp_spark.ledger._fs import tmp_name

__all__ = [
    "plot_comparison",
    "plot_estimates",
    "plot_levels",
    "plot_plan_widths",
    "plot_remaining",
]

_OURS, _BASE, _FREE, _FULL = "#1f6f8b", "#c8553d", "#4c956c", "#9aa5b1"


class _Figures:
    """Figures without pyplot: no figure manager, no global state to close, and
    matplotlib.pyplot (~0.5 s) is never imported; each figure draws on its own Agg canvas."""

    def __init__(self, figure_class: Any, canvas_class: Any) -> None:
        self._figure, self._canvas = figure_class, canvas_class

    def subplots(self, nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float],
                 **kwargs: Any) -> tuple[Any, Any]:
        fig = self._figure(figsize=figsize)
        self._canvas(fig)
        return fig, fig.subplots(nrows, ncols, **kwargs)

    def close(self, fig: Any) -> None:
        """Nothing to release: no pyplot manager holds the figure."""


def _pyplot() -> _Figures | None:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return _Figures(Figure, FigureCanvasAgg)


_DIGEST_KEY = "hdp_spark:inputs"
"""The PNG ``tEXt`` keyword of a plot's digest (:func:`_digest`)."""


def _canon(v: object) -> object:
    if isinstance(v, str | bool | int | float) or v is None:
        return v
    if isinstance(v, Mapping):
        return [[str(k), _canon(x)] for k, x in v.items()]
    tolist = getattr(v, "tolist", None)
    if callable(tolist):
        return _canon(tolist())
    if isinstance(v, Sequence):
        return [_canon(x) for x in v]
    return repr(v)


@functools.cache
def _code_version() -> bytes:
    """This module's source and matplotlib's version (read once per process)."""
    try:
        mpl = importlib.metadata.version("matplotlib")
    except importlib.metadata.PackageNotFoundError:
        mpl = ""
    source = Path(__file__).read_bytes() + mpl.encode()
    return hashlib.sha256(source).digest()  # design-ok: a hash of code, not of data


def _digest(kind: str, *inputs: object) -> str:
    """A digest of everything a plot draws: its kind, its inputs (full precision), this
    module's source and matplotlib's version.

    Privacy: the inputs of every plot are DP values or public counts that the report and
    the release outputs print exactly; the digest tells nothing they do not.
    """
    h = hashlib.sha256(_code_version())  # design-ok: of published DP values and public counts
    h.update(json.dumps([kind, _canon(list(inputs))], allow_nan=True).encode())
    return h.hexdigest()


def _unchanged(path: Path, digest: str) -> bool:
    """Whether the PNG at ``path`` already holds ``digest`` (read from its ``tEXt`` chunks
    before the image data; any unreadable file is not unchanged)."""
    try:
        with path.open("rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                return False
            while True:
                head = f.read(8)
                if len(head) < 8:
                    return False
                size, kind = struct.unpack(">I4s", head)
                if kind in (b"IDAT", b"IEND"):
                    return False
                data = f.read(size + 4)[:size]
                if kind == b"tEXt":
                    key, _, text = data.partition(b"\0")
                    if key == _DIGEST_KEY.encode():
                        return text == digest.encode()
    except OSError:
        return False


def _save(plt: Any, fig: Any, path: Path, digest: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(tmp_name(f".{path.stem}.") + ".png")
    fig.savefig(tmp, dpi=110, bbox_inches="tight", metadata={_DIGEST_KEY: digest},
                pil_kwargs={"compress_level": 1})  # zlib's fastest level: ~15 % larger files
    plt.close(fig)
    os.replace(tmp, path)
    return path


def _f(v: object) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan


def _gap(a: float, b: float) -> float:
    d = a - b
    return max(d, 0.0) if not math.isnan(d) else 0.0


def _xticks(ax: Any, groups: Sequence[str]) -> None:
    ax.set_xticks(list(range(len(groups))))
    rotate = len(groups) > 4 or max((len(g) for g in groups), default=0) > 14
    ax.set_xticklabels(groups, rotation=30 if rotate else 0, ha="right" if rotate else "center")


def _zero_based(ax: Any, values: Sequence[float]) -> None:
    finite = [v for v in values if math.isfinite(v)]
    if finite and max(abs(v) for v in finite) >= 10_000:
        from matplotlib.ticker import FuncFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    if finite and min(finite) >= 0:
        ax.set_ylim(bottom=0, top=max(finite) * 1.08 if max(finite) > 0 else 1)
    elif finite:  # noisy counts may go below zero: show where zero is
        ax.axhline(0.0, color="#555555", linewidth=0.8)


def _fit(ax: Any, values: Sequence[float]) -> None:
    """A y axis that fits ``values`` (estimates and interval ends) with a margin, so that
    intervals are as tall as the panel allows: zero is on the axis only when the values
    reach it (then drawn as a line), never added to a range far from it (eight means
    near 92,000 on an axis from 0 are a flat line with invisible intervals)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return
    if max(abs(v) for v in finite) >= 10_000:
        from matplotlib.ticker import FuncFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    lo, hi = min(finite), max(finite)
    span = hi - lo
    pad = 0.08 * span if span > 0 else max(abs(hi) * 0.05, 1e-9)
    ax.set_ylim(lo - pad, hi + pad)
    if lo <= 0 <= hi:
        ax.axhline(0.0, color="#555555", linewidth=0.8)


def plot_estimates(
    path: Path,
    groups: Sequence[str],
    series: Mapping[str, tuple[Sequence[object], Sequence[object], Sequence[object]]],
    *,
    title: str,
    ylabel: str,
    level: str,
    interval: str = "interval",
) -> Path | None:
    """Estimates with their intervals per group as error bars, one series per estimate
    (``label -> (estimates, lows, highs)``); the y axis fits the estimates and intervals
    (zero only when they reach it). Below it, a second zero-based panel shows each interval's
    ± (half-width) per group, so that an interval too narrow to see on the first panel is
    read on the second. ``interval`` names the interval ("interval", "error bound (noise +
    bias)"). None without matplotlib."""
    digest = _digest("plot_estimates", groups, series, title, ylabel, level, interval)
    if _unchanged(path, digest):
        return path
    plt = _pyplot()
    if plt is None:
        return None
    fig, (ax, pm) = plt.subplots(
        2, 1, sharex=True, figsize=(max(5.0, 0.9 * len(groups) + 2), 5.0),
        gridspec_kw={"height_ratios": [3, 1.6], "hspace": 0.3})
    xs = list(range(len(groups)))
    width = 0.8 / max(len(series), 1)
    seen: list[float] = []
    halves: list[float] = []
    for j, (label, (estimates, lows, highs)) in enumerate(series.items()):
        est = [_f(v) for v in estimates]
        lo_v, hi_v = [_f(v) for v in lows], [_f(v) for v in highs]
        seen += est + lo_v + hi_v
        lo = [_gap(e, v) for e, v in zip(est, lo_v, strict=True)]
        hi = [_gap(v, e) for e, v in zip(est, hi_v, strict=True)]
        half = [(a + b) / 2 for a, b in zip(lo, hi, strict=True)]
        halves += half
        offset = (j - (len(series) - 1) / 2) * width if len(series) > 1 else 0.0
        color = None if len(series) > 1 else _OURS
        ax.errorbar([x + offset for x in xs], est, yerr=[lo, hi], fmt="o", capsize=4,
                    color=color,
                    label=label if len(series) > 1 else f"estimate with its {level} {interval}")
        pm.bar([x + offset for x in xs], half, width=min(width, 0.5) * 0.9, color=color or _OURS)
    _xticks(pm, groups)
    pm.set_xlim(-0.6, len(groups) - 0.4)
    _fit(ax, seen)
    _zero_based(pm, halves)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    pm.set_ylabel(f"± ({level})")
    pm.set_title(f"± of each {level} {interval} (half its width; axis from 0)",
                 fontsize="small", loc="left")
    for a in (ax, pm):
        a.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0),
              title=f"bars: {level} {interval}" if len(series) > 1 else None)
    return _save(plt, fig, path, digest)


def plot_comparison(
    path: Path,
    groups: Sequence[str],
    estimates: Sequence[float],
    ours: tuple[Sequence[float], Sequence[float]],
    baseline: tuple[Sequence[float], Sequence[float]],
    *,
    title: str,
    ylabel: str,
    level: str,
    baseline_label: str,
    interval: str = "interval",
) -> Path | None:
    """Our interval (``interval`` names it) beside the single-ε baseline's, both around
    the released estimate (``ours`` and ``baseline`` are ``(lows, highs)``). The baseline
    is not a release: it is drawn without an estimate's dot, dashed, and labelled as a
    comparison in the plot itself. The y axis fits both intervals (zero only when they
    reach it). None without matplotlib."""
    digest = _digest("plot_comparison", groups, estimates, ours, baseline, title, ylabel, level,
                     baseline_label, interval)
    if _unchanged(path, digest):
        return path
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(max(5.0, 1.0 * len(groups) + 2), 3.8))
    xs = list(range(len(groups)))
    seen: list[float] = list(estimates)
    tops: list[float] = []
    for dx, (lows, highs), color, label, fmt in (
        (-0.15, ours, _OURS, f"this release: estimate and {level} {interval}", "o"),
        (0.15, baseline, _BASE, baseline_label, "none"),
    ):
        lo = [_gap(e, v) for e, v in zip(estimates, lows, strict=True)]
        hi = [_gap(v, e) for e, v in zip(estimates, highs, strict=True)]
        seen += list(lows) + list(highs)
        bars = ax.errorbar([x + dx for x in xs], list(estimates), yerr=[lo, hi], fmt=fmt,
                           capsize=5, color=color, label=label, elinewidth=1.6)
        if fmt == "none":
            for line in bars[2]:
                line.set_linestyle("--")
        tops = [t if not math.isfinite(_f(h)) else max(t, _f(h)) if math.isfinite(t) else _f(h)
                for t, h in zip(tops or [math.nan] * len(xs), highs, strict=True)]
    _xticks(ax, groups)
    ax.set_xlim(-0.7, len(groups) - 0.3)
    _fit(ax, seen)
    finite = [(x, t) for x, t in zip(xs, tops, strict=False) if math.isfinite(t)]
    if finite:  # say in the plot what the dashed bars are
        x0, top = finite[0]
        ax.annotate("one ε for all:\ncomparison,\nnot a release", (x0 + 0.15, top),
                    xytext=(0, 5), textcoords="offset points", fontsize="x-small",
                    color=_BASE, va="bottom", ha="center")
        low, high = ax.get_ylim()
        ax.set_ylim(low, max(high, top + 0.22 * (high - low)))
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(plt, fig, path, digest)


def plot_levels(
    path: Path, labels: Sequence[str], full: Sequence[int], free: Sequence[int], *, title: str
) -> Path | None:
    """People per ε range (zero-based stacked bars): charged their full ε, or less (privacy
    for free). None without matplotlib."""
    digest = _digest("plot_levels", labels, full, free, title)
    if _unchanged(path, digest):
        return path
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(labels) + 2), 3.2))
    xs = list(range(len(labels)))
    ax.bar(xs, list(full), color=_FULL, label="charged their full ε")
    ax.bar(xs, list(free), bottom=list(full), color=_FREE,
           label="charged less (privacy for free)")
    _xticks(ax, labels)
    tallest = max((a + b for a, b in zip(full, free, strict=True)), default=0)
    ax.set_ylim(bottom=0, top=tallest * 1.12 if tallest > 0 else 1)  # headroom above it
    ax.set_xlabel("ε allowed for this release")
    ax.set_ylabel("people")
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(plt, fig, path, digest)


def plot_remaining(path: Path, edges: Sequence[float], counts: Sequence[int]) -> Path | None:
    """Histogram of the users' remaining budgets (zero-based); None without matplotlib."""
    digest = _digest("plot_remaining", edges, counts)
    if _unchanged(path, digest):
        return path
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    widths = [b - a for a, b in itertools.pairwise(edges)]
    ax.bar(list(edges[:-1]), list(counts), width=widths, align="edge", color=_FREE,
           edgecolor="white")
    ax.set_ylim(bottom=0, top=max(max(counts, default=0) * 1.12, 1))
    ax.set_xlabel("ε left to spend (per person)")
    ax.set_ylabel("people")
    ax.set_title("Privacy budget left per person after this run")
    ax.grid(axis="y", alpha=0.3)
    return _save(plt, fig, path, digest)


def plot_plan_widths(
    path: Path,
    labels: Sequence[str],
    ours: Sequence[float],
    baseline: Sequence[float],
    *,
    title: str,
) -> Path | None:
    """Predicted interval half-widths (as a share of the output range) of a plan beside the
    single-ε baseline's, one pair of zero-based horizontal bars per (release, group).
    None without matplotlib."""
    digest = _digest("plot_plan_widths", labels, ours, baseline, title)
    if _unchanged(path, digest):
        return path
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7.5, max(2.5, 0.32 * len(labels) + 1.2)))
    ys = list(range(len(labels)))
    ax.barh([y - 0.2 for y in ys], [_f(v) for v in ours], height=0.4, color=_OURS,
            label="predicted (heterogeneous ε)")
    ax.barh([y + 0.2 for y in ys], [_f(v) for v in baseline], height=0.4, color=_BASE,
            label="single-ε baseline (every row at the smallest ε)")
    ax.set_yticks(ys)
    ax.set_yticklabels(list(labels), fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    ax.set_xlabel("interval half-width / output range (1 − β)")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    return _save(plt, fig, path, digest)
