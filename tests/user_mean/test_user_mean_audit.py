"""Empirical privacy audit of each step (noise-and-audit.md §3.2 with the audit review's
corrections, #6 and #9).

Each audit fixes two neighbouring inputs of one step (they differ in ONE user) and an output
event chosen analytically before sampling, draws ``N`` outputs per side with a FRESH release
key per draw (i.i.d.; a fixed seed would replay one draw), and runs the one-sided
Clopper-Pearson test in four directions (both orders, event and complement, α/4 each),
against that user's own ε_i. Pure ε-DP, so the rejection rule is L1 > e^ε U2.

False-failure budget: 5 soundness audits at α = 2e-5 each (1e-4 in total, Bonferroni).
The power check (a mechanism with half the noise, true loss 2ε, must be flagged) misses with
probability < 1e-10 at N = 1500 (exact power of the CP test, noise-and-audit A.3).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from hdp_spark.core import user_mean as core
from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.mean.weights import normalize, solve_clip_level
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.user_mean import FinalCell, MeanCell, VarUser, hdp_user_mean
from hdp_spark.core.user_mean import steps as um_steps

ALPHA = 2e-5
N = 1500


def _cp_lower(k: int, n: int, a: float) -> float:
    return 0.0 if k == 0 else float(stats.beta.ppf(a, k, n - k + 1))


def _cp_upper(k: int, n: int, a: float) -> float:
    return 1.0 if k == n else float(stats.beta.ppf(1 - a, k + 1, n - k))


def _violation(k1: int, k2: int, n: int, eps: float, alpha: float) -> tuple[bool, float]:
    """Four-direction CP event test; returns (violation found, best lower bound on ε)."""
    best = -math.inf
    for a, b in ((k1, k2), (k2, k1), (n - k1, n - k2), (n - k2, n - k1)):
        lo, up = _cp_lower(a, n, alpha / 8), _cp_upper(b, n, alpha / 8)
        if lo > 0:
            best = max(best, math.log(lo / up))
    return best > eps, best


def _audit(mech: Callable[[object], bool], d1: object, d2: object) -> tuple[int, int]:
    k1 = sum(mech(d1) for _ in range(N))
    k2 = sum(mech(d2) for _ in range(N))
    return k1, k2


def _final_setup(eps: dict[int, float]) -> tuple[core.FinalDesign, list[FinalCell]]:
    counts = {(k, e): 5 + k % 4 for k, e in eps.items()}
    spec = hdp_user_mean("x", user="u", eps="e", lower=0, upper=1)
    design = core.design_final(counts, 200, 0.45, 0.08, 0.02, spec)
    rng = np.random.default_rng(0)
    cells = []
    for (k, e), users in zip(design.classes, design.users, strict=True):
        a, b = design.bounds[k]
        cells.append(FinalCell(k, e, users, int(rng.integers(a, b + 1)) * users))
    return design, cells


def _statistic(design: core.FinalDesign, cells: list[FinalCell]) -> Fraction:
    z = sum((u * c for u, c in zip(design.weights, design.users, strict=True)), Fraction(0))
    return sum((u * Fraction(c.total, c.k * FIXED_ONE)
                for u, c in zip(design.weights, cells, strict=True)), Fraction(0)) / z


def _neighbours(design: core.FinalDesign, cells: list[FinalCell], index: int
                ) -> tuple[list[FinalCell], list[FinalCell]]:
    """One user of class ``index`` at the lower clamp bound vs at the upper one."""
    k = cells[index].k
    a, b = design.bounds[k]
    c = cells[index]
    rest = (c.users - 1) * ((a + b) // 2)
    low, high = list(cells), list(cells)
    low[index] = FinalCell(k, c.eps, c.users, rest + a)
    high[index] = FinalCell(k, c.eps, c.users, rest + b)
    return low, high


def _final_mech(design: core.FinalDesign, threshold: Fraction) -> Callable[[object], bool]:
    def mech(cells: object) -> bool:
        out = core.final_step(design, cells, 0.05, ReleaseKey.fresh(), ("audit",))  # type: ignore[arg-type]
        return Fraction(out.value) <= threshold

    return mech


def test_final_step_equal_eps() -> None:
    design, cells = _final_setup({1: 1.0, 3: 1.0, 9: 1.0, 27: 1.0, 81: 1.0})
    probe = core.final_step(design, cells, 0.05, ReleaseKey.fresh(), ("audit",))
    index = max(range(len(cells)), key=lambda i: probe.classes[i].eps_effective)
    low, high = _neighbours(design, cells, index)
    mech = _final_mech(design, _statistic(design, low))
    k1, k2 = _audit(mech, low, high)
    flagged, bound = _violation(k1, k2, N, probe.classes[index].eps_effective, ALPHA)
    assert not flagged, bound


@pytest.mark.parametrize("which", ["low", "high"])
def test_final_step_each_user_gets_its_own_eps(which: str) -> None:
    """§6.4-E1: audit a user of the ε = 0.5 class and one of the ε = 2 class, each against
    its own ε_i (a bug that gave everyone the same loss would breach the ε = 0.5 user)."""
    design, cells = _final_setup({1: 2.0, 3: 0.5, 9: 2.0, 27: 0.5, 81: 2.0})
    probe = core.final_step(design, cells, 0.05, ReleaseKey.fresh(), ("audit",))
    target_eps = 0.5 if which == "low" else 2.0
    index = max((i for i in range(len(cells)) if cells[i].eps == target_eps),
                key=lambda i: probe.classes[i].eps_effective)
    low, high = _neighbours(design, cells, index)
    k1, k2 = _audit(_final_mech(design, _statistic(design, low)), low, high)
    flagged, bound = _violation(k1, k2, N, target_eps, ALPHA)
    assert not flagged, bound


def test_audit_flags_a_mechanism_with_half_the_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Power check of the harness: halving the final noise (true loss 2ε) is detected."""
    design, cells = _final_setup({1: 1.0, 3: 1.0, 9: 1.0, 27: 1.0, 81: 1.0})
    probe = core.final_step(design, cells, 0.05, ReleaseKey.fresh(), ("audit",))
    index = max(range(len(cells)), key=lambda i: probe.classes[i].eps_effective)
    low, high = _neighbours(design, cells, index)
    real = um_steps.laplace_mechanism
    monkeypatch.setattr(um_steps, "laplace_mechanism",
                        lambda v, s, d, rng: real(v, s / 2, d, rng))
    k1, k2 = _audit(_final_mech(design, _statistic(design, low)), low, high)
    flagged, bound = _violation(k1, k2, N, probe.classes[index].eps_effective, ALPHA)
    assert flagged, bound


def test_initial_step_heterogeneous_eps() -> None:
    """G_mean with two ε levels (ADPM weights): a user of the tighter level, p̂ 0 vs 1."""
    base = [MeanCell(1, 0.3, 30, 10 * FIXED_ONE), MeanCell(2, 0.3, 10, 8 * FIXED_ONE),
            MeanCell(1, 1.5, 40, 25 * FIXED_ONE)]
    hi_cell = MeanCell(1, 1.5, 40, 26 * FIXED_ONE)
    d1, d2 = base, [base[0], base[1], hi_cell]
    probe = core.initial_step(d1, 0.05, ReleaseKey.fresh(), ("a",))
    eff = next(c.eps_effective for c in probe.classes if c.eps == 1.5)
    eps_levels = [0.3, 1.5]
    phi, tau = solve_clip_level(eps_levels, [40, 40], 8.0)
    weights = normalize(eps_levels, [40, 40], phi, tau)
    stat = (weights.w[0] * Fraction(10 * 2 + 8, 2) + weights.w[1] * 25)  # Σ w p̂ of d1

    def mech(cells: object) -> bool:  # p_init is clipped: post-processing, same event test
        out = core.initial_step(cells, 0.05, ReleaseKey.fresh(), ("a",))  # type: ignore[arg-type]
        return out.p_init <= float(stat)

    k1, k2 = _audit(mech, d1, d2)
    flagged, bound = _violation(k1, k2, N, eff, ALPHA)
    assert not flagged, bound


def test_variance_step_exponential_mechanism() -> None:
    """G_var: one user's mean moves from its pair partner's value to far away, which changes
    cnt_t for many t; event {t <= t0} fixed from the exact EM probabilities."""
    eps = 1.0
    means = [0.50, 0.52, 0.30, 0.31, 0.70, 0.74, 0.10, 0.12]
    k = 100

    def users(ms: list[float]) -> list[VarUser]:
        return [VarUser(k, eps, round(m * k) * FIXED_ONE // 1, (i, str(i)))
                for i, m in enumerate(ms)]

    d1 = users(means)
    d2 = users([0.98, *means[1:]])
    top = math.ceil(math.log2(k)) + 8

    def probs(us: list[VarUser]) -> np.ndarray:
        ms = [Fraction(u.total, u.k * FIXED_ONE) for u in us]
        diffs = [(ms[2 * j] - ms[2 * j + 1]) ** 2 for j in range(len(ms) // 2)]
        sc = np.array([-abs(2 * sum(d <= Fraction(1, 2**t) for d in diffs) - len(diffs))
                       for t in range(top + 1)], dtype=float)
        p = np.exp(eps * sc / 4)
        return p / p.sum()

    p1, p2 = np.cumsum(probs(d1)), np.cumsum(probs(d2))
    t0 = int(np.argmax(np.abs(np.log(p1[:-1] / p2[:-1]))))
    assert abs(math.log(p1[t0] / p2[t0])) <= eps + 1e-12  # exact probabilities obey ε

    def mech(us: object) -> bool:
        out = core.variance_step(us, k, ReleaseKey.fresh(), ("v",))  # type: ignore[arg-type]
        t = round(math.log2(core.KAPPA_V / (2 * core.CHI2_MEDIAN * out.s2)))
        return t <= t0

    k1, k2 = _audit(mech, d1, d2)
    flagged, bound = _violation(k1, k2, N, eps, ALPHA)
    assert not flagged, bound
