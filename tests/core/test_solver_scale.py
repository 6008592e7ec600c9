"""Solvers at many levels: S1 by prefix sums and DROP-t by one scan agree with brute force."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from hdp_spark.core.mean.weights import drop_phi, normalize, r_c2, solve_l1

LN40 = math.log(40.0)


def _objective(v: list[float], m: list[int], big_l: float, phi: list[float], tau: float) -> float:
    """‖w − 1/n‖₁² + L²‖w/ε‖∞² of the solver's weights, evaluated directly."""
    w = normalize(v, m, phi, tau)
    n = sum(m)
    l1 = sum(c * abs(float(wl) - 1.0 / n) for wl, c in zip(w.w, m, strict=True))
    return l1 * l1 + big_l**2 * float(w.eta) ** 2


def _brute_min(v: list[float], m: list[int], big_l: float) -> float:
    """min over s of 4 D(s)² + L² s², by the dense candidates × levels form (spec §2.7)."""
    va, ma = np.asarray(v), np.asarray(m, dtype=float)
    n = ma.sum()
    pos = (va > 0) & np.isfinite(va)
    fin = np.isfinite(va)
    s_lo = 0.0 if np.any(~fin) else 1.0 / float(np.sum(ma[pos] * va[pos]))
    s_hi = max(s_lo, 1.0 / (n * va[pos].min()))
    grid = np.concatenate([np.linspace(s_lo, s_hi, 4001), 1.0 / (n * va[pos])])
    grid = np.clip(grid, s_lo, s_hi)
    ev, mv = np.where(fin, va, 0.0), np.where(fin, ma, 0.0)
    d = np.sum(mv[None, :] * np.maximum(1.0 / n - grid[:, None] * ev[None, :], 0.0), axis=1)
    return float(np.min(4 * d * d + big_l**2 * grid * grid))


@pytest.mark.parametrize("seed", range(40))
def test_prefix_sum_solver_is_optimal(seed: int) -> None:
    rng = np.random.default_rng(seed)
    g = int(rng.integers(1, 40))
    v = sorted({float(x) for x in np.exp(rng.uniform(-6, 4, size=g))})
    if seed % 3 == 0:
        v = [0.0, *v]
    if seed % 4 == 0:
        v = [*v, math.inf]
    m = [int(x) for x in rng.integers(1, 200, size=len(v))]
    big_l = float(rng.choice([1.0, LN40, 10.0]))
    phi, tau = solve_l1(v, m, big_l)
    ours = _objective(v, m, big_l, phi, tau)
    # the exact minimiser is never beaten by a dense scan (up to rounding)
    assert ours <= _brute_min(v, m, big_l) * (1 + 1e-9) + 1e-15


@pytest.mark.parametrize("levels", [10_000, 100_000])
def test_many_levels_stay_linear_in_memory(levels: int) -> None:
    rng = np.random.default_rng(levels)
    v = [float(x) for x in np.sort(np.exp(rng.uniform(-8, 6, size=levels)))]
    m = [int(x) for x in rng.integers(1, 50, size=levels)]
    tracemalloc.start()
    phi, tau = solve_l1(v, m, LN40)
    _cur, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # O(G) arrays only: the former candidates × levels matrix needed 8·G·2G bytes (1.6 GB
    # at 10k levels); allow 2 KiB per level
    assert peak < 2048 * levels
    assert len(phi) == levels
    assert all(0 <= p <= x for p, x in zip(phi, v, strict=True))
    assert tau > 0


def _drop_objective(v: list[float], m: list[int], phi: list[float], big_l: float) -> float:
    w = normalize(v, m, phi, math.nan)
    return r_c2(v, m, w, big_l)


@pytest.mark.parametrize("seed", range(30))
def test_drop_closed_form_matches_the_brute_force(seed: int) -> None:
    """DROP-t by the O(G) scan picks a cut whose r_C² is the minimum over every cut."""
    rng = np.random.default_rng(100 + seed)
    g = int(rng.integers(1, 25))
    v = sorted({float(x) for x in np.exp(rng.uniform(-5, 3, size=g))})
    if seed % 3 == 0:
        v = [0.0, *v]
    if seed % 4 == 0:
        v = [*v, math.inf]
    m = [int(x) for x in rng.integers(0 if seed % 5 == 0 else 1, 40, size=len(v))]
    if sum(m) == 0:
        m[-1] = 1
    big_l = float(rng.choice([1.0, LN40]))
    phi, _tau = drop_phi(v, m, big_l)
    live = [i for i, c in enumerate(m) if c > 0]
    brute = []
    for cut in range(len(live)):
        keep = set(live[cut:])
        cand = [1.0 if i in keep and v[i] > 0 else 0.0 for i in range(len(v))]
        if any(cand):
            brute.append(_drop_objective(v, m, cand, big_l))
    if not brute:
        assert not any(phi)
        return
    assert _drop_objective(v, m, phi, big_l) <= min(brute) * (1 + 1e-9) + 1e-15


def test_drop_at_many_levels() -> None:
    rng = np.random.default_rng(7)
    v = [float(x) for x in np.sort(np.exp(rng.uniform(-8, 6, size=20_000)))]
    m = [int(x) for x in rng.integers(1, 50, size=len(v))]
    phi, tau = drop_phi(v, m, LN40)
    assert any(phi)
    assert tau in v
    first = phi.index(1.0)
    assert all(p == 1.0 for p in phi[first:])
    assert not any(phi[:first])
