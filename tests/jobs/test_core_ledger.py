"""Pure ledger rules: exact units, the capping rule, charges never above the remaining budget."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hdp_spark.core.ledger import (
    CAPPED,
    EXCLUDED,
    FULL,
    UNIT,
    budget_units_numpy,
    cap_numpy,
    ceil_units,
    ceil_units_numpy,
    charge_units_numpy,
    floor_units,
    idempotency_key,
    remaining_units_numpy,
    units_to_eps,
)
from hdp_spark.errors import ParameterError


def test_units_round_trip_exactly() -> None:
    for eps in (0.0, 0.1, 0.5, 1.0, 2.0, 3.7, 1e-9):
        lo, hi = floor_units(eps), ceil_units(eps)
        assert units_to_eps(lo) <= eps <= units_to_eps(hi)
        assert hi - lo in (0, 1)
    assert ceil_units(math.inf) == ceil_units(2.0**21)
    assert units_to_eps(12345) == 12345 * UNIT


def test_ceil_units_numpy_handles_invalid() -> None:
    out = ceil_units_numpy([np.nan, -1.0, 0.0, np.inf, 0.25])
    assert out.tolist() == [0, 0, 0, 2**51, 2**28]


def test_budget_units_counts_invalid_budgets() -> None:
    units, bad = budget_units_numpy([1.0, np.nan, -1.0, np.inf, 2.0**21], None, 5)
    assert bad == 4
    assert units[0] == 2**30
    units, bad = budget_units_numpy([1.0, np.nan], 3.0, 2)
    assert bad == 0
    assert units.tolist() == [2**30, 3 * 2**30]
    units, bad = budget_units_numpy(None, None, 3)
    assert bad == 3


def test_remaining_never_negative() -> None:
    assert remaining_units_numpy(np.array([5, 5]), np.array([3, 9])).tolist() == [2, 0]


def test_cap_single_aggregator_is_min_of_eps_and_remaining() -> None:
    eps = np.array([0.1, 2.0, np.inf, 1.0, 0.0])
    rem = np.array([floor_units(1.0)] * 5)
    out = cap_numpy([(eps, 1)], rem, "cap")
    assert out.eps[0].tolist() == [0.1, 1.0, 1.0, 1.0, 0.0]
    assert out.status.tolist() == [FULL, CAPPED, CAPPED, FULL, FULL]


def test_exclude_sets_eps_to_zero() -> None:
    eps = np.array([0.1, 2.0, np.inf])
    out = cap_numpy([(eps, 1)], np.array([floor_units(1.0)] * 3), "exclude")
    assert out.eps[0].tolist() == [0.1, 0.0, 0.0]
    assert out.status.tolist() == [FULL, EXCLUDED, EXCLUDED]


def test_fail_policy_only_reports() -> None:
    eps = np.array([0.1, 2.0])
    out = cap_numpy([(eps, 1)], np.array([floor_units(1.0)] * 2), "fail")
    assert out.eps[0].tolist() == [0.1, 2.0]
    assert out.status.tolist() == [FULL, CAPPED]


def test_multi_aggregator_demand_is_summed_and_split() -> None:
    a = np.array([0.5, 0.5])
    b = np.array([0.4, 0.7])
    rem = np.array([floor_units(1.0), floor_units(1.0)])
    # column a read by 1 aggregator, b by 2: demand 1.3 (within? no: 0.5+0.8) and 1.9
    out = cap_numpy([(a, 1), (b, 2)], rem, "cap")
    assert out.status.tolist() == [CAPPED, CAPPED]
    share = (floor_units(1.0) // 3) * UNIT
    assert out.eps[0].tolist() == [min(0.5, share)] * 2
    assert out.eps[1].tolist() == [min(0.4, share), min(0.7, share)]
    under = cap_numpy([(np.array([0.3]), 1), (np.array([0.3]), 2)],
                      np.array([floor_units(1.0)]), "cap")
    assert under.status.tolist() == [FULL]


def test_invalid_eps_is_left_for_the_release_to_reject() -> None:
    eps = np.array([np.nan, -1.0])
    out = cap_numpy([(eps, 1)], np.array([0, 0]), "cap")
    assert np.isnan(out.eps[0][0])
    assert out.eps[0][1] == -1.0
    assert out.status.tolist() == [FULL, FULL]


def test_policy_and_k_are_checked() -> None:
    with pytest.raises(ParameterError, match="`policy`"):
        cap_numpy([(np.array([1.0]), 1)], np.array([1]), "drop")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="k >= 1"):
        cap_numpy([(np.array([1.0]), 0)], np.array([1]), "cap")


def test_charge_modes() -> None:
    eff = np.array([0.3, np.nan, 0.0, 0.5 + 1e-12])
    capped = np.array([1.0, 1.0, 1.0, 0.5])
    eff_units = charge_units_numpy(eff, capped)
    assert eff_units.tolist() == [ceil_units(0.3), 0, 0, ceil_units(0.5)]
    demand = charge_units_numpy(eff, capped, "demand")
    assert demand.tolist() == [ceil_units(1.0), 0, ceil_units(1.0), ceil_units(0.5)]
    with pytest.raises(ParameterError, match="`mode`"):
        charge_units_numpy(eff, capped, "max")  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    eps=st.lists(
        st.one_of(st.floats(0, 50, allow_nan=False), st.just(math.inf)), min_size=1, max_size=4
    ),
    mult=st.lists(st.integers(1, 3), min_size=4, max_size=4),
    remaining=st.floats(0, 20, allow_nan=False),
    frac=st.lists(st.floats(0, 1), min_size=4, max_size=4),
    policy=st.sampled_from(["cap", "exclude"]),
    mode=st.sampled_from(["effective", "demand"]),
)
def test_charges_never_exceed_remaining(
    eps: list[float], mult: list[int], remaining: float, frac: list[float], policy: str,
    mode: str,
) -> None:
    """Whatever the demands, the effective ε (any value <= the capped ε) and the policy,
    the summed charges of a row never exceed its remaining budget."""
    rem_units = np.array([floor_units(remaining)])
    cols = [(np.array([e]), m) for e, m in zip(eps, mult, strict=False)]
    out = cap_numpy(cols, rem_units, policy)  # type: ignore[arg-type]
    total = 0
    for (capped, (_, m)), f in zip(zip(out.eps, cols, strict=True), frac, strict=False):
        # the mechanism delivers at most the capped ε; float round-off may add an ulp
        eff = np.nextafter(capped * f, np.inf)
        total += m * int(charge_units_numpy(eff, capped, mode)[0])  # type: ignore[arg-type]
    assert total <= rem_units[0]
    if out.status[0] == FULL:
        assert all(c[0] == e for c, e in zip(out.eps, eps, strict=False))


def test_idempotency_key_depends_on_every_part() -> None:
    base = idempotency_key("j", "r", "fp", {"a": 1})
    assert len(base) == 64
    assert base == idempotency_key("j", "r", "fp", {"a": 1})
    assert base != idempotency_key("j2", "r", "fp", {"a": 1})
    assert base != idempotency_key("j", "r2", "fp", {"a": 1})
    assert base != idempotency_key("j", "r", "fp2", {"a": 1})
    assert base != idempotency_key("j", "r", "fp", {"a": 2})
