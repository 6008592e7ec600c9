"""Independent reference implementations for the mean tests (test oracles, not library code).

Everything here is written from the specs (seed-000 §2-§5, seed-001 §2-§5, noise-and-audit
§3 with the audit review's corrections), per user and by brute force where possible, so that
the tests do not check the library against itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
from scipy import optimize

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.mean.finalize import mean_weights
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.mean.weights import Weights
from hdp_spark.core.stats import GroupStats, LevelRow

INF = math.inf
ALL_METHODS = (
    "adpm", "hpm-a", "hpm-cp", "hpm-ce", "hpm-wp", "hpm-we", "uniform", "proportional", "drop",
)
CAPPED_METHODS = ("adpm", "hpm-cp", "hpm-ce", "hpm-wp", "hpm-we")


def spec(method: str = "adpm", lower: float = 0.0, upper: float = 1.0, **kw: object) -> MeanSpec:
    """A mean spec on columns x / eps."""
    return MeanSpec("x", "eps", lower, upper, method=method, **kw)  # type: ignore[arg-type]


def histogram(eps: Sequence[float]) -> tuple[list[float], list[int]]:
    """Distinct ε values (ascending) and their counts."""
    vals = sorted(set(eps))
    return vals, [sum(1 for e in eps if e == x) for x in vals]


def level_weights(method: str, v: list[float], m: list[int], beta: float = 0.05) -> Weights:
    """The library's weights for a level table."""
    return mean_weights(spec(method, beta=beta), v, m)


def per_user(eps: Sequence[float], method: str, beta: float = 0.05) -> tuple[list[float], Weights]:
    """Per-user float weights (in the input order) and the level Weights."""
    v, m = histogram(eps)
    w = level_weights(method, v, m, beta)
    by_level = dict(zip(v, w.w, strict=True))
    return [float(by_level[e]) for e in eps], w


def stats_of(v: Sequence[float], m: Sequence[int], totals: Sequence[int]) -> GroupStats:
    """A one-value-column level table."""
    return GroupStats(
        tuple(LevelRow(float(x), int(c), (int(t),)) for x, c, t in zip(v, m, totals, strict=True))
    )


def unit_totals(m: Sequence[int], unit_values: Sequence[float]) -> list[int]:
    """Encoded totals when every row of level l holds the unit value unit_values[l]."""
    return [c * math.floor(u * FIXED_ONE + 0.5) for c, u in zip(m, unit_values, strict=True)]


# ---------------------------------------------------------------- objectives (per user)


def s_of(w: Sequence[float], eps: Sequence[float]) -> float:
    """s(w) = max{w_i/ε_i : w_i > 0, ε_i finite} (seed-000); inf if w_i > 0 at ε_i = 0."""
    out = 0.0
    for wi, e in zip(w, eps, strict=True):
        if wi > 0 and math.isfinite(e):
            out = max(out, math.inf if e == 0 else wi / e)
    return out


def l1_dev(w: Sequence[float]) -> float:
    n = len(w)
    return float(sum(abs(wi - 1.0 / n) for wi in w))


def r_c2(w: Sequence[float], eps: Sequence[float], big_l: float) -> float:
    """||w - 1/n||_1^2 + L^2 s(w)^2 (seed-000 eq. 6)."""
    return l1_dev(w) ** 2 + big_l**2 * s_of(w, eps) ** 2


def r_wc2(w: Sequence[float], eps: Sequence[float], big_l: float) -> float:
    """(||w - 1/n||_1^2 ∧ L||w||_2^2) + L^2 s(w)^2 (seed-000 eq. 7)."""
    l2 = float(sum(wi * wi for wi in w))
    return min(l1_dev(w) ** 2, big_l * l2) + big_l**2 * s_of(w, eps) ** 2


def adpm_objective(w: Sequence[float], eps: Sequence[float]) -> float:
    """Worst-case MSE of an affine mean on [-1/2, 1/2]: ||w||²/4 + 2 s(w)² (seed-001 §2.1)."""
    return float(sum(wi * wi for wi in w)) / 4 + 2 * s_of(w, eps) ** 2


def g_of_s(s: float, eps: Sequence[float], big_l: float) -> float:
    """g(s) = 4 D(s)² + L² s², D(s) = Σ (1/n - s ε_i)_+ (seed-000 §2.7; ε = inf adds 0)."""
    n = len(eps)
    d = sum(max(1.0 / n - s * e, 0.0) for e in eps if math.isfinite(e))
    return 4 * d * d + big_l**2 * s * s


# ---------------------------------------------------------------- brute-force solvers


def recursion_133(eps: Sequence[float], c: float) -> list[float]:
    """Per-user r-recursion of seed-000 eq. (133), with the review's P11 guard (leading ε = 0
    users get weight 0) and P4 (only public users left: uniform over them)."""
    order = sorted(range(len(eps)), key=lambda i: eps[i])
    r = [0.0] * len(eps)
    live = [i for i in order if eps[i] > 0]
    if not live:
        return r
    if math.isinf(eps[live[0]]):
        for i in live:
            r[i] = 1.0
    else:
        r[live[0]] = eps[live[0]]
        s1, s2 = r[live[0]], r[live[0]] ** 2
        for i in live[1:]:
            r[i] = min((s2 + c) / s1, eps[i])
            s1 += r[i]
            s2 += r[i] ** 2
    total = sum(r)
    return [x / total for x in r]


def qp_clip_level(eps: Sequence[float], c: float) -> float:
    """min ||w||² + c s² over the simplex by SLSQP (variables w and t = s); returns the value."""
    n = len(eps)
    fin = [i for i in range(n) if math.isfinite(eps[i])]
    bounds = [(0.0, 0.0) if eps[i] == 0 else (0.0, 1.0) for i in range(n)] + [(0.0, None)]
    cons = [{"type": "eq", "fun": lambda x: float(np.sum(x[:n])) - 1.0}]
    for i in fin:
        if eps[i] > 0:
            cons.append({"type": "ineq", "fun": lambda x, i=i: x[n] * eps[i] - x[i]})
    live = [i for i in range(n) if eps[i] > 0]
    best = math.inf
    rng = np.random.default_rng(7)
    for attempt in range(3):
        w0 = np.zeros(n)
        w0[live] = 1.0 / len(live) if attempt == 0 else rng.dirichlet(np.ones(len(live)))
        t0 = max([w0[i] / eps[i] for i in fin if eps[i] > 0] or [0.0]) + 0.1
        res = optimize.minimize(
            lambda x: float(np.sum(x[:n] ** 2) + c * x[n] ** 2),
            np.concatenate([w0, [t0]]),
            method="SLSQP",
            bounds=bounds,
            constraints=cons,
            options={"maxiter": 1000, "ftol": 1e-15},
        )
        w = np.clip(res.x[:n], 0.0, None)
        w = w / w.sum()
        best = min(best, float(np.sum(w**2)) + c * s_of(list(w), eps) ** 2)
    return best


def lp_min_l1(s: float, eps: Sequence[float]) -> tuple[float, list[float] | None]:
    """min ||w - 1/n||_1 over the simplex with w_i <= s ε_i (HiGHS LP): (value, w), or
    (inf, None) if infeasible."""
    n = len(eps)
    # variables: w (n), t (n); minimise Σ t, t >= |w - 1/n|
    cost = np.concatenate([np.zeros(n), np.ones(n)])
    a_ub = np.zeros((2 * n, 2 * n))
    b_ub = np.zeros(2 * n)
    for i in range(n):
        a_ub[2 * i, i], a_ub[2 * i, n + i], b_ub[2 * i] = 1.0, -1.0, 1.0 / n
        a_ub[2 * i + 1, i], a_ub[2 * i + 1, n + i], b_ub[2 * i + 1] = -1.0, -1.0, -1.0 / n
    a_eq = np.concatenate([np.ones(n), np.zeros(n)])[None, :]
    bounds = [(0.0, min(1.0, s * e) if math.isfinite(e) else 1.0) for e in eps]
    bounds += [(0.0, None)] * n
    res = optimize.linprog(cost, a_ub, b_ub, a_eq, [1.0], bounds=bounds, method="highs")
    if res.status != 0:
        return math.inf, None
    w = np.clip(res.x[:n], 0.0, None)
    return float(res.fun), [float(x) for x in w / w.sum()]


def bruteforce_min_rc2(eps: Sequence[float], big_l: float) -> tuple[float, float]:
    """min_w r_C(w)² by an exact LP for each s and a 1-D convex search over s.

    The LP value is convex in s (parametric right-hand side), so LP(s)² + L²s² is convex on
    the feasible interval [s_lo, 1/ε_min⁺] (any simplex point has s(w) <= 1/ε_min⁺).

    Returns the LP-valued minimum (up to the LP solver's ~1e-9 feasibility tolerance, so it
    can sit slightly BELOW the true optimum) and the exact r_C² of the LP's weight vector at
    the best s (a feasible point, so an upper bound on the true optimum).
    """
    pos = [e for e in eps if e > 0 and math.isfinite(e)]
    if not pos:
        return (0.0, 0.0) if any(math.isinf(e) for e in eps) else (math.inf, math.inf)
    s_lo = 0.0 if any(math.isinf(e) for e in eps) else 1.0 / sum(pos)
    s_hi = 1.0 / min(pos)

    def h(s: float) -> float:
        return lp_min_l1(s, eps)[0] ** 2 + big_l**2 * s * s

    res = optimize.minimize_scalar(h, bounds=(s_lo, s_hi), method="bounded",
                                   options={"xatol": 1e-14 * max(s_hi, 1e-300)})
    best_s = min((float(res.x), s_lo, s_hi), key=h)
    w = lp_min_l1(best_s, eps)[1]
    point = r_c2(w, eps, big_l) if w is not None else math.inf
    return h(best_s), point


def exact_statistic(w: Weights, totals: Sequence[int]) -> Fraction:
    """Σ_l w_l T_l / 2^31: the exact pre-noise statistic in unit scale."""
    return sum((wl * t for wl, t in zip(w.w, totals, strict=True)), Fraction(0)) / FIXED_ONE
