"""Budget, accounting and parameter rules (seed-004 §5 oracles 1-6, review P2/P7/P8/P9/P11)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from hdp_spark.core.partial import hdp_heavy_hitters
from hdp_spark.core.partial.accounting import (
    delta_bs16,
    eps_bs16,
    eps_cks20,
    per_column_person,
    per_person_pure,
    per_person_rho,
    rho_from_pure,
)
from hdp_spark.core.partial.budget import (
    TreeShape,
    detection_count,
    dlap_sf,
    eps_tree,
    inclusion_probability,
    lam_for,
    release_max_count,
)
from hdp_spark.errors import ParameterError

BIN = {f"a{j}": [0, 1] for j in range(16)}


def _spec(**kw):
    cols = kw.pop("cols", list(BIN))
    domains = kw.pop("domains", {c: BIN.get(c, [0, 1]) for c in cols})
    return hdp_heavy_hitters(cols, domains=domains, **{"eps0": 1.0, **kw})


# -- accounting (oracles 1-5) ------------------------------------------------------------

def test_conversions_match_spec_vectors() -> None:
    assert per_person_pure(0.5, 10) == 5.0
    assert per_person_rho(0.5, 10) == pytest.approx(12.5)
    assert eps_bs16(12.5, 1e-6) == pytest.approx(38.7826, abs=1e-4)
    assert delta_bs16(12.5, 40.0) == pytest.approx(2.6996e-7, rel=1e-4)
    assert eps_cks20(2.63, 1e-6) == pytest.approx(13.79, abs=0.01)
    assert eps_cks20(1.02, 1e-6) == pytest.approx(7.856, abs=0.005)
    assert eps_bs16(2.63, 1e-6) == pytest.approx(14.686, abs=1e-3)
    assert eps_bs16(1.02, 1e-6) == pytest.approx(8.528, abs=1e-3)
    assert rho_from_pure(1.0) == 0.5
    assert per_column_person([0.5, 0.5, 1.0]) == (2.0, pytest.approx(0.75))
    with pytest.raises(ParameterError, match="delta"):
        eps_bs16(1.0, 1.5)


# -- Lemma 28 and the solver (oracle 6) -----------------------------------------------------

def test_eps_tree_vectors() -> None:
    assert eps_tree(3, 3 * math.log(160)) == pytest.approx(1.33753, abs=1e-5)
    assert eps_tree(8.002501563, 59.040527198) == pytest.approx(0.5, abs=1e-6)
    assert lam_for(0.5, math.log(1600)) == pytest.approx(8.0025016, abs=1e-6)
    assert lam_for(0.5, math.log(160)) == pytest.approx(8.0251572, abs=1e-6)
    assert lam_for(0.5, math.log(160)) * math.log(160) == pytest.approx(40.7291, abs=1e-3)


@pytest.mark.parametrize("eps0", [0.05, 0.3, 1.0, 4.0])
@pytest.mark.parametrize("fraction", [0.0, 0.25, 0.5, 0.9])
@pytest.mark.parametrize("delta", [1e-9, 1e-6, 1 / 320, 0.2])
def test_solver_rounds_up_and_never_exceeds_eps0(eps0: float, fraction: float,
                                                 delta: float) -> None:
    b = _spec(eps0=eps0, count_fraction=fraction, delta=delta).budget
    t = float(b.tree_scale)
    assert b.tree_scale.denominator <= 1024
    assert b.mu >= 2
    assert isinstance(b.mu, int)
    assert b.mu >= b.kappa * t
    assert eps_tree(t, b.mu) <= eps0 * (1 - fraction) * (1 + 1e-12)
    assert b.eps_tree == min(b.eps_tree_lemma, b.eps_tree_naive)
    assert b.eps_attribute <= eps0 * (1 + 1e-12)
    assert b.eps_attribute > 0.95 * eps0  # rounding t and mu up costs little
    if fraction:
        assert b.count_scale is not None
        assert b.count_scale >= Fraction(2) / Fraction(eps0 * fraction)
    else:
        assert b.count_scale is None
        assert b.eps_count == 0


def test_per_person_bound_and_padding() -> None:
    """Review P7: N_int counts padded nodes: d_real = 5 gives 6 > d - 1, d = 9 gives 11."""
    assert TreeShape.for_attributes(5).n_internal == 6
    assert TreeShape.for_attributes(9).n_internal == 11
    assert TreeShape.for_attributes(16).n_internal == 15
    assert TreeShape.for_attributes(5).d_pad == 8
    spec = _spec(cols=[f"a{j}" for j in range(5)])
    b = spec.budget
    t = float(b.tree_scale)
    assert b.shape.depth == 3
    assert b.eps_person == pytest.approx(min(5 * b.eps_tree, 2 * 6 / t) + b.eps_count)
    assert b.eps_person < 5 * b.eps_attribute  # tighter than Proposition 8
    rep = _spec().budget
    assert rep.eps_person == pytest.approx(2 * 15 / float(rep.tree_scale) + rep.eps_count)


def test_discrete_inclusion_vectors() -> None:
    """Review P2 test vectors: the discrete law (t = 8, mu = 59)."""
    ref = {0: 2.938e-4, 1: 2.938e-4, 41: 2.938e-4, 60: 3.1587e-3, 100: 0.46879, 120: 0.9564}
    for f, p in ref.items():
        assert inclusion_probability(f, 100, 59, 8.0) == pytest.approx(p, rel=2e-3)
    # tau_l < mu: never p_low; counts are clipped at 0.
    assert inclusion_probability(0, 30, 59, 8.0) == pytest.approx(0.011025, rel=1e-3)
    assert inclusion_probability(1, 30, 59, 8.0) == pytest.approx(0.012493, rel=1e-3)
    q = math.exp(-1 / 8)
    assert dlap_sf(1, 8.0) + (1 - dlap_sf(0, 8.0)) + (1 - q) / (1 + q) == pytest.approx(1.0)


def test_detection_and_release_figures() -> None:
    shape = TreeShape.for_attributes(64)
    taus = tuple(100 + (lv - 1) * 59 for lv in range(1, 7))
    f = detection_count(shape, taus, 8.0025, 0.01)
    # The continuous-law figure is 426.5 (seed-004 §2.2.6); the discrete tail is at most
    # 2/(1+e^{-1/t}) times larger (review P9): a few counts more.
    assert 426 <= f <= 432
    miss = sum(n * dlap_sf(f - t, 8.0025) for n, t in zip(shape.noisy_per_level, taus,
                                                            strict=True))
    miss_before = sum(n * dlap_sf(f - 1 - t, 8.0025)
                      for n, t in zip(shape.noisy_per_level, taus, strict=True))
    assert miss <= 0.01 < miss_before
    x = release_max_count(395, 59, 8.0025, 1e-3)
    assert inclusion_probability(x, 395, 59, 8.0025) <= 1e-3
    assert inclusion_probability(x + 1, 395, 59, 8.0025) > 1e-3
    assert inclusion_probability(0, 395, 59, 8.0025) <= 1e-3


def test_report_low_inclusion_and_warning_when_tau_below_mu() -> None:
    """Review P8: per-level false-positive rates; warn when tau < mu."""
    spec = _spec(threshold=10, delta=1e-6)
    b = spec.budget
    assert b.low_inclusion[0] == pytest.approx(dlap_sf(11, float(b.tree_scale)))
    assert b.low_inclusion[0] > spec.delta
    assert b.low_inclusion[1] <= spec.delta
    from hdp_spark.core.partial.heavy_hitters import build_report

    rep = build_report(spec, unsafe=False)
    assert any("threshold" in w for w in rep.warnings)
    assert not build_report(_spec(), unsafe=False).warnings


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"eps0": 0}, "eps0"),
        ({"eps0": float("inf")}, "eps0"),
        ({"eps0": True}, "eps0"),
        ({"delta": 0.5}, "delta"),
        ({"delta": 0}, "delta"),
        ({"count_fraction": 1.0}, "count_fraction"),
        ({"threshold": -3}, "threshold"),
        ({"failure_prob": 1}, "failure_prob"),
        ({"beta": 0}, "beta"),
        ({"max_candidates": 0}, "max_candidates"),
        ({"cols": ["a0"]}, "at least 2"),
        ({"cols": ["a0", "a0"]}, "repeat"),
        ({"cols": "a0"}, "cols"),
        ({"cols": ["a0", "a1"], "domains": {"a0": [0, 1]}}, "missing"),
        ({"cols": ["a0", "a1"], "domains": {"a0": [0, 1], "a1": [0, 1], "z": [1]}}, "unexpected"),
        ({"cols": ["a0", "a1"], "domains": {"a0": [0, 0], "a1": [0, 1]}}, "repeat a value"),
        ({"cols": ["a0", "a1"], "domains": {"a0": [], "a1": [0, 1]}}, "non-empty"),
        ({"cols": ["a0", "a1"], "domains": {"a0": [0, "x"], "a1": [0, 1]}}, "one kind"),
        ({"cols": ["a0", "a1"], "domains": {"a0": [0, float("nan")], "a1": [0, 1]}}, "NaN"),
        ({"cols": ["a0", "a1"], "domains": {"a0": {0, 1}, "a1": [0, 1]}}, "ordered"),
        ({"cols": ["a0", "a1"], "domains": {"a0": "ab", "a1": [0, 1]}}, "list of values"),
        ({"cols": ["a0", "a1"], "other": {"a0": 5}}, "other"),
        ({"cols": ["a0", "a1"], "other": {"zz": 0}}, "other"),
        ({"cols": ["a0", "a1"], "privacy_unit": "a0"}, "privacy_unit"),
        ({"cols": [f"c{j}" for j in range(64)],
          "domains": {f"c{j}": [0, 1] for j in range(64)}}, "2\\*\\*62"),
    ],
)
def test_parameter_rules(kwargs: dict, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        _spec(**kwargs)


def test_other_absorbs_unknown_values_without_extra_category() -> None:
    spec = _spec(cols=["a0", "a1"], other={"a0": 1})
    assert spec.domains[0].size == 2
    assert spec.domains[0].other_code == 1
    assert spec.domains[1].size == 3
    assert spec.domains[1].other_code == 2
    assert spec.domains[1].value(2) is None
    # 64 binary attributes fit once `other` removes the extra categories? 2**64 does not.
    cols = [f"c{j}" for j in range(61)]
    ok = hdp_heavy_hitters(cols, domains={c: [0, 1] for c in cols}, eps0=1.0,
                           other={c: 0 for c in cols})
    assert ok.budget.shape.d_pad == 64
