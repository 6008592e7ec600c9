"""Batch finalize of the heterogeneous-DP mean: many groups of one spec in one call.

:func:`finalize_mean_columns` returns, for every group, the figures of the
:class:`MeanResult` that :func:`~hdp_spark.core.mean.finalize.finalize_mean` returns for it,
bit for bit, as columns (:class:`~hdp_spark.core.mean.columns.MeanColumns`; its
``results()`` gives the records; the scalar function is the reference;
``tests/core/test_mean_batch.py`` checks equality with ``==`` on every float). Inputs are
columnar (:class:`MeanCells`: flat per-cell arrays and group offsets), which the driver's
``GroupStats`` tables and an Arrow batch of aggregated rows on the executors both produce
cheaply.

What runs vectorized over groups (numpy, :mod:`.batch_weights`): the weight solver of the
closed-form and prefix-scan methods (``adpm``, ``hpm-a``, ``uniform``, ``proportional``),
the exact decomposition of φ into integer numerators, the choice of η's level, the
smallest constrained weight, ADPM's fallback test wherever floats settle it
(:func:`~hdp_spark.core.mean.batch_weights.adpm_fallback`; the others exactly), the empty
groups and the histogram bytes of the noise context, the exact discrete Laplace draws of
all noisy groups at once
(:func:`~hdp_spark.core.noise.batch_laplace.discrete_laplace_batch`), and the released
floats computed from the integers
(:func:`~hdp_spark.core.noise.batch_laplace.floats_on_grid_batch`,
:func:`~hdp_spark.core.mean.finalize.released_figures_arrays`). What stays per group
(Python integers, one short loop): the exact big-integer sums (Σ m·P, Σ P·q), η and the
statistic as unreduced integer pairs (no ``Fraction``: every use is a comparison, a
ceiling or a correctly rounded quotient, the same for any pair of one rational; the
context encodes the statistic reduced, :func:`~hdp_spark.core.noise.prf.encode_rational`),
the integer noise scale and grid point, and the per-level figures (correctly rounded
divisions of big integers). Methods with an iterative solver (``hpm-cp/ce/wp/we``,
``drop``) and the local-DP baselines go through the scalar path per group (same numbers:
it *is* the scalar path).

Privacy (noise binding): the batch path is the same mechanism as the scalar one, not a
re-implementation of it. For each group it builds the same context bytes (the shared head
of (kind, label, method, column, bounds), then the group key, the packed ε histogram, the
exact statistic as a reduced fraction and the value index), the same stream
``HMAC-SHA256(release key, domain || context)`` and the same grid and integer scale
(:func:`~hdp_spark.core.noise.exact.laplace_grid`) as
:func:`~hdp_spark.core.noise.laplace_mechanism`; the draws come from
:func:`~hdp_spark.core.noise.batch_laplace.discrete_laplace_batch`, which returns the
scalar sampler's integers on those streams (tested draw for draw), and the output is
:func:`~hdp_spark.core.noise.exact.laplace_on_grid` of them, as in the scalar mechanism.
Same key, same context, same sampler: the same bits, so the
sensitivity argument of :mod:`hdp_spark.core.mean.finalize` (loss w_l/η <= ε_l per row)
carries over unchanged, and so do the re-evaluation and differencing properties of
:mod:`hdp_spark.core.noise.prf` (noise is a function of key, group and exact statistic).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np
import numpy.typing as npt

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.keys import context_keys
from hdp_spark.core.level_table import gather_groups
from hdp_spark.core.mean.auto import AUTO, MEAN_CANDIDATES, choose_mean_cells
from hdp_spark.core.mean.batch_weights import adpm_fallback, batch_phi, vector_method
from hdp_spark.core.mean.columns import MeanColumns
from hdp_spark.core.mean.finalize import (
    _context_head,
    finalize_mean,
    released_figures,
    released_figures_arrays,
    with_method,
)
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.noise.batch_laplace import discrete_laplace_batch, floats_on_grid_batch
from hdp_spark.core.noise.exact import grid_index, laplace_grid_of
from hdp_spark.core.noise.prf import encode_bytes, encode_context_parts, encode_rational
from hdp_spark.core.reweighting import FALLBACK_BOUND, reweighting_bound
from hdp_spark.core.stats import GroupStats, LevelRow
from hdp_spark.errors import InternalError

__all__ = ["MeanCells", "finalize_mean_columns"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

_INF = float("inf")
_NAN = float("nan")


@dataclass(frozen=True, slots=True)
class MeanCells:
    """The level tables of G groups for one mean spec, as flat arrays.

    Attributes:
        offsets: int64, G + 1 entries; group g's cells are ``[offsets[g], offsets[g+1])``.
        levels: float64 ε level per cell, ascending within each group.
        counts: int64 rows per cell.
        totals: int64 exact encoded sum of the spec's value column per cell.
    """

    offsets: IntArray
    levels: FloatArray
    counts: IntArray
    totals: IntArray

    def __post_init__(self) -> None:
        cells = int(self.offsets[-1]) if self.offsets.shape[0] else -1
        if (self.offsets.shape[0] < 1 or int(self.offsets[0]) != 0
                or bool((np.diff(self.offsets) < 0).any())
                or not self.levels.shape[0] == self.counts.shape[0] == self.totals.shape[0]
                == cells):
            msg = "MeanCells needs offsets from 0 to the number of cells, one entry per cell"
            raise InternalError(msg)

    @property
    def size(self) -> int:
        """Number of groups."""
        return int(self.offsets.shape[0]) - 1

    @classmethod
    def from_stats(cls, stats: Sequence[GroupStats], slot: int) -> MeanCells:
        """The cells of ``stats`` (one table per group), the ``slot``-th encoded sum.

        Privacy:
            None: a change of layout of the pre-noise cells (never published).
        """
        offsets = np.zeros(len(stats) + 1, dtype=np.int64)
        np.cumsum([len(s.rows) for s in stats], out=offsets[1:])
        rows = [r for s in stats for r in s.rows]
        return cls(
            offsets,
            np.array([r.level for r in rows], dtype=np.float64),
            np.array([r.count for r in rows], dtype=np.int64),
            np.array([r.totals[slot] for r in rows], dtype=np.int64),
        )

    def subset(self, idx: IntArray) -> MeanCells:
        """The cells of groups ``idx`` (ascending), in that order.

        Privacy:
            None: a change of layout of the pre-noise cells (never published).
        """
        offsets, cell = gather_groups(self.offsets, idx)
        return MeanCells(offsets, self.levels[cell], self.counts[cell], self.totals[cell])

    def group_stats(self, g: int, slot: int) -> GroupStats:
        """Group g as the scalar path's table (its sum at position ``slot``).

        Privacy:
            None: a change of layout of the pre-noise cells (never published).
        """
        lo, hi = int(self.offsets[g]), int(self.offsets[g + 1])
        pad = (0,) * slot
        return GroupStats(tuple(
            LevelRow(lv, c, (*pad, q)) for lv, c, q in zip(
                self.levels[lo:hi].tolist(), self.counts[lo:hi].tolist(),
                self.totals[lo:hi].tolist(), strict=True)
        ))


def finalize_mean_columns(
    spec: MeanSpec,
    cells: MeanCells,
    value_index: int,
    key: ReleaseKey,
    groups: Sequence[tuple[object, ...]],
    label: str,
) -> MeanColumns:
    """Weights, estimate, noise and metadata of every group of a batch, column by column.

    Args:
        spec: the aggregator.
        cells: the groups' level tables (``cells.size == len(groups)``).
        value_index: the spec's position in its shared request (enters the context).
        key: the release key.
        groups: the group keys, in the order of ``cells``.
        label: the aggregator's name within the release (domain separation).

    Returns:
        The columns of ``[finalize_mean(spec, stats_g, value_index, key, groups[g], label)
        for g]``, equal bit for bit.

    Raises:
        InternalError: ``cells`` and ``groups`` disagree in size.

    Privacy:
        The same mechanism as :func:`~hdp_spark.core.mean.finalize.finalize_mean` per
        group: weights from the public ε histogram, noise from the stream of the same
        context (release key, spec, group key, ε histogram, exact statistic) through the
        same exact sampler (see the module docstring). Nothing is drawn twice or shared
        between groups.
    """
    size = cells.size
    if size != len(groups):
        msg = "finalize_mean_columns needs one group key per group of cells"
        raise InternalError(msg)
    if spec.method == AUTO:
        return _finalize_auto(spec, cells, value_index, key, groups, label)
    if not vector_method(spec):
        return MeanColumns.from_results([
            finalize_mean(spec, cells.group_stats(g, value_index), value_index, key,
                          groups[g], label) for g in range(size)])
    offsets = cells.offsets
    table = batch_phi(spec.method, offsets, cells.levels, cells.counts, spec.beta)
    mask = table.mask
    # exact numerators P = M << (E + K), flat over the real cells
    nums: list[int] = list(map(operator.lshift, table.mant[mask].tolist(),
                               table.shift[mask].tolist()))
    eps_l: list[float] = cells.levels.tolist()
    cnt_l: list[int] = cells.counts.tolist()
    tot_l: list[int] = cells.totals.tolist()
    off_l: list[int] = offsets.tolist()
    tau_l: list[float] = table.tau.tolist()
    eta_l: list[int] = table.eta_at.tolist()
    scalar_l: list[bool] = table.scalar.tolist()
    unit_l: list[bool] = table.eta_unit.tolist()
    phi_l: list[float] = table.phi[mask].tolist()
    min_at: list[int] = table.min_at.tolist()
    # ADPM's fallback test, settled from floats where it is far from the threshold; the
    # others exactly in the loop (as plan_mean)
    fallback_l: list[bool] = []
    settled_l: list[bool] = []
    if spec.method == "adpm":
        fallback_a, settled_a = adpm_fallback(table, offsets, cells.levels, cells.counts)
        fallback_l, settled_l = fallback_a.tolist(), settled_a.tolist()
    hist_v = cells.levels.astype(">f8").tobytes()
    hist_m = cells.counts.astype(">i8").tobytes()
    lower, upper = float(spec.lower), float(spec.upper)
    midpoint = (lower + upper) / 2
    method, clips, beta, adpm = spec.method, spec.clips, spec.beta, spec.method == "adpm"
    head = _context_head(label, spec.method, spec.column, spec.lower, spec.upper)
    # the context items that differ per group, encoded once each (encode_context_tail's
    # bytes: head, key, histogram, statistic, value index, ")")
    key_parts = encode_context_parts(context_keys(groups))
    index_part = encode_context_parts((value_index,))[0]
    mul = operator.mul
    out = MeanColumns()
    # per finalized group: the MeanResult columns; per level: the LevelPrivacy columns
    est, noise_sd, ci_low, ci_high = out.estimate, out.noise_scale, out.ci_low, out.ci_high
    bias_col = out.bias_bound
    n_col, tau_col, method_col, fallback = out.n, out.tau, out.method, out.fallback
    eps_c, n_c, weight_c, eff_c = out.eps, out.level_n, out.weight, out.eps_effective
    level_offsets = out.level_offsets
    contexts: list[bytes] = []  # the noise of every noisy group, drawn after the loop
    scales: list[int] = []  # their integer scales T, grid exponents and grid points
    exps: list[int] = []
    points: list[int] = []
    noisy_rows: list[int] = []
    biases: list[float] = []  # their unit-scale reweighting bounds
    bounds = (lower, upper)
    mid = _Midpoint(est, noise_sd, ci_low, ci_high, bias_col, tau_col, fallback, midpoint,
                    lower, upper)
    for g in range(size):
        lo, hi = off_l[g], off_l[g + 1]
        if scalar_l[g]:
            out.append_result(finalize_mean(spec, cells.group_stats(g, value_index),
                                            value_index, key, groups[g], label))
            continue
        m = cnt_l[lo:hi]
        n = sum(m)
        n_col.append(n)
        method_col.append(method)
        if not n:  # no rows: the midpoint, no levels (plan_mean)
            mid.append(_NAN)
            level_offsets.append(len(eps_c))
            continue
        eps_c.extend(eps_l[lo:hi])
        n_c.extend(m)
        level_offsets.append(len(eps_c))
        ps = nums[lo:hi]
        den = sum(map(mul, m, ps))
        if not den:  # no row may carry weight: the midpoint (scalar: weights.trivial)
            mid.append(_NAN)
            weight_c.extend(repeat(0.0, hi - lo))
            eff_c.extend(repeat(0.0, hi - lo))
            continue
        tau = tau_l[g]
        e_at = eta_l[g]
        # η = max_l P_l/(den·ε_l) = P·d/(den·c) with ε = c/d exactly (normalize), kept as
        # an unreduced pair: every use below is a comparison, a ceiling or a correctly
        # rounded quotient of the rational, the same for any pair (scalar: the Fraction)
        if e_at < 0:
            eta_n = eta_d = c = d = p_at = 0
        else:
            c, d = eps_l[lo + e_at].as_integer_ratio()
            p_at = ps[e_at]
            eta_n, eta_d = p_at * d, den * c
        if adpm and (fallback_l[g] if settled_l[g] else
                     sum(map(mul, m, [p * p for p in ps])) / (den * den) / 4
                     + 2 * (eta_n / eta_d if eta_n else 0.0) ** 2 > 0.25):
            # data-independent fallback (ISIT paper, Alg. 1), as plan_mean
            mid.append(tau)
            weight_c.extend(repeat(0.0, hi - lo))
            eff_c.extend(repeat(0.0, hi - lo))
            continue
        weight_c.extend([p / den for p in ps])
        if not eta_n:
            eff_c.extend([_INF if p else 0.0 for p in ps])
        elif unit_l[g]:  # w_l/η = P_l/2**K = φ_l exactly (batch_weights.PhiTable)
            eff_c.extend(phi_l[lo:hi])
        else:  # w_l/η = (P_l/den)/(P·d/(den·c)) = P_l·c/(P·d), one correctly rounded quotient
            divisor = p_at * d
            eff_c.extend([(p * c) / divisor if p else 0.0 for p in ps])
        m_at = min_at[g]
        # the statistic Σ P_l·q_l/(den·2**31) as a pair (the Fraction of the scalar path)
        s_num, s_den = sum(map(mul, ps, tot_l[lo:hi])), den * FIXED_ONE
        tau_col.append(tau)
        fallback.append(False)
        row = len(est)
        est.append(_NAN)  # placeholders of the four noisy figures, set by _released
        noise_sd.append(_NAN)
        ci_low.append(_NAN)
        ci_high.append(_NAN)
        bias_col.append(_NAN)
        # ||w - 1/n||₁/2 (hdp_spark.core.reweighting), as the scalar path
        bias_unit = reweighting_bound(m, ps, den)
        if not eta_n:  # every weighted row public: the statistic itself (no draw)
            _released(out, (s_num / s_den, 0.0, 0.0, bias_unit), bounds, clips, row)
            continue
        # Noise: the scalar path's context, stream, grid and integer scale (module
        # docstring), drawn below for all groups at once. The histogram bytes are its
        # struct: the levels (>f8), then the counts (>i8).
        contexts.append(b"".join((
            head, key_parts[g], encode_bytes(hist_v[8 * lo:8 * hi] + hist_m[8 * lo:8 * hi]),
            encode_rational(s_num, s_den), index_part, b")")))
        # the grid of the smallest sensitivity P_min/den (1 without a constrained level)
        e, t = laplace_grid_of(eta_n, eta_d, *((ps[m_at], den) if m_at >= 0 else (1, 1)))
        noisy_rows.append(row)
        biases.append(bias_unit)
        points.append(grid_index(s_num, s_den, e))  # the statistic's grid point
        exps.append(e)
        scales.append(t)
    if noisy_rows:  # the draws, then the five figures of every noisy group as arrays
        draws = discrete_laplace_batch(key, contexts, scales)
        figures = released_figures_arrays(
            lower, upper, *floats_on_grid_batch(list(map(operator.add, points, draws)),
                                                exps, scales, beta),
            np.array(biases, dtype=np.float64), clips)
        for column, values in zip((est, noise_sd, ci_low, ci_high, bias_col), figures,
                                  strict=True):
            for row, x in zip(noisy_rows, values.tolist(), strict=True):
                column[row] = x
    return out.check()


def _finalize_auto(spec: MeanSpec, cells: MeanCells, value_index: int, key: ReleaseKey,
                   groups: Sequence[tuple[object, ...]], label: str) -> MeanColumns:
    """``method="auto"``: each group's choice (the scalar path's, as both call
    :func:`~hdp_spark.core.mean.auto.choose_mean`, whose figures of a group do not depend on
    the other groups), then the batch finalize of each chosen method's subset of groups,
    reassembled in order. Privacy: see :mod:`hdp_spark.core.mean.auto`."""
    choice = choose_mean_cells(cells.offsets, cells.levels, cells.counts, spec.beta)
    present = np.unique(choice).tolist()
    if len(present) == 1:
        return finalize_mean_columns(with_method(spec, MEAN_CANDIDATES[present[0]]), cells,
                                     value_index, key, groups, label)
    parts: list[MeanColumns] = []
    where: list[tuple[int, int]] = [(0, 0)] * cells.size
    for p, c in enumerate(present):
        idx = np.flatnonzero(choice == c).tolist()
        parts.append(finalize_mean_columns(
            with_method(spec, MEAN_CANDIDATES[c]), cells.subset(np.asarray(idx, np.int64)),
            value_index, key, [groups[g] for g in idx], label))
        for row, g in enumerate(idx):
            where[g] = (p, row)
    return MeanColumns.gather(parts, where)


def _released(out: MeanColumns, noisy: tuple[float, float, float, float],
              bounds: tuple[float, float], clips: bool, row: int) -> None:
    """Set row ``row``'s estimate, noise scale, interval and bias bound from the noisy
    value, the scale and the half-width of its draw and the reweighting bound (unit
    scale), as the scalar finalize does."""
    value, scale, half_unit, bias_unit = noisy
    (out.estimate[row], out.noise_scale[row], out.ci_low[row], out.ci_high[row],
     out.bias_bound[row]) = released_figures(*bounds, value, scale, half_unit, bias_unit,
                                              clips)


@dataclass(frozen=True, slots=True)
class _Midpoint:
    """Appends the data-independent midpoint output (plan_mean's fallback) to the columns:
    the midpoint, no noise, the interval [lower, upper] and the bound (upper - lower)/2
    (w = 0, :data:`~hdp_spark.core.reweighting.FALLBACK_BOUND`)."""

    est: list[float]
    noise_sd: list[float]
    ci_low: list[float]
    ci_high: list[float]
    bias: list[float]
    tau_col: list[float]
    fallback: list[bool]
    midpoint: float
    lower: float
    upper: float

    def append(self, tau: float) -> None:
        self.est.append(self.midpoint)
        self.noise_sd.append(0.0)
        self.ci_low.append(self.lower)
        self.ci_high.append(self.upper)
        self.bias.append((self.upper - self.lower) * FALLBACK_BOUND)
        self.tau_col.append(tau)
        self.fallback.append(True)
