"""``method="auto"`` for the histogram: per group, the HPF method with the least predicted
error (the predictions and the privacy argument are in :mod:`hdp_spark.core.mean.auto`).

Per released bin, the worst case over every data set of the MSE against the bin's
frequency: (||w - 1/n||₁/2)² + 2·(2η)², the released ``bias_bound`` squared plus the
variance of HPF's Laplace noise of scale 2η (Algorithm 1 of Chaudhuri & Courtade, *Private
Estimation When Data and Privacy Demands Are Correlated*, FORC 2025); 1/4 for the
data-independent output 1/2. Candidates: the central methods of ``hdp_histogram``; the
local-DP k-RAPPOR baselines are left out, and ``hpf-ce``/``hpf-we`` (log factor ln k) need
k >= 2 released bins.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.mean.auto import AUTO, CHUNK_CELLS, best_of
from hdp_spark.core.mean.auto_solvers import (
    Figures,
    LevelTable,
    agnostic,
    figures,
    proportional,
    s1,
    s2,
    uniform_figures,
)
from hdp_spark.core.stats import GroupStats

__all__ = [
    "HISTOGRAM_CANDIDATES",
    "candidates",
    "histogram_candidate_errors",
    "histogram_figures",
    "histogram_predictions",
    "resolve_histogram",
    "resolve_histograms",
]

HISTOGRAM_CANDIDATES: tuple[str, ...] = (
    "hpf-a", "hpf-cp", "hpf-ce", "hpf-wp", "hpf-we", "hpf-ct", "hpf-wt", "uniform",
    "proportional",
)
"""The histogram's candidates, in tie-break order."""


def candidates(k: int) -> tuple[str, ...]:
    """The candidates for ``k`` released bins (ln k needs k >= 2).

    Privacy:
        None: a function of the public domain size.
    """
    return HISTOGRAM_CANDIDATES if k >= 2 else tuple(
        c for c in HISTOGRAM_CANDIDATES if c not in ("hpf-ce", "hpf-we"))


def histogram_figures(t: LevelTable, k: int, beta: float) -> list[Figures]:
    """The figures of every candidate, in :func:`candidates` order: S1 and S2 runs shared
    between methods; Turbo (FORC paper, App. M) is S2 at c = L²/n, for WT also c = L,
    keeping the smaller (n||w - 1/n||₂² ∧ L||w||₂²) + L²η².

    Privacy:
        None: a function of the public ε histograms, k and β.
    """
    pac = math.log(k / beta)
    with np.errstate(divide="ignore"):
        c_ct = np.where(t.n > 0, pac * pac / np.where(t.n > 0, t.n, 1.0), 1.0)
    cp = figures(t, s1(t, pac))
    wp = best_of(cp, figures(t, s2(t, pac)), pac)
    ct = figures(t, s2(t, c_ct), dev2=True)
    wt_b = figures(t, s2(t, pac), dev2=True)

    def turbo(f: Figures) -> npt.NDArray[np.float64]:
        out: npt.NDArray[np.float64] = np.minimum(f.dev2, pac * f.l2) + pac**2 * f.eta**2
        return out

    wt = ct.where(turbo(ct) <= turbo(wt_b), wt_b)
    out = [figures(t, agnostic(t)), cp]
    if k >= 2:
        ce = figures(t, s1(t, math.log(k)))
        out.append(ce)
    out.append(wp)
    if k >= 2:
        out.append(best_of(ce, figures(t, s2(t, math.log(k))), math.log(k)))
    return [*out, ct, wt, uniform_figures(t), figures(t, proportional(t))]


def histogram_predictions(t: LevelTable, k: int, beta: float) -> npt.NDArray[np.float64]:
    """Predicted worst-case per-bin MSE, (candidates x groups), in the order of
    :func:`candidates` ``(k)``.

    Privacy:
        None: a function of the public ε histograms, k and β.
    """
    names = candidates(k)
    out = np.empty((len(names), t.size))
    for i, f in enumerate(histogram_figures(t, k, beta)):
        out[i] = np.where(f.trivial | ~(t.n > 0), 0.25, f.bias**2 + 8 * f.eta**2)
    return np.where(np.isnan(out), math.inf, out)


def resolve_histogram(spec: HistogramSpec, v: Sequence[float], m: Sequence[int]
                      ) -> HistogramSpec:
    """``spec`` itself, or for ``method="auto"`` the spec of the group's chosen method.

    Privacy:
        A function of the public ε histogram (v, m) and the spec's public k and β: the
        release that follows is the chosen method's (argument in
        :mod:`hdp_spark.core.mean.auto`).
    """
    if spec.method != AUTO:
        return spec
    pred = _one_group(tuple(v), tuple(m), spec.k, spec.beta)
    return _with_method(spec, candidates(spec.k)[pred.index(min(pred))])  # first smallest


@functools.lru_cache(maxsize=4096)
def _one_group(v: tuple[float, ...], m: tuple[int, ...], k: int, beta: float
               ) -> tuple[float, ...]:
    """:func:`histogram_predictions` of one group (cached)."""
    return tuple(histogram_predictions(LevelTable.single(list(v), list(m)), k, beta)[:, 0]
                 .tolist())


def resolve_histograms(spec: HistogramSpec, tables: Sequence[GroupStats]
                       ) -> list[HistogramSpec]:
    """:func:`resolve_histogram` of every group at once (one vectorized prediction over
    the groups, in chunks): the same choices, as a group's figures do not depend on the
    other groups of the table.

    Privacy:
        A function of the public ε histograms and the spec's public k and β.
    """
    if spec.method != AUTO:
        return [spec] * len(tables)
    names = candidates(spec.k)
    sizes = np.array([len(t.rows) for t in tables], dtype=np.int64)
    offsets = np.zeros(len(tables) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    levels = np.array([x for t in tables for x in t.levels], dtype=np.float64)
    counts = np.array([c for t in tables for c in t.counts], dtype=np.int64)
    out: list[HistogramSpec] = []
    start = 0
    while start < len(tables):
        stop = int(np.searchsorted(offsets, offsets[start] + CHUNK_CELLS, side="right")) - 1
        stop = min(max(stop, start + 1), len(tables))
        lo, hi = int(offsets[start]), int(offsets[stop])
        t = LevelTable.of(offsets[start:stop + 1] - lo, levels[lo:hi], counts[lo:hi])
        pick = np.argmin(histogram_predictions(t, spec.k, spec.beta), axis=0).tolist()
        out.extend(_with_method(spec, names[i]) for i in pick)
        start = stop
    return out


@functools.lru_cache(maxsize=256)
def _with_method(spec: HistogramSpec, method: str) -> HistogramSpec:
    return dataclasses.replace(spec, method=method)  # type: ignore[arg-type]


def histogram_candidate_errors(spec: HistogramSpec, v: Sequence[float], m: Sequence[int]
                               ) -> tuple[tuple[str, float], ...]:
    """(candidate, predicted worst-case per-bin RMSE) for one group, in tie-break order.

    Privacy:
        None: a function of the public ε histogram, k and β.
    """
    pred = _one_group(tuple(v), tuple(m), spec.k, spec.beta)
    return tuple((c, math.sqrt(p)) for c, p in zip(candidates(spec.k), pred, strict=True))
