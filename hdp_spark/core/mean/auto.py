"""``method="auto"``: per group, the method with the least predicted error.

Predicted error (ours; every figure a function of the public ε histogram and the spec):
the worst case, over every data set in the public range, of the mean squared error of the
release against the group's own mean (or a bin's frequency). For an affine release
Σ_i w_i·x_i + Laplace(b) with Σ w_i = 1 and target (1/n)·Σ x_i, the error is
Σ_i (w_i - 1/n)·x_i + noise, so for values in a range of length Δ

    worst MSE = (Δ·||w - 1/n||₁ / 2)² + 2·b²,

the first term attained by the data set that puts every over-weighted row at one end of the
range and every under-weighted row at the other (the correlated setting of Chaudhuri &
Courtade, *Private Estimation When Data and Privacy Demands Are Correlated*, FORC 2025, §1
and eq. (6), with the constants of an MSE instead of the paper's PAC rates), the second the
Laplace variance. Mean: Δ = upper - lower, b = Δ·η. Histogram: per bin, Δ = 1 and the HPF
scale b = 2η, so the bound is (||w - 1/n||₁/2)² + 8η², and ||w - 1/n||₁/2 is the released
``bias_bound``. A release whose output is data-independent (no weight anywhere, or the ADPM
fallback) predicts (Δ/2)². The variance term is taken at this worst case on purpose: a
sharper figure needs an assumption on how values and ε relate (under a random assignment of
values to rows, the weakly-correlated setting of the same paper, ADPM's objective
||w||²/4 + 2η² of *Mean Estimation Under Heterogeneous Privacy: Some Privacy Can Be Free*,
ISIT 2023, Algorithm 1, is the better prediction), and the data cannot tell which setting
holds without spending privacy.

The candidates' weights are computed with vectorized float solvers over a padded
(groups x levels) table (:mod:`.auto_solvers`, the same algorithms as :mod:`.weights`):
only the *choice* comes from these floats; the release then runs the chosen method's exact
solver and exact noise. One group's figures depend neither on the other groups of the
table nor on its padding, so the scalar finalize (a table of one group) and the batch
finalize choose identically. Methods that share a solver share its run (``hpm-cp`` and
``hpm-wp`` both need S1 at L = ln(1/β); ``hpm-wp`` is whichever of S1(L) and S2(c = L) has
the smaller r_WC², as in :func:`~hdp_spark.core.mean.weights.best_of_solvers`).

Privacy argument (replace-one neighbours; ε, n and the spec public):
  1. Every candidate is a central mechanism whose row i loses at most ε_i under the same
     replace-one neighbour model (the arguments of :mod:`hdp_spark.core.mean.finalize` and
     :mod:`hdp_spark.core.histogram.finalize`); the local-DP baselines are not candidates.
  2. The choice is a deterministic function of the group's ε histogram (levels and counts,
     public in this model) and of the spec's public parameters (bounds, categories, β): it
     reads no value and no category, draws no noise. It is therefore the same on neighbouring
     data sets, which differ in one row's value only.
  3. Given the choice, the release *is* the chosen method's release (same weights, same
     noise, same context), so for every neighbouring pair and every output set S,
     P[M(x) ∈ S] = P[M_c(x) ∈ S] <= e^{ε_i} P[M_c(x') ∈ S] = e^{ε_i} P[M(x') ∈ S] with c the
     common choice. Each row's guarantee is the chosen method's, and the published
     ``_method`` and predictions are functions of public facts.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import numpy.typing as npt

from hdp_spark.core.mean.auto_solvers import (
    Figures,
    LevelTable,
    agnostic,
    drop,
    drop_figures,
    figures,
    proportional,
    s1,
    s2,
    uniform,
    uniform_figures,
)

__all__ = [
    "AUTO",
    "MEAN_CANDIDATES",
    "Figures",
    "LevelTable",
    "best_of",
    "choose_mean",
    "choose_mean_cells",
    "figures",
    "mean_candidate_errors",
    "mean_figures",
    "mean_phi",
    "mean_predictions",
    "one_group_predictions",
    "r_wc2",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

AUTO = "auto"
"""The method name that chooses per group."""

MEAN_CANDIDATES: tuple[str, ...] = (
    "adpm", "hpm-a", "hpm-cp", "hpm-ce", "hpm-wp", "hpm-we", "uniform", "proportional", "drop",
)
"""The mean's candidates, in tie-break order: every central method of ``hdp_mean`` (the
local-DP baselines ``ldp-*`` are left out: their error is larger by design)."""

ADPM_C = 8.0


def r_wc2(f: Figures, log_factor: float) -> FloatArray:
    """r_WC² = min(||w - 1/n||₁², L·||w||₂²) + L²·η² (FORC paper, eq. 7) per group.

    Privacy:
        None: a function of the public ε histograms (and k, β).
    """
    out: FloatArray = np.minimum((2 * f.bias) ** 2, log_factor * f.l2) + (
        log_factor**2 * f.eta**2)
    return out


def best_of(fa: Figures, fb: Figures, log_factor: float) -> Figures:
    """The figures of S1(L) (``fa``) or S2(c = L) (``fb``), whichever has the smaller
    r_WC² (ties: S1), per group, as :func:`~hdp_spark.core.mean.weights.best_of_solvers`.

    Privacy:
        None: a function of the public ε histograms (and k, β).
    """
    return fa.where(r_wc2(fa, log_factor) <= r_wc2(fb, log_factor), fb)


def mean_phi(method: str, t: LevelTable, beta: float) -> FloatArray:
    """φ of one mean candidate per group (floats; for the tests of the predictions).

    Privacy:
        None: a function of the public ε histograms (and k, β).
    """
    log_pac = math.log(1.0 / beta)
    simple = {"adpm": lambda: s2(t, ADPM_C), "hpm-a": lambda: agnostic(t),
              "uniform": lambda: uniform(t), "proportional": lambda: proportional(t),
              "drop": lambda: drop(t, log_pac)}
    if method in simple:
        return simple[method]()
    lf = log_pac if method in ("hpm-cp", "hpm-wp") else 1.0
    phi_a = s1(t, lf)
    if method in ("hpm-cp", "hpm-ce"):
        return phi_a
    phi_b = s2(t, lf)
    pick = r_wc2(figures(t, phi_a), lf) <= r_wc2(figures(t, phi_b), lf)
    return np.where(pick[:, None], phi_a, phi_b)


def mean_figures(t: LevelTable, beta: float) -> list[Figures]:
    """The figures of every candidate, in :data:`MEAN_CANDIDATES` order.

    Privacy:
        None: a function of the public ε histograms and β.
    """
    log_pac = math.log(1.0 / beta)
    cp, ce = figures(t, s1(t, log_pac)), figures(t, s1(t, 1.0))
    wp = best_of(cp, figures(t, s2(t, log_pac)), log_pac)
    we = best_of(ce, figures(t, s2(t, 1.0)), 1.0)
    return [figures(t, s2(t, ADPM_C)), figures(t, agnostic(t)), cp, ce, wp, we,
            uniform_figures(t), figures(t, proportional(t)), drop_figures(t, log_pac)]


def mean_predictions(t: LevelTable, beta: float) -> FloatArray:
    """Predicted worst-case MSE on a unit range, (candidates x groups), in the order of
    :data:`MEAN_CANDIDATES` (multiply by (upper - lower)² for data units).

    Privacy:
        None: a function of the public ε histograms and β (module docstring).
    """
    out = np.empty((len(MEAN_CANDIDATES), t.size))
    empty = ~(t.n > 0)
    for i, f in enumerate(mean_figures(t, beta)):
        pred = f.bias**2 + 2 * f.eta**2
        if i == 0:  # adpm: the data-independent fallback of ISIT Alg. 1
            pred = np.where(f.l2 / 4 + 2 * f.eta**2 > 0.25, 0.25, pred)
        out[i] = np.where(f.trivial | empty, 0.25, pred)
    return np.where(np.isnan(out), math.inf, out)


def choose_mean(t: LevelTable, beta: float) -> IntArray:
    """Index into :data:`MEAN_CANDIDATES` of each group's choice: the least predicted
    error, ties to the first candidate.

    Privacy:
        None: a function of the public ε histograms and β (module docstring).
    """
    out: IntArray = np.argmin(mean_predictions(t, beta), axis=0).astype(np.int64)
    return out


CHUNK_CELLS = 1 << 15
"""Cells per chunk of :func:`choose_mean_cells` (the table's arrays stay in cache)."""


def choose_mean_cells(offsets: IntArray, levels: FloatArray, counts: IntArray, beta: float
                      ) -> IntArray:
    """:func:`choose_mean` of the groups of flat cells, in chunks of about
    :data:`CHUNK_CELLS` cells (a group's choice does not depend on the other groups).

    Privacy:
        None: a function of the public ε histograms and β.
    """
    size = offsets.shape[0] - 1
    out = np.empty(size, dtype=np.int64)
    start = 0
    while start < size:
        stop = int(np.searchsorted(offsets, offsets[start] + CHUNK_CELLS, side="right")) - 1
        stop = min(max(stop, start + 1), size)
        lo, hi = int(offsets[start]), int(offsets[stop])
        t = LevelTable.of(offsets[start:stop + 1] - lo, levels[lo:hi], counts[lo:hi])
        out[start:stop] = choose_mean(t, beta)
        start = stop
    return out


@functools.lru_cache(maxsize=4096)
def one_group_predictions(v: tuple[float, ...], m: tuple[int, ...], beta: float
                          ) -> tuple[float, ...]:
    """:func:`mean_predictions` of one group (cached: ``explain``, the release and the
    jobs' plans predict the same histogram more than once).

    Privacy:
        None: a function of the public ε histogram and β.
    """
    return tuple(mean_predictions(LevelTable.single(list(v), list(m)), beta)[:, 0].tolist())


def mean_candidate_errors(v: list[float], m: list[int], beta: float, span: float
                          ) -> tuple[tuple[str, float], ...]:
    """(candidate, predicted worst-case RMSE in data units) for one group, in tie-break
    order (``span`` = upper - lower).

    Privacy:
        None: a function of the public ε histogram, the bounds and β.
    """
    pred = one_group_predictions(tuple(v), tuple(m), beta)
    return tuple((c, span * math.sqrt(p)) for c, p in zip(MEAN_CANDIDATES, pred, strict=True))
