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


def _restrict(counts: Counter[Record], attrs: tuple[int, ...]) -> Counter[Record]:
    out: Counter[Record] = Counter()
    for rec, c in counts.items():
        out[tuple(rec[j] for j in attrs)] += c
    return out


def _subset_loglik(cands: list[Record], f: Counter[Record], level: int, incl: Incl) -> np.ndarray:
    """log P(L = S) for every subset S of cands (bitmask order)."""
    logs = np.array([incl(f.get(s, 0), level) for s in cands])
    out = np.zeros(1 << len(cands))
    for mask in range(1 << len(cands)):
        bits = np.array([(mask >> i) & 1 for i in range(len(cands))], dtype=bool)
        out[mask] = logs[bits, 0].sum() + logs[~bits, 1].sum()
    return out


def max_log_ratio(x: Counter[Record], xp: Counter[Record], d: int, incl: Incl) -> float:
    """Exact max over all outcomes (L_A, L_B, L_root) of ln P_x / P_x' for d in {3, 4}
    binary attributes (d = 3: the right node is attribute 2 and a padded constant)."""
    left, right = (0, 1), (2, 3) if d == 4 else (2,)
    ca = list(itertools.product((0, 1), repeat=2))
    cb = list(itertools.product((0, 1), repeat=len(right)))
    la = _subset_loglik(ca, _restrict(x, left), 1, incl) - _subset_loglik(
        ca, _restrict(xp, left), 1, incl)
    lb = _subset_loglik(cb, _restrict(x, right), 1, incl) - _subset_loglik(
        cb, _restrict(xp, right), 1, incl)
    fx, fxp = _restrict(x, tuple(range(d))), _restrict(xp, tuple(range(d)))
    m = np.zeros((len(ca), len(cb)))
    for i, a in enumerate(ca):
        for j, b in enumerate(cb):
            (li, lo), (lpi, lpo) = incl(fx.get(a + b, 0), 2), incl(fxp.get(a + b, 0), 2)
            m[i, j] = max(li - lpi, lo - lpo)
    ia = np.array([[(mask >> i) & 1 for i in range(len(ca))] for mask in range(1 << len(ca))])
    ib = np.array([[(mask >> i) & 1 for i in range(len(cb))] for mask in range(1 << len(cb))])
    total = la[:, None] + lb[None, :] + ia @ m @ ib.T
    return float(total.max())


def own_inclusion(spec: Any) -> Incl:
    b = spec.budget
    t = float(b.tree_scale)

    def incl(f: int, level: int) -> tuple[float, float]:
        args = (f, b.taus[level - 1], b.mu, t)
        return math.log(inclusion_probability(*args)), math.log(exclusion_probability(*args))

    return incl
