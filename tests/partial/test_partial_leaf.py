"""Level-0 (leaf) thresholding of the partial-DP heavy hitters (seed-004 §2.2.8 "for larger
public domains"; review P1, P8, P9).

* budget and report: ε_tree unchanged, naive bound 2(D+1)/t, per person
  min(d·ε_tree, 2(N_int + d)/t) + ε_count, leaf threshold τ₀ = τ - μ, detection count;
* exact brute force over all outcomes of tiny trees with the leaves thresholded, per
  attribute and per person, with the implementation's own inclusion law; the review's
  deterministic pair whose loss exceeds the old 2N_int/t claim;
* the level-0 decisions follow the inclusion law (explicit draws and the Binomial);
* both engines: identical releases, a large domain that only leaf thresholding can run.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import math
from collections import Counter
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial import hdp_heavy_hitters
from hdp_spark.core.partial.budget import (
    detection_count,
    dlap_sf,
    eps_tree,
    exclusion_probability,
    inclusion_probability,
)
from hdp_spark.core.partial.heavy_hitters import decide_node
from hdp_spark.core.partial.privacy import log_inclusion, worst_case_loss
from hdp_spark.errors import InternalError, ParameterError
from partial.partial_testlib import (
    max_log_ratio_given,
    random_dataset,
    restrict,
    subset_loglik,
)

Record = tuple[int, ...]
Incl = Callable[[int, int], tuple[float, float]]  # (count, level 0..2) -> (ln P[in], ln P[out])


def _spec(d: int, tau: int | None, *, leaf: bool = True, **kw):
    cols = [f"a{j}" for j in range(d)]
    args = {"eps0": 1.3375, "count_fraction": 0, "delta": 1 / 320, "threshold": tau,
            "other": {c: 0 for c in cols}, "leaf_thresholding": leaf} | kw
    return hdp_heavy_hitters(cols, domains={c: [0, 1] for c in cols}, **args)


# -- budget and report --------------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 3, 5, 8, 13])
def test_budget_with_leaf_thresholding(d: int) -> None:
    """Review P1: same Lemma-28 ε_tree, naive 2(D+1)/t, per person 2(N_int + d)/t."""
    on = _spec(d, 200, eps0=1.0, count_fraction=0.4).budget
    off = _spec(d, 200, eps0=1.0, count_fraction=0.4, leaf=False).budget
    t = float(on.tree_scale)
    assert (on.tree_scale, on.mu, on.taus) == (off.tree_scale, off.mu, off.taus)
    assert on.eps_tree_lemma == off.eps_tree_lemma
    assert on.eps_tree_naive == pytest.approx(2 * (on.shape.depth + 1) / t)
    assert off.eps_tree_naive == pytest.approx(2 * on.shape.depth / t)
    n_int = on.shape.n_internal
    assert on.noisy_nodes == n_int + d
    assert on.eps_person == pytest.approx(
        min(d * on.eps_tree, 2 * (n_int + d) / t) + on.eps_count)
    assert off.eps_person == pytest.approx(
        min(d * off.eps_tree, 2 * n_int / t) + off.eps_count)
    assert on.eps_person >= off.eps_person
    assert on.leaf_tau == 200 - on.mu
    assert on.floor(0) == max(200 - 2 * on.mu, 0)
    assert off.leaf_tau is None
    with pytest.raises(InternalError):
        off.tau_at(0)
    # detection: d more noisy nodes, at the lower threshold tau_0
    assert on.detection_count >= off.detection_count
    f = on.detection_count
    miss = d * dlap_sf(f - on.leaf_tau, t) + sum(
        n * dlap_sf(f - tl, t) for n, tl in zip(on.shape.noisy_per_level, on.taus, strict=True))
    assert miss <= on.failure_prob
    assert on.leaf_low_inclusion == pytest.approx(dlap_sf(on.leaf_tau - on.floor(0) + 1, t))


def test_detection_count_leaf_term() -> None:
    off = _spec(8, 300, eps0=1.0, leaf=False).budget
    t = float(off.tree_scale)
    base = detection_count(off.shape, off.taus, t, 0.01)
    with_leaf = detection_count(off.shape, off.taus, t, 0.01, leaf_tau=300 - off.mu)
    assert with_leaf >= base


def test_default_threshold_and_warnings() -> None:
    b = _spec(4, None).budget
    assert b.tau == 2 * b.mu  # tau_0 = mu: leaves keep absent values at ~delta
    assert b.leaf_low_inclusion is not None
    assert b.leaf_low_inclusion <= 1 / 320
    out = importlib.import_module("hdp_spark.core.partial.heavy_hitters").build_report(
        _spec(4, 5), False)
    assert out.leaf_thresholding
    assert out.leaf_threshold == 5 - out.mu
    assert out.leaf_low_inclusion > 0.5  # tau_0 < 0: absent values pass w.p. > 1/2 (P8)
    assert any("leaf threshold" in w for w in out.warnings)
    assert "N_int + d" in out.eps_person_conversion
    quiet = importlib.import_module("hdp_spark.core.partial.heavy_hitters").build_report(
        _spec(4, None), False)
    assert not any("leaf threshold" in w for w in quiet.warnings)


def test_leaf_thresholding_must_be_bool() -> None:
    with pytest.raises(ParameterError, match="`leaf_thresholding` must be True or False, got 1"):
        _spec(4, 20, leaf=1)


# -- chain calculator: level 0 is one more level of the same chain -------------------------------


@pytest.mark.parametrize("tau", [3, 60, 200])
@pytest.mark.parametrize("depth", [1, 3, 5])
def test_chain_with_level0_below_lemma28(tau: int, depth: int) -> None:
    b = _spec(1 << depth, tau, eps0=1.0).budget
    t = float(b.tree_scale)
    loss = worst_case_loss(t, b.mu, b.leaf_tau, depth + 1)  # levels 0..D, thresholds tau_0..
    assert loss <= b.eps_tree
    assert loss <= 0.76 * eps_tree(t, b.mu)


# -- exact brute force over all outcomes, leaves thresholded -------------------------------------


def _members(cands: list[Record], mask: int) -> list[Record]:
    return [c for i, c in enumerate(cands) if (mask >> i) & 1]


def max_log_ratio_leaf(x: Counter[Record], xp: Counter[Record], d: int, incl: Incl) -> float:
    """Exact max over ALL outcomes (L_0..L_{d-1}, L_A, L_B, L_root) of ln P_x / P_x' for
    d in {3, 4} binary attributes with the leaves thresholded (d = 3: the right block is
    attribute 2 and a padded constant, which is not thresholded)."""
    vals: list[Record] = [(0,), (1,)]
    leaf = []
    for j in range(d):
        fj, fjp = restrict(x, (j,)), restrict(xp, (j,))
        leaf.append(subset_loglik(vals, fj, 0, incl) - subset_loglik(vals, fjp, 0, incl))
    best = -math.inf
    for masks in itertools.product(range(4), repeat=d):
        lists = [_members(vals, mk) for mk in masks]
        la_c = [a + b for a in lists[0] for b in lists[1]]
        lb_c = ([a + b for a in lists[2] for b in lists[3]] if d == 4 else list(lists[2]))
        head = sum(float(leaf[j][masks[j]]) for j in range(d))
        best = max(best, head + max_log_ratio_given(x, xp, d, la_c, lb_c, incl))
    return best


def _own_inclusion(spec) -> Incl:
    b = spec.budget
    t = float(b.tree_scale)

    def incl(f: int, level: int) -> tuple[float, float]:
        args = (f, b.tau_at(level), b.mu, t)
        return math.log(inclusion_probability(*args)), math.log(exclusion_probability(*args))

    return incl


def _continuous(lam: float, mu: float, tau: float) -> Incl:
    def incl(f: int, level: int) -> tuple[float, float]:
        tl = tau + (level - 1) * mu
        li = float(log_inclusion(np.array([f]), tl, mu, lam, continuous=True)[0])
        return li, math.log(-math.expm1(li))

    return incl


ZERO, ONE = (0, 0, 0, 0), (1, 1, 1, 1)


def test_review_pair_continuous_reference() -> None:
    """Review P1: continuous lambda = 3, kappa = ln 160, tau = 40, x = {11 x 0000,
    200 x 1111}, one 0000 -> 1111, leaves thresholded: exact loss 8/lambda = 2.667, above
    the 2 N_int / lambda = 2.0 the spec's per-person formula reported."""
    lam = 3.0
    incl = _continuous(lam, lam * math.log(160), 40.0)
    x = Counter({ZERO: 11, ONE: 200})
    xp = Counter({ZERO: 10, ONE: 201})
    loss = max(max_log_ratio_leaf(x, xp, 4, incl), max_log_ratio_leaf(xp, x, 4, incl))
    assert loss == pytest.approx(8 / lam, abs=2e-3)
    assert loss > 2 * 3 / lam


def test_review_pair_with_our_noise_needs_the_leaf_term() -> None:
    """The same pair in our discrete noise: above the old 2 N_int / t, below the reported
    eps_person = min(d eps_tree, 2 (N_int + d) / t)."""
    spec = _spec(4, 40)
    b = spec.budget
    t = float(b.tree_scale)
    incl = _own_inclusion(spec)
    mu = b.mu
    worst = 0.0
    for n0 in (mu // 3, mu // 2, mu - 2, 11):  # the zero record straddling tau_0 = 40 - mu < 0
        x = Counter({ZERO: n0, ONE: 200})
        xp = Counter({ZERO: n0 - 1, ONE: 201})
        worst = max(worst, max_log_ratio_leaf(x, xp, 4, incl), max_log_ratio_leaf(xp, x, 4, incl))
    assert worst > 2 * b.shape.n_internal / t  # the formula without the leaves under-reports
    assert worst <= b.eps_person + 1e-9


def _neighbour(rng: np.random.Generator, x: Counter[Record], d: int,
               whole_record: bool) -> Counter[Record]:
    recs = sorted(r for r, c in x.items() if c > 0)
    src = recs[rng.integers(len(recs))]
    if whole_record:
        dst = tuple(1 - v for v in src) if rng.random() < 0.5 else tuple(
            int(v) for v in rng.integers(0, 2, d))
    else:
        j = int(rng.integers(d))
        dst = tuple(1 - v if i == j else v for i, v in enumerate(src))
    xp = Counter(x)
    xp[src] -= 1
    xp[dst] += 1
    return +xp


@pytest.mark.slow
@pytest.mark.parametrize("d", [4, 3])
@pytest.mark.parametrize("tau", [1, 20, 40, 70])
def test_brute_force_leaf_per_attribute_and_person(d: int, tau: int) -> None:
    """Oracle 7 with level 0: one attribute flip stays below eps_tree (= eps_attribute
    here), a whole-record change below eps_person."""
    spec = _spec(d, tau)
    b = spec.budget
    incl = _own_inclusion(spec)
    rng = np.random.default_rng(31 * d + tau)
    attr, person = 0.0, 0.0
    for _ in range(12):
        x = random_dataset(rng, d, tau, b.mu)
        xa = _neighbour(rng, x, d, whole_record=False)
        xp = _neighbour(rng, x, d, whole_record=True)
        attr = max(attr, max_log_ratio_leaf(x, xa, d, incl), max_log_ratio_leaf(xa, x, d, incl))
        person = max(person, max_log_ratio_leaf(x, xp, d, incl),
                     max_log_ratio_leaf(xp, x, d, incl))
    assert attr <= b.eps_tree + 1e-9
    assert attr <= b.eps_attribute + 1e-9
    assert person <= b.eps_person + 1e-9


# -- the level-0 decisions follow the inclusion law ----------------------------------------------


def _budget(t: int = 8, mu: int = 59, tau: int = 160):
    base = _spec(4, 200).budget
    return dataclasses.replace(base, tree_scale=Fraction(t), mu=mu, tau=tau,
                               taus=(tau, tau + mu), leaf_tau=tau - mu)


def _within(k: int, n: int, p: float) -> bool:
    return abs(k / n - p) <= 4.5 * math.sqrt(p * (1 - p) / n) + 1e-12


@pytest.mark.parametrize(("f", "tau"), [(60, 160), (101, 160), (120, 160), (3, 89), (1, 40)])
def test_leaf_explicit_draws_follow_law(f: int, tau: int) -> None:
    """Seen values (count above the leaf floor) are kept at P[f + Z > tau_0]."""
    b = _budget(tau=tau)
    tau0 = tau - 59
    if f <= b.floor(0):
        pytest.skip("not an explicit draw")
    n = 12000
    kept = decide_node(0, 0, tuple(range(n)), (0,), 1, dict.fromkeys(range(n), f), b,
                       ReleaseKey.from_unsafe_seed(f"leaf-explicit-{f}-{tau}"))
    assert _within(len(kept), n, inclusion_probability(f, tau0, 59, 8.0))


@pytest.mark.parametrize("tau", [160, 89, 40])
def test_leaf_low_values_follow_same_law(tau: int) -> None:
    """Absent values (and counts <= max(tau_0 - mu, 0)) share P[Z >= tau_0 - floor_0 + 1],
    in the same discrete law, including tau_0 < mu and tau_0 < 0 (review P2, P8)."""
    b = _budget(tau=tau)
    p0 = inclusion_probability(0, tau - 59, 59, 8.0)
    assert p0 == pytest.approx(dlap_sf(tau - 59 - b.floor(0) + 1, 8.0))
    n, reps = 100_000 if p0 < 0.01 else 4000, 20
    total = 0
    for r in range(reps):
        kept = decide_node(0, 3, tuple(range(n)), (0,), 1, {}, b,
                           ReleaseKey.from_unsafe_seed(f"leaf-low-{tau}-{r}"))
        assert list(kept) == sorted(set(kept))
        total += len(kept)
    assert _within(total, n * reps, p0)


# -- both engines ---------------------------------------------------------------------------------

M = 3000  # a domain whose level-1 product (9e6) only leaf thresholding keeps small


def _frame(n: int = 6000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, M, n).astype(np.int64)
    b = rng.integers(0, M, n).astype(np.int64)
    c = rng.choice(["x", "y", "z", None], n)
    planted = [(17, 2999, "x", 900), (5, 5, "y", 500), (17, 4, "z", 400)]
    start = 0
    for va, vb, vc, k in planted:
        a[start:start + k], b[start:start + k], c[start:start + k] = va, vb, vc
        start += k
    return pd.DataFrame({"a": a, "b": b, "c": c})


def _hh_spec(**kw):
    args = {"domains": {"a": list(range(M)), "b": list(range(M)), "c": ["x", "y", "z"]},
            "eps0": 2.0, "delta": 1e-4, "other": {"a": 0, "b": 0},
            "leaf_thresholding": True, "max_candidates": 10**5} | kw
    return hdp_heavy_hitters(["a", "b", "c"], **args)


def test_large_domain_needs_leaf_thresholding(engine) -> None:
    """Without level 0 the level-1 product (M² = 9e6) hits max_candidates; with it the
    planted records are found, on both engines, with the report's per-person cost."""
    mod = importlib.import_module(f"hdp_spark.{engine.name}")
    pdf = _frame()
    with pytest.raises(ParameterError, match="max_candidates"):
        mod.heavy_hitters(engine.frame(pdf), _hh_spec(leaf_thresholding=False), unsafe_seed=1)
    out = mod.heavy_hitters(engine.frame(pdf), _hh_spec(), unsafe_seed=1)
    table = out.table if engine.name == "pandas" else out.table.toPandas()
    got = {(int(r.a), int(r.b), r.c) for r in table.itertuples()}
    assert {(17, 2999, "x"), (5, 5, "y"), (17, 4, "z")} <= got
    assert out.report.leaf_thresholding
    assert out.report.noisy_nodes == 3 + 3  # N_int = ceil(3/2) + ceil(3/4), plus 3 leaves


def test_leaf_release_identical_across_engines(spark) -> None:
    """Oracle 13 with level 0: same seed, same table on pandas (two row orders) and Spark."""
    ph = importlib.import_module("hdp_spark.pandas")
    sh = importlib.import_module("hdp_spark.spark")
    pdf = _frame(seed=4)
    spec = _hh_spec()
    a = ph.heavy_hitters(pdf, spec, unsafe_seed=5).table
    b = ph.heavy_hitters(pdf.sample(frac=1.0, random_state=2), spec, unsafe_seed=5).table
    c = sh.heavy_hitters(spark.createDataFrame(pdf).repartition(3), spec,
                         unsafe_seed=5).table.toPandas()
    pd.testing.assert_frame_equal(a, b)
    assert a.to_dict("records") == c.to_dict("records")


def test_leaf_report_is_data_independent() -> None:
    ph = importlib.import_module("hdp_spark.pandas")
    spec = _hh_spec()
    r1 = ph.heavy_hitters(_frame(seed=1), spec).report
    r2 = ph.heavy_hitters(_frame(n=3000, seed=9), spec).report
    assert r1 == r2
