"""PNG plots of the report (matplotlib, Agg backend; skipped when matplotlib is missing)."""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hdp_spark.ledger._fs import tmp_name

__all__ = ["plot_estimates", "plot_remaining"]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(tmp_name(f".{path.stem}.") + ".png")
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, path)
    return path


def _f(v: object) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan


def plot_estimates(
    path: Path,
    groups: Sequence[str],
    series: Mapping[str, tuple[Sequence[object], Sequence[object], Sequence[object]]],
    *,
    title: str,
) -> Path | None:
    """Estimates with their intervals per group (error bars), one series per estimate
    (``label -> (estimates, lows, highs)``); None without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(groups) + 2), 3.2))
    xs = list(range(len(groups)))
    width = 0.8 / max(len(series), 1)
    for j, (label, (estimates, lows, highs)) in enumerate(series.items()):
        est = [_f(v) for v in estimates]
        lo = [_gap(e, _f(v)) for e, v in zip(est, lows, strict=True)]
        hi = [_gap(_f(v), e) for e, v in zip(est, highs, strict=True)]
        offset = (j - (len(series) - 1) / 2) * width if len(series) > 1 else 0.0
        ax.errorbar([x + offset for x in xs], est, yerr=[lo, hi], fmt="o", capsize=4,
                    label=label if len(series) > 1 else None)
    ax.set_xticks(xs)
    rotate = len(groups) > 4
    ax.set_xticklabels(groups, rotation=30 if rotate else 0, ha="right" if rotate else "center")
    ax.set_title(title)
    ax.set_ylabel("estimate (noise interval)")
    ax.grid(axis="y", alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(plt, fig, path)


def _gap(a: float, b: float) -> float:
    d = a - b
    return max(d, 0.0) if not math.isnan(d) else 0.0


def plot_remaining(path: Path, edges: Sequence[float], counts: Sequence[int]) -> Path | None:
    """Histogram of the users' remaining budgets; None without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    widths = [b - a for a, b in itertools.pairwise(edges)]
    ax.bar(list(edges[:-1]), list(counts), width=widths, align="edge", color="#4c956c",
           edgecolor="white")
    ax.set_xlabel("remaining ε")
    ax.set_ylabel("users")
    ax.set_title("Remaining privacy budget per user")
    ax.grid(axis="y", alpha=0.3)
    return _save(plt, fig, path)
