"""Coverage of the released intervals on mixes of ε and values nobody tuned them for.

Shared by ``benchmarks/bench_coverage.py`` (the table in RESULTS.md) and the Monte Carlo
tests (``tests/core/test_interval_coverage.py``). A *mix* is one data set: per row an ε
level, a value on the library's encoding grid (unit scale, q/2³¹ of the range) and a
category code. The target of every interval is the table's own statistic: the plain mean
of the rows of the group, and each bin's plain frequency (what a user means).

The releases run through the core finalize directly (the batch paths the engines call,
:func:`~hdp_spark.core.mean.batch.finalize_mean_columns` and
:func:`~hdp_spark.core.histogram.batch.finalize_histograms`): one data set, ``reps`` copies
of it as ``reps`` groups of one release, so each copy gets independent noise (the group key
enters the noise context). Coverage for one fixed data set over the noise is exactly what
the interval promises (>= 1 - β for *every* data set in range), so fixing the data loses
nothing.

Mixes (n rows each):

* ``independent``: ε ∈ {0.05, 0.5, 5} in equal thirds, values Beta(2, 5) and categories
  (0.5, 0.3, 0.2) independent of ε (n = 2,000);
* ``comonotone``: the same ε; the ε = 0.05 rows at the lower bound and in bin 0, every
  other row at the upper bound and in bin 1 (n = 2,000): the worst case of a method that
  gives low-ε rows less weight;
* ``rank-0.5``: continuous ε, log-uniform on [0.05, 5], rounded down to a public grid of
  ratio 1.1; values and categories from a Gaussian copula with Spearman correlation 0.5
  with ε (n = 3,000);
* ``small-60``: the ``rank-0.5`` generator with n = 60;
* ``public-20``: 20 % public rows (ε = +inf) at the upper bound and in bin 2, the others as
  ``independent`` (n = 2,000).

Under partition selection (:func:`selected_mean_coverage`, :func:`selected_histogram_coverage`)
the noise interval's target is the κ-weighted statistic (κ_i = min(ε_i, c)), and the
released ``ci_low``/``ci_high`` are the whole range (docs/partition_selection.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from unittest import mock

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from hdp_spark.aggregators import hdp_histogram, hdp_mean
from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.histogram.auto import resolve_histograms
from hdp_spark.core.histogram.batch import finalize_histograms
from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.levels import EpsGrid, levels_numpy
from hdp_spark.core.mean import batch as mean_batch
from hdp_spark.core.mean import finalize as mean_finalize
from hdp_spark.core.mean.auto import MEAN_CANDIDATES
from hdp_spark.core.mean.batch import MeanCells, finalize_mean_columns
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.selection.mechanism import (
    Key,
    Selected,
    group_units,
    noisy_weight,
    selected_histograms,
    selected_means,
)
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.core.stats import GroupStats, LevelRow

_ZERO_BOUND = 0.0


def _zero(m: object, nums: object, den: object) -> float:
    """A reweighting bound of 0: the noise-only interval (see :func:`mean_coverage`)."""
    return _ZERO_BOUND

MIXES: tuple[str, ...] = ("independent", "comonotone", "rank-0.5", "small-60", "public-20")
MEAN_METHODS: tuple[str, ...] = (*MEAN_CANDIDATES, "auto")
"""Every central mean method (the local-DP baselines ``ldp-*`` are simulations of another
model, left out as ``auto`` leaves them out)."""
HISTOGRAM_METHODS: tuple[str, ...] = (
    "hpf-a", "hpf-cp", "hpf-ce", "hpf-wp", "hpf-we", "hpf-ct", "hpf-wt", "uniform",
    "proportional", "auto",
)
"""Every central histogram method (the k-RAPPOR baselines are local-DP simulations)."""
CATEGORIES = ("a", "b", "c")
LOWER, UPPER = 0.0, 100.0
GRID = EpsGrid(ratio=1.1, lowest=0.01, highest=100.0)
SPEARMAN = 0.5

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Mix:
    """One data set: per row its ε level, encoded value q (unit value q/2³¹) and category
    code (0..2)."""

    name: str
    levels: FloatArray
    q: IntArray
    codes: IntArray

    @property
    def n(self) -> int:
        return int(self.levels.shape[0])

    def true_mean(self) -> float:
        """The plain mean of the rows, in value units (exact, then rounded once)."""
        unit = Fraction(int(self.q.sum()), self.n * FIXED_ONE)
        return float(LOWER + (UPPER - LOWER) * unit)

    def true_frequencies(self) -> list[float]:
        """The plain frequency of each released bin (the categories, then ``other``)."""
        counts = np.bincount(self.codes, minlength=len(CATEGORIES) + 1)
        return [int(c) / self.n for c in counts]

    def mean_stats(self) -> GroupStats:
        """The level table of the mean (one encoded sum per level)."""
        return GroupStats(tuple(
            LevelRow(float(lv), int(m), (int(self.q[self.levels == lv].sum()),))
            for lv, m in zip(*np.unique(self.levels, return_counts=True), strict=True)))

    def histogram_stats(self) -> GroupStats:
        """The level table of the histogram (the counts of codes 0..3, 3 = unmatched)."""
        rows = []
        for lv, m in zip(*np.unique(self.levels, return_counts=True), strict=True):
            counts = np.bincount(self.codes[self.levels == lv], minlength=len(CATEGORIES) + 1)
            rows.append(LevelRow(float(lv), int(m), tuple(int(c) for c in counts)))
        return GroupStats(tuple(rows))


def _three_levels(n: int) -> FloatArray:
    return np.array([0.05, 0.5, 5.0])[np.arange(n) % 3]


def _encode(u: FloatArray) -> IntArray:
    return np.floor(np.clip(u, 0.0, 1.0) * float(FIXED_ONE) + 0.5).astype(np.int64)


def make_mix(name: str, seed: int = 0) -> Mix:
    """The data set ``name`` (see the module docstring), drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    if name in ("independent", "comonotone", "public-20"):
        n = 2000
        levels = _three_levels(n)
        u = rng.beta(2.0, 5.0, n)
        codes = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
        if name == "comonotone":
            low = levels == 0.05
            u = np.where(low, 0.0, 1.0)
            codes = np.where(low, 0, 1)
        elif name == "public-20":
            public = rng.random(n) < 0.2
            levels = np.where(public, math.inf, levels)
            u = np.where(public, 1.0, u)
            codes = np.where(public, 2, rng.choice(2, size=n, p=[0.6, 0.4]))
        return Mix(name, levels, _encode(u), codes.astype(np.int64))
    if name in ("rank-0.5", "small-60"):
        n = 3000 if name == "rank-0.5" else 60
        rho = 2.0 * math.sin(math.pi * SPEARMAN / 6.0)  # Pearson of the copula
        z1 = rng.standard_normal(n)
        z2 = rho * z1 + math.sqrt(1.0 - rho * rho) * rng.standard_normal(n)
        eps = np.exp(math.log(0.05) + (math.log(5.0) - math.log(0.05)) * sps.norm.cdf(z1))
        u = sps.norm.cdf(z2)
        codes = np.minimum((u * 3).astype(np.int64), 2)
        return Mix(name, levels_numpy(eps, GRID), _encode(u), codes)
    msg = f"unknown mix {name!r}"
    raise ValueError(msg)


def mean_spec(method: str, beta: float = 0.05) -> MeanSpec:
    return hdp_mean("x", eps="eps", lower=LOWER, upper=UPPER, method=method,  # type: ignore[arg-type]
                    beta=beta)


def histogram_spec(method: str, beta: float = 0.05) -> HistogramSpec:
    return hdp_histogram("c", eps="eps", categories=list(CATEGORIES), method=method,  # type: ignore[arg-type]
                         beta=beta)


@dataclass(frozen=True)
class Coverage:
    """Coverage of one method on one mix over ``releases`` intervals (for the histogram:
    releases × bins), for the released interval and the noise-only one."""

    releases: int
    honest_misses: int
    noise_misses: int
    honest_width: float
    noise_width: float
    bias_bound: float

    @property
    def honest(self) -> float:
        return 1.0 - self.honest_misses / self.releases

    @property
    def noise_only(self) -> float:
        return 1.0 - self.noise_misses / self.releases

    @property
    def width_ratio(self) -> float:
        """Released width ÷ noise-only width; NaN when there is no noise (every weighted row
        public: the noise-only interval is then only the rounding margin wide)."""
        if self.noise_width <= 1e-9 * self.honest_width:
            return math.nan
        return self.honest_width / self.noise_width


def mean_coverage(mix: Mix, method: str, reps: int, key: ReleaseKey,
                  beta: float = 0.05) -> Coverage:
    """``reps`` releases of the mean of ``mix`` (one batch, one group per release): how
    often ``ci_low``/``ci_high`` hold the plain mean, and how often the noise-only interval
    (estimate ± the noise's half-width, cut to the range) does."""
    spec = mean_spec(method, beta)
    table = mix.mean_stats()
    k = len(table.rows)
    cells = MeanCells(
        np.arange(0, k * (reps + 1), k, dtype=np.int64),
        np.tile(np.array(table.levels, dtype=np.float64), reps),
        np.tile(np.array(table.counts, dtype=np.int64), reps),
        np.tile(np.array([r.totals[0] for r in table.rows], dtype=np.int64), reps),
    )
    groups = [(i,) for i in range(reps)]
    out = finalize_mean_columns(spec, cells, 0, key, groups, "x_mean")
    # the noise-only interval: the same release (same key and groups, so the same noise)
    # with the reweighting bound taken as 0, i.e. ci_low/ci_high as they were before
    # issue 48
    with mock.patch.object(mean_batch, "reweighting_bound", _zero), \
            mock.patch.object(mean_finalize, "reweighting_bound", _zero):
        noise = finalize_mean_columns(spec, cells, 0, key, groups, "x_mean")
    if noise.estimate != out.estimate:
        msg = "the noise-only replay drew other noise"
        raise AssertionError(msg)
    lo, hi = np.array(out.ci_low), np.array(out.ci_high)
    nlo, nhi = np.array(noise.ci_low), np.array(noise.ci_high)
    target = mix.true_mean()
    return Coverage(reps, int(np.sum((target < lo) | (target > hi))),
                    int(np.sum((target < nlo) | (target > nhi))), float(np.mean(hi - lo)),
                    float(np.mean(nhi - nlo)), float(out.bias_bound[0]))


def histogram_coverage(mix: Mix, method: str, reps: int, key: ReleaseKey,
                       beta: float = 0.05) -> Coverage:
    """``reps`` releases of the histogram of ``mix``: how often each bin's
    ``ci_low``/``ci_high`` hold the bin's plain frequency, and how often the noise-only
    interval does (counted over releases × bins: the intervals are per bin)."""
    spec = histogram_spec(method, beta)
    table = mix.histogram_stats()
    tables = [table] * reps
    results = finalize_histograms(resolve_histograms(spec, tables), tables, key,
                                  [(i,) for i in range(reps)])
    target = np.array(mix.true_frequencies())
    honest = np.array([r.intervals() for r in results])  # reps x bins x 2
    noise = np.array([r.noise_intervals() for r in results])

    def misses(iv: FloatArray) -> int:
        return int(np.sum((target < iv[:, :, 0]) | (target > iv[:, :, 1])))

    return Coverage(int(honest.shape[0] * honest.shape[1]), misses(honest), misses(noise),
                    float(np.mean(honest[:, :, 1] - honest[:, :, 0])),
                    float(np.mean(noise[:, :, 1] - noise[:, :, 0])),
                    float(results[0].bias_bound))


# -- partition selection (``keys=select_keys``) ---------------------------------------------

SELECTION = SelectKeys(delta=1e-6, c=1.0, share=0.5)
"""The selection of the coverage runs: c = 1 (so the weights min(ε_i, 1) differ on every
mix), f = 0.5, δ = 1e-6."""


@dataclass(frozen=True)
class SelectionCoverage:
    """Coverage under partition selection over ``releases`` intervals (histogram: releases
    × bins), drawn unconditionally (each release's W̃ drawn whether or not it reaches T;
    ``released`` of them did):

    * ``weighted_misses``: the noise interval (``noise_ci_low``/``noise_ci_high``) misses
      the κ-weighted statistic, its stated target;
    * ``plain_noise_misses``: the noise interval misses the plain statistic (why it is not
      called the group's interval);
    * ``honest_misses``: ``ci_low``/``ci_high`` miss the plain statistic;
    * ``noise_width``: the noise interval's average width (value units; a bin: share)."""

    releases: int
    released: int
    weighted_misses: int
    plain_noise_misses: int
    honest_misses: int
    noise_width: float
    bias_bound: float

    @property
    def weighted(self) -> float:
        return 1.0 - self.weighted_misses / self.releases

    @property
    def plain_noise(self) -> float:
        return 1.0 - self.plain_noise_misses / self.releases

    @property
    def honest(self) -> float:
        return 1.0 - self.honest_misses / self.releases


def _selected(mix: Mix, table: GroupStats, reps: int, key: ReleaseKey,
              selection: SelectKeys) -> tuple[list[Key], list[Selected], list[int], int]:
    """Each release's group key and selection (W̃ drawn from the group's own stream, as
    :func:`~hdp_spark.core.selection.mechanism.select_one` draws it), the units per level
    and W."""
    units = group_units(selection, table)
    weight = sum(k * r.count for k, r in zip(units, table.rows, strict=True))
    groups: list[Key] = [(i,) for i in range(reps)]
    chosen = [Selected(selection, noisy_weight(selection, weight, key, g), 1) for g in groups]
    return groups, chosen, units, weight


def _misses(target: FloatArray, lo: FloatArray, hi: FloatArray) -> int:
    return int(np.sum((target < lo) | (target > hi)))


def selected_mean_coverage(mix: Mix, reps: int, key: ReleaseKey, beta: float = 0.05,
                           selection: SelectKeys = SELECTION) -> SelectionCoverage:
    """``reps`` releases of the mean of ``mix`` under partition selection (one group per
    release, the batch finalize the engines call)."""
    table = mix.mean_stats()
    groups, chosen, units, weight = _selected(mix, table, reps, key, selection)
    out = selected_means(mean_spec("adpm", beta), [table] * reps, 0, key, groups, "x_mean",
                         chosen)
    weighted = Fraction(sum(k * r.totals[0] for k, r in zip(units, table.rows, strict=True)),
                        weight * FIXED_ONE)
    target_w = np.array([float(LOWER + (UPPER - LOWER) * weighted)])
    plain = np.array([mix.true_mean()])
    nlo, nhi = (np.array([getattr(r, f) for r in out]) for f in ("noise_ci_low",
                                                                   "noise_ci_high"))
    lo, hi = (np.array([getattr(r, f) for r in out]) for f in ("ci_low", "ci_high"))
    return SelectionCoverage(reps, sum(c.weight >= selection.threshold for c in chosen),
                             _misses(target_w, nlo, nhi), _misses(plain, nlo, nhi),
                             _misses(plain, lo, hi), float(np.mean(nhi - nlo)),
                             out[0].bias_bound)


def selected_histogram_coverage(mix: Mix, reps: int, key: ReleaseKey, beta: float = 0.05,
                                selection: SelectKeys = SELECTION) -> SelectionCoverage:
    """``reps`` releases of the histogram of ``mix`` under partition selection (counted over
    releases × bins)."""
    table = mix.histogram_stats()
    groups, chosen, units, weight = _selected(mix, table, reps, key, selection)
    out = selected_histograms(histogram_spec("auto", beta), [table] * reps, key, groups,
                              "c_histogram", chosen)
    counts = [sum(k * r.totals[j] for k, r in zip(units, table.rows, strict=True))
              for j in range(len(CATEGORIES) + 1)]
    target_w = np.array([c / weight for c in counts])
    plain = np.array(mix.true_frequencies())
    noise = np.array([r.noise_intervals for r in out])  # reps x bins x 2
    honest = np.array([r.intervals() for r in out])
    return SelectionCoverage(
        int(noise.shape[0] * noise.shape[1]),
        sum(c.weight >= selection.threshold for c in chosen),
        _misses(target_w, noise[:, :, 0], noise[:, :, 1]),
        _misses(plain, noise[:, :, 0], noise[:, :, 1]),
        _misses(plain, honest[:, :, 0], honest[:, :, 1]),
        float(np.mean(noise[:, :, 1] - noise[:, :, 0])), out[0].bias_bound)
