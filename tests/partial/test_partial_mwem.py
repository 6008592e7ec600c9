"""Partial-DP MWEM (seed-004 §2.5, §5 oracles 23-25; Algorithm 1, Theorem 12).

* budget: ε_T = ε₀/√(2T) (rounded down), per attribute ½ε₀², per person (ℓ² + ℓ)ε₀²/4;
* the sensitivity argument (score <= 1 per attribute, <= ℓ per person over every
  attribute-disjoint tuple) checked by enumerating record pairs;
* every A_t a distribution, answers in [0, 1], selected tuples attribute-disjoint, ℓ = 1;
* the selection's law on a tiny instance; utility against the uniform start;
* both engines; errors name parameter, rule and value (domain and tuple limits).
"""

from __future__ import annotations

import importlib
import itertools
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial import accounting
from hdp_spark.core.partial.mwem import (
    MwemSpec,
    eps_round,
    hdp_mwem,
    run_mwem,
    table_tuples,
    tuple_count,
)
from hdp_spark.core.partial.tree import key_space
from hdp_spark.errors import ParameterError


def _spec(d: int = 4, k: int = 1, **kw) -> MwemSpec:
    cols = [f"a{j}" for j in range(d)]
    return hdp_mwem(cols, domains={c: [0, 1] for c in cols}, eps0=kw.pop("eps0", 1.0), k=k,
                    other={c: 0 for c in cols}, **kw)


def _counts(x: np.ndarray, spec: MwemSpec) -> list[dict[int, int]]:
    out = []
    for s in spec.workload:
        key = np.zeros(len(x), dtype=np.int64)
        for j in s:
            key = key * spec.sizes[j] + x[:, j]
        c = np.bincount(key, minlength=key_space(s, spec.sizes))
        out.append({i: int(v) for i, v in enumerate(c) if v})
    return out


def test_oracle23_budget() -> None:
    assert float(eps_round(1.0, 10)) == pytest.approx(0.223607, abs=2e-6)
    assert eps_round(1.0, 10) <= 1 / math.sqrt(20)
    spec = _spec(5, 1, per_round=5)
    assert spec.rho_person == pytest.approx(7.5)
    assert spec.rho_attribute == pytest.approx(0.5)
    x = np.random.default_rng(0).integers(0, 2, (50, 5))
    r = run_mwem(hdp_mwem([f"a{j}" for j in range(5)], domains={f"a{j}": [0, 1]
                 for j in range(5)}, eps0=1.0, k=1, per_round=5, rounds=10,
                 other={f"a{j}": 0 for j in range(5)}), _counts(x, spec),
                 ReleaseKey.from_unsafe_seed(1)).report
    assert r["rho_attribute"] <= 0.5
    assert r["rho_attribute"] > 0.5 * (1 - 1e-5)
    assert r["rho_person"] <= 7.5
    assert r["rho_person_theorem12"] == pytest.approx(12.5)
    # (ε, δ) at the default δ = 1e-6 (CKS20), of the realised ρ
    assert r["delta"] == 1e-6
    assert r["eps_delta_person_cks20"] == pytest.approx(
        accounting.eps_cks20(r["rho_person"], 1e-6))
    assert r["eps_delta_attribute_cks20"] < r["eps_delta_person_cks20"]


def test_delta_sets_the_reported_conversion_only() -> None:
    x = np.random.default_rng(1).integers(0, 2, (80, 3))
    reports = []
    for delta in (1e-6, 1e-3):
        spec = _spec(3, 1, rounds=5, delta=delta)
        reports.append(run_mwem(spec, _counts(x, spec), ReleaseKey.from_unsafe_seed(2)))
    assert np.array_equal(reports[0].distribution, reports[1].distribution)
    a, b = reports[0].report, reports[1].report
    assert a["rho_person"] == b["rho_person"]
    assert b["eps_delta_person_cks20"] < a["eps_delta_person_cks20"]
    assert b["eps_delta_person_cks20"] == pytest.approx(
        accounting.eps_cks20(b["rho_person"], 1e-3))


@pytest.mark.parametrize(("d", "k", "ell"), [(4, 1, 3), (4, 2, 2), (5, 2, 2)])
def test_score_sensitivity_by_enumeration(d: int, k: int, ell: int) -> None:
    """Over every attribute-disjoint ℓ-tuple of queries, a one-attribute change of one
    record moves Σ_i |Δc_i| by <= 1 and a whole-record change by <= ℓ (so the score
    Σ_i |n q_i(A) − c_i| and the measured counts have those sensitivities)."""
    spec = _spec(d, k, per_round=ell)
    tables = table_tuples(spec.workload, ell)
    assert tables
    for ts in tables:  # pairwise attribute-disjoint by construction
        for i, j in itertools.combinations(ts, 2):
            assert not set(spec.workload[i]) & set(spec.workload[j])
    records = list(itertools.product((0, 1), repeat=d))

    def cell(rec: tuple[int, ...], s: tuple[int, ...]) -> int:
        c = 0
        for j in s:
            c = c * 2 + rec[j]
        return c

    for u, v in itertools.combinations(records, 2):
        changed = sum(1 for a, b in zip(u, v, strict=True) if a != b)
        for ts in tables:
            for cs in itertools.product(*(range(2 ** len(spec.workload[i])) for i in ts)):
                moved = sum(abs(int(cell(u, spec.workload[i]) == c)
                                - int(cell(v, spec.workload[i]) == c))
                            for i, c in zip(ts, cs, strict=True))
                assert moved <= (1 if changed == 1 else ell)


@pytest.mark.parametrize("ell", [1, 2])
def test_oracles24_25_run(ell: int) -> None:
    spec = _spec(4, 2, per_round=ell, rounds=25)
    rng = np.random.default_rng(ell)
    x = rng.integers(0, 2, (400, 4))
    x[:, 1] = x[:, 0]  # a strong 2-way dependence for MWEM to learn
    res = run_mwem(spec, _counts(x, spec), ReleaseKey.from_unsafe_seed(f"mw-{ell}"))
    a = res.distribution
    assert np.all(a >= 0)
    assert a.sum() == pytest.approx(1.0)
    fr = np.array([r["mwem_fraction"] for r in res.rows])
    assert np.all((fr >= 0) & (fr <= 1))
    assert len(res.report["selected"]) == 25
    for picked in res.report["selected"]:
        assert len(picked) == ell
        attrs = [set(spec.workload[i]) for i, _ in picked]
        for p, q in itertools.combinations(attrs, 2):
            assert not p & q
    # utility: better than the uniform start on the planted marginal (a0, a1)
    truth = np.array([(x[:, 0] == a).sum() for a in (0, 1)]) / 400
    got = [r["mwem_fraction"] for r in res.rows if r["marginal"] == "a0,a1"]
    uniform_err = abs(0.25 - truth[0])  # cell (0, 0) holds P(a0 = 0)
    assert abs(got[0] - truth[0]) < uniform_err


def test_selection_follows_exponential_law() -> None:
    """One round, ℓ = 1, 4 binary 1-way marginals (8 queries): the chosen query's law is
    ∝ exp(ε_T · |n q(A_1) − c|) (A_1 uniform, so n q = n/2)."""
    spec = _spec(4, 1, rounds=1, eps0=0.08)
    n = 40
    x = np.zeros((n, 4), dtype=np.int64)
    x[:30, 0] = 1  # a0: 30 ones -> |20 - c| = 10 on both cells; others 0 on both
    x[:25, 1] = 1  # a1: |20 - 25| = 5
    counts = _counts(x, spec)
    reps = 3000
    hits = Counter()
    for r in range(reps):
        res = run_mwem(spec, counts, ReleaseKey.from_unsafe_seed(f"law-{r}"))
        hits[tuple(res.report["selected"][0][0])] += 1
    eps_t = float(eps_round(0.08, 1))
    scores = {(i, c): abs(n / 2 - counts[i].get(c, 0)) for i in range(4) for c in range(2)}
    w = {q: math.exp(eps_t * s) for q, s in scores.items()}
    z = sum(w.values())
    keys = sorted(scores)
    obs = [hits.get(q, 0) for q in keys]
    exp = [reps * w[q] / z for q in keys]
    assert stats.chisquare(obs, exp).pvalue > 1e-4


def test_default_rounds_from_public_n() -> None:
    spec = _spec(4, 2)
    t = spec.rounds_for(1000)
    m = 6 * 4
    assert t == round(math.sqrt(math.log(16)) * 1000 / math.log(m))


def test_release_on_engine(engine) -> None:
    mod = importlib.import_module(f"hdp_spark.{engine.name}")
    rng = np.random.default_rng(3)
    pdf = pd.DataFrame({"a": rng.integers(0, 3, 500), "b": rng.choice(["x", "y"], 500),
                        "c": rng.random(500) < 0.3})
    spec = hdp_mwem(["a", "b", "c"], domains={"a": [0, 1, 2], "b": ["x", "y"],
                                              "c": [False, True]},
                    eps0=1.0, k=2, rounds=15, other={"a": 0, "b": "x", "c": False})
    out = mod.mwem(engine.frame(pdf), spec, unsafe_seed=4)
    table = out.table if engine.name == "pandas" else out.table.toPandas()
    assert list(table.columns) == ["marginal", "a", "b", "c", "mwem_fraction"]
    assert len(table) == 6 + 6 + 4
    ref = importlib.import_module("hdp_spark.pandas").mwem(
        pdf, spec, unsafe_seed=4).table
    assert np.allclose(table["mwem_fraction"], ref["mwem_fraction"])


def test_agg_equals_the_mwem_function(engine) -> None:
    """Inside ``agg`` MWEM is one list column with the rows of ``mwem()`` (same kernel, same
    key); it is refused with ``by`` and beside another whole-table aggregator."""
    mod = importlib.import_module(f"hdp_spark.{engine.name}")
    rng = np.random.default_rng(5)
    pdf = pd.DataFrame({"a": rng.integers(0, 3, 400), "b": rng.choice(["x", "y"], 400),
                        "g": rng.choice(["u", "v"], 400)})
    spec = hdp_mwem(["a", "b"], domains={"a": [0, 1, 2], "b": ["x", "y"]}, eps0=1.0, k=1,
                    rounds=10, other={"a": 0, "b": "x"}, alias="m")
    df = engine.frame(pdf)
    out = mod.agg(df, spec, unsafe_seed=6)
    row = (out if engine.name == "pandas" else out.toPandas()).iloc[0]
    ref = importlib.import_module("hdp_spark.pandas").mwem(
        pdf, spec, unsafe_seed=6).table
    assert [c["marginal"] for c in row["m"]] == list(ref["marginal"])
    assert np.allclose([c["mwem_fraction"] for c in row["m"]], ref["mwem_fraction"])
    with pytest.raises(ParameterError, match=r"\(and MWEM\) are released for the whole"):
        mod.agg(df, spec, by="g", keys=["u", "v"])
    other = hdp_mwem(["a", "b"], domains={"a": [0, 1, 2], "b": ["x", "y"]}, eps0=1.0, k=1,
                     other={"a": 0, "b": "x"}, alias="m2")
    with pytest.raises(ParameterError, match=r"at most one heavy-hitters or marginals"):
        mod.agg(df, spec, other)


@pytest.mark.parametrize(("kw", "match"), [
    ({"d": 22, "k": 1}, r"`max_domain` = 1048576, got 4194304 \(practical up to about 2\*\*20"),
    ({"d": 4, "k": 2, "per_round": 3}, "`per_round` = 3: the marginals hold no 3 pairwise"),
    ({"d": 8, "k": 2, "per_round": 4, "max_tuples": 1000},
     r"there are \d+ for `per_round` = 4, more than `max_tuples` = 1000"),
    ({"d": 4, "k": 1, "rounds": 0}, r"`rounds` must be an int in \[1, 10000\] or None, got 0"),
    ({"d": 4, "k": 1, "per_round": 5}, r"`per_round` must be an int in \[1, 4\], got 5"),
    ({"d": 4, "k": 1, "eps0": -1}, "`eps0` must be a positive finite number, got -1"),
    ({"d": 4, "k": 1, "delta": 1.0}, r"`delta` must be in \(0, 1\), got 1.0"),
    ({"d": 4, "k": 1, "delta": True}, r"`delta` must be in \(0, 1\), got True"),
])
def test_parameter_errors(kw, match) -> None:
    with pytest.raises(ParameterError, match=match):
        _spec(**kw)


def test_tuple_count() -> None:
    spec = _spec(4, 1, per_round=2)
    assert tuple_count(spec.workload, spec.sizes, 2) == 4 * 3 * 2 * 2


def test_unit_and_alias_rules() -> None:
    with pytest.raises(ParameterError, match="`privacy_unit` must not be one of `cols`"):
        _spec(4, 1, privacy_unit="a0")
    with pytest.raises(ParameterError, match="`alias` must be a non-empty column name"):
        _spec(4, 1, alias="")
    with pytest.raises(ParameterError, match="`workload` must be a non-empty tuple"):
        MwemSpec(_spec(4, 1).domains, ((1, 0),), 1.0)
