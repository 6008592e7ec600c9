"""Driver-side weight solvers.

The weights of HPF/HPM (Tables 1 and 3 of Chaudhuri & Courtade, *Private Estimation When
Data and Privacy Demands Are Correlated*, FORC 2025) and of ADPM (Algorithm 1 of Chaudhuri &
Courtade, *Mean Estimation Under Heterogeneous Privacy: Some Privacy Can Be Free*, ISIT 2023).

Privacy-critical: the effective ε of every row of the central mean and histogram is
w_i/η, and η is computed here (:func:`normalize`) from the final weights. Argument: an
affine estimator Σ w_i x_i + Lap(Δ·η) with η = max{w_i/ε_i : w_i > 0, ε_i finite} gives
row i the loss w_i/η <= ε_i (Lemma 1 of the FORC paper; ISIT paper §III-A); this needs the
weights to depend on the public ε histogram only, ε = 0 rows to get weight 0 and ε = +inf
rows to contribute nothing to η, all of which hold below. The solvers only choose w (for
accuracy); privacy never relies on their optimality.

Every weight rule has the form ``w_i = phi(eps_i) / sum_j phi(eps_j)`` (in fact
phi = min(ε, τ) for every optimised rule; this structure is our observation, verified
against brute force), so the solvers work on the table of distinct ε levels ``v``
(ascending, may contain 0 and +inf) with their row counts ``m``: O(G log G) for G levels,
never the rows.

Conventions (ours; the papers assume ε_i > 0):
* ε = 0 levels get phi = 0 (their rows count in n but never influence the output);
* ε = +inf levels are public: they add nothing to the noise, min(inf, tau) = tau;
* when only public rows carry weight, phi = 1 on them (uniform over the public rows) -- a
  distinct outcome, never ``tau = inf`` (which also arises when ε² overflows, and would
  then mean proportional weights on finite levels: 1/n on all rows would give an ε = 0
  row positive weight with η = 0).

The noise parameter is NOT taken from the solvers: :func:`normalize` recomputes it exactly
from the final weights, so a rounding error of a solver can never under-noise.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from hdp_spark.errors import InternalError

__all__ = [
    "Weights",
    "agnostic_phi",
    "best_of_solvers",
    "best_solver_phi",
    "drop_phi",
    "normalize",
    "proportional_phi",
    "r_c2",
    "r_ct2",
    "r_wc2",
    "r_wt2",
    "solve_clip_level",
    "solve_l1",
    "turbo_weights",
    "uniform_phi",
    "uniform_weights",
]


@dataclass(frozen=True, slots=True)
class Weights:
    """Per-level weights of one group, in exact integer form.

    The per-row weight of level l is ``numerators[l] / denominator`` (they sum to 1 over
    rows), or every numerator is 0 when no level may carry weight (trivial output).

    Attributes:
        numerators: integer numerator of each level's per-row weight.
        denominator: common positive denominator (1 when trivial).
        eta: exact noise parameter max{w_l / v_l : w_l > 0, v_l finite} (0 if none).
        tau: clip level of capped rules (+inf = nobody clipped, NaN = not a capped rule).
    """

    numerators: tuple[int, ...]
    denominator: int
    eta: Fraction
    tau: float

    @property
    def w(self) -> tuple[Fraction, ...]:
        """Exact per-row weight of each level."""
        return tuple(Fraction(p, self.denominator) for p in self.numerators)

    @property
    def trivial(self) -> bool:
        """True when no row may influence the output."""
        return not any(self.numerators)


def normalize(
    v: Sequence[float], m: Sequence[int], phi: Sequence[float], tau: float
) -> Weights:
    """Exact per-row weights ``phi_l / sum_j m_j phi_j`` and the exact noise parameter.

    Integer arithmetic: every float phi is a/2^k exactly, so scaling by the largest 2^k
    gives integer numerators P_l and w_l = P_l / Σ m_j P_j with no rounding at all.
    """
    try:
        ratios = [float(p).as_integer_ratio() for p in phi]  # raises on NaN and ±inf
    except (OverflowError, ValueError):
        ratios = []
    if len(ratios) != len(phi) or (ratios and min(phi) < 0):
        msg = "weights must be finite and >= 0"
        raise InternalError(msg)
    # every b is a power of two: scale = max b = 2**(top - 1), P_l = a_l · scale / b_l
    top = max([b for _, b in ratios], default=1).bit_length()
    nums = tuple([a << (top - b.bit_length()) for a, b in ratios])
    den = sum(map(operator.mul, m, nums))
    if den == 0:
        return Weights(tuple(0 for _ in v), 1, Fraction(0), tau)
    best_num, best_den = 0, 1  # max over levels of P_l / v_l, as an exact ratio
    for i in _eta_candidates(v, phi):
        p = nums[i]
        c, d = float(v[i]).as_integer_ratio()
        if p * d * best_den > best_num * c:
            best_num, best_den = p * d, c
    return Weights(nums, den, Fraction(best_num, den * best_den), tau)


def _eta_candidates(v: Sequence[float], phi: Sequence[float]) -> list[int]:
    """Levels that may attain max{P_l / v_l : P_l > 0, v_l finite}: a superset of the argmax.

    P_l = phi_l · 2^k exactly, so the argmax is that of phi_l / v_l. The float quotient
    fl(phi_l / v_l) is one correctly rounded division, and rounding is monotone (also
    into the subnormals, to 0 and to inf): a level whose float quotient is below the largest
    one has a smaller exact ratio. Only the levels that tie the float maximum remain, and
    the caller compares those exactly. Levels with phi_l == v_l all have the exact ratio 1,
    so one of them stands for all (capped rules put every level at or below τ there).

    Raises:
        InternalError: positive weight on an ε = 0 level.
    """
    # one pass: the running maximum of the float quotients and the levels that tie it
    best = -1.0  # quotients are >= 0
    out: list[int] = []
    unit = False  # a level with the exact ratio 1 is already in
    isfinite = math.isfinite
    for i, (p, vl) in enumerate(zip(phi, v, strict=True)):
        if not (p > 0 and isfinite(vl)):
            continue
        if vl <= 0:
            msg = "positive weight on an ε = 0 level"
            raise InternalError(msg)
        r = p / vl
        if r > best:
            best, out, unit = r, [i], p == vl
        elif r == best:
            if p == vl:
                if unit:
                    continue
                unit = True
            out.append(i)
    return out


def _public_only(v: Sequence[float]) -> list[float]:
    return [1.0 if math.isinf(x) else 0.0 for x in v]


def solve_clip_level(v: Sequence[float], m: Sequence[int], c: float) -> tuple[list[float], float]:
    """Capped-proportional solver S2: argmin ||w||² + c ||w/ε||∞² over the simplex.

    Grouped form of the recursion (eq. 133, App. M) of the FORC paper, as a fixed point
    τ = (Σ min(ε, τ)² + c)/Σ min(ε, τ); ADPM (ISIT paper, Algorithm 1) uses c = 8. Returns phi per
    level and tau (inf = no clipping; NaN when only public rows carry weight).
    """
    if not c > 0:
        msg = "solve_clip_level needs c > 0"
        raise InternalError(msg)
    s1 = 0.0
    s2 = 0.0
    for vl, ml in zip(v, m, strict=True):
        if vl <= 0 or ml == 0:
            continue
        if vl == math.inf:
            break
        if s1 > 0:
            tau = (s2 + c) / s1
            if tau <= vl:
                return [min(x, tau) for x in v], tau
        s1 += ml * vl
        s2 += ml * vl * vl
    has_public = any(math.isinf(x) and ml > 0 for x, ml in zip(v, m, strict=True))
    if has_public:
        if s1 > 0:
            tau = (s2 + c) / s1
            return [min(x, tau) for x in v], tau
        return _public_only(v), math.nan
    return [max(x, 0.0) for x in v], math.inf


def solve_l1(v: Sequence[float], m: Sequence[int], log_factor: float) -> tuple[list[float], float]:
    """ℓ1 solver S1: argmin ||w - 1/n||₁² + L² ||w/ε||∞² over the simplex.

    The FORC paper (§3) solves this QP with cvxpy; this exact solver is ours.

    Exact 1-D reduction over the noise parameter s, with s_hi := max(s_lo, 1/(n ε_min⁺))
    (with ε = 0 rows, s_lo > 1/(n ε_min⁺) can happen and the interval would be empty) and
    the canonical water-filling weights w_i = min(s* ε_i, λ), returned as phi = min(ε, τ)
    with τ = λ/s*.
    """
    if not log_factor > 0:
        msg = "solve_l1 needs L > 0"
        raise InternalError(msg)
    va = np.asarray(v, dtype=np.float64)
    ma = np.asarray(m, dtype=np.float64)
    n = float(ma.sum())
    pos = (va > 0) & np.isfinite(va) & (ma > 0)
    has_inf = bool(np.any(np.isinf(va) & (ma > 0)))
    if not pos.any():
        return _public_only(v), math.nan
    finite_sum = float(np.sum(ma[pos] * va[pos]))
    s_lo = 0.0 if has_inf else 1.0 / finite_sum
    eps_min = float(va[pos].min())
    s_hi = max(s_lo, 1.0 / (n * eps_min))
    fin = np.isfinite(va)
    # D(s) = Σ_finite m (1/n - s ε)_+ by prefix sums over the finite levels sorted by ε and a
    # binary search for the deficit prefix {ε < 1/(n s)} (O(G log G), no
    # candidates × levels matrix, which took 3 GB at 10k levels).
    ef = np.maximum(va[fin], 0.0)
    mf = ma[fin]
    order_f = np.argsort(ef, kind="stable")
    ef, mf = ef[order_f], mf[order_f]
    pre_m = np.concatenate([[0.0], np.cumsum(mf)])
    pre_p = np.concatenate([[0.0], np.cumsum(mf * ef)])

    def g(s: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            threshold = np.where(s > 0, 1.0 / (n * s), np.inf)
        k = np.searchsorted(ef, threshold, side="left")
        d = np.maximum(pre_m[k] / n - s * pre_p[k], 0.0)
        return np.asarray(4.0 * d * d + log_factor**2 * s * s)

    zero_count = float(np.sum(ma[(va <= 0)]))
    pv, pm = va[pos], ma[pos]
    n_m = zero_count + np.concatenate([[0.0], np.cumsum(pm)])
    p_m = np.concatenate([[0.0], np.cumsum(pm * pv)])
    s_m = 4.0 * n_m * p_m / (n * (log_factor**2 + 4.0 * p_m**2))
    cands = np.concatenate([[s_lo, s_hi], 1.0 / (n * pv), s_m])
    cands = np.clip(cands, s_lo, s_hi)
    s_star = float(cands[int(np.argmin(g(cands)))])
    if s_star <= 0:
        return _public_only(v), math.nan
    # water-filling: find λ with Σ m_l min(s* v_l, λ) = 1 (v = inf contributes λ).
    caps = np.where(fin, s_star * va, np.inf)
    order = np.argsort(caps, kind="stable")
    remaining_mass = 1.0
    remaining_rows = float(ma.sum())
    lam = math.inf
    for idx in order:
        if ma[idx] == 0:
            continue
        cap = caps[idx]
        candidate = remaining_mass / remaining_rows
        if cap >= candidate:
            lam = candidate
            break
        remaining_mass -= ma[idx] * cap
        remaining_rows -= ma[idx]
    if math.isinf(lam):
        # Σ s* ε = 1 exactly up to rounding: nobody is capped.
        return [max(x, 0.0) for x in v], math.inf
    # a Python float, not numpy.float64: tau is released (`<alias>_tau`), and Spark's
    # createDataFrame rejects numpy scalars in a DoubleType column
    tau = float(lam / s_star)
    return [min(x, tau) if x > 0 else 0.0 for x in v], tau


def agnostic_phi(v: Sequence[float]) -> list[float]:
    """Heuristic A (HPF-A/HPM-A, FORC paper Table 1): phi(ε) = 1 - exp(-ε), as -expm1(-ε)."""
    return [1.0 if math.isinf(x) else (-math.expm1(-x) if x > 0 else 0.0) for x in v]


def proportional_phi(v: Sequence[float], m: Sequence[int]) -> list[float]:
    """Prop: phi(ε) = ε; with public rows present, all weight goes to them (the FORC
    paper's criticism of Prop, App. B.1)."""
    if any(math.isinf(x) and c > 0 for x, c in zip(v, m, strict=True)):
        return _public_only(v)
    return [max(x, 0.0) for x in v]


def uniform_phi(v: Sequence[float], m: Sequence[int]) -> list[float]:
    """UNI: everyone at ε_min. If some row has ε = 0, no uniform mechanism exists (trivial)."""
    if any(x <= 0 and c > 0 for x, c in zip(v, m, strict=True)):
        return [0.0 for _ in v]
    return [1.0 for _ in v]


def drop_phi(v: Sequence[float], m: Sequence[int], log_factor: float) -> tuple[list[float], float]:
    """DROP-t: weight 0 on the t most private rows, uniform on the rest (the FORC paper's
    straw-man of App. C.1).

    t ranges over level boundaries (so equal ε get equal weight) and is chosen to minimise
    the correlated objective r_C² with L = ``log_factor``: a function of ε only.
    """
    # Closed form per cut: keeping the K rows
    # of positive ε at or above the cut, uniformly, gives ||w - 1/n||₁ = 2 (n - K) / n and
    # η = 1 / (K ε_keep) with ε_keep the smallest kept finite ε (η = 0 if all kept rows are
    # public). One suffix scan: O(G), where re-normalizing per cut was O(G²) with Fractions.
    n = sum(m)
    live = [i for i, c in enumerate(m) if c > 0]
    suffix_k = [0] * (len(live) + 1)
    suffix_eps = [math.inf] * (len(live) + 1)
    for j in range(len(live) - 1, -1, -1):
        i = live[j]
        positive = v[i] > 0
        suffix_k[j] = suffix_k[j + 1] + (m[i] if positive else 0)
        suffix_eps[j] = v[i] if positive and math.isfinite(v[i]) else suffix_eps[j + 1]
    best: tuple[float, int] | None = None
    for cut in range(len(live)):
        k = suffix_k[cut]
        if k == 0:
            continue
        eps_keep = suffix_eps[cut]
        eta = 0.0 if math.isinf(eps_keep) else float(1 / (k * Fraction(eps_keep)))
        obj = (2 * (n - k) / n) ** 2 + log_factor**2 * eta**2
        if best is None or obj < best[0]:
            best = (obj, cut)
    if best is None:
        return [0.0 for _ in v], math.nan
    keep = set(live[best[1]:])
    phi = [1.0 if i in keep and v[i] > 0 else 0.0 for i in range(len(v))]
    return phi, v[live[best[1]]]


def _l1_dev(m: Sequence[int], w: Weights) -> float:
    n = sum(m)
    return float(sum(abs(float(wl) - 1.0 / n) * c for wl, c in zip(w.w, m, strict=True)))


def r_c2(v: Sequence[float], m: Sequence[int], w: Weights, log_factor: float) -> float:
    """Correlated objective r_C² = ||w - 1/n||₁² + L² s(w)² (FORC paper, eq. 6)."""
    del v
    return _l1_dev(m, w) ** 2 + log_factor**2 * float(w.eta) ** 2


def r_wc2(v: Sequence[float], m: Sequence[int], w: Weights, log_factor: float) -> float:
    """Weakly-correlated objective r_WC² (FORC paper, eq. 7)."""
    del v
    l2 = float(sum(float(wl) ** 2 * c for wl, c in zip(w.w, m, strict=True)))
    return min(_l1_dev(m, w) ** 2, log_factor * l2) + log_factor**2 * float(w.eta) ** 2


def best_of_solvers(v: Sequence[float], m: Sequence[int], lf: float) -> Weights:
    """The weights of solver S1 (L1) or S2 (clip level), whichever has the smaller
    worst-case risk ``r_wc2`` at log factor ``lf`` (the "WP"/"WE" methods of both the mean
    and the histogram). A function of the public ε histogram only."""
    return best_solver_phi(v, m, lf)[2]


def best_solver_phi(v: Sequence[float], m: Sequence[int], lf: float
                    ) -> tuple[list[float], float, Weights]:
    """φ, τ and the weights (``normalize`` of that φ and τ) of :func:`best_of_solvers`'
    choice. A function of the public ε histogram only."""
    phi_a, tau_a = solve_l1(v, m, lf)
    phi_b, tau_b = solve_clip_level(v, m, lf)
    wa, wb = normalize(v, m, phi_a, tau_a), normalize(v, m, phi_b, tau_b)
    if r_wc2(v, m, wa, lf) <= r_wc2(v, m, wb, lf):
        return phi_a, tau_a, wa
    return phi_b, tau_b, wb


def _l2_dev(m: Sequence[int], w: Weights) -> float:
    """n·||w - 1/n||₂² (= n·||w||₂² - 1 on the simplex), the Turbo relaxation of ||w - 1/n||₁²."""
    n = sum(m)
    return float(n * sum((float(wl) - 1.0 / n) ** 2 * c for wl, c in zip(w.w, m, strict=True)))


def r_ct2(v: Sequence[float], m: Sequence[int], w: Weights, log_factor: float) -> float:
    """Turbo correlated objective n||w - 1/n||₂² + L² s(w)² (FORC paper, App. M, HPF-CT)."""
    del v
    return _l2_dev(m, w) + log_factor**2 * float(w.eta) ** 2


def r_wt2(v: Sequence[float], m: Sequence[int], w: Weights, log_factor: float) -> float:
    """Turbo weakly-correlated objective (n||w - 1/n||₂² ∧ L||w||₂²) + L² s(w)² (FORC paper,
    App. M, HPF-WT)."""
    del v
    l2 = float(sum(float(wl) ** 2 * c for wl, c in zip(w.w, m, strict=True)))
    return min(_l2_dev(m, w), log_factor * l2) + log_factor**2 * float(w.eta) ** 2


def turbo_weights(v: Sequence[float], m: Sequence[int], lf: float, weak: bool) -> Weights:
    """The "Turbo" weights HPF-CT (``weak=False``) and HPF-WT (``weak=True``) of
    Algorithm 3 (FORC paper, App. M), both through solver S2 only.

    The paper relaxes ||w - 1/n||₁² to n||w - 1/n||₂² (Cauchy-Schwarz; App. M says "upper
    bound the ℓ1-norm by nℓ2-norm", which holds for the squares: ||x||₁² <= n||x||₂²).
    On the simplex n||w - 1/n||₂² = n||w||₂² - 1, so

    * CT, argmin n||w - 1/n||₂² + L²s² = argmin ||w||₂² + (L²/n)s²: S2 with c = L²/n;
    * WT, the objective (n||w - 1/n||₂² ∧ L||w||₂²) + L²s² splits into the branch above
      and argmin L||w||₂² + L²s² = argmin ||w||₂² + L·s²: S2 with c = L. Both branches are
      solved and the weights with the smaller WT objective are kept (the paper's rule,
      "choose the weights corresponding to the one minimizing the two objective values").

    n counts every row, ε = 0 rows included (they get weight 0 but stay in 1/n). The
    paper's recursion (eq. 133) assumes ε_i > 0 (Algorithm 3's input is ε ∈ R^n_{>0}); its
    first step r₂ = (r₁² + c)/r₁ divides by 0 when ε₁ = 0. The grouped solver
    :func:`solve_clip_level` skips ε = 0 levels (weight 0), which is the optimum with
    w_i = 0 forced, and handles ε = +inf. L > 0 is required. A function of the public ε
    histogram only.
    """
    if not lf > 0:
        msg = "turbo_weights needs L > 0"
        raise InternalError(msg)
    n = sum(m)
    phi_a, tau_a = solve_clip_level(v, m, lf * lf / n)
    wa = normalize(v, m, phi_a, tau_a)
    if not weak:
        return wa
    phi_b, tau_b = solve_clip_level(v, m, lf)
    wb = normalize(v, m, phi_b, tau_b)
    return wa if r_wt2(v, m, wa, lf) <= r_wt2(v, m, wb, lf) else wb


def uniform_weights(v: Sequence[float], m: Sequence[int]) -> Weights:
    """The homogeneous baseline: equal weights, τ = the smallest positive ε present (NaN
    when no row may carry weight). A function of the public ε histogram only."""
    phi = uniform_phi(v, m)
    positive = [x for x, c in zip(v, m, strict=True) if c > 0 and x > 0]
    tau = min(positive) if positive and any(phi) else math.nan
    return normalize(v, m, phi, tau)
