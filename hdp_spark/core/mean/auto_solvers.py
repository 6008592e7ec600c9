"""Float weight solvers of every group of a batch at once, for ``method="auto"``'s
predictions only (:mod:`hdp_spark.core.mean.auto`; the release runs the chosen method's
exact solver from :mod:`hdp_spark.core.mean.weights`).

The same algorithms as the exact solvers, on a padded (groups x levels) table whose
method-independent parts (prefix sums, breakpoints of S1, 1/ε) are computed once in
:class:`LevelTable`. Every operation is element-wise, a sequential ``cumsum`` along a row or
a max/min/argmin over a row, so a group's numbers depend neither on the other groups nor on
the table's width (padding: v = 0, m = 0 at the end of a row): a table of one group gives
the same bits as that group inside a batch.

Privacy: none of this reads a value; every function is of the public ε histograms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hdp_spark.core.mean.batch_weights import padded

__all__ = ["Figures", "LevelTable", "agnostic", "drop", "drop_figures", "figures",
           "proportional", "s1", "s2", "uniform", "uniform_figures"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_INF = math.inf


_NARROW = 64
"""Up to this many levels, sums along a row run as a loop over the columns (a few numpy
calls on whole columns) instead of ``cumsum`` along the rows (a slow inner loop per row):
the same additions in the same order, so the same bits."""


def _rowsum(x: FloatArray) -> FloatArray:
    """Σ along each row, left to right (sequential: padding zeros at the end change
    nothing; numpy's pairwise ``sum`` would group a row's terms by the table's width)."""
    if x.shape[1] > _NARROW:
        out: FloatArray = np.cumsum(x, axis=1)[:, -1]
        return out
    acc = x[:, 0].copy()
    for j in range(1, x.shape[1]):
        acc += x[:, j]
    return acc


def _cumsum(x: FloatArray) -> FloatArray:
    """Prefix sums along each row, left to right (as ``numpy.cumsum(x, axis=1)``)."""
    if x.shape[1] > _NARROW:
        out: FloatArray = np.cumsum(x, axis=1)
        return out
    acc = np.array(x, dtype=np.float64, order="F")  # columns contiguous
    for j in range(1, x.shape[1]):
        acc[:, j] += acc[:, j - 1]
    return np.ascontiguousarray(acc)


def _shift(x: FloatArray) -> FloatArray:
    """Exclusive prefix: the row's cumsum shifted right by one (0 first)."""
    out = np.zeros_like(x)
    out[:, 1:] = x[:, :-1]
    return out


@dataclass(frozen=True, slots=True)
class LevelTable:
    """G groups' ε histograms as a padded (G x L) table, with the parts every solver
    shares. ``v`` ascending within a group's cells; padding v = 0, m = 0.

    Attributes:
        v: ε level per cell.
        m: rows per cell (float; counts < 2**53 are exact).
        mask: real cells.
        n: rows per group.
        fin: finite ε.
        pos: 0 < ε < inf with rows (S1's and S2's private levels).
        inv_v: 1/ε on finite positive levels, else 0 (η = max φ/ε over them).
        big_n: S1: rows of the ε = 0 levels plus those of the positive levels up to here.
        big_p: S1: Σ m·ε over the positive levels up to here.
        seg_lo: S1: smallest s of the segment where the deficit set ends here.
        seg_hi: S1: its largest s, 1/(n·ε).
        s_lo: S1's interval [s_lo, s_hi] per group.
        s_hi: (see s_lo).
        zero_n: rows with ε = 0 per group.
        first: smallest positive finite level per group (inf: none).
        p1: S2: exclusive prefix Σ m·ε over the positive finite levels.
        p2: S2: exclusive prefix Σ (m·ε)·ε.
        public: a group with a row at ε = +inf.
        taken: rows before each cell (exclusive prefix over the cells with rows).
    """

    v: FloatArray
    m: FloatArray
    mask: BoolArray
    n: FloatArray
    fin: BoolArray
    pos: BoolArray
    inv_v: FloatArray
    big_n: FloatArray
    big_p: FloatArray
    seg_lo: FloatArray
    seg_hi: FloatArray
    s_lo: FloatArray
    s_hi: FloatArray
    zero_n: FloatArray
    first: FloatArray
    p1: FloatArray
    p2: FloatArray
    public: BoolArray
    taken: FloatArray

    @classmethod
    def of(cls, offsets: IntArray, levels: FloatArray, counts: IntArray) -> LevelTable:
        """The table of flat cells (group g: ``[offsets[g], offsets[g + 1])``).

        Privacy:
            None: a change of layout of the public ε histograms.
        """
        vp, mask = padded(offsets, levels, 0.0)
        mi, _ = padded(offsets, counts, 0)
        v = np.asarray(vp, dtype=np.float64)
        m = mi.astype(np.float64)
        n = _rowsum(m)
        fin = np.isfinite(v)
        live = m > 0
        pos = (v > 0) & fin & live
        public: BoolArray = np.asarray((~fin & live).any(axis=1))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            inv_v = np.where(fin & (v > 0), 1.0 / np.where(v > 0, v, 1.0), 0.0)
            mv = np.where(pos, m * v, 0.0)
            s1 = _cumsum(mv)
            s2 = _cumsum(np.where(pos, mv * v, 0.0))
            zero_n = _rowsum(np.where(v <= 0, m, 0.0))
            big_n = zero_n[:, None] + _cumsum(np.where(pos, m, 0.0))
            pv = np.where(pos, v, _INF)
            after = np.minimum.accumulate(pv[:, ::-1], axis=1)[:, ::-1]
            nxt = np.full_like(v, _INF)
            nxt[:, :-1] = after[:, 1:]
            nn = n[:, None]
            seg_hi = 1.0 / (nn * pv)
            seg_lo = np.where(np.isinf(nxt), 0.0, 1.0 / (nn * nxt))
            first = after[:, 0]
            finite_sum = s1[:, -1]
            s_lo = np.where(public | ~(finite_sum > 0), 0.0, 1.0 / finite_sum)
            s_hi = np.maximum(s_lo, 1.0 / (n * first))
        taken = _shift(_cumsum(m))
        return cls(v, m, mask, n, fin, pos, inv_v, big_n, s1, seg_lo, seg_hi, s_lo, s_hi,
                   zero_n, first, _shift(s1), _shift(s2), public, taken)

    @classmethod
    def single(cls, v: list[float], m: list[int]) -> LevelTable:
        """The table of one group.

        Privacy:
            None: a function of the public ε histograms (and k, β).
        """
        return cls.of(np.array([0, len(v)], dtype=np.int64), np.array(v, dtype=np.float64),
                      np.array(m, dtype=np.int64))

    @property
    def size(self) -> int:
        """Number of groups.

        Privacy:
            None: a function of the public ε histograms (and k, β).
        """
        return int(self.v.shape[0])


@dataclass(frozen=True, slots=True)
class Figures:
    """The float figures of one candidate's weights w = φ/Σmφ per group.

    Attributes:
        bias: ||w - 1/n||₁ / 2 (the worst reweighting error on a unit range).
        eta: max{w_l/ε_l : w_l > 0, ε_l finite} (the noise parameter).
        l2: ||w||₂².
        dev2: n·||w - 1/n||₂² (NaN unless asked for).
        trivial: no row may carry weight (data-independent output).
    """

    bias: FloatArray
    eta: FloatArray
    l2: FloatArray
    dev2: FloatArray
    trivial: BoolArray

    def where(self, pick: BoolArray, other: Figures) -> Figures:
        """Per group: these figures where ``pick``, else ``other``'s.

        Privacy:
            None: a function of the public ε histograms (and k, β).
        """
        return Figures(*(np.where(pick, a, b) for a, b in (
            (self.bias, other.bias), (self.eta, other.eta), (self.l2, other.l2),
            (self.dev2, other.dev2), (self.trivial, other.trivial))))


def figures(t: LevelTable, phi: FloatArray, dev2: bool = False) -> Figures:
    """:class:`Figures` of the weights φ/Σmφ (φ >= 0, finite; any value on padding).

    Privacy:
        None: a function of the public ε histograms.
    """
    m = t.m
    mphi = m * phi
    total = _rowsum(mphi)
    trivial = ~(total > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_t = 1.0 / np.where(trivial, 1.0, total)
        centre = (total / np.where(t.n > 0, t.n, 1.0))[:, None]
        bias = _rowsum(m * np.abs(phi - centre)) * inv_t / 2
        eta = (phi * t.inv_v).max(axis=1) * inv_t
        l2 = _rowsum(mphi * phi) * inv_t * inv_t
        d2 = (t.n * _rowsum(m * (phi - centre) ** 2) * inv_t * inv_t if dev2
              else np.full(t.size, math.nan))
    return Figures(bias, eta, l2, d2, trivial)


def _public_only(t: LevelTable) -> FloatArray:
    return np.where(~t.fin & t.mask, 1.0, 0.0)


def s1(t: LevelTable, log_factor: float) -> FloatArray:
    """φ of :func:`~hdp_spark.core.mean.weights.solve_l1` (solver S1).

    g(s) = 4·D(s)² + L²·s², D(s) = Σ m·(1/n - s·ε)_+ over the finite levels, is a convex
    quadratic on each segment between the breakpoints 1/(n·ε_l): there the deficit set
    (ε < 1/(n·s)) is a fixed prefix of the ascending levels, with N rows and P = Σ m·ε, so
    D = N/n - s·P, minimized at the stationary point 4NP/(n(L² + 4P²)) clipped to the
    segment and to [s_lo, s_hi]. The smallest over the segments is g's minimum; then the
    scalar solver's water-filling, Σ m·min(s*·ε, λ) = 1, φ = min(ε, λ/s*).

    Privacy:
        None: a function of the public ε histograms (and k, β).
    """
    lf2 = log_factor * log_factor
    n, nn = t.n, t.n[:, None]
    rows = np.arange(t.size)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # the segment with no positive level in deficit: s >= 1/(n·ε_first)
        lo0 = np.maximum(np.where(np.isinf(t.first), 0.0, 1.0 / (n * t.first)), t.s_lo)
        g0 = np.where(lo0 <= t.s_hi, 4 * (t.zero_n / n) ** 2 + lf2 * lo0 * lo0, _INF)
        lo = np.maximum(t.seg_lo, t.s_lo[:, None])
        hi = np.minimum(t.seg_hi, t.s_hi[:, None])
        big_n, big_p = t.big_n, t.big_p
        s = np.minimum(np.maximum(4 * big_n * big_p / (nn * (lf2 + 4 * big_p * big_p)), lo),
                       hi)
        d = np.maximum(big_n / nn - s * big_p, 0.0)
        g = np.where(t.pos & (lo <= hi), 4 * d * d + lf2 * s * s, _INF)
        at = np.argmin(g, axis=1)
        best = g[rows, at]
        s_star = np.where(g0 <= best, lo0, s[rows, at])  # ties: the first, lo0
        # water-filling over the ascending caps s*·ε (inf for ε = +inf)
        caps = np.where(t.fin, s_star[:, None] * t.v, _INF)
        mass = _shift(_cumsum(np.where(t.fin, t.m * caps, 0.0)))
        cand = (1.0 - mass) / (nn - t.taken)
        hit = (t.m > 0) & (caps >= cand)
        found: BoolArray = np.asarray(hit.any(axis=1))
        lam = np.where(found, cand[rows, np.argmax(hit, axis=1)], _INF)
        tau = (lam / s_star)[:, None]
        phi = np.where(found[:, None], np.where(t.v > 0, np.minimum(t.v, tau), 0.0),
                       np.maximum(t.v, 0.0))
    ok = t.pos.any(axis=1) & (s_star > 0)
    return np.where(ok[:, None], phi, _public_only(t))


def s2(t: LevelTable, c: float | FloatArray) -> FloatArray:
    """φ of :func:`~hdp_spark.core.mean.weights.solve_clip_level` (solver S2; ``c`` one
    constant or one per group): the first positive level l with τ = (p2 + c)/p1 <= ε_l
    caps every level at τ; with public rows and none, τ over all positive levels.

    Privacy:
        None: a function of the public ε histograms (and k, β).
    """
    c_row = np.asarray(c, dtype=np.float64)
    c_cell = c_row[:, None] if c_row.ndim else c_row
    rows = np.arange(t.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        cand = (t.p2 + c_cell) / t.p1
        hit = t.pos & (t.p1 > 0) & (cand <= t.v)
        found = hit.any(axis=1)
        tau = np.where(found, cand[rows, np.argmax(hit, axis=1)], _INF)
        total1 = t.big_p[:, -1]
        total2 = t.p2[:, -1] + np.where(t.pos[:, -1], t.m[:, -1] * t.v[:, -1] ** 2, 0.0)
        capped_public = ~found & t.public & (total1 > 0)
        tau = np.where(capped_public, (total2 + c_row) / total1, tau)
    phi = np.where((found | capped_public)[:, None], np.minimum(t.v, tau[:, None]),
                   np.maximum(t.v, 0.0))
    only_public = ~found & t.public & ~(total1 > 0)
    return np.where(only_public[:, None], _public_only(t), phi)


def agnostic(t: LevelTable) -> FloatArray:
    """φ = 1 - exp(-ε) (heuristic A; 1 at ε = +inf, 0 at ε = 0).

    ``numpy.expm1`` is an element-wise ufunc: each element's result is a function of its
    value alone (its SIMD loops handle a row's tail with masked lanes of the same code), so
    a level gets the same bits in a table of one group and in a batch.

    Privacy:
        None: a function of the public ε histograms (and k, β).
    """
    with np.errstate(over="ignore"):
        return np.where(t.v > 0, -np.expm1(-t.v), 0.0)


def uniform(t: LevelTable) -> FloatArray:
    """φ = 1 (0 everywhere when some row has ε = 0: no uniform mechanism exists).

    Privacy:
        None: a function of the public ε histograms (and k, β).
    """
    return np.where((t.zero_n > 0)[:, None], 0.0, np.ones_like(t.v))


def uniform_figures(t: LevelTable) -> Figures:
    """:class:`Figures` of :func:`uniform` in closed form: w = 1/n, so no reweighting
    error, ||w||₂² = 1/n and η = 1/(n·ε_min) (0 with no finite positive level).

    Privacy:
        None: a function of the public ε histograms (and k, β).
    """
    trivial = (t.zero_n > 0) | ~(t.n > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_n = np.where(t.n > 0, 1.0 / t.n, 0.0)
        eta = np.where(np.isinf(t.first), 0.0, inv_n / t.first)
    zero = np.zeros(t.size)
    return Figures(zero, eta, inv_n, zero, trivial)


def proportional(t: LevelTable) -> FloatArray:
    """φ = ε (with public rows: 1 on them, 0 elsewhere).

    Privacy:
        None: a function of the public ε histograms (and k, β).
    """
    return np.where(t.public[:, None], _public_only(t), np.maximum(t.v, 0.0))


def _drop_cut(t: LevelTable, log_factor: float
              ) -> tuple[IntArray, BoolArray, FloatArray, FloatArray]:
    """DROP-t's cut per group (:func:`~hdp_spark.core.mean.weights.drop_phi`): the first
    level minimizing (2(n - K)/n)² + L²·η² over the levels with rows, K the rows of
    positive ε at or after it, η = 1/(K·ε_keep); (cut, any cut, K, η) per group."""
    live = t.m > 0
    suffix_k = _cumsum(np.where(live & (t.v > 0), t.m, 0.0)[:, ::-1])[:, ::-1]
    eps_keep = np.minimum.accumulate(np.where(t.pos, t.v, _INF)[:, ::-1], axis=1)[:, ::-1]
    nn = t.n[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        eta = np.where(np.isinf(eps_keep), 0.0, 1.0 / (suffix_k * eps_keep))
        obj = np.where(live & (suffix_k > 0),
                       (2 * (nn - suffix_k) / nn) ** 2 + log_factor**2 * eta**2, _INF)
    best = np.argmin(obj, axis=1)
    rows = np.arange(t.size)
    any_cut: BoolArray = np.asarray(np.isfinite(obj[rows, best]))
    return best, any_cut, suffix_k[rows, best], eta[rows, best]


def drop(t: LevelTable, log_factor: float) -> FloatArray:
    """φ of DROP-t: 1 on the positive levels at or after the cut, 0 elsewhere.

    Privacy:
        None: a function of the public ε histograms (and k, β).
    """
    best, any_cut, _, _ = _drop_cut(t, log_factor)
    keep = (np.arange(t.v.shape[1])[None, :] >= best[:, None]) & (t.v > 0) & t.mask
    return np.where(any_cut[:, None] & keep, 1.0, 0.0)


def drop_figures(t: LevelTable, log_factor: float) -> Figures:
    """:class:`Figures` of :func:`drop` in closed form: w = 1/K on the K kept rows, so
    ||w - 1/n||₁ = 2(n - K)/n, ||w||₂² = 1/K, η as in the cut's objective.

    Privacy:
        None: a function of the public ε histograms (and k, β).
    """
    _, any_cut, k, eta = _drop_cut(t, log_factor)
    with np.errstate(divide="ignore", invalid="ignore"):
        bias = np.where(any_cut, (t.n - k) / t.n, 0.0)
        l2 = np.where(any_cut, 1.0 / k, 0.0)
    return Figures(bias, np.where(any_cut, eta, 0.0), l2, np.full(t.size, math.nan),
                   ~any_cut)
