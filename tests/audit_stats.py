"""One derivation for both sides of every statistical privacy audit (noise-and-audit §3.2-§3.3).

The audit. Two neighbouring inputs D and D', an event S fixed before sampling, n i.i.d.
outputs per side, k1 and k2 of them in S. ε-DP implies p1 <= e^ε p2 for S, for its complement
and with D and D' swapped: four directions. In each, the one-sided Clopper-Pearson lower bound
on p1 and upper bound on p2 are taken at α/8 each (α/4 per direction, Bonferroni), and
ln(lower/upper) is a lower confidence bound on the privacy loss of that event.

* Privacy side (:func:`assert_private`): fail iff the best of the four bounds exceeds the
  claimed ε. If the mechanism is ε-DP, all eight intervals cover with probability >= 1 - α,
  and then no bound exceeds ε: the false-failure probability per run is <= ``ALPHA`` = 1e-6,
  for any ε-DP mechanism and any event fixed in advance. This side is never widened.
* Power side (:func:`power_floor`): the audit must be informative, i.e. the best bound must
  exceed a floor, or a mechanism with no noise-event link would pass vacuously. The floor is
  DERIVED from the event probabilities (p1, p2) of the correct mechanism: it is the largest f
  with P(bound of the (k1, k2) direction > f) >= 1 - ``MISS``, computed exactly over the two
  binomial laws (:func:`cp_power`). The best of four bounds is at least that direction's
  bound, so a correct mechanism misses the floor with probability <= ``MISS`` = 1e-6.
  Callers pass p1 rounded down and p2 rounded up (power is increasing in p1, decreasing in
  p2), so the floor is conservative.

Seeded audits (keys from ``ReleaseKey.from_unsafe_seed``, one per sample) draw the same counts
on every run, so they cannot flake at all; the two probabilities above then say that the seed
was not chosen for luck: a fresh key would fail either side with probability <= 1e-6.

Counting tests (coverage of an interval, rates) use :func:`max_count`: the largest count a
Binomial(n, p) exceeds with probability <= ``MISS``.

Keys of audited draws come from :func:`key` (or :func:`seed` for APIs taking
``unsafe_seed``): seeded by a tag by default; fresh from OS entropy when the environment sets
``HDP_TEST_FRESH_KEYS=1``, which ``scripts/repeat-statistical.sh`` uses to exercise the stated
probabilities on new draws. Only tests whose every statistical check has a stated
false-failure probability <= 1e-6 use them; demonstrations with less power (a broken
mechanism flagged with probability 0.998) keep their fixed seeds.
"""

from __future__ import annotations

import math
import os

import numpy as np
from scipy import stats

from hdp_spark.core.noise import ReleaseKey

ALPHA = 1e-6
"""False-failure probability per run of the privacy side, for a correct mechanism."""
MISS = 1e-6
"""False-failure probability per run of a power side (or of any derived count threshold)."""
FRESH_KEYS = os.environ.get("HDP_TEST_FRESH_KEYS") == "1"
"""Draw audited keys from OS entropy instead of seeds (see the module docstring)."""


def key(tag: str) -> ReleaseKey:
    """The key of one audited draw: seeded by ``tag``, or fresh under HDP_TEST_FRESH_KEYS=1."""
    return ReleaseKey.fresh() if FRESH_KEYS else ReleaseKey.from_unsafe_seed(tag)


def seed(tag: str) -> str | None:
    """``unsafe_seed`` of one audited call: ``tag``, or None (a fresh key) under
    HDP_TEST_FRESH_KEYS=1."""
    return None if FRESH_KEYS else tag


def cp_lower(k: int, n: int, a: float) -> float:
    """One-sided (1 - a) Clopper-Pearson lower bound on a binomial proportion."""
    return 0.0 if k == 0 else float(stats.beta.ppf(a, k, n - k + 1))


def cp_upper(k: int, n: int, a: float) -> float:
    """One-sided (1 - a) Clopper-Pearson upper bound on a binomial proportion."""
    return 1.0 if k == n else float(stats.beta.ppf(1 - a, k + 1, n - k))


def eps_lower_bound(k1: int, k2: int, n: int, a: float) -> float:
    """A lower confidence bound on ln(p1/p2), valid with probability >= 1 - a (a/2 a side)."""
    lo, up = cp_lower(k1, n, a / 2), cp_upper(k2, n, a / 2)
    return math.log(lo / up) if lo > 0 else -math.inf


def audit_bound(k1: int, k2: int, n: int, alpha: float = ALPHA) -> float:
    """The best lower bound on the privacy loss over the four directions (α/4 each)."""
    return max(eps_lower_bound(a, b, n, alpha / 4)
               for a, b in ((k1, k2), (k2, k1), (n - k1, n - k2), (n - k2, n - k1)))


def cp_power(n: int, p1: float, p2: float, eps: float, a: float) -> float:
    """Exact P(eps_lower_bound(k1, k2, n, a) > eps) for k1 ~ Bin(n, p1), k2 ~ Bin(n, p2)."""
    k = np.arange(n + 1)
    with np.errstate(all="ignore"):
        low = np.where(k == 0, 0.0, stats.beta.ppf(a / 2, k, n - k + 1))
        up = np.where(k == n, 1.0, stats.beta.ppf(1 - a / 2, k + 1, n - k))
    # for each k1: the bound exceeds eps iff up[k2] < low[k1] e^-eps, i.e. k2 <= kmax(k1)
    kmax = np.searchsorted(up, low * math.exp(-eps), side="left") - 1
    return float(np.sum(stats.binom.pmf(k, n, p1) * stats.binom.cdf(kmax, n, p2)))


def power_floor(n: int, p1: float, p2: float, alpha: float = ALPHA, miss: float = MISS,
                directions: int = 4) -> float:
    """The largest f (to 1e-4, rounded down) such that the audit's best bound exceeds f with
    probability >= 1 - miss when the event probabilities are p1 (D) and p2 (D').

    ``directions``: 4 for :func:`audit_bound`; 1 for a single-direction audit, whose bound is
    ``eps_lower_bound(k1, k2, n, alpha)`` (the event and its direction fixed in advance)."""
    a = alpha / directions
    lo, hi = -5.0, math.log(p1 / p2) if p2 > 0 else 50.0
    if cp_power(n, p1, p2, lo, a) < 1 - miss:
        return -math.inf
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cp_power(n, p1, p2, mid, a) >= 1 - miss else (lo, mid)
    return lo


def assert_private(bound: float, eps: float) -> None:
    """Privacy side: fails a correct ε-DP mechanism with probability <= α (see module doc)."""
    assert bound <= eps, f"privacy loss lower bound {bound:.4f} > ε = {eps}"


def assert_audit(k1: int, k2: int, n: int, eps: float, floor: float,
                 alpha: float = ALPHA) -> float:
    """Both sides of one audit: the privacy bound (<= ε) and the power check (> floor,
    a floor from :func:`power_floor`). Returns the best bound."""
    assert floor > 0, "the audit cannot be informative at this n: raise the sample size"
    bound = audit_bound(k1, k2, n, alpha)
    assert_private(bound, eps)
    assert bound > floor, f"audit not informative: bound {bound:.4f} <= floor {floor:.4f}"
    return bound


def max_count(n: int, p: float, miss: float = MISS) -> int:
    """The smallest k with P(Bin(n, p) > k) <= miss: a count threshold with a stated
    false-failure probability (<= miss) when the true rate is at most p."""
    k = int(stats.binom.isf(miss, n, p))
    while stats.binom.sf(k, n, p) > miss:
        k += 1
    return k
