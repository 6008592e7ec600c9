"""Statistical audits of the selection as implemented (keyed exact sampler, one key per draw):
Clopper–Pearson intervals of release rates against δ (a group holding one person) and
against f·κ_i (a two-person group against the same group without person i).

The keys are seeded (one per test, weight and draw): the counts are the same on every run.
With fresh keys, each test would fail a correct sampler with probability <= 1e-6: every CP
interval is two-sided at ALPHA = 5e-7 and each test reads at most two intervals' worth (its
one-sided bounds at ALPHA/2); the power checks are stated beside them."""

from __future__ import annotations

import math

import pytest
from audit_stats import key
from scipy import stats

from hdp_spark.core.selection import select_keys
from hdp_spark.core.selection.mechanism import noisy_weight

pytestmark = pytest.mark.statistical

TRIALS = 20_000
ALPHA = 5e-7  # two-sided risk of a false alarm per interval

# δ large enough to be measured; κ on the grid (k = 4 steps of 0.25): T = 4 + 19
SEL = select_keys(delta=0.05, c=1.0, share=0.5, step=0.25, neighbours="add_remove")


def _cp(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(stats.beta.ppf(ALPHA / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - ALPHA / 2, k + 1, n - k))
    return lo, hi


def _released(weight: int, tag: str, trials: int = TRIALS) -> int:
    threshold = SEL.threshold
    return sum(
        noisy_weight(SEL, weight, key(f"sel-audit-{tag}-{i}"), ("g",)) >= threshold
        for i in range(trials)
    )


def _closed_form(weight: int) -> float:
    t = SEL.selection_scale
    q = math.exp(-t.denominator / t.numerator)
    return q ** (SEL.threshold - weight) / (1 + q)


@pytest.mark.slow
def test_singleton_release_rate_is_at_most_delta() -> None:
    k_i = SEL.units(1.0)
    assert (k_i, SEL.threshold) == (4, 23)
    hits = _released(k_i, "singleton")
    lo, hi = _cp(hits, TRIALS)
    assert lo <= SEL.delta  # no evidence of a release rate above δ
    assert lo <= _closed_form(k_i) <= hi  # the sampler follows the analysed law
    # the audit has power: the rate is near δ, not 0 (true rate 0.0494: P(hi <= 0.9 δ) is
    # 1.4e-15 by the exact binomial law)
    assert hi > 0.9 * SEL.delta


@pytest.mark.slow
def test_two_person_group_against_f_kappa() -> None:
    """P[release {i, j}] <= e^(f·κ_i)·P[release {j}] (no δ needed: both groups exist);
    the measured ratio is close to e^(f·κ_i) (the bound is tight)."""
    k_i = k_j = SEL.units(1.0)
    bound = SEL.share * float(SEL.gamma * k_i)  # f·κ_i = 0.5
    both, alone = _released(k_i + k_j, "both"), _released(k_j, "alone")
    lo_both, hi_both = _cp(both, TRIALS)
    _lo_alone, hi_alone = _cp(alone, TRIALS)
    assert math.log(lo_both / hi_alone) <= bound  # CP lower bound of the loss
    point = math.log(both / alone)
    # tight: half the noise would give about 1.0 (true log-ratio 0.5, sd of the estimate
    # 0.039 by the delta method: |error| >= 0.2 is a 5.1σ event, ~3e-7 two-sided)
    assert abs(point - bound) < 0.2
    assert lo_both <= _closed_form(k_i + k_j) <= hi_both
