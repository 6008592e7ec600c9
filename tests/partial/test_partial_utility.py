"""Utility oracles of the heavy hitters on pandas (seed-004 §5 oracles 15-18, A.3).

Runs use fixed seeds; each assertion's false-failure probability for a fresh seed is
bounded in its comment (<= 1e-4)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd

from hdp_spark.core.partial import hdp_heavy_hitters
from hdp_spark.pandas import release_heavy_hitters


def _binary_spec(d: int, **kw):
    cols = [f"a{j}" for j in range(d)]
    return hdp_heavy_hitters(cols, domains={c: [0, 1] for c in cols},
                             other={c: 0 for c in cols}, **kw)


def _planted(n: int, d: int, counts: list[int], seed: int) -> tuple[pd.DataFrame, list[tuple]]:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2, size=(n, d))
    keys, row = [], 0
    for c in counts:
        k = rng.integers(0, 2, size=d)
        while tuple(k) in keys:
            k = rng.integers(0, 2, size=d)
        keys.append(tuple(int(v) for v in k))
        x[row:row + c] = k
        row += c
    return pd.DataFrame(x, columns=[f"a{j}" for j in range(d)]), keys


def _released(result) -> dict[tuple, int | None]:
    cols = result.cols
    return {tuple(r[c] for c in cols): r["noisy_count"] for r in result.rows}


def test_prototype_sanity_run_and_detection_count() -> None:
    """Appendix A.3: d = 16, n = 20k, eps_tree = eps_count = 0.5, kappa = ln 1600, tau = 100:
    the five planted keys are found; every key with count >= F_eta is found.
    Failure bound: 10 runs x 5 keys x eta = 1e-6 = 5e-5."""
    counts = [5884, 4071, 2016, 1018, 420]
    spec = _binary_spec(16, eps0=1.0, count_fraction=0.5, delta=1 / 3200, threshold=100,
                        failure_prob=1e-6)
    b = spec.budget
    assert float(b.tree_scale) == round(float(b.tree_scale) * 1024) / 1024
    assert abs(float(b.tree_scale) - 8.0025) < 2e-3
    assert b.mu == 60
    assert b.taus[-1] == 280
    assert b.detection_count <= min(counts)
    sizes = []
    for run in range(10):
        frame, keys = _planted(20_000, 16, counts, seed=run)
        out = _released(release_heavy_hitters(frame, spec, unsafe_seed=run))
        assert all(k in out for k in keys)
        sizes.append(len(out))
    # every other record has count ~ 1: released w.p. <= delta each; expected extra keys
    # <= delta x #root candidates, far below 1 per run (P[>= 4 extras in 10 runs] < 1e-4).
    assert sum(s - 5 for s in sizes) <= 3


def test_lemma30_configuration() -> None:
    """Oracle 15/18: d = 8, nu = 0.1, eta = 0.05, eps_tree = 0.5, kappa = ln(16/nu),
    tau = 1451, n = 2 tau / nu: all keys with f >= nu n found, |L| <= 8/nu on average,
    max error <= nu n (the theorem's failure probability is <= eta per run; with
    these margins the per-run miss probability is < 1e-6)."""
    nu, n = 0.1, 29_020
    spec = _binary_spec(8, eps0=1.0, count_fraction=0.5, delta=1 / 320, threshold=1451)
    b = spec.budget
    assert abs(float(b.tree_scale) - 8.0252) < 2e-3
    assert 40 <= b.mu <= 41
    heavy = [int(nu * n)] * 9
    sizes = []
    for run in range(5):
        frame, keys = _planted(n, 8, heavy, seed=100 + run)
        res = release_heavy_hitters(frame, spec, unsafe_seed=run)
        out = _released(res)
        exact = Counter(map(tuple, frame.to_numpy().tolist()))
        assert all(k in out for k in keys)
        sizes.append(len(out))
        err = max(abs((out.get(k) or 0) - exact.get(k, 0)) for k in set(exact) | set(out))
        assert err <= nu * n
    assert np.mean(sizes) <= 8 / nu


def test_release_guarantee_on_low_counts() -> None:
    """Oracle 17: keys with true count <= X (report.release_max_count) are released with
    probability <= delta each. Here 40 keys sit exactly at X: over 20 runs the number of
    released ones is Bin(800, <= delta = 1e-3): P[> 5] < 1e-4."""
    spec = _binary_spec(6, eps0=1.0, delta=1e-3, threshold=30)
    x = spec.budget.release_max_count
    assert x >= 1
    rng = np.random.default_rng(0)
    recs = [tuple(int(v) for v in rng.integers(0, 2, 6)) for _ in range(400)]
    low = [k for k in dict.fromkeys(recs) if k != (1, 1, 1, 1, 1, 1)][:40]
    rows = [k for k in low for _ in range(x)] + [(1, 1, 1, 1, 1, 1)] * 2000
    frame = pd.DataFrame(rows, columns=[f"a{j}" for j in range(6)])
    released_low = 0
    for run in range(20):
        out = _released(release_heavy_hitters(frame, spec, unsafe_seed=run))
        assert (1, 1, 1, 1, 1, 1) in out
        released_low += sum(k in out for k in low)
    assert released_low <= 5
    assert math.isclose(spec.budget.delta, 1e-3)
