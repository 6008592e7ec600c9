"""User-level mean: the weight solver (exact minimiser of the paper's eq. 6, per-user ε ours)
and the design of the final step (clip intervals, widths, weights, noise scale).

Privacy-critical: part of the user-level mean (Algorithm 2 of Cummings, Feldman, McMillan &
Talwar, NeurIPS 2022, §4.2); the privacy argument of the whole pipeline is in the package
docstring of :mod:`hdp_spark.core.user_mean`.
Here: the weight solver's Λ and the exact sensitivities d_j.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.noise import encode_context
from hdp_spark.core.user_mean.spec import KAPPA_L, UserMeanSpec
from hdp_spark.errors import InternalError

# ---------------------------------------------------------------------------------------------
# Weight solver: exact minimiser of the paper's eq. (6), extended to per-user ε_i (ours)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SolverResult:
    """Output of :func:`solve_user_weights`.

    Attributes:
        t: the cap T̂ (weights u_j = min(1/s_j², T̂/ρ_j)).
        u: unnormalised per-user weight of each class.
        objective: g(T̂), the proxy variance of the normalised estimator.
    """

    t: float
    u: np.ndarray = field(repr=False)
    objective: float


def proxy_objective(
    t: float, c: np.ndarray, s: np.ndarray, wn: np.ndarray, rho: np.ndarray, kappa: float
) -> float:
    """g(T) = [Σ c u² s² + κ max(u·wn)²] / (Σ c u)² with u = min(1/s², T/ρ) (direct form)."""
    u = np.minimum(1.0 / s**2, t / rho)
    num = float(np.sum(c * u * u * s * s)) + kappa * float(np.max(u * wn)) ** 2
    return num / float(np.sum(c * u)) ** 2


def solve_user_weights(
    c: Sequence[float] | np.ndarray,
    s: Sequence[float] | np.ndarray,
    wn: Sequence[float] | np.ndarray,
    rho: Sequence[float] | np.ndarray,
    kappa: float = KAPPA_L,
) -> SolverResult:
    """Exact minimiser of g(T) over T > 0 (paper eq. 6; closed form ours), O(K log K) for K classes.

    Args:
        c: users per class (> 0).
        s: σ̂ per class (> 0).
        wn: noise width per class, W_j/ε_j (>= 0; per-user ε enters here, with ε <- 1).
        rho: cap denominator per class (> 0): W_j/ε_j (width form) or σ̂_j/ε_j (paper).
        kappa: Laplace variance factor (2 exact; 1 is the paper's).

    Knots τ_j = ρ_j/s_j² (class j is capped iff T < τ_j). On [τ_(r), τ_(r+1)] the uncapped
    set is fixed, g = (a + bT²)/(A + DT)² on each side of T× = sqrt(M0/M1), and the
    minimiser of such a piece is D·a/(b·A) clamped to it. The candidates are the knots and
    these clamped points; g is evaluated in closed form per piece and the best is returned
    (ties: the smallest T). Outside [min τ, max τ] g is constant, so T̂ lies inside.
    """
    ca, sa, wa, ra = (np.asarray(x, dtype=np.float64) for x in (c, s, wn, rho))
    if ca.size == 0 or np.any(ca <= 0) or np.any(sa <= 0) or np.any(ra <= 0):
        msg = "solve_user_weights needs classes with c, s, rho > 0"
        raise InternalError(msg)
    tau = ra / sa**2
    order = np.argsort(tau, kind="stable")
    ca, sa, wa, ra, tau = ca[order], sa[order], wa[order], ra[order], tau[order]
    knots, first = np.unique(tau, return_index=True)
    q = knots.size
    last = np.append(first[1:], tau.size) - 1  # last index of each knot group
    inv = ca / sa**2
    a_pref = np.cumsum(inv)[last]
    m0_pref = np.maximum.accumulate(wa**2 / sa**4)[last]
    b_terms = ca * sa**2 / ra**2
    d_terms = ca / ra
    m1_terms = wa**2 / ra**2
    b_suf = np.append(np.cumsum(b_terms[::-1])[::-1], 0.0)
    d_suf = np.append(np.cumsum(d_terms[::-1])[::-1], 0.0)
    m1_suf = np.append(np.maximum.accumulate(m1_terms[::-1])[::-1], 0.0)
    nxt = last + 1  # first index of the capped suffix for piece r
    big_a, big_b, big_d = a_pref, b_suf[nxt], d_suf[nxt]
    m0, m1 = m0_pref, m1_suf[nxt]

    def g_piece(r: int, t: float) -> float:
        noise = kappa * max(m0[r], t * t * m1[r])
        return float((big_a[r] + big_b[r] * t * t + noise) / (big_a[r] + big_d[r] * t) ** 2)

    best_t, best_g = float(knots[0]), g_piece(0, float(knots[0]))
    for r in range(q):
        cands = [float(knots[r])]
        if r + 1 < q:
            lo, hi = float(knots[r]), float(knots[r + 1])
            pts = [lo, hi]
            if m0[r] > 0 and m1[r] > 0:
                cross = math.sqrt(m0[r] / m1[r])
                if lo < cross < hi:
                    pts = [lo, cross, hi]
            for left, right in itertools.pairwise(pts):
                mid = (left + right) / 2
                if m0[r] >= mid * mid * m1[r]:
                    pa, pb = big_a[r] + kappa * m0[r], big_b[r]
                else:
                    pa, pb = big_a[r], big_b[r] + kappa * m1[r]
                if big_a[r] > 0 and pb > 0:
                    cands.append(min(max(big_d[r] * pa / (pb * big_a[r]), left), right))
        for t in cands:
            gv = g_piece(r, t)
            if gv < best_g or (gv == best_g and t < best_t):
                best_t, best_g = t, gv
    u = np.minimum(1.0 / sa**2, best_t / ra)
    out = np.empty_like(u)
    out[order] = u
    return SolverResult(float(best_t), out, float(best_g))



def concentration(k: int, n: int, s2: float, beta: float, tau_d: float) -> float:
    """f^k(n, s2, β): Hoeffding (within user) + sub-Gaussian (between users), union bound.

    The paper leaves the concentration function f_D^k of Algorithm 2 to an appendix; this form
    is ours. Privacy does not depend on f (it only sets the clip intervals, whose exact
    widths enter the noise), only the bias does."""
    log_term = math.log(4.0 * n / beta)
    return math.sqrt(log_term / (2.0 * k)) + math.sqrt(2.0 * tau_d * s2 * log_term)


@dataclass(frozen=True, slots=True)
class FinalDesign:
    """Everything the final step fixes before the engine's clamped sums.

    Attributes:
        classes: (k, ε) of each G_fin class, in the order of the other fields.
        users: users per class.
        bounds: per k, the integer clamp [A_k, B_k] of s_i (A_k = ⌈â_k k 2^31⌉,
            B_k = ⌊b̂_k k 2^31⌋, [â_k, b̂_k] = p_init ± (α + f^k) ∩ [0, 1]).
        widths: exact widths W_j = (B_k - A_k)/(k 2^31) per class.
        sigma: σ̂ per class (s2 clamp below applied).
        weights: exact u_j per class (the solver's floats, as rationals).
        t: the solver's T̂.
        cap: the cap form.
        z: exact Z = Σ_j c_j u_j.
        sensitivity: exact d_j = u_j W_j / Z per class (one user's largest move).
        scale: exact noise scale b = max_j d_j / ε_j.
        digest: SHA-256 of the canonical encoding of everything above (the noise context
            binds to it, so two designs never share noise).
    """

    classes: tuple[tuple[int, float], ...]
    users: tuple[int, ...]
    bounds: Mapping[int, tuple[int, int]]
    widths: tuple[Fraction, ...]
    sigma: tuple[float, ...]
    weights: tuple[Fraction, ...]
    t: float
    cap: str
    z: Fraction
    sensitivity: tuple[Fraction, ...]
    scale: Fraction
    digest: bytes = field(repr=False)


def design_final(
    fin_counts: Mapping[tuple[int, float], int],
    n: int,
    p_init: float,
    alpha: float,
    s2: float,
    spec: UserMeanSpec,
) -> FinalDesign:
    """Per-class σ̂, clip intervals, widths and weights of G_fin (driver, no data).

    σ̂_k² = p(1-p)/k + (1 - 1/k)·min(s2, p(1-p)) (clamp for the weights only, since
    σ_p² <= p(1-p) by the paper's Lemma 2.1; the unclamped s2 goes into f). For values in
    [0, 1] that are not Bernoulli, p(1-p) bounds the mean within-user variance from above,
    so σ̂ stays a valid (conservative) scale.
    """
    classes = tuple(sorted(fin_counts))
    users = tuple(fin_counts[c] for c in classes)
    pq = p_init * (1.0 - p_init)
    s2w = min(s2, pq)
    bounds: dict[int, tuple[int, int]] = {}
    for k in sorted({k for k, _ in classes}):
        f = concentration(k, n, s2, spec.beta, spec.tau_d)
        lo = max(p_init - alpha - f, 0.0)
        hi = min(p_init + alpha + f, 1.0)
        scale = k * FIXED_ONE
        a_int = math.ceil(Fraction(lo) * scale)
        b_int = max(math.floor(Fraction(hi) * scale), a_int)
        bounds[k] = (a_int, b_int)
    widths = tuple(Fraction(bounds[k][1] - bounds[k][0], k * FIXED_ONE) for k, _ in classes)
    sigma = tuple(math.sqrt(pq / k + (1.0 - 1.0 / k) * s2w) for k, _ in classes)
    eps = np.array([e for _, e in classes], dtype=np.float64)
    w_float = np.array([float(w) for w in widths], dtype=np.float64)
    s_arr = np.array(sigma, dtype=np.float64)
    wn = w_float / eps
    base = w_float if spec.cap == "width" else s_arr
    rho = np.maximum(base, 1e-300) / eps
    sol = solve_user_weights(users, s_arr, wn, rho, KAPPA_L)
    weights = tuple(Fraction(float(x)) for x in sol.u)
    z = sum((u * c for u, c in zip(weights, users, strict=True)), Fraction(0))
    sens = tuple(u * width / z for u, width in zip(weights, widths, strict=True))
    scale = max(d / Fraction(e) for d, (_, e) in zip(sens, classes, strict=True))
    digest = hashlib.sha256(encode_context(
        (spec.cap, sol.t, classes, users, tuple(sorted(bounds.items())), weights, z, scale)
    )).digest()
    return FinalDesign(classes, users, bounds, widths, sigma, weights, sol.t, spec.cap, z, sens,
                       scale, digest)

