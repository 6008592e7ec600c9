"""Local-DP aggregations under a privacy unit (issue 50): one report per person.

* the exact loss of the selection rule AS IMPLEMENTED (pandas ``keep_one_report``), with
  the exact probabilities the library's randomized response realizes, enumerated over
  every input of a person with up to 3 reports (and neighbours with another number of
  reports): at most ε_person; the hash-of-value rule and the sorted rule at a known
  position lose 2ε (the counter-example of ``hdp_spark/core/privacy_unit/ldp.py``);
* the kept position is uniform over keys and depends on the person and key only;
* pandas and Spark keep the same reports and release the same numbers;
* a person with many reports counts once; every new error path names its argument.
"""

from __future__ import annotations

import itertools
import math
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import hdp_spark.ldp as L
import hdp_spark.pandas as hpd
from hdp_spark import select_keys
from hdp_spark.core.ldp.common import rr_factor
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.noise import vector as vx
from hdp_spark.core.privacy_unit import PrivacyUnit, bounding_key, rank, report_rank_text
from hdp_spark.core.privacy_unit.ldp import kept_position
from hdp_spark.errors import ParameterError, SchemaError
from hdp_spark.pandas.ldp import report_codes
from hdp_spark.pandas.privacy_unit import keep_one_report, unit_eps
from tests.conftest import Engine
from tests.privacy_unit.ldp_unit_data import ldp_specs as _ldp_specs
from tests.privacy_unit.ldp_unit_data import table as _table

UNIT = PrivacyUnit("uid")
RR = L.ldp_mean("y", eps="eps", mechanism="rr")
TWO64 = 2**64


def _key(i: int) -> ReleaseKey:
    return ReleaseKey(i.to_bytes(32, "big"), unsafe=True)


def _at_most_exp(ratio: Fraction, eps: float) -> bool:
    """ratio <= e^ε, decided with 80 digits (a 1e-70 relative guard)."""
    with localcontext() as ctx:
        ctx.prec = 80
        value = Decimal(ratio.numerator) / Decimal(ratio.denominator)
        return value <= Decimal(eps).exp() * (1 - Decimal(10) ** -70)


def _log_ratio(a: Fraction, b: Fraction) -> float:
    return math.log(a / b)


def _rr_law(eps: float) -> Fraction:
    """P(report = x | x) that the library's randomized response realizes (K / 2**64)."""
    return Fraction(int(vx.keep_numerator(np.array([eps]))[0]), TWO64)


def _keys_for_positions(m: int) -> list[ReleaseKey]:
    """One key per kept position 0..m-1 of person "7" (found by trying keys in order)."""
    found: dict[int, ReleaseKey] = {}
    for i in itertools.count():
        key = _key(i)
        j = kept_position(rank(report_rank_text(bounding_key(key), RR.name, "7")), m)
        found.setdefault(j, key)
        if len(found) == m:
            return [found[j] for j in range(m)]
    raise AssertionError  # pragma: no cover


def _kept_report(reports: tuple[int, ...], key: ReleaseKey, eps: float) -> int:
    """The report the pandas implementation keeps of person 7 (plus a bystander)."""
    df = pd.DataFrame({"uid": [7] * len(reports) + [8], "y": [*reports, 1],
                       "eps": [eps] * (len(reports) + 1), "row": range(len(reports) + 1)})
    kept = keep_one_report(df, UNIT, RR, key)
    assert list(kept["uid"]) == [7, 8]  # one report per person, the bystander untouched
    assert kept["row"].iloc[1] == len(reports)
    return int(kept["y"].iloc[0])


def _implemented_law(x: tuple[int, ...], eps: float) -> Fraction:
    """P(kept report = +1 | inputs x) of the implemented rule: J uniform over the m
    positions (each realized by a key), reports drawn by the exact RR law."""
    keep = _rr_law(eps)
    total = Fraction(0)
    keys = _keys_for_positions(len(x))
    for y in itertools.product((-1, 1), repeat=len(x)):
        p = Fraction(1)
        for xi, yi in zip(x, y, strict=True):
            p *= keep if xi == yi else 1 - keep
        hits = sum(_kept_report(y, key, eps) == 1 for key in keys)
        total += p * Fraction(hits, len(keys))
    return total


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_implemented_rule_loses_at_most_the_persons_eps(eps: float) -> None:
    """Exact enumeration: every input vector of 1..3 reports against every other (another
    number of reports included: neighbours replace all of the person's rows)."""
    inputs = [x for k in (1, 2, 3) for x in itertools.product((-1, 1), repeat=k)]
    laws = {x: _implemented_law(x, eps) for x in inputs}
    worst = 0.0
    for a, b in itertools.product(inputs, repeat=2):
        for pa, pb in ((laws[a], laws[b]), (1 - laws[a], 1 - laws[b])):
            assert _at_most_exp(pa / pb, eps), (a, b)
            worst = max(worst, _log_ratio(pa, pb))
    assert worst > 0.99 * eps  # the bound is reached (one report against its opposite)


def _order_statistic_law(x: tuple[int, ...], eps: float, position: int) -> Fraction:
    """P(kept = +1) when the kept report is the sorted reports' entry at a KNOWN position
    (position 0: the smallest; = keeping the value with the smaller hash when
    h(-1) < h(+1))."""
    keep = _rr_law(eps)
    total = Fraction(0)
    for y in itertools.product((-1, 1), repeat=len(x)):
        p = Fraction(1)
        for xi, yi in zip(x, y, strict=True):
            p *= keep if xi == yi else 1 - keep
        total += p * (sorted(y)[position] == 1)
    return total


@pytest.mark.parametrize("eps", [0.5, 1.0])
def test_hash_of_value_rule_loses_twice_eps(eps: float) -> None:
    """The counter-example: k = 2, keep the report whose value has the smaller hash.
    P(kept = 1 | (1, 1)) / P(kept = 1 | (-1, -1)) = p²/(1-p)² = e^{2ε}."""
    h = {v: rank(f"unkeyed-hash-of-value\x1f{v}") for v in (-1, 1)}
    smaller = min(h, key=h.__getitem__)
    position = 0 if smaller == -1 else 1  # the smaller hash's value is kept when present
    both_up = _order_statistic_law((1, 1), eps, position)
    both_down = _order_statistic_law((-1, -1), eps, position)
    up, down = (both_up, both_down) if position == 0 else (1 - both_down, 1 - both_up)
    loss = _log_ratio(up, down)
    keep = _rr_law(eps)
    assert loss == pytest.approx(2 * math.log(keep / (1 - keep)), rel=1e-12)
    assert not _at_most_exp(up / down, eps)
    assert loss > 1.9 * eps


def test_kept_position_is_uniform_over_keys_and_reads_no_value() -> None:
    m, keys = 5, 2000
    counts = np.zeros(m, dtype=np.int64)
    for i in range(keys):
        counts[kept_position(rank(report_rank_text(bounding_key(_key(i)), "a", "p")), m)] += 1
    assert stats.chisquare(counts).pvalue > 1e-6
    # the kept row is the one at that position in the sorted order, whatever the values
    key = _key(3)
    j = kept_position(rank(report_rank_text(bounding_key(key), RR.name, "7")), 4)
    for y in itertools.product((-1, 1), repeat=4):
        assert _kept_report(y, key, 1.0) == sorted(y)[j]
    with pytest.raises(ParameterError, match="`m` must be >= 1, got 0"):
        kept_position(5, 0)


def test_only_the_smallest_eps_reports_are_candidates() -> None:
    df = pd.DataFrame({"uid": ["a"] * 4 + ["b"] * 3, "y": [1, 1, -1, 1, 1, -1, 1],
                       "eps": [2.0, 0.5, 0.5, np.nan, 1.0, 1.0, 3.0]})
    for i in range(40):
        kept = keep_one_report(df, UNIT, RR, _key(i)).set_index("uid")
        # a's NaN ε counts as 0: a spends nothing, the kept report is the ε-0 one
        assert kept.loc["a", "eps"] == 0.0
        assert kept.loc["a", "y"] == 1
        assert kept.loc["b", "eps"] == 1.0  # b's reports at ε 1 only
        assert kept.loc["b", "y"] in (1, -1)


def _kept(engine: Engine, df: pd.DataFrame, spec: Any, key: ReleaseKey
          ) -> list[tuple[int, float, str]]:
    """(person, ε, codes) of every kept report: rows with equal codes and ε are
    interchangeable (a tie may keep either on Spark, whose row order varies); a missing
    report's codes are "-1" (its q is not read)."""
    if engine.name == "pandas":
        rows = keep_one_report(df, UNIT, spec, key)["row"].tolist()
    else:
        from hdp_spark.spark.privacy_unit import keep_one_report as spark_keep

        rows = spark_keep(engine.frame(df), UNIT, spec, key).select("row").toPandas()[
            "row"].tolist()
    safe = df.assign(eps=unit_eps(df["eps"]))
    index, q = report_codes(safe, spec)
    return sorted((int(safe["uid"].iloc[r]), float(safe["eps"].iloc[r]),
                   str([int(index[r]), *q[r].tolist()]) if index[r] >= 0 else "-1")
                  for r in rows)


def test_engines_keep_the_same_reports_and_release_the_same(engine: Engine) -> None:
    df, oracle = _table()
    specs = _ldp_specs(oracle)
    for spec in specs:
        expected = _kept(Engine("pandas"), df, spec, _key(11))
        assert _kept(engine, df, spec, _key(11)) == expected
        assert [p for p, _, _ in expected] == sorted(df["uid"].unique())  # one per person
    got = engine.module.ldp_release(engine.frame(df), *specs, already_randomized=True,
                                    privacy_unit="uid", unsafe_seed="k")
    want = hpd.ldp_release(df, *specs, already_randomized=True, privacy_unit="uid",
                           unsafe_seed="k")
    for t_got, t_want in zip(got.tables, want.tables, strict=True):
        assert t_got == t_want  # the same pre-finalize aggregates
    assert repr(got.rows()) == repr(want.rows())
    table = pd.DataFrame(want.rows())
    persons = df["uid"].nunique()
    assert int(table["rr_mean_n"].iloc[0]) + int(table["rr_mean_skipped"].iloc[0]) <= persons
    assert sum(lv["n"] for lv in table["rr_mean_eps_levels"].iloc[0]) <= persons


def test_a_person_with_many_reports_counts_once(engine: Engine) -> None:
    df = pd.DataFrame({"uid": [1] * 50 + [2, 3], "y": [1.0] * 50 + [-1.0, -1.0],
                       "eps": [1.0] * 52})
    spec = L.ldp_mean("y", eps="eps", mechanism="rr", weights="uniform")
    frame = engine.frame(df)
    outs = [engine.module.ldp_agg(frame, spec, already_randomized=True, **kw)
            for kw in ({"privacy_unit": "uid", "unsafe_seed": 1}, {})]
    unit, rows = (o if engine.name == "pandas" else o.toPandas() for o in outs)
    assert int(unit["y_mean_n"].iloc[0]) == 3
    assert int(rows["y_mean_n"].iloc[0]) == 52
    # the unbiased RR mean c(ε)·mean(y): person 1 weighs 1/3, not 50/52
    assert float(unit["y_mean_raw"].iloc[0]) == pytest.approx(-rr_factor(1.0) / 3)
    assert float(rows["y_mean_raw"].iloc[0]) == pytest.approx(rr_factor(1.0) * 48 / 52)


def test_errors_name_the_parameter(engine: Engine) -> None:
    df = pd.DataFrame({"uid": [1, 2], "g": ["a", "b"], "y": [1.0, -1.0], "eps": [1.0, 1.0]})
    frame = engine.frame(df)
    mod = engine.module
    spec = L.ldp_mean("y", eps="eps", mechanism="rr")
    kw: dict[str, Any] = {"already_randomized": True, "privacy_unit": "uid"}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"by": "g", "keys": ["a", "b"]}, r"`by`: .*grouped releases are not supported yet, "
                                          r"got \('g',\)"),
        ({"keys": ["a"]}, r"`keys`: .*not supported yet, got \['a'\]"),
        ({"max_groups": 2}, r"`max_groups` must be 1 .*got 2"),
        ({"max_rows": 3}, r"`max_rows` must be 1 .*got 3"),
    ]
    for extra, pattern in cases:
        with pytest.raises(ParameterError, match=pattern):
            mod.ldp_agg(frame, spec, **kw, **extra)
    with pytest.raises(ParameterError, match=r"`eps_cap` is an option .* got 0.5"):
        mod.agg(frame, spec, privacy_unit="uid", eps_cap=0.5)
    with pytest.raises(ParameterError, match=r"`weight_share` is an option .* got 0.1"):
        mod.agg(frame, spec, privacy_unit="uid", weight_share=0.1)
    with pytest.raises(ParameterError, match=r"cannot share a call .* got MeanSpec"):
        mod.agg(frame, spec, hpd.hdp_mean("y", eps="eps", lower=-1, upper=1, alias="m"),
                privacy_unit="uid")
    with pytest.raises(ParameterError, match=r"`keys=select_keys\(...\)` supports hdp_mean "
                                             "and hdp_histogram so far, got LdpMeanSpec"):
        mod.agg(frame, spec, by="g", keys=select_keys(delta=1e-6, c=1.0, share=0.25),
                privacy_unit="uid")
    with pytest.raises(ParameterError, match="`privacy_unit` column 'eps' identifies"):
        mod.ldp_agg(frame, spec, already_randomized=True, privacy_unit="eps")
    for name, value in (("max_groups", 2), ("max_rows", 2), ("unsafe_seed", 5)):
        with pytest.raises(ParameterError, match=f"`{name}` applies under a privacy unit "
                                                 f"only.*got None .*={value}"):
            mod.ldp_agg(frame, spec, already_randomized=True, **{name: value})
    missing = [(L.ldp_mean("y", eps="e2", mechanism="rr"), "ε column `e2` is not in"),
               (L.ldp_mean("z", eps="eps", mechanism="rr"), "report column `z` is not in")]
    if engine.name == "spark":  # typed columns (pandas skips a non-array report instead)
        missing.append((L.ldp_mean_vector("y", eps="eps", d=2),
                        "report column `y` must be an array"))
    for bad, message in missing:
        with pytest.raises(SchemaError, match=message):
            mod.ldp_agg(frame, bad, already_randomized=True, privacy_unit="uid")
    with pytest.raises(SchemaError, match="`privacy_unit` names column 'who'"):
        mod.ldp_agg(frame, spec, already_randomized=True, privacy_unit="who")
    with pytest.raises(ParameterError, match="already_randomized"):
        mod.ldp_agg(frame, spec, privacy_unit="uid")  # the marker check still runs


def test_a_persons_kept_report_reads_their_own_rows_and_the_key_only() -> None:
    """Replacing, adding or removing another person's rows never changes p's kept
    report; another key (another release) chooses independently."""
    rng = np.random.default_rng(9)
    base = pd.DataFrame({"uid": rng.integers(0, 30, 400), "y": rng.choice([-1, 1], 400),
                         "eps": rng.choice([0.5, 1.0], 400), "row": np.arange(400)})
    key = _key(21)

    def kept(df: pd.DataFrame) -> dict[int, tuple[int, float]]:
        out = keep_one_report(df, UNIT, RR, key)
        return {int(u): (int(r), float(e)) for u, r, e in zip(out["uid"], out["row"],
                                                             out["eps"], strict=True)}

    before = kept(base)
    others = base[base["uid"] != 4]
    changed = pd.concat([base[base["uid"] == 4].assign(y=lambda d: -d["y"]),
                         pd.DataFrame({"uid": [4] * 5, "y": [1] * 5, "eps": [0.5] * 5,
                                       "row": range(1000, 1005)})])
    for table in (others, pd.concat([others, changed])):
        after = kept(table)
        assert {u: v for u, v in after.items() if u != 4} == {
            u: v for u, v in before.items() if u != 4}
    positions = {kept_position(rank(report_rank_text(bounding_key(_key(i)), RR.name, "4")),
                               7) for i in range(40)}
    assert len(positions) == 7  # other keys, other positions


@pytest.mark.parametrize("server", ["connect_server", "bare_connect_server"])
def test_connect_releases_what_pandas_releases(server: str, request: Any) -> None:
    """On Spark Connect the release equals pandas' and keeps pandas' reports; with the
    extension (and its plugin) the one-report operator holds the key in the field no printed
    plan shows, as on classic Spark; on a server without it the key is a plan literal (the
    fallback docs/ldp.md describes)."""
    pytest.importorskip("pyspark.sql.connect")
    from pathlib import Path

    from tests.privacy_unit.ldp_unit_job import KEPT_SEED

    got = request.getfixturevalue(server).run(Path(__file__).with_name("ldp_unit_job.py"),
                                              conf={"spark.sql.shuffle.partitions": "3"})
    assert "connect" in got["session"]
    df, oracle = _table()
    want = hpd.ldp_release(df, *_ldp_specs(oracle), already_randomized=True,
                           privacy_unit="uid", unsafe_seed="k")
    assert got["rows"] == repr(want.rows())
    spec = _ldp_specs(oracle)[1]
    kept = keep_one_report(df, UNIT, spec, ReleaseKey.resolve(KEPT_SEED))
    assert [tuple(k) for k in got["kept"]] == sorted(
        zip(kept["uid"].astype(int), kept["rr"].astype(float), strict=True))
    extension = server == "connect_server"
    assert got["operator"] is extension  # the one-report operator, its key unprinted
    assert got["secret_rank"] is False  # no window plan with the operator; none bare
    assert got["key_in_plans"] is not extension


def test_null_ids_and_tables_without_persons(engine: Engine) -> None:
    """Rows with a null id belong to nobody and are dropped; a table without a person
    releases the data-independent fallback, as an empty one-row release does."""
    spec = L.ldp_mean("y", eps="eps", mechanism="rr")
    tables = [pd.DataFrame({"uid": ["a", None, "a", None], "y": [1.0, -1.0, np.nan, 1.0],
                            "eps": [1.0, 1.0, 1.0, 0.5]}, index=[10, 5, 7, 2]),
              pd.DataFrame({"uid": pd.Series([None, None], dtype="Int64"), "y": [1.0, -1.0],
                            "eps": [1.0, 1.0]})]
    if engine.name == "pandas":  # Spark cannot infer a schema from an empty pandas frame
        tables.append(tables[1].iloc[:0])
    for df, persons in zip(tables, (1, 0, 0), strict=False):
        out = engine.module.ldp_agg(engine.frame(df), spec, already_randomized=True,
                                    privacy_unit="uid", unsafe_seed=1)
        row = (out if engine.name == "pandas" else out.toPandas()).iloc[0]
        assert int(row["y_mean_n"]) + int(row["y_mean_skipped"]) == persons
        if not persons:
            assert bool(row["y_mean_fallback"])
            assert float(row["y_mean"]) == 0.0


def test_the_release_api_s_key_is_in_no_spark_plan(spark: Any) -> None:
    """On classic Spark with the extension the one-report operator holds the bounding key
    in a field no printed plan shows (``HdpLdpUnitBound``), not as a plan literal."""
    from hdp_spark.spark.privacy_unit import keep_one_report as spark_keep

    df, _ = _table()
    key = _key(12)
    spec = L.ldp_mean("rr", eps="eps", mechanism="rr")
    kept = spark_keep(spark.createDataFrame(df), UNIT, spec, key)
    execution = kept._jdf.queryExecution()
    plans = execution.toString() + execution.executedPlan().toJSON()
    assert "HdpLdpUnitBound" in plans  # the operator is in use
    bkey = bounding_key(key)
    assert bkey not in plans
    assert key.material.hex() not in plans
    # the same reports (rows tying on (person, ε, report) are interchangeable: the
    # operator keeps the first of a tie, pandas the one at the position in row order)
    got = sorted(kept.select("uid", "eps", "rr").toPandas().itertuples(index=False))
    want = keep_one_report(df, UNIT, spec, key)
    assert got == sorted(want[["uid", "eps", "rr"]].itertuples(index=False))
