"""The "optimal" allocation with very many distinct ε (continuous ε, no eps_grid): the search
runs on a proxy simulation (ε rounded onto a fine public grid), the result is evaluated
exactly (issue 20, third slice)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hdp_spark.jobs.allocation as al
from hdp_spark.aggregators import hdp_mean
from hdp_spark.core.ledger import UNIT
from hdp_spark.jobs.allocation import Profile, ReleaseModel, allocate, needs_proxy, simulate


def _profile(n: int, seed: int) -> Profile:
    rng = np.random.default_rng(seed)
    return Profile(
        counts=np.ones(n, dtype=np.int64),
        remaining=np.floor(rng.uniform(0.2, 2.0, n) / UNIT).astype(np.int64),
        eps={"eps": rng.uniform(0.05, 4.0, n)},  # n distinct ε
        groups=(np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)),
    )


def _models() -> list[ReleaseModel]:
    out = []
    for rid, w in (("a", 1.0), ("b", 4.0)):
        spec = hdp_mean("x", eps="eps", lower=0, upper=1, alias=f"m_{rid}")
        out.append(ReleaseModel(rid, w, ((),), ((spec.name, spec),), (("eps", 1),)))
    return out


def test_needs_proxy() -> None:
    assert needs_proxy(_profile(600, 1))
    small = _profile(600, 1)
    few = Profile(small.counts, np.full(600, 10**6, dtype=np.int64),
                  {"eps": np.round(small.eps["eps"], 1)}, small.groups)
    assert not needs_proxy(few)


@pytest.mark.parametrize("seed", [2, 3])
def test_proxy_search_is_exact_and_close_to_the_exact_search(seed: int, monkeypatch: Any
                                                              ) -> None:
    profile, models = _profile(600, seed), _models()
    fast = allocate(profile, models, "optimal", "cap", "effective")
    # the returned simulation is the exact one at the chosen shares
    again = simulate(profile, models, fast.shares, "cap", "effective")
    for a, b in zip(fast.simulation.releases, again.releases, strict=True):
        assert np.array_equal(a.charges, b.charges)
        assert a.error == b.error
    seq = allocate(profile, models, "sequential", "cap", "effective")
    equal = allocate(profile, models, "equal", "cap", "effective")
    assert fast.error <= min(seq.error, equal.error)
    assert (fast.simulation.remaining >= 0).all()
    monkeypatch.setattr(al, "needs_proxy", lambda _p, levels=256: False)
    slow = allocate(profile, models, "optimal", "cap", "effective")
    assert fast.error <= slow.error * 1.01
