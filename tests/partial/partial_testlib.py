"""Helpers shared by the partial-DP privacy tests (no fixtures; imported by name)."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from hdp_spark.core.partial.budget import exclusion_probability, inclusion_probability

Record = tuple[int, ...]


def random_dataset(rng: np.random.Generator, d: int, tau: int, mu: int) -> Counter[Record]:
    """A small multiset of binary records: a few heavy ones straddling the thresholds
    (τ, τ ± 2μ) and some singletons; never empty."""
    recs = list(itertools.product((0, 1), repeat=d))
    counts: Counter[Record] = Counter()
    for _ in range(rng.integers(1, 4)):
        counts[recs[rng.integers(len(recs))]] += int(rng.integers(0, tau + 2 * mu + 4))
    for _ in range(int(rng.integers(0, 25))):
        counts[recs[rng.integers(len(recs))]] += 1
    counts = +counts
    if not counts:
        counts[recs[0]] = 1
    return counts


# -- exact brute force over all outcomes of a tiny tree (oracle 7) ----------------------------

Incl = Callable[[int, int], tuple[float, float]]  # (count, level) -> (ln P[in], ln P[out])


def restrict(counts: Counter[Record], attrs: tuple[int, ...]) -> Counter[Record]:
    """The counts of the records' projections on ``attrs``."""
    out: Counter[Record] = Counter()
    for rec, c in counts.items():
        out[tuple(rec[j] for j in attrs)] += c
    return out


def subset_loglik(cands: list[Record], f: Counter[Record], level: int, incl: Incl) -> np.ndarray:
    """log P(L = S) for every subset S of cands (bitmask order)."""
    logs = np.array([incl(f.get(s, 0), level) for s in cands]).reshape(len(cands), 2)
    out = np.zeros(1 << len(cands))
    for mask in range(1 << len(cands)):
        bits = np.array([(mask >> i) & 1 for i in range(len(cands))], dtype=bool)
        out[mask] = logs[bits, 0].sum() + logs[~bits, 1].sum()
    return out


def subset_bits(k: int) -> np.ndarray:
    """Row ``mask``: the membership bits of subset ``mask`` of k candidates."""
    return np.array([[(mask >> i) & 1 for i in range(k)] for mask in range(1 << k)], dtype=float)


def max_log_ratio_given(x: Counter[Record], xp: Counter[Record], d: int, la_c: list[Record],
                        lb_c: list[Record], incl: Incl) -> float:
    """max over (L_A, L_B, L_root) of ln P_x / P_x' given the level-1 candidate lists (d in
    {3, 4} binary attributes; d = 3: the right node is attribute 2 and a padded constant);
    each root candidate in or out, whichever is worse."""
    left, right = (0, 1), (2, 3) if d == 4 else (2,)
    la = subset_loglik(la_c, restrict(x, left), 1, incl) - subset_loglik(
        la_c, restrict(xp, left), 1, incl)
    lb = subset_loglik(lb_c, restrict(x, right), 1, incl) - subset_loglik(
        lb_c, restrict(xp, right), 1, incl)
    fx, fxp = restrict(x, tuple(range(d))), restrict(xp, tuple(range(d)))
    m = np.zeros((len(la_c), len(lb_c)))
    for i, a in enumerate(la_c):
        for j, b in enumerate(lb_c):
            (li, lo), (lpi, lpo) = incl(fx.get(a + b, 0), 2), incl(fxp.get(a + b, 0), 2)
            m[i, j] = max(li - lpi, lo - lpo)
    ia, ib = subset_bits(len(la_c)), subset_bits(len(lb_c))
    total = la[:, None] + lb[None, :] + ia @ m @ ib.T
    return float(total.max())


def max_log_ratio(x: Counter[Record], xp: Counter[Record], d: int, incl: Incl) -> float:
    """Exact max over all outcomes (L_A, L_B, L_root) of ln P_x / P_x' for d in {3, 4}
    binary attributes (d = 3: the right node is attribute 2 and a padded constant)."""
    ca = list(itertools.product((0, 1), repeat=2))
    cb = list(itertools.product((0, 1), repeat=2 if d == 4 else 1))
    return max_log_ratio_given(x, xp, d, ca, cb, incl)


def own_inclusion(spec: Any) -> Incl:
    b = spec.budget
    t = float(b.tree_scale)

    def incl(f: int, level: int) -> tuple[float, float]:
        args = (f, b.taus[level - 1], b.mu, t)
        return math.log(inclusion_probability(*args)), math.log(exclusion_probability(*args))

    return incl
