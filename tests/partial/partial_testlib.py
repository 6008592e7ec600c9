"""Helpers shared by the partial-DP privacy tests (no fixtures; imported by name)."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np

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
