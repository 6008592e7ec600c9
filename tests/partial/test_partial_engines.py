"""Both engines: equal pre-noise statistics, identical releases, data-independent handling
of bad values, one-row-per-person check, histograms (seed-004 §5 oracles 11-14, 19)."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

from hdp_spark.core.partial import hdp_heavy_hitters
from hdp_spark.core.partial.heavy_hitters import COUNT_COLUMNS
from hdp_spark.core.partial.histograms import HISTOGRAM_COLUMNS
from hdp_spark.core.partial.tree import ChildFilter, NodeRequest, key_weights
from hdp_spark.errors import ParameterError, SchemaError

COLORS = ["red", "green", "blue"]
ZIPS = list(range(0, 200, 2))  # 100 values, not a range: the Spark broadcast-join path


def _frame(n: int = 4000, seed: int = 0) -> pd.DataFrame:
    """Attributes with planted frequent records, nulls and out-of-domain values."""
    rng = np.random.default_rng(seed)
    color = rng.choice(["red", "green", "blue", "purple", None], n, p=[.4, .3, .2, .05, .05])
    size = rng.choice([1.0, 2.0, 3.0, 4.0, 9.0, 2.5, np.nan], n, p=[.3, .3, .2, .1, .03, .02, .05])
    flag = rng.random(n) < 0.3
    zips = rng.integers(0, 120, n)
    level = rng.choice(["a", "b"], n)
    planted = [("red", 2.0, True, 8, "a", 900), ("blue", 1.0, False, 50, "b", 600),
               ("purple", 2.5, False, 111, "a", 400)]
    start = 0
    for c, s, f, z, lv, k in planted:
        color[start:start + k], size[start:start + k] = c, s
        flag[start:start + k], zips[start:start + k], level[start:start + k] = f, z, lv
        start += k
    return pd.DataFrame({"id": np.arange(n), "color": color, "size": size, "flag": flag,
                         "zip": zips, "level": level})


# size: consecutive ints (arithmetic recoding, float column: 2.5 and NaN -> other);
# color, flag, level: CASE WHEN recoding; zip: broadcast join.
DOMAINS = {"color": COLORS, "size": [1, 2, 3, 4], "flag": [False, True], "zip": ZIPS,
           "level": ["a", "b"]}
COLS = ["color", "size", "flag", "zip", "level"]  # d = 5: padded to 8


def _spec(**kw):
    args = {"domains": DOMAINS, "eps0": 2.0, "delta": 1e-4, "threshold": 60,
            "other": {"level": "a"}} | kw
    return hdp_heavy_hitters(COLS, **args)


def _mod(engine):
    """The backend module of an engine (importlib: the package may export a function of
    the same name)."""
    return importlib.import_module(f"hdp_spark.{engine.name}")


def _local(engine, table) -> pd.DataFrame:
    """A released table as pandas (Spark: collected)."""
    return table if engine.name == "pandas" else table.toPandas()


def _sdf(spark, pdf: pd.DataFrame):
    """The Spark copy of ``pdf``, repartitioned (row order and partitioning differ)."""
    return spark.createDataFrame(pdf).repartition(3).cache()


def _counters(spark, pdf: pd.DataFrame, spec) -> list:
    from hdp_spark.pandas._heavy_hitters import PandasTreeCounter
    from hdp_spark.spark._heavy_hitters import SparkTreeCounter

    return [SparkTreeCounter.from_frame(_sdf(spark, pdf), spec),
            PandasTreeCounter.from_frame(pdf, spec)]


def test_pre_noise_statistics_equal_across_engines(spark) -> None:
    """Level counts and released-key counts are identical on pandas and Spark."""
    pdf = _frame()
    spec = _spec()
    sizes = [d.size for d in spec.domains]
    results = []
    for counter in _counters(spark, pdf, spec):
        level1 = [NodeRequest(0, (0, 1), key_weights((0, 1), sizes), ()),
                  NodeRequest(1, (2, 3), key_weights((2, 3), sizes), ()),
                  NodeRequest(2, (4,), (1,), ())]
        c1 = counter.count_level(level1, 40)
        left = tuple(sorted(k for k, _ in sorted(c1[0].items(), key=lambda kv: -kv[1])[:5]))
        right = tuple(sorted(k for k, _ in sorted(c1[1].items(), key=lambda kv: -kv[1])[:7]))
        attrs = (0, 1, 2, 3)
        level2 = [NodeRequest(0, attrs, key_weights(attrs, sizes), (
            ChildFilter((0, 1), key_weights((0, 1), sizes), left),
            ChildFilter((2, 3), key_weights((2, 3), sizes), right)))]
        c2 = counter.count_level(level2, 3)
        w = key_weights(tuple(range(5)), sizes)
        some = sorted(c2[0])[:10]
        keys = [k * sizes[4] + v for k in some for v in range(sizes[4])] + [0, 1]
        ck = counter.count_keys(w, keys)
        if hasattr(counter, "close"):
            counter.close()
        results.append((c1, c2, ck))
    assert results[0] == results[1]
    c1, c2, ck = results[0]
    full = counter.count_level(level1, 0)  # the pandas counter: every row is counted
    assert sum(full[0].values()) == len(pdf)
    assert c1[0] == {k: v for k, v in full[0].items() if v > 40}
    assert c2[0]
    assert ck


def test_release_identical_on_both_engines_and_partitionings(spark) -> None:
    """Oracle 13: a fixed seed gives the same release on pandas, on Spark (repartitioned)
    and on a shuffled pandas frame."""
    ph = importlib.import_module("hdp_spark.pandas")
    sh = importlib.import_module("hdp_spark.spark")

    pdf = _frame()
    spec = _spec()
    a = ph.heavy_hitters(pdf, spec, unsafe_seed=11)
    b = ph.heavy_hitters(pdf.sample(frac=1.0, random_state=3), spec, unsafe_seed=11)
    c = sh.heavy_hitters(_sdf(spark, pdf), spec, unsafe_seed=11)
    ta, tc = a.table, c.table.toPandas()
    assert list(ta.columns) == [*COLS, *COUNT_COLUMNS] == list(tc.columns)
    pd.testing.assert_frame_equal(ta, b.table)
    assert ta.astype(object).where(ta.notna(), None).values.tolist() == \
        tc.astype(object).where(tc.notna(), None).values.tolist()
    assert a.report == c.report
    # the planted records are found; the out-of-domain one appears as the "other" values
    found = {tuple(r) for r in ta[COLS].astype(object).where(ta[COLS].notna(), None)
             .itertuples(index=False)}
    assert ("red", 2, True, 8, "a") in found
    assert ("blue", 1, False, 50, "b") in found
    assert (None, None, False, None, "a") in found
    # oracle 19: every released key is in the product of the (recoded) domains
    for col in COLS:
        allowed = set(DOMAINS[col]) | ({None} if col != "level" else set())
        assert set(ta[col].astype(object).where(ta[col].notna(), None)) <= allowed
    # sorted by key (review P3): domain order, "other" last
    codes = [tuple((DOMAINS[c] + [None]).index(v if not pd.isna(v) else None) for c, v in
                   zip(COLS, row, strict=True)) for row in ta[COLS].astype(object).values]
    assert codes == sorted(codes)


def test_release_semantics(engine) -> None:
    pdf = _frame(n=3000, seed=5)
    spec = _spec()
    out = _mod(engine).heavy_hitters(engine.frame(pdf), spec, unsafe_seed=2)
    table = out.table if engine.name == "pandas" else out.table.toPandas()
    again = out.table if engine.name == "pandas" else out.table.toPandas()
    pd.testing.assert_frame_equal(table, again)  # materialized: re-reading never redraws
    assert len(table) >= 2
    r = out.report
    assert (table["count_ci_high"] - table["count_ci_low"]).nunique() == 1
    assert r.eps_attribute <= spec.eps0
    assert r.eps_person < r.eps_person_group_privacy
    # oracle 12: only keys and fresh counts; no tree values anywhere in the output
    assert set(table.columns) == {*COLS, *COUNT_COLUMNS}
    assert not any("tree" in k and "noisy" in k for k in r.as_dict())
    if engine.name == "spark":
        return  # keys-only output is engine-neutral; one engine suffices
    keys_only = _mod(engine).heavy_hitters(engine.frame(pdf), _spec(count_fraction=0),
                                            unsafe_seed=2)
    t2 = keys_only.table
    assert t2["noisy_count"].isna().all()
    assert len(t2) >= 2
    assert keys_only.report.count_scale is None
    assert keys_only.report.eps_count == 0


def test_report_is_data_independent() -> None:
    """Oracle 14: two different datasets give identical reports."""
    ph = importlib.import_module("hdp_spark.pandas")

    spec = _spec()
    a = ph.heavy_hitters(_frame(seed=1), spec, unsafe_seed=1).report
    b = ph.heavy_hitters(_frame(n=500, seed=2), spec, unsafe_seed=9).report
    assert a == b
    assert a.as_dict()["thresholds"] == list(spec.budget.taus)


def test_fresh_key_differs_and_seed_replays() -> None:
    ph = importlib.import_module("hdp_spark.pandas")

    pdf = _frame()
    spec = _spec()
    x = ph.heavy_hitters(pdf, spec, unsafe_seed=4).table
    y = ph.heavy_hitters(pdf, spec, unsafe_seed=4).table
    pd.testing.assert_frame_equal(x, y)
    fresh = [ph.heavy_hitters(pdf, spec) for _ in range(3)]
    assert not fresh[0].report.unsafe_seed
    assert len({tuple(f.table["noisy_count"].tolist()) for f in fresh}) > 1


def test_privacy_unit_counts_persons_with_one_row(engine) -> None:
    """``privacy_unit``: a repeated id's rows and a null id's row are left out, without an
    error; the release equals the one over the persons with one row (same key), and the
    left-out persons' values change nothing (their loss is 0)."""
    pdf = _frame(n=500)
    spec = _spec(privacy_unit="id")
    mod = _mod(engine)
    dup = pdf.copy()
    dup["id"] = dup["id"].astype("float64")
    dup.loc[10:14, "id"] = 987654.0  # one person with 5 rows
    dup.loc[20, "id"] = np.nan  # a row without an id
    kept = dup.drop(index=[*range(10, 15), 20])
    out = mod.heavy_hitters(engine.frame(dup), spec, unsafe_seed=1)
    assert out.report.unit_checked
    ref = mod.heavy_hitters(engine.frame(kept), spec, unsafe_seed=1)
    pd.testing.assert_frame_equal(_local(engine, out.table), _local(engine, ref.table))
    other = dup.copy()
    other.loc[10:14, "color"] = "purple"  # the 5-row person's attribute, in every row
    other.loc[20, "size"] = 9.0
    moved = mod.heavy_hitters(engine.frame(other), spec, unsafe_seed=1)
    pd.testing.assert_frame_equal(_local(engine, moved.table), _local(engine, out.table))
    hist = {"domains": DOMAINS, "eps0": 1.0, "other": {"level": "a"}}
    h_dup = mod.attribute_histograms(engine.frame(dup), COLS, privacy_unit="id",
                                     unsafe_seed=2, **hist)
    h_ref = mod.attribute_histograms(engine.frame(kept), COLS, privacy_unit="id",
                                     unsafe_seed=2, **hist)
    pd.testing.assert_frame_equal(_local(engine, h_dup.table), _local(engine, h_ref.table))
    assert h_dup.report.unit_checked


def test_privacy_unit_missing_column_is_a_schema_error(engine) -> None:
    with pytest.raises(SchemaError, match="`privacy_unit` column `nope` is not in the table"):
        _mod(engine).heavy_hitters(engine.frame(_frame(n=200)), _spec(privacy_unit="nope"),
                                   unsafe_seed=1)


def test_schema_errors_name_columns_not_values(engine) -> None:
    pdf = _frame(n=200)
    with pytest.raises(SchemaError, match="`color`"):
        _mod(engine).heavy_hitters(engine.frame(pdf.drop(columns="color")), _spec())
    bad = pdf.assign(color=np.arange(len(pdf)))
    with pytest.raises(SchemaError, match="cannot hold the str values"):
        _mod(engine).heavy_hitters(engine.frame(bad), _spec())
    with pytest.raises(ParameterError, match="hdp_heavy_hitters"):
        _mod(engine).heavy_hitters(engine.frame(pdf), {"cols": COLS})


def test_histograms_on_both_engines(spark) -> None:
    ph = importlib.import_module("hdp_spark.pandas")
    sh = importlib.import_module("hdp_spark.spark")

    pdf = _frame()
    kw = {"domains": {"color": COLORS, "size": [1, 2, 3, 4], "zip": ZIPS}, "eps0": 0.5,
          "other": {"size": 4}}
    cols = ["color", "size", "zip"]
    a = ph.attribute_histograms(pdf, cols, **kw, unsafe_seed=3)
    b = sh.attribute_histograms(_sdf(spark, pdf), cols, **kw, unsafe_seed=3)
    ta, tb = a.table, b.table.toPandas()
    assert list(ta.columns) == list(HISTOGRAM_COLUMNS) == list(tb.columns)
    assert ta.astype(object).where(ta.notna(), None).values.tolist() == \
        tb.astype(object).where(tb.notna(), None).values.tolist()
    assert a.report == b.report
    # every domain value has a row (absent ones too); "other" category only without `other`
    assert len(ta) == 4 + 4 + 101
    assert ta[ta.attribute == "size"]["noisy_count"].sum() > 0.9 * len(pdf)
    assert ta[ta.attribute == "color"]["value"].tolist() == [*COLORS, None]
    assert ta[ta.attribute == "size"]["value"].tolist() == ["1", "2", "3", "4"]
    r = a.report
    assert r.noise_scale == 4.0
    assert r.eps_attribute == 0.5
    assert r.eps_person == pytest.approx(1.5)
    assert r.rho_person == pytest.approx(3 * 0.125)
    # the noisy counts track the exact ones (scale 4: |noise| <= 70 w.p. 1 - 1e-7 per cell)
    exact = pdf["color"].value_counts()
    for v in COLORS:
        got = ta[(ta.attribute == "color") & (ta.value == v)]["noisy_count"].item()
        assert abs(got - exact[v]) <= 70
