"""Partition selection with per-row ε, engine-free: parameters, integer weights, threshold,
and the exact privacy of the selection against the DP inequalities (closed forms)."""

from __future__ import annotations

import math
from decimal import Decimal, getcontext
from fractions import Fraction

import pytest

from hdp_spark.core.selection import SelectKeys, select_keys
from hdp_spark.errors import HdpError, ParameterError

getcontext().prec = 60


# -- parameters -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"delta": 0.0}, "`delta` must be in (0, 1), got 0.0"),
        ({"delta": 1.0}, "`delta` must be in (0, 1)"),
        ({"delta": math.nan}, "`delta` must be in (0, 1), got nan"),
        ({"delta": True}, "`delta` must be a number, got True"),
        ({"delta": "1e-7"}, "`delta` must be a number"),
        ({"c": 0.0}, "`c` must be a finite number > 0, got 0.0"),
        ({"c": math.inf}, "`c` must be a finite number > 0, got inf"),
        ({"c": math.nan}, "`c` must be a finite number > 0"),
        ({"c": -1}, "`c` must be a finite number > 0, got -1"),
        ({"share": 0.0}, "`share` must be in (0, 1), got 0.0"),
        ({"share": 1}, "`share` must be in (0, 1), got 1"),
        ({"share": None}, "`share` must be a number, got None"),
        ({"step": 0.0}, "`step` must be a number in (0, c], got 0.0"),
        ({"step": 2.0}, "`step` must be a number in (0, c], got 2.0"),
        ({"step": math.nan}, "`step` must be a number in (0, c]"),
        ({"step": 1e-13}, "`step` must be at least c / 2**40"),
        ({"neighbours": "swap"}, "`neighbours` must be one of replace, add_remove; got 'swap'"),
    ],
)
def test_bad_parameters_are_refused_by_name(kwargs: dict[str, object], needle: str) -> None:
    params: dict[str, object] = {"delta": 1e-7, "c": 1.0, "share": 0.4} | kwargs
    with pytest.raises(ParameterError) as info:
        select_keys(**params)  # type: ignore[arg-type]
    assert needle in str(info.value)
    assert isinstance(info.value, HdpError)


def test_spec_is_frozen_and_defaults() -> None:
    sel = select_keys(delta=1e-7, c=1.0, share=0.4)
    assert sel == SelectKeys(1e-7, 1.0, 0.4)
    assert sel.gamma == Fraction(1, 1024)
    assert sel.cap_units == 1024
    assert sel.touched == 2
    with pytest.raises(AttributeError):
        sel.delta = 0.5  # type: ignore[misc]
    assert select_keys(delta=1e-7, c=1.0, share=0.4, neighbours="add_remove").touched == 1


def test_units_are_exact_floors_never_above_kappa() -> None:
    """k = ⌊min(ε, c)/γ⌋ on the decimals: every grid value j·γ keeps its j steps, and
    γ·k never exceeds min(ε, c); float rules drop or add a step on some values."""
    sel = select_keys(delta=1e-7, c=20.0, share=0.5, step=0.1)
    gamma = Fraction(1, 10)  # the decimal the caller wrote
    float_wrong = 0
    for j in range(1, 201):
        eps = j / 10  # the float that prints as j/10
        k = sel.units(eps)
        assert k == j
        assert gamma * k <= Fraction(repr(eps))
        assert sel.units(math.nextafter(eps, 0)) == j - 1  # just below the grid point
        float_wrong += math.floor(eps / 0.1) != j or math.floor(Fraction(eps) / gamma) != j
    assert float_wrong > 0  # the naive rules differ on some grid values: the test can fail
    sel = select_keys(delta=1e-7, c=2.0, share=0.5, step=0.1)
    assert sel.units(math.inf) == sel.cap_units == 20
    assert sel.units(5.0) == 20
    assert sel.units(0.0) == 0
    assert sel.charge(math.inf) == float(gamma * 20)
    assert sel.charge(0.0) == 0.0


def test_charge_rejects_nan_and_negative_eps() -> None:
    sel = select_keys(delta=1e-7, c=1.0, share=0.4)
    for bad in (math.nan, -0.5, -math.inf):
        with pytest.raises(ParameterError, match="`eps` must be >= 0 or \\+inf"):
            sel.charge(bad)


def _q(sel: SelectKeys) -> Decimal:
    t = sel.selection_scale
    return (-(Decimal(t.denominator) / Decimal(t.numerator))).exp()


@pytest.mark.parametrize(
    "sel",
    [
        select_keys(delta=1e-7, c=1.0, share=0.4),
        select_keys(delta=1e-6, c=2.0, share=0.5, neighbours="add_remove"),
        select_keys(delta=1e-3, c=1.0, share=0.3, step=0.25),
        select_keys(delta=0.05, c=1.0, share=0.5, step=0.25, neighbours="add_remove"),
        select_keys(delta=1e-12, c=0.5, share=0.9, step=0.5),
    ],
)
def test_threshold_is_the_least_safe_margin(sel: SelectKeys) -> None:
    """T = K_c + m*: q^m*/(1+q) <= δ exactly (60 digits), and m* - 1 would not do."""
    q, delta = _q(sel), Decimal(sel.delta)
    m = sel.margin
    assert q**m / (1 + q) <= delta
    if m > 1:
        assert q ** (m - 1) / (1 + q) > delta
    assert sel.threshold == sel.cap_units + m


def test_threshold_matches_the_design_note() -> None:
    """Continuous limit of the note: T ≈ c + b_S·ln(1/(2δ)) with b_S = u/f."""
    sel = select_keys(delta=1e-6, c=1.0, share=0.5)
    t = float(sel.threshold * sel.gamma)
    assert abs(t - (1.0 + 4 * math.log(1 / 2e-6))) < 0.01


# -- exact privacy of the selection (closed forms) --------------------------------------

Outcome = dict[object, Decimal]


def _group_law(sel: SelectKeys, weight: int) -> Outcome:
    """Exact law of one candidate group's output: None (not released) or W̃ = w >= T."""
    q = _q(sel)
    norm = (1 - q) / (1 + q)
    threshold = sel.threshold
    law: Outcome = {}
    top = threshold + 400 + int(40 * sel.selection_scale)
    released = Decimal(0)
    for w in range(threshold, top):
        p = norm * q ** abs(w - weight)
        law[w] = p
        released += p
    law[None] = 1 - released - norm * q ** (top - weight) / (1 - q)  # tail beyond `top`
    law["tail"] = norm * q ** (top - weight) / (1 - q)
    return law


def _absent() -> Outcome:
    """An absent group: its output is indistinguishable from an unreleased one."""
    return {None: Decimal(1)}


INF = Decimal("Infinity")


def _pld(p: Outcome, r: Outcome) -> dict[Decimal, Decimal]:
    """Privacy-loss distribution of P against R: mass of P at each loss ln(P(o)/R(o))."""
    out: dict[Decimal, Decimal] = {}
    for o, v in p.items():
        if not v:
            continue
        rv = r.get(o, Decimal(0))
        loss = INF if not rv else (v / rv).ln().quantize(Decimal("1e-40"))
        out[loss] = out.get(loss, Decimal(0)) + v
    return out


def _convolve(a: dict[Decimal, Decimal], b: dict[Decimal, Decimal]) -> dict[Decimal, Decimal]:
    """The loss distribution of two independent groups (losses add)."""
    out: dict[Decimal, Decimal] = {}
    for la, pa in a.items():
        for lb, pb in b.items():
            loss = la + lb
            out[loss] = out.get(loss, Decimal(0)) + pa * pb
    return out


def _hockey(pld: dict[Decimal, Decimal], eps: float) -> Decimal:
    """δ(ε) = Σ_o max(0, P(o) - e^ε R(o)) = E_P[(1 - e^(ε - L))_+]: the least δ with
    P <= e^ε R + δ on every event."""
    e = Decimal(eps)
    total = Decimal(0)
    for loss, mass in pld.items():
        if loss == INF:
            total += mass
        elif loss > e:
            total += mass * (1 - (e - loss).exp())
    return total


def _law(sel: SelectKeys, levels: list[float]) -> Outcome:
    if not levels:
        return _absent()
    return _group_law(sel, sum(sel.units(v) for v in levels))


PROFILES = [[0.3], [1.0, 1.0], [0.25, 0.6, math.inf], [0.1, 0.1, 0.1, 0.1, 0.1], [2.0, 0.0]]


@pytest.mark.parametrize("others", [[], *PROFILES])
@pytest.mark.parametrize("eps_i", [0.0, 0.25, 0.7, 1.0, math.inf])
def test_add_remove_selection_meets_its_guarantee_exactly(
    others: list[float], eps_i: float
) -> None:
    """D = H ∪ {i}, D' = H: the selection's output laws satisfy (f·γk_i, δ) both ways,
    and the bound is tight (a slightly smaller ε fails) whenever i has weight and H ≠ ∅."""
    sel = select_keys(delta=1e-3, c=1.0, share=0.5, step=0.25, neighbours="add_remove")
    eps_sel = float(sel.share) * float(sel.gamma * sel.units(eps_i))
    with_i, without = _law(sel, [*others, eps_i]), _law(sel, others)
    for p, r in ((with_i, without), (without, with_i)):
        d = _hockey(_pld(p, r), eps_sel)
        if others:
            assert d <= Decimal("1e-40")  # pure ε for a group present on both sides
        else:
            assert d <= Decimal(sel.delta)  # the singleton: released w.p. <= δ
    if others and sel.units(eps_i):
        assert _hockey(_pld(with_i, without), eps_sel * 0.98) > Decimal("1e-6")


BIG = [math.inf] * 40  # a group far above the threshold (weight 160 steps against T = 104)


@pytest.mark.parametrize(
    ("g1", "g2"),
    [([0.5], [1.0]), ([], [0.3, 0.3]), ([0.5, 0.2], []), ([], []), (BIG, BIG), ([], BIG)],
)
def test_replacement_moving_groups_costs_kappa_share_and_delta(
    g1: list[float], g2: list[float]
) -> None:
    """u = 2: i moves from group 1 (D) to group 2 (D'); both groups' laws together satisfy
    (f·γk_i, δ) — not 2δ (the review box), even when both sides hold a singleton; the
    bound is tight when both groups are far above the threshold."""
    sel = select_keys(delta=1e-3, c=1.0, share=0.5, step=0.25)
    eps_i = 0.75
    eps_sel = float(sel.share) * float(sel.gamma * sel.units(eps_i))
    d1, d2 = _law(sel, [*g1, eps_i]), _law(sel, g2)
    e1, e2 = _law(sel, g1), _law(sel, [*g2, eps_i])
    for (p1, r1), (p2, r2) in (((d1, e1), (d2, e2)), ((e1, d1), (e2, d2))):
        d = _hockey(_convolve(_pld(p1, r1), _pld(p2, r2)), eps_sel)
        bound = Decimal(sel.delta) if (not g1 or not g2) else Decimal("1e-40")
        assert d <= bound
    if g1 == BIG and g2 == BIG:
        both = _convolve(_pld(d1, e1), _pld(d2, e2))
        assert _hockey(both, eps_sel * 0.9) > Decimal("1e-3")  # fails if the noise halves


def test_describe_states_the_guarantee_in_plain_words() -> None:
    text = select_keys(delta=1e-7, c=1.5, share=0.4).describe()
    assert "min(ε_i, 1.5)" in text
    assert "δ = 1e-07" in text
    assert "0.4 of it selects the groups" in text
