"""Empirical privacy audits of the zCDP partial-DP mechanisms (marginals, MWEM).

Each test runs the released mechanism with one key per draw on two neighbouring tables (one
person's record changed: all attributes for the per-person guarantee, one attribute for the
per-attribute one), counts an output event on each, and turns the counts into a
Clopper-Pearson lower confidence bound on ε at the claimed δ:
ε_lb = ln((p_lo - δ) / p_hi). That bound must stay at or under the (ε, δ) the report
claims (the Canonne-Kamath-Steinke conversion of the reported ρ), and must be positive,
so that the audit can detect a mechanism whose noise is much smaller than claimed.
The exact Rényi checks are in ``test_partial_projection.py``; this is the end-to-end
check through the release functions.

The keys are seeded (``from_unsafe_seed``, one per test, table and draw; the MWEM pilot has
its own tag, so its draws are independent of the audited ones): the counts are the same on
every run. With fresh keys the privacy side (``lower <= claimed``) would fail a correct
mechanism with probability <= ALPHA = 1e-6: (ε, δ)-DP gives p1 <= e^ε p2 + δ, and both
one-sided CP bounds (ALPHA/2 each) cover with probability >= 1 - ALPHA. The informativeness
floors (0.5, 0) are not derived from an exact law (the released statistics go through the
projection/MWEM post-processing); they hold for these seeds and are not privacy claims.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from scipy import stats as sst

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial import accounting
from hdp_spark.core.partial.mwem import hdp_mwem, run_mwem
from hdp_spark.core.partial.projection import finalize_marginals, hdp_marginals

pytestmark = [pytest.mark.slow, pytest.mark.statistical]

ALPHA = 1e-6  # total miss probability of the two one-sided bounds
DELTA = 1e-6


def _cells(records: Sequence[tuple[int, ...]], workload: Sequence[tuple[int, ...]]
           ) -> list[dict[int, int]]:
    """Exact {cell: count} per binary marginal (cell = the marginal's bits, first major)."""
    out: list[dict[int, int]] = []
    for s in workload:
        table: dict[int, int] = {}
        for r in records:
            cell = 0
            for j in s:
                cell = 2 * cell + r[j]
            table[cell] = table.get(cell, 0) + 1
        out.append(table)
    return out


def _eps_lower(hits: int, hits_neighbour: int, trials: int) -> float:
    p_lo = float(sst.beta.ppf(ALPHA / 2, hits, trials - hits + 1)) if hits else 0.0
    p_hi = (float(sst.beta.isf(ALPHA / 2, hits_neighbour + 1, trials - hits_neighbour))
            if hits_neighbour < trials else 1.0)
    return math.log((p_lo - DELTA) / p_hi) if p_lo > DELTA else -math.inf


@pytest.fixture(autouse=True)
def _no_seed_warnings(caplog: pytest.LogCaptureFixture) -> None:
    """The audits draw tens of thousands of seeded keys, and each logs the unsafe-seed
    WARNING (tested in tests/backends/test_unsafe_seed_marks.py):
    about 7 % of an audit's CPU time under pytest's log capture. Not what an audit tests."""
    caplog.set_level(logging.ERROR, logger="hdp_spark")


def _count(event: Callable[[ReleaseKey], bool], trials: int, tag: str) -> int:
    return sum(event(ReleaseKey.from_unsafe_seed(f"partial-audit-{tag}-{i}"))
               for i in range(trials))


@pytest.mark.parametrize(("unit", "rows"), [("person", 1), ("attribute", 1), ("person", 2),
                                           ("attribute", 3)])
def test_marginals_audit_stays_under_the_reported_guarantee(unit: str, rows: int) -> None:
    """Three binary attributes, all 2-way marginals, ε₀ = 1. The person's record (0,0,0)
    moves to (1,1,1) (person) or to (1,0,0) (attribute a); with ``max_rows`` = R > 1 the
    person has R rows, all of which move (the bounding itself is tested in
    test_partial_unit_rows.py). Event: the summed noisy differences n[00] - n[moved cell]
    over the marginals that hold a, above a threshold set between the two tables' means."""
    cols = ["a", "b", "c"]
    unit_kw = {"privacy_unit": "id", "max_rows": rows} if rows > 1 else {}
    spec = hdp_marginals(cols, domains={c: [0, 1] for c in cols}, eps0=1.0, k=2,
                         other={c: 0 for c in cols}, delta=DELTA, **unit_kw)
    rest = [(0, 1, 0), (1, 0, 1), (1, 1, 0), (0, 0, 1)] * 4
    moved = (1, 1, 1) if unit == "person" else (1, 0, 0)
    base = _cells([(0, 0, 0)] * rows + rest, spec.workload)
    neighbour = _cells([moved] * rows + rest, spec.workload)
    # a's marginals: (a, b) and (a, c); the moved record's cell in each
    pairs = [(i, 2 * moved[s[0]] + moved[s[1]]) for i, s in enumerate(spec.workload) if 0 in s]

    def statistic(counts: list[dict[int, int]], key: ReleaseKey) -> int:
        out = finalize_marginals(spec, counts, key).rows
        per = [out[4 * i:4 * i + 4] for i in range(len(spec.workload))]
        return sum(per[i][0]["noisy_count"] - per[i][cell]["noisy_count"] for i, cell in pairs)

    shift = 2 * rows * len(pairs)  # the statistic's mean moves by 2R per marginal
    threshold = int(np.ceil(shift + math.sqrt(2 * len(pairs) * float(spec.budget.sigma2))))
    trials = 12_000
    tag = unit if rows == 1 else f"{unit}-{rows}rows"
    hits = _count(lambda k: statistic(base, k) >= threshold, trials, f"{tag}-D")
    hits_neighbour = _count(lambda k: statistic(neighbour, k) >= threshold, trials,
                            f"{tag}-D'")
    rho = spec.budget.rho_person if unit == "person" else spec.budget.rho_attribute
    claimed = accounting.eps_cks20(rho, DELTA)
    lower = _eps_lower(hits, hits_neighbour, trials)
    assert lower <= claimed
    assert lower > 0.5  # informative: a noise scale far below the claim would show


def test_mwem_audit_stays_under_the_reported_guarantee() -> None:
    """Three binary attributes, all 2-way marginals, T = 3, ε₀ = 1, four rows. The person
    (0,0,0) becomes (1,1,1). Event: the released fraction of cell a=0, b=0 above a
    threshold fixed from a pilot run on independent keys."""
    cols = ["a", "b", "c"]
    spec = hdp_mwem(cols, domains={c: [0, 1] for c in cols}, eps0=1.0, k=2, rounds=3,
                    other={c: 0 for c in cols}, delta=DELTA)
    rest = [(0, 0, 0)] * 3
    base = _cells([(0, 0, 0), *rest], spec.workload)
    neighbour = _cells([(1, 1, 1), *rest], spec.workload)

    def fraction(counts: list[dict[int, int]], key: ReleaseKey) -> float:
        return float(run_mwem(spec, counts, key).rows[0]["mwem_fraction"])

    pilot = [fraction(neighbour, ReleaseKey.from_unsafe_seed(f"partial-audit-pilot-{i}"))
             for i in range(2_000)]
    threshold = float(np.quantile(pilot, 0.9))
    trials = 12_000
    hits = _count(lambda k: fraction(base, k) > threshold, trials, "mwem-D")
    hits_neighbour = _count(lambda k: fraction(neighbour, k) > threshold, trials, "mwem-D'")
    report = run_mwem(spec, base, ReleaseKey.from_unsafe_seed("partial-audit-report")).report
    claimed = accounting.eps_cks20(report["rho_person"], DELTA)
    lower = _eps_lower(hits, hits_neighbour, trials)
    assert lower <= claimed
    assert lower > 0.0  # the event does separate the tables
