"""Heavy hitters, marginals and MWEM under ``privacy_unit=, max_rows=R``: persons with at most
R rows count with all their rows, and each mechanism runs at ε₀/R per row, so that any change
of a counted person's values (one attribute in all their rows, or all of their rows) costs at
most the reported per-attribute / per-person guarantee, and a person with more rows costs
nothing. Exact losses (brute force over all outcomes of the tree; exact Rényi divergences of
the discrete Gaussian; score and measurement sensitivities of MWEM), exact budgets, both
engines, and every error path."""

from __future__ import annotations

import importlib
import math
from collections import Counter
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial import hdp_heavy_hitters
from hdp_spark.core.partial.budget import SCALE_GRID
from hdp_spark.core.partial.heavy_hitters import build_report
from hdp_spark.core.partial.mwem import eps_round, hdp_mwem, run_mwem, table_tuples
from hdp_spark.core.partial.projection import (
    finalize_marginals,
    hdp_marginals,
    marginal_requests,
)
from hdp_spark.core.partial.projection_budget import VARIANCE_GRID
from hdp_spark.errors import ParameterError
from hdp_spark.pandas._heavy_hitters import bounded_persons
from hdp_spark.pandas.engine import PandasEngine
from partial.partial_testlib import Record, max_log_ratio, own_inclusion, random_dataset

D = 4
COLS = [f"a{j}" for j in range(D)]
BINARY = {c: [0, 1] for c in COLS}
OTHER = {c: 0 for c in COLS}  # no extra null category: binary records


def _frame(seed: int = 0, persons: int = 150) -> pd.DataFrame:
    """Persons with 1 to 5 rows each, binary attributes drawn per row."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(1, 6, persons)
    ids = np.repeat(np.arange(persons), rows)
    data = rng.integers(0, 2, (ids.size, D))
    return pd.DataFrame({"id": ids, **{c: data[:, j] for j, c in enumerate(COLS)}})


def _with_person(df: pd.DataFrame, pid: int, records: list[Record]) -> pd.DataFrame:
    """``df`` with person ``pid``'s rows replaced by ``records`` (same number of rows)."""
    out = df.copy()
    mask = out["id"] == pid
    assert int(mask.sum()) == len(records)
    out.loc[mask, COLS] = np.array(records)
    return out


def _persons(df: pd.DataFrame, max_rows: int) -> tuple[int, int]:
    """A counted person with exactly ``max_rows`` rows and one with more."""
    sizes = df.groupby("id").size()
    return int(sizes[sizes == max_rows].index[0]), int(sizes[sizes > max_rows].index[0])


def _unit(max_rows: int) -> dict[str, Any]:
    return {"privacy_unit": "id", "max_rows": max_rows} if max_rows > 1 else {}


# -- heavy hitters: pure DP, group privacy over R rows -----------------------------------------


def _hh(max_rows: int, eps0: float = 1.3375, tau: int | None = 20, count_fraction: float = 0.0,
        **kw: Any) -> Any:
    # delta = 1/320: kappa = ln 160, as the row-level brute-force tests
    return hdp_heavy_hitters(COLS, domains=BINARY, eps0=eps0, delta=1 / 320, threshold=tau,
                             count_fraction=count_fraction, other=OTHER, **_unit(max_rows),
                             **kw)


@pytest.mark.parametrize("max_rows", [1, 2, 3, 5])
@pytest.mark.parametrize("count_fraction", [0.0, 0.5])
def test_hh_budget_is_the_row_budget_at_eps0_over_r(max_rows: int,
                                                     count_fraction: float) -> None:
    eps0 = 1.1
    b = _hh(max_rows, eps0, None, count_fraction).budget
    row = _hh(1, eps0 / max_rows, None, count_fraction).budget  # the mechanism per row
    assert (b.tree_scale, b.mu, b.taus) == (row.tree_scale, row.mu, row.taus)
    assert b.release_max_count == row.release_max_count
    assert b.detection_count == row.detection_count
    assert b.max_rows == max_rows
    for name in ("eps_tree", "eps_tree_lemma", "eps_tree_naive", "eps_count",
                 "eps_attribute", "eps_person"):
        assert getattr(b, name) == pytest.approx(max_rows * getattr(row, name), rel=1e-12)
    assert b.eps_attribute <= eps0 * (1 + 1e-12)
    if count_fraction:  # b >= 2R/eps_count exactly, rounded up on the grid
        exact = Fraction(2 * max_rows) / Fraction(count_fraction * eps0)
        assert exact <= b.count_scale < exact + Fraction(1, SCALE_GRID)
    report = build_report(_hh(max_rows, eps0, None, count_fraction), unsafe=False)
    assert report.max_rows == max_rows
    assert report.eps_attribute == b.eps_attribute
    assert report.rho_person == pytest.approx(0.5 * b.eps_person**2)
    if max_rows > 1:
        assert f"at most {max_rows} row(s)" in report.neighbours
        assert f"group privacy over a person's {max_rows} rows" in report.eps_person_conversion


def test_hh_one_row_with_a_unit_is_the_row_model() -> None:
    plain = _hh(1, 1.0, None, 0.5)
    unit = _hh(1, 1.0, None, 0.5, privacy_unit="id")
    assert plain.budget == unit.budget


def _kept(df: pd.DataFrame, max_rows: int) -> Counter[Record]:
    """The multiset of records the engines count (pandas bounding rule)."""
    kept = bounded_persons(df, "id", max_rows)
    return Counter(tuple(int(v) for v in r) for r in kept[COLS].to_numpy())


def with_threshold_rows(df: pd.DataFrame, rng: np.random.Generator, b: Any) -> pd.DataFrame:
    """``df`` and rows of new one-row persons whose records have counts around the tree's
    thresholds (where the keep decisions, hence the losses, are largest)."""
    extra = random_dataset(rng, D, b.taus[0], b.mu)
    rest = pd.DataFrame([(10_000 + i, *r) for i, r in enumerate(extra.elements())],
                        columns=["id", *COLS])
    return pd.concat([df, rest], ignore_index=True)


@pytest.mark.parametrize("max_rows", [2, 3])
def test_hh_tree_exact_loss_of_a_person_with_r_rows(max_rows: int) -> None:
    """Exact max over all outcomes of the tree (d = 4) between a table and a person-level
    neighbour: one attribute changed in all R rows of a counted person stays within the
    per-attribute eps_tree (<= eps0), all R rows replaced within eps_person, a person with
    more rows changes nothing. The same neighbours under the unscaled row budget exceed
    eps0 (R = 3): the scaling is needed."""
    spec, unscaled = _hh(max_rows), _hh(1)
    b = spec.budget
    incl, incl_row = own_inclusion(spec), own_inclusion(unscaled)
    rng = np.random.default_rng(50 + max_rows)
    worst_attr = worst_person = worst_unscaled = 0.0
    for trial in range(30):
        df = _frame(trial, persons=60)
        counted, heavy = _persons(df, max_rows)
        table = with_threshold_rows(df, rng, b)
        src = tuple(int(v) for v in rng.integers(0, 2, D))
        j = int(rng.integers(D))
        dst = tuple(1 - v if i == j else v for i, v in enumerate(src))
        x = _kept(_with_person(table, counted, [src] * max_rows), max_rows)
        xa = _kept(_with_person(table, counted, [dst] * max_rows), max_rows)
        people = [tuple(int(v) for v in rng.integers(0, 2, D)) for _ in range(max_rows)]
        xp = _kept(_with_person(table, counted, people), max_rows)
        worst_attr = max(worst_attr, max_log_ratio(x, xa, D, incl), max_log_ratio(xa, x, D, incl))
        worst_person = max(worst_person, max_log_ratio(x, xp, D, incl),
                           max_log_ratio(xp, x, D, incl))
        worst_unscaled = max(worst_unscaled, max_log_ratio(x, xa, D, incl_row),
                             max_log_ratio(xa, x, D, incl_row))
        n_heavy = int((table["id"] == heavy).sum())
        moved = _kept(_with_person(table, heavy, [dst] * n_heavy), max_rows)
        assert moved == _kept(table, max_rows)  # counted nowhere: loss 0
    assert worst_attr <= b.eps_tree + 1e-9
    assert b.eps_tree <= 1.3375 * (1 + 1e-12)
    assert worst_person <= b.eps_person + 1e-9
    if max_rows == 3:
        assert worst_unscaled > 1.3375


@pytest.mark.parametrize("max_rows", [2, 4])
def test_hh_count_stage_exact_loss(max_rows: int) -> None:
    """The count stage adds discrete Laplace of scale b to every released key's count: the
    largest log ratio is at most Σ_keys |f - f'| / b, which a counted person's R rows keep
    within eps_count (attained: all R rows leave one record for the same other one)."""
    spec = _hh(max_rows, 1.0, None, 0.5)
    b = spec.budget
    df = _frame(3)
    counted, heavy = _persons(df, max_rows)
    base = _kept(_with_person(df, counted, [(0, 0, 0, 0)] * max_rows), max_rows)
    moved = _kept(_with_person(df, counted, [(1, 0, 0, 0)] * max_rows), max_rows)
    l1 = sum(abs(base[k] - moved[k]) for k in set(base) | set(moved))
    assert l1 / float(b.count_scale) == pytest.approx(b.eps_count)
    assert b.eps_count <= 0.5 * (1 + 1e-12)
    n_heavy = int((df["id"] == heavy).sum())
    assert _kept(_with_person(df, heavy, [(1, 1, 1, 1)] * n_heavy), max_rows) == _kept(
        df, max_rows)


# -- marginals: zCDP, σ² grows R²-fold ---------------------------------------------------------


def _marginals(max_rows: int, eps0: float = 1.0, **kw: Any) -> Any:
    return hdp_marginals(COLS, domains=BINARY, eps0=eps0, other=OTHER, **_unit(max_rows), **kw)


@pytest.mark.parametrize("max_rows", [1, 2, 3, 7])
def test_marginals_budget_scales_sigma2_by_r_squared(max_rows: int) -> None:
    eps0 = 0.9
    spec = _marginals(max_rows, eps0, k=2)
    b = spec.budget
    max_deg = max(b.degrees)  # 3 for all 2-way marginals of 4 attributes
    exact = Fraction(2 * max_deg * max_rows**2) / Fraction(eps0) ** 2
    assert exact <= b.sigma2 < exact + Fraction(1, VARIANCE_GRID)
    assert b.rho_attribute == pytest.approx(max_rows**2 * max_deg / float(b.sigma2))
    assert b.rho_attribute <= 0.5 * eps0**2 * (1 + 1e-12)
    assert b.rho_person == pytest.approx(max_rows**2 * len(spec.workload) / float(b.sigma2))
    assert b.sens_attr_sq == 2 * max_deg * max_rows**2
    counts = [{0: 10} for _ in spec.workload]
    report = finalize_marginals(spec, counts, ReleaseKey.resolve(1)).report
    assert report.max_rows == max_rows
    assert report.sens_attribute == pytest.approx(max_rows * math.sqrt(2 * max_deg))
    if max_rows > 1:
        assert f"at most {max_rows} row(s)" in report.neighbours
        assert f"each times {max_rows}^2" in report.conversion


def _cell_counts(df: pd.DataFrame, spec: Any, requests: Any) -> list[np.ndarray]:
    """Exact counts of every cell of every marginal, through the pandas engine's bounding
    and counter (the release path)."""
    with PandasEngine(df).tree_counter(spec) as counter:
        counts = counter.count_level(requests, -1)
    return [np.array([counts.get(i, {}).get(c, 0) for c in range(2 ** len(s))])
            for i, s in enumerate(spec.workload)]


def _renyi_shift(sigma2: float, shift: int, alpha: float) -> float:
    """Exact D_α(N_Z(shift, σ²) ‖ N_Z(0, σ²)) by summing the pmfs."""
    z = np.arange(-600, 601).astype(float)
    lp = -(z**2) / (2 * sigma2)
    lq = -((z - shift) ** 2) / (2 * sigma2)
    lp -= np.logaddexp.reduce(lp)
    lq -= np.logaddexp.reduce(lq)
    return float(np.logaddexp.reduce(alpha * lq + (1 - alpha) * lp) / (alpha - 1))


@pytest.mark.parametrize("max_rows", [2, 3])
def test_marginals_exact_renyi_of_a_person_with_r_rows(max_rows: int) -> None:
    """The exact Rényi divergence of the noisy counts between a table and a person-level
    neighbour is α·ρ with ρ at most the reported ρ_attribute (one attribute in all R rows)
    or ρ_person (all R rows), attained when all rows move together; 0 for a person with
    more rows."""
    spec = _marginals(max_rows, 1.0, k=2)
    b = spec.budget
    s2 = float(b.sigma2)
    requests = marginal_requests(spec)
    df = _frame(5)
    counted, heavy = _persons(df, max_rows)
    base = _cell_counts(_with_person(df, counted, [(0, 0, 0, 0)] * max_rows), spec, requests)
    rng = np.random.default_rng(max_rows)
    mixed = [tuple(int(v) for v in rng.integers(0, 2, D)) for _ in range(max_rows)]
    cases = [([(1, 0, 0, 0)] * max_rows, b.rho_attribute, True),
             ([(1, 1, 1, 1)] * max_rows, b.rho_person, True),
             (mixed, b.rho_person, False)]
    for records, rho, tight in cases:
        other = _cell_counts(_with_person(df, counted, records), spec, requests)
        shift = np.concatenate([o - c for o, c in zip(other, base, strict=True)])
        for alpha in (1.5, 4.0):
            div = sum(_renyi_shift(s2, int(c), alpha) for c in shift if c)
            assert div <= alpha * rho * (1 + 1e-9)
            if tight:
                assert div >= alpha * rho * (1 - 1e-6)
    assert b.rho_attribute <= 0.5 * (1 + 1e-12)
    n_heavy = int((df["id"] == heavy).sum())
    moved = _cell_counts(_with_person(df, heavy, [(1, 1, 1, 1)] * n_heavy), spec, requests)
    same = _cell_counts(df, spec, requests)
    assert all((m == s).all() for m, s in zip(moved, same, strict=True))


# -- MWEM: zCDP, the rounds run at ε₀/R --------------------------------------------------------


def _mwem(max_rows: int, eps0: float = 1.0, **kw: Any) -> Any:
    return hdp_mwem(COLS, domains=BINARY, eps0=eps0, other=OTHER, **_unit(max_rows), **kw)


@pytest.mark.parametrize("max_rows", [1, 2, 3])
def test_mwem_rounds_run_at_eps0_over_r(max_rows: int) -> None:
    eps0, n = 1.2, 400
    spec = _mwem(max_rows, eps0, k=1, per_round=2)
    row = _mwem(1, eps0 / max_rows, k=1, per_round=2)
    rounds = spec.rounds_for(n)
    assert rounds == row.rounds_for(n)  # the default T uses the per-row budget
    assert spec.eps_round_for(rounds) == eps_round(eps0 / max_rows, rounds)
    rho_attr, rho_person = spec.rho_for(n)
    e_t = float(spec.eps_round_for(rounds))
    assert rho_attr == pytest.approx(max_rows**2 * rounds * e_t**2)
    assert rho_attr <= 0.5 * eps0**2 * (1 + 1e-12)
    # + ρ₀ = ε₀²/8 of the measured n under a unit (tests/partial/test_partial_unit_counts.py)
    rho0 = eps0**2 / 8 if max_rows > 1 else 0.0
    assert spec.rho_count == pytest.approx(rho0)
    assert rho_person == pytest.approx(max_rows**2 * 6 * rounds * e_t**2 / 2 + rho0)
    assert rho_person <= (6 * eps0**2 / 4 + rho0) * (1 + 1e-12)
    counts = [{0: n // 2, 1: n - n // 2} for _ in spec.workload]
    report = run_mwem(spec, counts, ReleaseKey.resolve(2)).report
    assert report["max_rows"] == max_rows
    if max_rows > 1:  # under a unit T follows the measured ñ (the report's n)
        rho_attr = spec.rho_for(report["n"])[0]
        e_t = float(spec.eps_round_for(spec.rounds_for(report["n"])))
    assert report["rho_attribute"] == rho_attr
    assert report["eps_round"] == e_t
    if max_rows > 1:
        assert f"at most {max_rows} row(s)" in report["neighbours"]


@pytest.mark.parametrize("max_rows", [2, 3])
@pytest.mark.parametrize("per_round", [1, 2])
def test_mwem_sensitivities_of_a_person_with_r_rows(max_rows: int, per_round: int) -> None:
    """Over every attribute-disjoint query tuple, a counted person's R rows move the score
    Σ_i |n q_i(A) - c_i| by at most Σ_i |Δc_i| (any A) and the measurement by L2² = Σ Δc_i²:
    at most R and R² for one attribute, ℓR and ℓR² for all rows (attained when the rows
    move together). The run's zCDP T·(½(ε_T·Δscore)² + ½ε_T²·L2²) is then the reported ρ;
    a person with more rows moves nothing."""
    spec = _mwem(max_rows, 1.0, k=2, per_round=per_round, rounds=5)
    requests = marginal_requests(spec)  # the same cell counts (one per marginal)
    df = _frame(7)
    counted, heavy = _persons(df, max_rows)
    base = _cell_counts(_with_person(df, counted, [(0, 0, 0, 0)] * max_rows), spec, requests)
    tuples = table_tuples(spec.workload, per_round)
    rounds, e_t = 5, float(spec.eps_round_for(5))
    n = len(bounded_persons(df, "id", max_rows))
    rho_attr, rho_person = spec.rho_for(n)
    for records, rho, score_max, l2_max in (
            ([(1, 0, 0, 0)] * max_rows, rho_attr, max_rows, max_rows**2),
            ([(1, 1, 1, 1)] * max_rows, rho_person, per_round * max_rows,
             per_round * max_rows**2)):
        other = _cell_counts(_with_person(df, counted, records), spec, requests)
        delta = [np.abs(o - c) for o, c in zip(other, base, strict=True)]
        score = max(sum(int(delta[i].max()) for i in t) for t in tuples)
        l2 = max(sum(int((delta[i] ** 2).max()) for i in t) for t in tuples)
        assert (score, l2) == (score_max, l2_max)
        rounds_rho = rho - (spec.rho_count if rho == rho_person else 0.0)  # ρ₀ of ñ
        assert rounds * (0.5 * (e_t * score) ** 2 + 0.5 * e_t**2 * l2) == pytest.approx(
            rounds_rho)
    assert rho_attr <= 0.5 * (1 + 1e-12)
    n_heavy = int((df["id"] == heavy).sum())
    moved = _cell_counts(_with_person(df, heavy, [(1, 1, 1, 1)] * n_heavy), spec, requests)
    same = _cell_counts(df, spec, requests)
    assert all((m == s).all() for m, s in zip(moved, same, strict=True))


# -- engines, Columns, errors ------------------------------------------------------------------


def _specs(max_rows: int) -> list[tuple[str, Any]]:
    unit = {"privacy_unit": "id", "max_rows": max_rows}
    return [
        ("heavy_hitters", hdp_heavy_hitters(COLS, domains=BINARY, eps0=8.0, other=OTHER,
                                            delta=1e-3, **unit)),
        ("marginals", hdp_marginals(COLS, domains=BINARY, eps0=1.0, k=2, other=OTHER, **unit)),
        ("mwem", hdp_mwem(COLS, domains=BINARY, eps0=1.0, k=1, rounds=4, other=OTHER, **unit)),
    ]


def _table(out: Any) -> pd.DataFrame:
    table = out.table if isinstance(out.table, pd.DataFrame) else out.table.toPandas()
    return table.reset_index(drop=True)


def test_engines_keep_the_same_persons(engine: Any) -> None:
    """Each release on each engine equals the pandas release over the persons with at most R
    rows, taken out beforehand (same key): the engines keep the same rows."""
    df = _frame(11, persons=400)
    df.loc[df.index % 3 == 0, COLS] = 0  # a frequent record: the heavy hitters release it
    mod = importlib.import_module(f"hdp_spark.{engine.name}")
    ref_mod = importlib.import_module("hdp_spark.pandas")
    sizes = df.groupby("id")["id"].transform("size")
    for name, spec in _specs(3):
        out = getattr(mod, name)(engine.frame(df), spec, unsafe_seed=21)
        ref = getattr(ref_mod, name)(df[sizes <= 3], spec, unsafe_seed=21)
        pd.testing.assert_frame_equal(_table(out), _table(ref), check_dtype=False)
        assert len(_table(ref)) > 0
        report = out.report if isinstance(out.report, dict) else out.report.as_dict()
        assert report["max_rows"] == 3
        if name != "heavy_hitters":  # n: a DP estimate of the kept rows, the same key's
            ref_report = ref.report if isinstance(ref.report, dict) else ref.report.as_dict()
            assert report["n"] == ref_report["n"]
            assert abs(report["n"] - int((sizes <= 3).sum())) < 60


_BAD = [
    ({"max_rows": 2}, "`max_rows` bounds the rows of a person: it needs `privacy_unit`"),
    ({"privacy_unit": "id", "max_rows": 0}, "`max_rows` must be a positive int, got 0"),
    ({"privacy_unit": "id", "max_rows": True}, "`max_rows` must be a positive int, got True"),
    ({"privacy_unit": "id", "max_rows": 1.5}, "`max_rows` must be a positive int, got 1.5"),
    ({"privacy_unit": "id", "max_rows": "2"}, "`max_rows` must be a positive int, got '2'"),
]
_BUILDERS = {
    "heavy_hitters": lambda **kw: hdp_heavy_hitters(COLS, domains=BINARY, eps0=1.0, **kw),
    "marginals": lambda **kw: hdp_marginals(COLS, domains=BINARY, eps0=1.0, k=1, **kw),
    "mwem": lambda **kw: hdp_mwem(COLS, domains=BINARY, eps0=1.0, k=1, **kw),
}


@pytest.mark.parametrize(("kw", "match"), _BAD)
@pytest.mark.parametrize("name", sorted(_BUILDERS))
def test_max_rows_errors(name: str, kw: dict[str, object], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        _BUILDERS[name](**kw)


@pytest.mark.parametrize(("kw", "match"), _BAD[:2])
@pytest.mark.parametrize("name", ["hdp_heavy_hitters", "hdp_marginals", "hdp_mwem"])
def test_column_forms_take_max_rows(name: str, kw: dict[str, object], match: str) -> None:
    """The Spark Column constructors take ``max_rows`` and validate it with the spec (the
    Column itself refuses ``privacy_unit``: a separate pass; ``hs.agg`` runs it)."""
    hs = pytest.importorskip("hdp_spark.spark")
    extra = {} if name == "hdp_heavy_hitters" else {"k": 1}
    with pytest.raises(ParameterError, match=match):
        getattr(hs, name)(COLS, domains=BINARY, eps0=1.0, **extra, **kw)


def test_job_kinds_take_max_rows_and_charge_the_reported_eps() -> None:
    """Each partial kind of a job accepts ``max_rows``; the ledger's per-person demand and
    charge are the release's own per-person figures at R."""
    from hdp_spark.core.partial.api import attribute_histogram_spec
    from hdp_spark.core.partial.histograms import finalize_histograms
    from hdp_spark.jobs.job_model import _person_charge
    from hdp_spark.jobs.kinds_partial import ATTRIBUTE_HISTOGRAMS, HEAVY_HITTERS, MARGINALS, MWEM

    params = {"cols": COLS, "domains": BINARY, "eps0": 0.8, "privacy_unit": "id",
              "max_rows": 3}
    hh = HEAVY_HITTERS.build(params)
    assert hh.spec.max_rows == 3
    assert _person_charge("heavy_hitters", hh) == hh.eps_person == hh.spec.budget.eps_person
    marg = MARGINALS.build({**params, "k": 2})
    assert marg.spec.budget.max_rows == 3
    mw = MWEM.build({**params, "k": 1, "rounds": 3})
    assert mw.spec.max_rows == 3
    ah = ATTRIBUTE_HISTOGRAMS.build(params)
    spec = attribute_histogram_spec(COLS, domains=BINARY, eps0=0.8, privacy_unit="id",
                                    max_rows=3)
    report = finalize_histograms(spec, [{} for _ in COLS], ReleaseKey.resolve(1)).report
    assert _person_charge("attribute_histograms", ah) == pytest.approx(report.eps_person)
    assert report.eps_person <= ah.eps_person
    with pytest.raises(ParameterError, match="`max_rows` must be a positive int, got 0"):
        ATTRIBUTE_HISTOGRAMS.build({**params, "max_rows": 0})


def test_spark_column_specs_release_with_the_unit(spark: Any) -> None:
    """A Column constructor with ``privacy_unit`` and ``max_rows`` is a spec the Spark
    release functions run (the Column itself refuses the unit): the same release as
    pandas' with the core spec."""
    import hdp_spark.pandas as hpd
    import hdp_spark.spark as hs

    df = _frame(13, persons=300)
    df.loc[df.index % 3 == 0, COLS] = 0
    sdf = spark.createDataFrame(df)
    unit = {"privacy_unit": "id", "max_rows": 2}
    column = hs.hdp_marginals(COLS, domains=BINARY, eps0=1.0, k=1, other=OTHER, **unit)
    spec = hdp_marginals(COLS, domains=BINARY, eps0=1.0, k=1, other=OTHER, **unit)
    out = hs.marginals(sdf, column, unsafe_seed=4)
    ref = hpd.marginals(df, spec, unsafe_seed=4)
    pd.testing.assert_frame_equal(_table(out), _table(ref), check_dtype=False)
    assert out.report.max_rows == 2
    column = hs.hdp_heavy_hitters(COLS, domains=BINARY, eps0=8.0, delta=1e-3, other=OTHER,
                                  **unit)
    out = hs.heavy_hitters(sdf, column, unsafe_seed=4)
    ref = hpd.heavy_hitters(df, hdp_heavy_hitters(COLS, domains=BINARY, eps0=8.0, delta=1e-3,
                                                  other=OTHER, **unit), unsafe_seed=4)
    pd.testing.assert_frame_equal(_table(out), _table(ref), check_dtype=False)
    assert len(_table(ref)) > 0
    assert out.report.eps_attribute <= 8.0
