"""Empirical privacy audit of each step (noise-and-audit.md §3.2 with the audit review's
corrections, #6 and #9).

Each audit fixes two neighbouring inputs of one step (they differ in ONE user) and an output
event chosen analytically before sampling, draws ``N`` outputs per side with its own release
key per draw (i.i.d.; one key would replay one draw), and runs the one-sided Clopper-Pearson
test in four directions (both orders, event and complement, α/4 each; ``audit_stats``),
against that user's own ε_i. Pure ε-DP, so the rejection rule is L1 > e^ε U2.

The keys are seeded, one per (test, side, draw): the counts are the same on every run. With
fresh keys each soundness audit would fail a correct mechanism with probability <= α = 1e-6.
The power check (a mechanism with half the noise, true loss 2ε, must be flagged) would miss
with probability ~6e-14 at N = 2000 and ε = 1 (event probabilities 1/2 and e^-2/2, each moved
1e-3 against the test; exact power of the CP test, ``audit_stats.cp_power``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from audit_stats import assert_private, audit_bound, key

from hdp_spark.core import user_mean as core
from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.mean.weights import normalize, solve_clip_level
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.user_mean import FinalCell, MeanCell, VarUser, hdp_user_mean
from hdp_spark.core.user_mean import steps as um_steps

pytestmark = pytest.mark.statistical

N = 2000
PROBE = ReleaseKey.from_unsafe_seed("um-audit-probe")  # the probes read public figures only

Mech = Callable[[object, ReleaseKey], bool]


def _audit(mech: Mech, d1: object, d2: object, tag: str) -> tuple[int, int]:
    """Event counts over N draws per side, each with its own seeded key."""
    k1 = sum(mech(d1, key(f"um-{tag}-D-{i}")) for i in range(N))
    k2 = sum(mech(d2, key(f"um-{tag}-D'-{i}")) for i in range(N))
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


def _final_mech(design: core.FinalDesign, threshold: Fraction) -> Mech:
    def mech(cells: object, key: ReleaseKey) -> bool:
        out = core.final_step(design, cells, 0.05, key, ("audit",))  # type: ignore[arg-type]
        return Fraction(out.value) <= threshold

    return mech


def test_final_step_equal_eps() -> None:
    design, cells = _final_setup({1: 1.0, 3: 1.0, 9: 1.0, 27: 1.0, 81: 1.0})
    probe = core.final_step(design, cells, 0.05, PROBE, ("audit",))
    index = max(range(len(cells)), key=lambda i: probe.classes[i].eps_effective)
    low, high = _neighbours(design, cells, index)
    mech = _final_mech(design, _statistic(design, low))
    k1, k2 = _audit(mech, low, high, "final-equal")
    assert_private(audit_bound(k1, k2, N), probe.classes[index].eps_effective)


@pytest.mark.parametrize("which", ["low", "high"])
def test_final_step_each_user_gets_its_own_eps(which: str) -> None:
    """§6.4-E1: audit a user of the ε = 0.5 class and one of the ε = 2 class, each against
    its own ε_i (a bug that gave everyone the same loss would breach the ε = 0.5 user)."""
    design, cells = _final_setup({1: 2.0, 3: 0.5, 9: 2.0, 27: 0.5, 81: 2.0})
    probe = core.final_step(design, cells, 0.05, PROBE, ("audit",))
    target_eps = 0.5 if which == "low" else 2.0
    index = max((i for i in range(len(cells)) if cells[i].eps == target_eps),
                key=lambda i: probe.classes[i].eps_effective)
    low, high = _neighbours(design, cells, index)
    k1, k2 = _audit(_final_mech(design, _statistic(design, low)), low, high, f"own-{which}")
    assert_private(audit_bound(k1, k2, N), target_eps)


def test_audit_flags_a_mechanism_with_half_the_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Power check of the harness: halving the final noise (true loss 2ε) is detected."""
    design, cells = _final_setup({1: 1.0, 3: 1.0, 9: 1.0, 27: 1.0, 81: 1.0})
    probe = core.final_step(design, cells, 0.05, PROBE, ("audit",))
    index = max(range(len(cells)), key=lambda i: probe.classes[i].eps_effective)
    low, high = _neighbours(design, cells, index)
    real = um_steps.laplace_mechanism
    monkeypatch.setattr(um_steps, "laplace_mechanism",
                        lambda v, s, d, rng: real(v, s / 2, d, rng))
    k1, k2 = _audit(_final_mech(design, _statistic(design, low)), low, high, "half")
    bound = audit_bound(k1, k2, N)
    assert bound > probe.classes[index].eps_effective, bound  # flagged


def test_initial_step_heterogeneous_eps() -> None:
    """G_mean with two ε levels (ADPM weights): a user of the tighter level, p̂ 0 vs 1."""
    base = [MeanCell(1, 0.3, 30, 10 * FIXED_ONE), MeanCell(2, 0.3, 10, 8 * FIXED_ONE),
            MeanCell(1, 1.5, 40, 25 * FIXED_ONE)]
    hi_cell = MeanCell(1, 1.5, 40, 26 * FIXED_ONE)
    d1, d2 = base, [base[0], base[1], hi_cell]
    probe = core.initial_step(d1, 0.05, PROBE, ("a",))
    eff = next(c.eps_effective for c in probe.classes if c.eps == 1.5)
    eps_levels = [0.3, 1.5]
    phi, tau = solve_clip_level(eps_levels, [40, 40], 8.0)
    weights = normalize(eps_levels, [40, 40], phi, tau)
    stat = (weights.w[0] * Fraction(10 * 2 + 8, 2) + weights.w[1] * 25)  # Σ w p̂ of d1

    def mech(cells: object, key: ReleaseKey) -> bool:  # p_init is clipped: post-processing
        out = core.initial_step(cells, 0.05, key, ("a",))  # type: ignore[arg-type]
        return out.p_init <= float(stat)

    k1, k2 = _audit(mech, d1, d2, "initial")
    assert_private(audit_bound(k1, k2, N), eff)


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

    def mech(us: object, key: ReleaseKey) -> bool:
        out = core.variance_step(us, k, key, ("v",))  # type: ignore[arg-type]
        t = round(math.log2(core.KAPPA_V / (2 * core.CHI2_MEDIAN * out.s2)))
        return t <= t0

    k1, k2 = _audit(mech, d1, d2, "variance")
    assert_private(audit_bound(k1, k2, N), eps)
