"""The Spark Column aggregators: same numbers as the release API, native cells equal to the
pandas engine's, re-evaluation identity, independent noise for tied groups, errors."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import hdp_spark.pandas as hpd
import hdp_spark.spark as hs
from hdp_spark import EpsGrid
from hdp_spark.errors import ParameterError
from hdp_spark.spark.columns import spec_of
from hdp_spark.spark.extension import ExtensionMissingError, install

pytestmark = pytest.mark.spark

CATS = ["north", "south", "east"]


def _table(n: int = 3000, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-50_000, 300_000, n)
    x[rng.random(n) < 0.03] = np.nan
    x[rng.random(n) < 0.01] = np.inf
    eps = rng.choice([0.05, 0.5, 1.0, 2.0, 4.0, math.inf], n, p=[0.05, 0.3, 0.3, 0.2, 0.1, 0.05])
    eps[rng.random(n) < 0.02] = 1e-200  # below the public floor: level 0
    return pd.DataFrame({
        "salary": x, "eps": eps,
        "dept": rng.choice(["hr", "it", "ops", "rnd"], n, p=[0.05, 0.5, 0.3, 0.15]),
        "region": rng.choice([*CATS, "west", None], n),
    })


def _rows(frame: object, cols: list[str]) -> list[tuple[object, ...]]:
    return [tuple(r[c] for c in cols) for r in frame.orderBy(*cols[:1]).collect()]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("method", "mean_method"),
                         [("hpf-a", "adpm"), ("hpf-wt", "adpm"), ("k-rappor-w", "ldp-we")])
def test_grouped_mean_and_histogram_equal_the_release_api(
    spark: object, method: str, mean_method: str
) -> None:
    pdf = _table()
    df = spark.createDataFrame(pdf).repartition(7)  # type: ignore[attr-defined]
    mean = hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000, method=mean_method)
    hist = hs.hdp_histogram("region", eps="eps", categories=CATS, method=method)
    out = df.groupBy("dept").agg(
        mean.unsafe_seed(21).alias("salary"), hist.unsafe_seed(21)  # type: ignore[attr-defined]
    ).orderBy("dept").collect()
    ref = hs.agg(df, mean, hist, by="dept", keys=["hr", "it", "ops", "rnd"],
                 unsafe_seed=21).orderBy("dept").collect()
    assert [r["dept"] for r in out] == ["hr", "it", "ops", "rnd"]
    for got, want in zip(out, ref, strict=True):
        s = got["salary"]
        assert s["estimate"] == want["salary_mean"]
        assert s["noise_scale"] == want["salary_mean_noise_scale"]
        assert (s["ci_low"], s["ci_high"]) == (want["salary_mean_ci_low"],
                                               want["salary_mean_ci_high"])
        assert (s["n"], s["tau"], s["method"], s["fallback"]) == (
            want["salary_mean_n"], want["salary_mean_tau"], want["salary_mean_method"],
            want["salary_mean_fallback"])
        assert [tuple(lv) for lv in s["eps_levels"]] == [tuple(lv) for lv in
                                                          want["salary_mean_eps_levels"]]
        h = got["region_histogram"]
        assert [tuple(b) for b in h["bins"]] == [tuple(b) for b in want["region_histogram"]]
        assert h["noise_scale"] == want["region_histogram_noise_scale"]


def test_global_mean_with_a_grid_equals_the_release_api(spark: object) -> None:
    df = spark.createDataFrame(_table(seed=4)).repartition(5)  # type: ignore[attr-defined]
    grid = EpsGrid(ratio=1.3, lowest=0.01, highest=10)
    col = hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000, eps_grid=grid,
                      method="hpm-a")
    got = df.agg(col.unsafe_seed(5)).collect()[0][0]  # type: ignore[attr-defined]
    want = hs.agg(df, col, unsafe_seed=5).collect()[0]
    assert got["estimate"] == want["salary_mean"]
    assert got["n"] == want["salary_mean_n"] == 3000


@pytest.mark.parametrize("grid", [None, EpsGrid(ratio=1.2, lowest=0.01, highest=3.0)])
def test_native_cells_equal_the_pandas_engines(spark: object, grid: EpsGrid | None) -> None:
    """hdp_cells' per-level count and exact sums (level rules and encoding in Java) equal
    the pandas engine's cells bit for bit, with skewed levels, empty partitions, NaN/inf
    values, ε below the floor, ε = inf and ε above the grid, for double and int columns."""
    from hdp_spark.core.release import LevelPlan
    from hdp_spark.spark.columns import native_cells

    pdf = _table(seed=6)
    age = np.random.default_rng(2).integers(-5, 90, len(pdf))
    pdf["age"] = pd.array(np.where(age % 17 == 0, None, age), dtype="Int64")  # nulls
    # hash partitioning by dept: 3 of 40 partitions hold rows, 37 are empty
    df = spark.createDataFrame(pdf).filter("dept != 'hr'").repartition(40, "dept")  # type: ignore[attr-defined]
    assert df.rdd.glom().map(len).filter(lambda n: n == 0).count() >= 30
    install(spark)
    specs = (spec_of(hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000)),
             spec_of(hs.hdp_mean("age", eps="eps", lower=18, upper=70, fill=40)))
    values = tuple((s.column, s.lower, s.upper, s.fill_value) for s in specs)  # type: ignore[attr-defined]
    cells = df.groupBy("dept").agg(native_cells("eps", grid, values=values).alias("c")
                                   ).collect()
    plan = LevelPlan("eps", grid, specs)  # type: ignore[arg-type]
    want = hpd.level_tables(pdf[pdf.dept != "hr"], [plan], ("dept",), None)[0]
    got = {
        (r["dept"],): [(lv, n, tuple(r["c"]["sums"][2 * i:2 * i + 2]))
                       for i, (lv, n) in enumerate(zip(r["c"]["level"], r["c"]["n"],
                                                       strict=True))]
        for r in cells
    }
    assert set(got) == set(want)
    for key, stats_ in want.items():
        assert got[key] == [(row.level, row.count, row.totals) for row in stats_.rows]
    assert all(r["c"]["group"] == f'[["str","{r["dept"]}"]]' for r in cells)


def test_non_numeric_columns_fail_analysis_with_the_release_apis_words(spark: object) -> None:
    df = spark.createDataFrame(pd.DataFrame({"x": ["a"], "eps": [1.0]}))  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="value column `x` must be numeric, got string"):
        df.agg(hs.hdp_mean("x", eps="eps", lower=0, upper=1)).collect()


def test_reevaluation_and_repartitioning_give_the_same_numbers(spark: object) -> None:
    df = spark.createDataFrame(_table(seed=8))  # type: ignore[attr-defined]
    col = hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000)  # a fresh private key
    a = df.repartition(2).groupBy("dept").agg(col.alias("s")).orderBy("dept")
    first = [r["s"]["estimate"] for r in a.collect()]
    a.show()
    again = [r["s"]["estimate"] for r in a.collect()]
    other = [r["s"]["estimate"] for r in df.repartition(9).groupBy("dept").agg(
        col.alias("s")).orderBy("dept").collect()]
    assert first == again == other
    fresh = [r["s"]["estimate"] for r in df.groupBy("dept").agg(
        hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000).alias("s")
    ).orderBy("dept").collect()]
    # a new Column is a new release: a new key (fresh keys are the point; the estimates agree
    # by chance only if all noise draws on a 2^-40-relative grid agree: < 1e-9)
    assert fresh != first


def test_tied_groups_draw_independent_laplace_noise(spark: object) -> None:
    """300 groups with identical rows (identical statistics): the noise of each group is an
    independent Laplace(b) draw (KS test), none repeats, and neighbouring groups' noises are
    uncorrelated. If the noise were a function of (key, statistics) only, all 300 would be
    equal. Seeded (the point is independence across groups under ONE key, not fresh keys),
    so the outcome is the same on every run; with a fresh key the KS check would fail w.p.
    1e-3 and the correlation check (4.3σ at 299 pairs) w.p. ~2e-5."""
    base = pd.DataFrame({"x": np.linspace(10, 90, 40), "eps": np.tile([1.0, 2.0], 20)})
    pdf = pd.concat([base.assign(g=i) for i in range(300)], ignore_index=True)
    df = spark.createDataFrame(pdf).repartition(6)  # type: ignore[attr-defined]
    col = hs.hdp_mean("x", eps="eps", lower=0, upper=100, method="hpm-a", clip_output=False
                      ).unsafe_seed(36)  # type: ignore[attr-defined]
    rows = df.groupBy("g").agg(col.alias("m")).orderBy("g").collect()
    noise = np.array([r["m"]["estimate"] for r in rows]) - base.x.mean()
    b = rows[0]["m"]["noise_scale"]
    assert len(set(noise.tolist())) >= 290  # the exact sampler's grid allows rare ties
    assert stats.kstest(noise / b, stats.laplace.cdf).pvalue > 1e-3
    assert abs(np.corrcoef(noise[:-1], noise[1:])[0, 1]) < 0.25


def test_column_carries_its_spec_and_errors_match(spark: object) -> None:
    col = hs.hdp_mean("salary", eps="eps", lower=0, upper=10, alias="m")
    assert spec_of(col).name == "m"  # type: ignore[attr-defined]
    with pytest.raises(ParameterError, match="lower"):
        hs.hdp_mean("salary", eps="eps", lower=10, upper=0)
    with pytest.raises(ParameterError):
        hs.hdp_histogram("region", eps="eps", categories=[])
    from pyspark.sql import Window

    with pytest.raises(ParameterError, match=r"`m` cannot be used with `\.over\(window\)`"):
        col.over(Window.partitionBy("dept"))


def test_invalid_eps_fails_the_column_like_the_release_api(spark: object) -> None:
    pdf = _table(n=200, seed=9)
    pdf.loc[3, "eps"] = -1.0
    df = spark.createDataFrame(pdf)  # type: ignore[attr-defined]
    col = hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000)
    from hdp_spark.errors import EpsilonColumnError

    with pytest.raises(EpsilonColumnError) as release_err:
        hs.agg(df, col)
    with pytest.raises(Exception, match="EpsilonColumnError") as column_err:
        df.agg(col).collect()
    assert str(release_err.value) in str(column_err.value)


def test_connect_session_without_the_extension_is_a_clear_error() -> None:
    class _Catalog:
        def functionExists(self, name: str) -> bool:
            return False

    class _RemoteSession:
        catalog = _Catalog()

    with pytest.raises(ExtensionMissingError, match="configure"):
        install(_RemoteSession())


def test_sql_function_equals_the_release_api(spark: object) -> None:
    pdf = _table(seed=10)
    df = spark.createDataFrame(pdf).repartition(3)  # type: ignore[attr-defined]
    df.createOrReplaceTempView("hdp_sql_employees")
    hs.register_sql(spark, unsafe_seed=31)
    got = spark.sql(  # type: ignore[attr-defined]
        "SELECT dept, hdp_mean(salary, eps, 0, 250000) AS s FROM hdp_sql_employees "
        "GROUP BY dept ORDER BY dept").collect()
    want = hs.agg(df, hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000), by="dept",
                  keys=["hr", "it", "ops", "rnd"], unsafe_seed=31).orderBy("dept").collect()
    assert [r["s"]["estimate"] for r in got] == [r["salary_mean"] for r in want]
    assert [r["s"]["n"] for r in got] == [r["salary_mean_n"] for r in want]
    with pytest.raises(Exception, match="lower` and `upper` must be constants"):
        spark.sql("SELECT hdp_mean(salary, eps, salary, 1) FROM hdp_sql_employees").collect()  # type: ignore[attr-defined]


def test_sql_histogram_equals_the_release_api(spark: object) -> None:
    pdf = _table(seed=11)
    pdf["code"] = pdf["region"].map({"north": 1, "south": 2, "east": 3}).fillna(9).astype(int)
    df = spark.createDataFrame(pdf).repartition(3)  # type: ignore[attr-defined]
    df.createOrReplaceTempView("hdp_sql_regions")
    hs.register_sql(spark, unsafe_seed=32)
    got = spark.sql(  # type: ignore[attr-defined]
        "SELECT dept, hdp_histogram(region, eps, array('north', 'south', 'east')) AS h, "
        "hdp_histogram(code, eps, array(1, 2, 3)) AS c FROM hdp_sql_regions "
        "GROUP BY dept ORDER BY dept").collect()
    keys = ["hr", "it", "ops", "rnd"]
    for alias, column, cats in (("h", "region", ["north", "south", "east"]),
                                ("c", "code", [1, 2, 3])):
        extra = {} if column == "region" else {"other": None}
        want = hs.agg(df, hs.hdp_histogram(column, eps="eps", categories=cats, **extra), by="dept",
                      keys=keys, unsafe_seed=32).orderBy("dept").collect()
        labels = [*cats, "other"] if column == "region" else cats  # SQL: the default `other`
        assert [[b["category"] for b in r[alias]["bins"]] for r in got] == [labels] * len(keys)
        assert [[b["frequency"] for b in r[alias]["bins"]] for r in got] == [
            [b["frequency"] for b in r[f"{column}_histogram"]] for r in want]
        assert [r[alias]["n"] for r in got] == [r[f"{column}_histogram_n"] for r in want]
    for bad, rule in (("array('a', 'a')", "must not repeat"), ("region", "constant array"),
                      ("array(1.5, 2.5)", "strings or integers"),
                      ("array(cast(null as string))", "must not hold null")):
        with pytest.raises(Exception, match=rule):
            spark.sql(  # type: ignore[attr-defined]
                f"SELECT hdp_histogram(region, eps, {bad}) FROM hdp_sql_regions").collect()


@pytest.mark.slow
def test_privacy_audit_through_the_column(spark: object) -> None:
    """Empirical privacy loss of the Column path on neighbouring tables. 2,000 groups hold
    table D and 2,000 hold D', which moves one row at ε = 1 from 0 to 100 (the full range);
    the groups' noises are independent draws (test above), so one job gives 2,000 samples of
    each output distribution. For every threshold t with enough mass on both sides, the
    log ratio of P[estimate > t] under D and D' must stay within the row's documented
    ``eps_effective`` (plus sampling slack), and must come near it (the audit can fail)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 100, 40)
    x[0] = 0.0
    eps = np.tile([1.0, 2.0], 20)
    d = pd.DataFrame({"x": x, "eps": eps})
    d2 = d.copy()
    d2.loc[0, "x"] = 100.0
    m = 2000
    pdf = pd.concat([d.assign(g=i) for i in range(m)] + [d2.assign(g=m + i) for i in range(m)],
                    ignore_index=True)
    df = spark.createDataFrame(pdf).repartition(4)  # type: ignore[attr-defined]
    col = hs.hdp_mean("x", eps="eps", lower=0, upper=100, method="hpm-a", clip_output=False
                      ).unsafe_seed(36)  # type: ignore[attr-defined]
    rows = df.groupBy("g").agg(col.alias("m")).collect()
    est = {r["g"]: r["m"]["estimate"] for r in rows}
    a = np.array([est[i] for i in range(m)])
    b = np.array([est[m + i] for i in range(m)])
    levels = {lv["eps"]: lv["eps_effective"] for lv in rows[0]["m"]["eps_levels"]}
    claim = levels[1.0]
    assert claim <= 1.0
    losses = []
    for t in np.quantile(np.concatenate([a, b]), np.linspace(0.05, 0.95, 37)):
        pa, pb = (a > t).mean(), (b > t).mean()
        if min(pa, pb, 1 - pa, 1 - pb) >= 0.1:  # standard error of each log ratio < 0.1
            losses += [abs(np.log(pa / pb)), abs(np.log((1 - pa) / (1 - pb)))]
    worst = max(losses)
    assert worst <= claim + 0.3, (worst, claim)
    assert worst >= 0.5 * claim, (worst, claim)


def test_release_api_native_path_equals_the_groupby_path(spark: object) -> None:
    """With ``hdp_spark.native=true`` the release API computes its cells with hdp_cells;
    the released numbers are the same as through Spark's groupBy(ε) pass."""
    from hdp_spark.spark.extension import NATIVE_CONF

    df = spark.createDataFrame(_table(seed=13)).repartition(5)  # type: ignore[attr-defined]
    specs = (hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000),
             hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000, alias="g",
                         eps_grid=EpsGrid(ratio=1.5, lowest=0.01, highest=10)),
             hs.hdp_histogram("region", eps="eps", categories=CATS))

    def run() -> list[object]:
        return hs.agg(df, *specs, by="dept", keys=["hr", "it", "ops", "rnd", "none"],
                      unsafe_seed=4).orderBy("dept").collect()

    plain = run()
    spark.conf.set(NATIVE_CONF, "true")  # type: ignore[attr-defined]
    try:
        native = run()
    finally:
        spark.conf.unset(NATIVE_CONF)  # type: ignore[attr-defined]
    assert repr(native) == repr(plain)  # NaN (an undefined τ) compares by its text


@pytest.mark.parametrize("kind", ["long", "double"])
def test_integer_categories_match_like_the_release_api(spark: object, kind: str) -> None:
    """Integer labels against an integral column compare as long, against a fractional one
    as double (2.0 matches 2; NaN, ±inf and 2.5 match nothing; -0.0 matches 0)."""
    rng = np.random.default_rng(14)
    n = 600
    raw = rng.choice([0.0, -0.0, 1.0, 2.0, 2.5, 3.0, 7.0, np.nan, np.inf], n)
    col = raw if kind == "double" else np.nan_to_num(raw, nan=5, posinf=6).astype(np.int64)
    pdf = pd.DataFrame({"c": col, "eps": rng.choice([0.5, 1.0, 2.0], n),
                        "g": rng.choice(["a", "b"], n)})
    df = spark.createDataFrame(pdf).repartition(3)  # type: ignore[attr-defined]
    hist = hs.hdp_histogram("c", eps="eps", categories=[0, 1, 2, 3], other=-1)
    got = df.groupBy("g").agg(hist.unsafe_seed(8).alias("h")).orderBy("g").collect()  # type: ignore[attr-defined]
    want = hs.agg(df, hist, by="g", keys=["a", "b"], unsafe_seed=8).orderBy("g").collect()
    for r, w in zip(got, want, strict=True):
        assert [tuple(b) for b in r["h"]["bins"]] == [tuple(b) for b in w["c_histogram"]]


def test_histogram_column_type_errors_use_the_release_apis_words(spark: object) -> None:
    df = spark.createDataFrame(pd.DataFrame({"c": [1, 2], "eps": [1.0, 1.0]}))  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="must hold strings for string `categories`, got bigint"):
        df.agg(hs.hdp_histogram("c", eps="eps", categories=["a", "b"])).collect()
    df2 = spark.createDataFrame(pd.DataFrame({"c": ["1"], "eps": [1.0]}))  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="must be numeric \\(integer or float\\)"):
        df2.agg(hs.hdp_histogram("c", eps="eps", categories=[1, 2], other=None)).collect()
