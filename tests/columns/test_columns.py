"""The Spark Column aggregators: same numbers as the release API, native cells equal to the
pandas engine's, re-evaluation identity, independent noise for tied groups, errors."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F
from scipy import stats

import hdp_spark.pandas as hpd
import hdp_spark.spark as hs
from hdp_spark import EpsGrid
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.errors import ParameterError
from hdp_spark.front import spec_of
from hdp_spark.spark.extension import ExtensionMissingError, install

sys.path.insert(0, str(Path(__file__).parent))
from column_job import query_key

sys.path.pop(0)

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
                         [("hpf-a", "adpm"), ("hpf-wt", "adpm"), ("k-rappor-w", "ldp-we"),
                          ("auto", "auto")])
def test_grouped_mean_and_histogram_equal_the_release_api(
    spark: object, method: str, mean_method: str
) -> None:
    pdf = _table()
    df = spark.createDataFrame(pdf).repartition(7)  # type: ignore[attr-defined]
    mean = hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000, method=mean_method,
                       keys="public").unsafe_seed(21)  # type: ignore[attr-defined]
    hist = hs.hdp_histogram("region", eps="eps", categories=CATS, method=method,
                            keys="public").unsafe_seed(21)  # type: ignore[attr-defined]
    out = df.groupBy("dept").agg(mean.alias("salary"), hist).orderBy("dept").collect()
    keys = ["hr", "it", "ops", "rnd"]
    ref = hs.agg(df, mean, by="dept", keys=keys,
                 unsafe_seed=query_key(df, mean, ("dept",))).orderBy("dept").collect()
    ref_hist = hs.agg(df, hist, by="dept", keys=keys,
                      unsafe_seed=query_key(df, hist, ("dept",))).orderBy("dept").collect()
    assert [r["dept"] for r in out] == keys
    for got, want, want_h in zip(out, ref, ref_hist, strict=True):
        s = got["salary"]
        assert s["estimate"] == want["salary_mean"]
        assert s["noise_scale"] == want["salary_mean_noise_scale"]
        assert (s["ci_low"], s["ci_high"]) == (want["salary_mean_ci_low"],
                                               want["salary_mean_ci_high"])
        assert s["bias_bound"] == want["salary_mean_bias_bound"]
        assert (s["n"], s["tau"], s["method"], s["fallback"]) == (
            want["salary_mean_n"], want["salary_mean_tau"], want["salary_mean_method"],
            want["salary_mean_fallback"])
        assert [tuple(lv) for lv in s["eps_levels"]] == [tuple(lv) for lv in
                                                          want["salary_mean_eps_levels"]]
        h = got["region_histogram"]
        assert [tuple(b) for b in h["bins"]] == [tuple(b) for b in want_h["region_histogram"]]
        assert h["noise_scale"] == want_h["region_histogram_noise_scale"]
        assert h["bias_bound"] == want_h["region_histogram_bias_bound"]


def test_global_mean_with_a_grid_equals_the_release_api(spark: object) -> None:
    df = spark.createDataFrame(_table(seed=4)).repartition(5)  # type: ignore[attr-defined]
    grid = EpsGrid(ratio=1.3, lowest=0.01, highest=10)
    col = hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000, eps_grid=grid,
                      method="hpm-a")
    seeded = col.unsafe_seed(5)  # type: ignore[attr-defined]
    got = df.agg(seeded).collect()[0][0]
    want = hs.agg(df, col, unsafe_seed=query_key(df, seeded)).collect()[0]
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


def test_reevaluation_gives_the_same_numbers(spark: object) -> None:
    """One query re-evaluated (collect, show, toPandas, write, AQE off, a cached input, the
    same query built again) repeats its numbers; another query or a new Column does not."""
    df = spark.createDataFrame(_table(seed=8)).repartition(2)  # type: ignore[attr-defined]
    col = hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000, keys="public")

    def query() -> object:
        return df.groupBy("dept").agg(col.alias("s")).orderBy("dept")

    def numbers(frame: object) -> list[float]:
        return [r["s"]["estimate"] for r in frame.collect()]  # type: ignore[attr-defined]

    a = query()
    first = numbers(a)
    a.show()
    assert numbers(a) == first
    assert a.toPandas()["s"].map(lambda s: s["estimate"]).tolist() == first  # type: ignore[attr-defined]
    assert numbers(query()) == first  # the same query built again
    spark.conf.set("spark.sql.adaptive.enabled", "false")  # type: ignore[attr-defined]
    try:
        assert numbers(query()) == first
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")  # type: ignore[attr-defined]
    df.cache()
    try:
        df.count()
        assert numbers(query()) == first  # a cached input: analysis sees the same plan
    finally:
        df.unpersist()
    # another query: another partitioning of the input is kept in the fingerprint
    other = numbers(df.repartition(9).groupBy("dept").agg(col.alias("s")).orderBy("dept"))
    # independent noise: 4 groups tie all at once with probability below (2e-6)**4
    # (exact sampler's grid, see column_job.attacks); the old keying repeated all 4
    assert other != first
    fresh = numbers(df.groupBy("dept").agg(
        hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000, keys="public").alias("s")
    ).orderBy("dept"))
    assert fresh != first  # a new Column: a new key


def test_grouped_column_without_a_group_decision_is_refused(spark: object) -> None:
    """A grouped Column (or SQL call) without keys='public' fails at analysis with an error
    naming the choices; the global aggregate needs no decision; keys takes 'public' or a key
    list."""
    df = spark.createDataFrame(_table(n=300, seed=15))  # type: ignore[attr-defined]
    col = hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000)
    with pytest.raises(Exception, match="which groups appear is a privacy decision") as err:
        df.groupBy("dept").agg(col).collect()
    for choice in ("keys='public'", "select_keys", "keys=[...]"):
        assert choice in str(err.value)
    with pytest.raises(Exception, match="which groups appear is a privacy decision"):
        df.groupBy("dept").agg(hs.hdp_histogram("region", eps="eps", categories=CATS)).collect()
    assert df.agg(col).collect()[0][0]["n"] == 300
    assert df.groupBy().agg(col).collect()[0][0]["n"] == 300  # no grouping: global
    df.createOrReplaceTempView("hdp_undecided")
    hs.register_sql(spark)
    with pytest.raises(Exception, match="which groups appear is a privacy decision"):
        spark.sql("SELECT dept, hdp_mean(salary, eps, 0, 1) FROM hdp_undecided "  # type: ignore[attr-defined]
                  "GROUP BY dept").collect()
    # a misspelt group decision: the hint names what the call wrote and what it resembles
    with pytest.raises(Exception, match="got 'pubic' \\(did you mean 'public'\\? As the last"):
        spark.sql("SELECT dept, hdp_mean(salary, eps, 0, 1, 'pubic') FROM hdp_undecided "  # type: ignore[attr-defined]
                  "GROUP BY dept").collect()
    # an unknown method resembling nothing: no hint about arguments the call lacks
    for query in ("SELECT dept, hdp_mean(salary, eps, 0, 1, 'data') FROM hdp_undecided "
                  "GROUP BY dept", "SELECT hdp_mean(salary, eps, 0, 1, 'data') FROM hdp_undecided"):
        with pytest.raises(Exception, match=r"`method` must be one of adpm, .*; got 'data'") as e:
            spark.sql(query).collect()  # type: ignore[attr-defined]
        message = str(e.value).split("got 'data'")[1].splitlines()[0]
        assert "public" not in message, message
        assert "select" not in message, message
    with pytest.raises(Exception, match="got 'admp' \\(did you mean 'adpm'\\?\\)"):
        spark.sql("SELECT hdp_mean(salary, eps, 0, 1, 'admp') FROM hdp_undecided")  # type: ignore[attr-defined]
    with pytest.raises(Exception, match=r"`method` \(argument 5 of hdp_mean\) must be a constant "
                       r"string, got 0.1") as e:
        spark.sql("SELECT hdp_mean(salary, eps, 0, 1, 0.1) FROM hdp_undecided")  # type: ignore[attr-defined]
    assert "public" not in str(e.value).split("got 0.1")[0]
    with pytest.raises(ParameterError, match="`keys` of a Column aggregator must be 'public'"):
        hs.hdp_mean("salary", eps="eps", lower=0, upper=1, keys=42)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="got 'data'"):
        hs.hdp_histogram("region", eps="eps", categories=CATS, keys="data")


def test_different_queries_with_equal_statistics_draw_independent_noise(spark: object) -> None:
    """300 releases: 15 queries of one Column that aggregate the same rows (filters on ids
    that do not exist), each over 20 groups with equal statistics. Across queries, a
    group's noises are independent draws: no repeat, Laplace-distributed (KS test), and
    uncorrelated between queries. Under the old noise (a function of key and statistics)
    every query would repeat the first one."""
    base = pd.DataFrame({"x": np.linspace(10, 90, 40), "eps": np.tile([1.0, 2.0], 20)})
    pdf = pd.concat([base.assign(g=i, id=np.arange(40) + 40 * i) for i in range(20)],
                    ignore_index=True)
    df = spark.createDataFrame(pdf).repartition(2)  # type: ignore[attr-defined]
    col = hs.hdp_mean("x", eps="eps", lower=0, upper=100, method="hpm-a", clip_output=False,
                      keys="public")
    noise = []
    for q in range(15):
        rows = df.filter(f"id != {10**6 + q}").groupBy("g").agg(col.alias("m")).orderBy(
            "g").collect()
        noise.append([r["m"]["estimate"] - base.x.mean() for r in rows])
        b = rows[0]["m"]["noise_scale"]
    z = np.array(noise) / b  # (query, group)
    # ties: about g/(2b) <= 2**-20 per pair (exact sampler's grid); 300 draws make 44,850
    # pairs, so P(any tie) < 0.05 - too high to assert none: allow a few (P[>= 3] < 1e-6)
    assert z.size - len(set(z.ravel().tolist())) <= 2
    # KS at level 1e-6: a correct sampler fails with probability 1e-6
    assert stats.kstest(z.ravel(), stats.laplace.cdf).pvalue > 1e-6
    # correlation of two queries' noises over 20 groups, for all 105 pairs: under
    # independence each is about N(0, 1/19); the mean over 105 pairs has sd 0.022, so
    # |mean| > 0.15 has probability below 1e-11; the equal-noise leak gives 1.0
    corr = [np.corrcoef(z[i], z[j])[0, 1] for i in range(15) for j in range(i + 1, 15)]
    assert abs(float(np.mean(corr))) < 0.15
    assert max(corr) < 0.99


@pytest.mark.statistical
def test_tied_groups_draw_independent_laplace_noise(spark: object) -> None:
    """300 groups with identical rows (identical statistics): the noise of each group is an
    independent Laplace(b) draw (KS test), none repeats, and neighbouring groups' noises are
    uncorrelated. If the noise were a function of (key, statistics) only, all 300 would be
    equal. The seed alone does not fix the draws: the noise key also carries the query's
    fingerprint, and local rows and a file source's listing enter it through a per-JVM
    MAC, so every run is a fresh draw; the thresholds hold its false-failure probability
    below 1e-6: the KS check fails w.p. 5e-7, the correlation check (|r| >= 0.3 at 299
    pairs, 5.2σ) w.p. ~2e-7.
    """
    import tempfile

    base = pd.DataFrame({"x": np.linspace(10, 90, 40), "eps": np.tile([1.0, 2.0], 20)})
    pdf = pd.concat([base.assign(g=i) for i in range(300)], ignore_index=True)
    path = Path(tempfile.gettempdir()) / "hdp_spark_tied_groups.parquet"
    if not path.exists():
        pdf.to_parquet(path)
    df = spark.read.parquet(str(path))  # type: ignore[attr-defined]
    col = hs.hdp_mean("x", eps="eps", lower=0, upper=100, method="hpm-a", clip_output=False,
                      keys="public").unsafe_seed(36)  # type: ignore[attr-defined]
    rows = df.groupBy("g").agg(col.alias("m")).orderBy("g").collect()
    noise = np.array([r["m"]["estimate"] for r in rows]) - base.x.mean()
    b = rows[0]["m"]["noise_scale"]
    assert len(rows) == 300
    assert len(set(noise.tolist())) >= 290  # the exact sampler's grid allows rare ties
    assert stats.kstest(noise / b, stats.laplace.cdf).pvalue > 5e-7
    assert abs(np.corrcoef(noise[:-1], noise[1:])[0, 1]) < 0.3


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
    # one short error (a JVM error condition, not a Python worker traceback), with the
    # release API's words and count (a global aggregate's count is the table's)
    assert str(release_err.value) in str(column_err.value)
    assert type(column_err.value).__name__ == "SparkRuntimeException"
    assert len(str(column_err.value).splitlines()) == 1


def test_bad_eps_errors_are_short_and_name_no_values(spark: object) -> None:
    """Grouped: each group is checked on its own, so the count is one group's (said in the
    message); SQL the same; an ε below the grid; a non-numeric column names the column and
    type in the release API's words, never Spark's ``hdp_cells(...)`` text."""
    pdf = pd.DataFrame({"x": np.arange(60.0) + 0.123, "eps": 1.0, "g": ["a", "b", "c"] * 20,
                        "s": "text"})
    pdf.loc[[0, 1, 4], "eps"] = [np.nan, -2.5, np.nan]  # groups a, b, b
    df = spark.createDataFrame(pdf)  # type: ignore[attr-defined]
    grouped = df.groupBy("g").agg(hs.hdp_mean("x", eps="eps", lower=0, upper=100, keys="public"))
    df.createOrReplaceTempView("hdp_bad_eps")
    hs.register_sql(spark)
    sql = spark.sql("SELECT g, hdp_mean(x, eps, 0, 100, 'public') FROM hdp_bad_eps "  # type: ignore[attr-defined]
                    "GROUP BY g")
    for query in (grouped, sql):
        with pytest.raises(Exception, match=r"EpsilonColumnError: Column `eps` must hold ε >= 0 "
                           r"or \+inf .*; [12] row\(s\) of one group break this rule") as err:
            query.collect()
        assert len(str(err.value).splitlines()) == 1
        assert "0.123" not in str(err.value)
        assert "-2.5" not in str(err.value)
    grid = hs.hdp_mean("x", eps="eps", lower=0, upper=100,
                       eps_grid=EpsGrid(lowest=2.0, highest=8.0))
    with pytest.raises(Exception, match=r"has 57 row\(s\) with 0 < ε below the lowest point"):
        df.filter("eps = 1.0").agg(grid).collect()
    for bad in (lambda: df.agg(hs.hdp_mean("s", eps="eps", lower=0, upper=1)).collect(),
                lambda: spark.sql("SELECT hdp_mean(s, eps, 0, 1) FROM hdp_bad_eps").collect(),  # type: ignore[attr-defined]
                lambda: df.agg(hs.hdp_mean("x", eps="s", lower=0, upper=1)).collect()):
        with pytest.raises(Exception, match=r"^SchemaError: (value|ε) column `s` must be "
                           "numeric, got string.$") as err:
            bad()
        assert "hdp_cells" not in str(err.value)


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
        "SELECT dept, hdp_mean(salary, eps, 0, 250000, 'public') AS s FROM hdp_sql_employees "
        "GROUP BY dept ORDER BY dept").collect()
    # the SQL call's native aggregate equals the Column's (constants compare by value), so
    # the same query over the view has the same fingerprint
    col = hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000, keys="public")
    key = query_key(spark.table("hdp_sql_employees"), col.unsafe_seed(31), ("dept",))  # type: ignore[attr-defined]
    want = hs.agg(df, col, by="dept", keys=["hr", "it", "ops", "rnd"],
                  unsafe_seed=key).orderBy("dept").collect()
    assert [r["s"]["estimate"] for r in got] == [r["salary_mean"] for r in want]
    assert [r["s"]["n"] for r in got] == [r["salary_mean_n"] for r in want]
    # the same honest interval and bias bound as the release API (issue 48)
    assert [(r["s"]["ci_low"], r["s"]["ci_high"], r["s"]["bias_bound"]) for r in got] == [
        (r["salary_mean_ci_low"], r["salary_mean_ci_high"], r["salary_mean_bias_bound"])
        for r in want]
    # optional method and beta: the defaults written out are the same call; another choice
    # is the release API's with that method and its own derived key
    q = ("SELECT dept, hdp_mean(salary, eps, 0, 250000{}) AS s FROM hdp_sql_employees "
         "GROUP BY dept ORDER BY dept")
    same = spark.sql(q.format(", 'adpm', 0.05, 'public'")).collect()  # type: ignore[attr-defined]
    assert [r["s"]["estimate"] for r in same] == [r["s"]["estimate"] for r in got]
    # (over the rows with ε > 0: a row at ε = 0 makes the uniform weights a fallback, whose
    # output, the midpoint, would equal whatever the key)
    positive = df.filter("eps > 1e-100")
    positive.createOrReplaceTempView("hdp_sql_employees_pos")
    other = spark.sql(q.replace("hdp_sql_employees", "hdp_sql_employees_pos").format(  # type: ignore[attr-defined]
        ", 'uniform', 0.1, 'public'")).collect()
    uniform = hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000, method="uniform",
                          beta=0.1)
    uniform_key = ReleaseKey.from_unsafe_seed(31).for_query("sql-options:uniform:0.1").for_query(
        query_key(spark.table("hdp_sql_employees_pos"),  # type: ignore[attr-defined]
                  _FingerprintOnly(col.unsafe_seed(31)), ("dept",)))  # type: ignore[attr-defined]
    want = hs.agg(positive, uniform, by="dept", keys=["hr", "it", "ops", "rnd"],
                  unsafe_seed=uniform_key).orderBy("dept").collect()
    assert not any(r["s"]["fallback"] for r in other)
    assert [r["s"]["estimate"] for r in other] == [r["salary_mean"] for r in want]
    assert [r["s"]["method"] for r in other] == ["uniform"] * 4
    assert [r["s"]["ci_high"] - r["s"]["ci_low"] for r in other] == [
        r["salary_mean_ci_high"] - r["salary_mean_ci_low"] for r in want]
    # "auto": per group the release API's choice; the call's key is the registration's
    # key derived with the options, then with the query's fingerprint
    chosen = spark.sql(q.format(", 'auto', 0.05, 'public'")).collect()  # type: ignore[attr-defined]
    auto = hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000, method="auto")
    fingerprint = query_key(spark.table("hdp_sql_employees"),  # type: ignore[attr-defined]
                            _FingerprintOnly(col.unsafe_seed(31)), ("dept",))  # type: ignore[attr-defined]
    call_key = ReleaseKey.from_unsafe_seed(31).for_query("sql-options:auto:0.05").for_query(
        fingerprint)
    want = hs.agg(df, auto, by="dept", keys=["hr", "it", "ops", "rnd"],
                  unsafe_seed=call_key).orderBy("dept").collect()
    assert [r["s"]["method"] for r in chosen] == [r["salary_mean_method"] for r in want]
    assert [r["s"]["estimate"] for r in chosen] == [r["salary_mean"] for r in want]
    assert "auto" not in {r["s"]["method"] for r in chosen}
    for bad, rule in (("'nope'", "`method` must be one of adpm, "),
                      ("'adpm', 2.0", r"`beta` must be in \(0, 1\), got 2.0"),
                      ("'adpm', 0.1, 0.2, 'public'", "at most a method, a beta and 'public'")):
        with pytest.raises(Exception, match=rule):  # at analysis
            spark.sql(q.format(", " + bad))  # type: ignore[attr-defined]
    for bad, rule in (("250000, 0", "`lower` must be < `upper`, got \\(250000, 0\\)"),
                      ("0, 1e308 * 10", "must be finite"),
                      ("-1e308, 1e308", "`upper - lower` must be a finite float")):
        with pytest.raises(Exception, match=rule):  # at analysis: no job runs
            spark.sql(f"SELECT hdp_mean(salary, eps, {bad}) FROM hdp_sql_employees")  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="lower` and `upper` must be constants"):
        spark.sql("SELECT hdp_mean(salary, eps, salary, 1) FROM hdp_sql_employees").collect()  # type: ignore[attr-defined]


class _FingerprintOnly:
    """A Column's spec, groups and inputs with a key that returns the fingerprint itself
    (``query_key`` then yields the query's fingerprint)."""

    def __init__(self, col: Any) -> None:
        self.spec, self.groups, self.inputs = col.spec, col.groups, col.inputs
        self.key = self

    @staticmethod
    def for_query(fingerprint: str) -> str:
        return fingerprint


@pytest.mark.spark
def test_sql_columns_are_named_as_written(spark: object) -> None:
    """As Spark names its own functions' columns (``avg(salary)``): the call as written, not
    the internal finalize over the native aggregate; an alias replaces it."""
    pdf = _table(seed=12)
    spark.createDataFrame(pdf).createOrReplaceTempView("hdp_sql_names")  # type: ignore[attr-defined]
    hs.register_sql(spark, unsafe_seed=33)
    sql = spark.sql  # type: ignore[attr-defined]
    assert sql("SELECT hdp_mean(salary, eps, 0, 250000) FROM hdp_sql_names").columns == [
        "hdp_mean(salary, eps, 0, 250000)"]
    assert sql("SELECT dept, hdp_histogram(region, eps, array('north', 'south'), 'public') "
               "FROM hdp_sql_names GROUP BY dept").columns == [
        "dept", "hdp_histogram(region, eps, array(north, south), public)"]
    assert sql("SELECT hdp_mean(salary, eps, 0, 250000) AS s FROM hdp_sql_names").columns == ["s"]
    plain = sql("SELECT hdp_mean(salary, eps, 0, 250000).estimate AS e FROM hdp_sql_names")
    assert plain.columns == ["e"]
    assert isinstance(plain.collect()[0]["e"], float)


def test_sql_histogram_equals_the_release_api(spark: object) -> None:
    pdf = _table(seed=11)
    pdf["code"] = pdf["region"].map({"north": 1, "south": 2, "east": 3}).fillna(9).astype(int)
    df = spark.createDataFrame(pdf).repartition(3)  # type: ignore[attr-defined]
    df.createOrReplaceTempView("hdp_sql_regions")
    hs.register_sql(spark, unsafe_seed=32)
    got = spark.sql(  # type: ignore[attr-defined]
        "SELECT dept, hdp_histogram(region, eps, array('north', 'south', 'east'), 'public') "
        "AS h, hdp_histogram(code, eps, array(1, 2, 3), 'public') AS c FROM hdp_sql_regions "
        "GROUP BY dept ORDER BY dept").collect()
    keys = ["hr", "it", "ops", "rnd"]
    for alias, column, cats in (("h", "region", ["north", "south", "east"]),
                                ("c", "code", [1, 2, 3])):
        extra = {} if column == "region" else {"other": None}
        col = hs.hdp_histogram(column, eps="eps", categories=cats, keys="public", **extra)
        key = query_key(spark.table("hdp_sql_regions"), col.unsafe_seed(32), ("dept",))  # type: ignore[attr-defined]
        want = hs.agg(df, col, by="dept", keys=keys, unsafe_seed=key).orderBy("dept").collect()
        labels = [*cats, "other"] if column == "region" else cats  # SQL: the default `other`
        assert [[b["category"] for b in r[alias]["bins"]] for r in got] == [labels] * len(keys)
        assert [[b["frequency"] for b in r[alias]["bins"]] for r in got] == [
            [b["frequency"] for b in r[f"{column}_histogram"]] for r in want]
        assert [r[alias]["n"] for r in got] == [r[f"{column}_histogram_n"] for r in want]
        assert [[(b["ci_low"], b["ci_high"]) for b in r[alias]["bins"]] for r in got] == [
            [(b["ci_low"], b["ci_high"]) for b in r[f"{column}_histogram"]] for r in want]
        assert [r[alias]["bias_bound"] for r in got] == [
            r[f"{column}_histogram_bias_bound"] for r in want]
    auto = spark.sql(  # type: ignore[attr-defined]
        "SELECT dept, hdp_histogram(region, eps, array('north', 'south', 'east'), 'auto', "
        "0.05, 'public') AS h FROM hdp_sql_regions GROUP BY dept ORDER BY dept").collect()
    col = hs.hdp_histogram("region", eps="eps", categories=["north", "south", "east"],
                           method="auto")
    want = hs.explain(df, col, by="dept", keys=keys).orderBy("dept").collect()
    assert [r["h"]["method"] for r in auto] == [r["method"] for r in want]
    assert "auto" not in {r["h"]["method"] for r in auto}
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
    col = hs.hdp_mean("x", eps="eps", lower=0, upper=100, method="hpm-a", clip_output=False,
                      keys="public").unsafe_seed(36)  # type: ignore[attr-defined]
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
    hist = hs.hdp_histogram("c", eps="eps", categories=[0, 1, 2, 3], other=-1,
                            keys="public").unsafe_seed(8)  # type: ignore[attr-defined]
    got = df.groupBy("g").agg(hist.alias("h")).orderBy("g").collect()
    want = hs.agg(df, hist, by="g", keys=["a", "b"],
                  unsafe_seed=query_key(df, hist, ("g",))).orderBy("g").collect()
    for r, w in zip(got, want, strict=True):
        assert [tuple(b) for b in r["h"]["bins"]] == [tuple(b) for b in w["c_histogram"]]


def test_histogram_column_type_errors_use_the_release_apis_words(spark: object) -> None:
    df = spark.createDataFrame(pd.DataFrame({"c": [1, 2], "eps": [1.0, 1.0]}))  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="must hold strings for string `categories`, got bigint"):
        df.agg(hs.hdp_histogram("c", eps="eps", categories=["a", "b"])).collect()
    df2 = spark.createDataFrame(pd.DataFrame({"c": ["1"], "eps": [1.0]}))  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="must be numeric \\(integer or float\\)"):
        df2.agg(hs.hdp_histogram("c", eps="eps", categories=[1, 2], other=None)).collect()


def test_seeded_column_marks_its_output_field(spark: object) -> None:
    """A Column built with unsafe_seed carries ``hdp_unsafe_seed`` in its struct field's
    metadata, through a re-alias too; a private Column carries none."""
    df = spark.createDataFrame(_table(n=200, seed=16))  # type: ignore[attr-defined]
    col = hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000, keys="public")
    seeded = df.groupBy("dept").agg(col.unsafe_seed(1).alias("s"))  # type: ignore[attr-defined]
    assert seeded.schema["s"].metadata == {"hdp_unsafe_seed": True}
    assert df.agg(col.unsafe_seed(1)).schema[0].metadata == {"hdp_unsafe_seed": True}  # type: ignore[attr-defined]
    assert df.agg(col).schema[0].metadata == {}


def test_fallback_tau_is_nan_in_both_apis(spark: object) -> None:
    """A fallback group publishes ``tau`` = NaN in the Column as in the release API (an
    Arrow UDF keeps the kernel's NaN; a pandas UDF would turn it into null)."""
    pdf = pd.DataFrame({"x": [0.2, 0.9], "eps": [0.0, 0.0]})  # no ε at all: fallback
    df = spark.createDataFrame(pdf)  # type: ignore[attr-defined]
    col = hs.hdp_mean("x", eps="eps", lower=0, upper=1)
    got = df.agg(col.alias("m")).collect()[0]["m"]
    want = hs.agg(df, hs.hdp_mean("x", eps="eps", lower=0, upper=1)).collect()[0]
    assert got["fallback"] is True
    assert want["x_mean_fallback"] is True
    assert math.isnan(got["tau"])
    assert math.isnan(want["x_mean_tau"])


def test_public_key_list_keeps_only_those_groups(spark: object) -> None:
    """``keys=[...]``, the release API's public key list: only rows with those grouping
    values are aggregated (Spark's own aggregates of the query see the same rows), a key
    without rows has no row, and each group equals the release API's for the same key."""
    from pyspark.sql import functions as F

    pdf = _table(n=2000, seed=21)
    df = spark.createDataFrame(pdf)  # type: ignore[attr-defined]
    col = hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000,
                      keys=["it", "hr", "sales"]).unsafe_seed(41)  # type: ignore[attr-defined]
    out = df.groupBy("dept").agg(col.alias("s"), F.count("*").alias("c")).orderBy(
        "dept").collect()
    assert [r["dept"] for r in out] == ["hr", "it"]  # "sales" has no rows: no row
    assert [r["c"] for r in out] == [int((pdf["dept"] == d).sum()) for d in ("hr", "it")]
    ref = hs.agg(df, col, by="dept", keys=["hr", "it"],
                 unsafe_seed=query_key(df, col, ("dept",))).orderBy("dept").collect()
    for got, want in zip(out, ref, strict=True):
        assert got["s"]["estimate"] == want["salary_mean"]
        assert got["s"]["n"] == want["salary_mean_n"]
    two = hs.hdp_histogram("region", eps="eps", categories=CATS,
                           keys=[("it", "north"), ("hr", "south")])
    rows = df.groupBy("dept", "region").agg(two.alias("h")).collect()
    assert sorted((r["dept"], r["region"]) for r in rows) == [("hr", "south"), ("it", "north")]
    longs = spark.createDataFrame(  # type: ignore[attr-defined]
        pd.DataFrame({"k": [1, 2, 3] * 40, "x": np.linspace(0, 1, 120), "eps": 1.0}))
    exact = hs.hdp_mean("x", eps="eps", lower=0, upper=1, keys=[1.0, 3])
    assert sorted(r["k"] for r in longs.groupBy("k").agg(exact).collect()) == [1, 3]


@pytest.mark.parametrize(("keys", "by", "message"), [
    (["it"], (), "needs a grouped aggregate"),
    ([("it", "north")], ("dept",), r"must have 1 value\(s\), one per grouping column"),
    ([1], ("dept",), "the key value 1 in `keys` is not a value of the grouping column"),
    (["x"], ("k",), "the key value 'x' in `keys` is not a value"),
    ([1.5], ("k",), r"the key value 1\.5 in `keys` is not a value"),
])
def test_key_list_errors_at_analysis(spark: object, keys: list[object], by: tuple[str, ...],
                                     message: str) -> None:
    pdf = _table(n=200, seed=22)
    pdf["k"] = np.arange(len(pdf)) % 3
    df = spark.createDataFrame(pdf)  # type: ignore[attr-defined]
    col = hs.hdp_mean("salary", eps="eps", lower=0, upper=1, keys=keys)
    with pytest.raises(Exception, match=message):
        df.groupBy(*by).agg(col).collect()


def test_key_lists_of_one_aggregate_must_agree(spark: object) -> None:
    df = spark.createDataFrame(_table(n=200, seed=23))  # type: ignore[attr-defined]
    a = hs.hdp_mean("salary", eps="eps", lower=0, upper=1, keys=["it"])
    b = hs.hdp_histogram("region", eps="eps", categories=CATS, keys=["hr"])
    with pytest.raises(Exception, match=r"must take the same `keys=`"):
        df.groupBy("dept").agg(a, b).collect()
    same = hs.hdp_histogram("region", eps="eps", categories=CATS, keys=["it"])
    assert [r["dept"] for r in df.groupBy("dept").agg(a, same).collect()] == ["it"]


@pytest.mark.parametrize(("keys", "message"), [
    ([None], "null or NaN"),
    (["a", "a"], "duplicates"),
    ([], "at least one key"),
    ([b"x"], "hold strings, integers, finite floats or booleans"),
    ([math.inf], "hold strings, integers, finite floats or booleans"),
    ("data", "must be 'public'"),
])
def test_key_list_errors_in_python(keys: object, message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        hs.hdp_mean("salary", eps="eps", lower=0, upper=1, keys=keys)  # type: ignore[arg-type]


def test_null_and_nan_grouping_values_are_not_released(spark: object) -> None:
    """The release API's rule for both: a public key is never null or NaN, so rows with a
    null or NaN grouping value are in no released group. The extension filters them below
    the aggregate, so Spark's own aggregates of the query see the same rows."""
    from pyspark.sql import functions as F

    pdf = pd.DataFrame({"k": [1.0, 0.0, 2.0, 3.0] * 50, "x": np.linspace(0, 1, 200),
                        "eps": 1.0})
    df = spark.createDataFrame(pdf).selectExpr(  # type: ignore[attr-defined]
        "CASE WHEN k = 0 THEN CAST('NaN' AS DOUBLE) WHEN k = 3 THEN NULL ELSE k END AS g",
        "x", "eps")
    col = hs.hdp_mean("x", eps="eps", lower=0, upper=1, keys="public")
    rows = df.groupBy("g").agg(col.alias("m"), F.count("*").alias("c")).orderBy("g").collect()
    assert [r["g"] for r in rows] == [1.0, 2.0]
    assert [(r["m"]["n"], r["c"]) for r in rows] == [(50, 50), (50, 50)]
    ref = hs.agg(df, hs.hdp_mean("x", eps="eps", lower=0, upper=1), by="g", keys=[1.0, 2.0])
    assert [r["x_mean_n"] for r in ref.orderBy("g").collect()] == [50, 50]
    text = df.groupBy("g").agg(col.alias("m"))._jdf.queryExecution().analyzed().toString()  # type: ignore[attr-defined]
    assert "isnotnull(g" in text
    assert "isnan(g" in text


def test_classic_session_without_the_analyzer_rule_names_configure() -> None:
    """A Column needs the extension's analyzer rule, which only a session built with
    ``configure`` has: elsewhere it fails before any noise, naming ``configure``."""
    from hdp_spark.core.noise import ReleaseKey
    from hdp_spark.spark.column_finalize import NO_FINGERPRINT
    from hdp_spark.spark.column_finalize import query_key as qk

    with pytest.raises(ParameterError, match="configure"):
        qk(ReleaseKey.fresh(), None)
    assert "hdp_spark.spark.configure" in NO_FINGERPRINT


def test_fingerprint_tells_queries_apart_and_repeats_for_the_same_query(
    spark: object, tmp_path: Path
) -> None:
    """What the query fingerprint covers: sources (file paths, local rows), filters,
    CASE WHEN in the argument, grouping; constants compare by value; the common plans
    need no equality-hash fallback (every part written by a specific rule)."""
    col = hs.hdp_mean("x", eps="eps", lower=0, upper=1, keys="public")
    pdf = pd.DataFrame({"id": np.arange(20), "x": np.linspace(0, 1, 20), "eps": 1.0,
                        "g": ["a", "b"] * 10})
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pdf.to_parquet(a)
    pdf.to_parquet(b)
    s = spark  # type: Any
    fa, fb = s.read.parquet(str(a)), s.read.parquet(str(b))
    local = s.createDataFrame(pdf)
    local2 = s.createDataFrame(pdf.assign(id=pdf.id + 1))  # other rows, equal statistics

    def fp(frame: Any, by: tuple[str, ...] = (), groups: str = "public") -> str:
        from hdp_spark.spark.columns import cells_of

        spec = spec_of(col)
        out = frame.groupBy(*by).agg(cells_of(spec, groups).alias("c"))
        return str(out.select("c.query").first()[0])

    assert fp(fa) == fp(s.read.parquet(str(a)))  # the same query, built again
    assert fp(fa) != fp(fb)  # another file, same contents
    assert fp(local) == fp(s.createDataFrame(pdf))  # the same local rows
    assert fp(local) != fp(local2)
    assert fp(fa.filter("id != 17")) == fp(fa.filter("id != CAST(17 AS BIGINT)"))
    assert fp(fa.filter("id != 17")) != fp(fa.filter("id != 18")) != fp(fa)
    assert fp(fa, ("g",)) != fp(fa.withColumn("g", F.upper("g")), ("g",))
    assert fp(fa) != fp(fa, (), "none")  # the group decision is part of the aggregate
    case = fa.withColumn("x", F.expr("CASE WHEN id = 3 THEN 0.5D ELSE x END"))
    assert fp(case) != fp(fa)
    jvm = s._jvm.org.hdpspark.QueryFingerprint
    for frame in (fa.filter("id != 17").join(local, "id"), local, case.groupBy("g").count()):
        assert jvm.opaqueParts(frame._jdf.queryExecution().analyzed()) == ""


def test_columns_and_expressions_are_accepted_for_value_and_eps(spark: object) -> None:
    """``hdp_mean(F.col("salary") / 1000, ...)``, ``df.salary``, an ε expression: the
    Column reads the expression natively and releases what the release API releases on a
    table with that expression as a column (same query key, same cells)."""
    import inspect

    df = spark.createDataFrame(_table(n=500, seed=17)).repartition(2)  # type: ignore[attr-defined]
    col = hs.hdp_mean(F.col("salary") / 1000, eps=F.coalesce("eps", F.lit(0.0)), lower=0,
                      upper=250).unsafe_seed(2)  # type: ignore[attr-defined]
    got = df.agg(col).collect()[0][0]
    spec = col.spec
    # named after the expression's text (classic: "/(salary, 1000)", as its JVM Column
    # prints it)
    assert "salary" in spec.column
    assert "1000" in spec.column
    assert spec.eps == "coalesce(eps, 0.0)"
    wide = df.withColumn(spec.column, F.col("salary") / 1000).withColumn(
        spec.eps, F.coalesce("eps", F.lit(0.0)))
    want = hs.agg(wide, spec, unsafe_seed=query_key(df, col)).collect()[0]
    assert got["estimate"] == want[f"{spec.name}"]
    assert got["n"] == want[f"{spec.name}_n"] == 500
    by_attr = df.agg(hs.hdp_mean(df.salary, eps=df.eps, lower=0, upper=250_000)).collect()  # type: ignore[attr-defined]
    assert by_attr[0][0]["n"] == 500
    hist = hs.hdp_histogram(F.upper("region"), eps="eps", categories=["NORTH", "SOUTH"])
    assert df.agg(hist).collect()[0][0]["n"] == 500
    with pytest.raises(ParameterError, match="reads a Column expression"):
        hs.agg(df, col)
    with pytest.raises(ParameterError, match="`eps` must be a column name or a Spark Column"):
        hs.hdp_mean("salary", eps=1.0, lower=0, upper=1)  # type: ignore[arg-type]
    with pytest.raises(Exception, match="must be numeric, got string"):
        df.agg(hs.hdp_mean(F.upper("region"), eps="eps", lower=0, upper=1)).collect()
    params = inspect.signature(hs.hdp_mean).parameters
    assert {"eps", "lower", "upper", "method", "beta", "keys"} <= set(params)


def test_selecting_fields_of_the_released_struct_collects_the_same_numbers(
        spark: object) -> None:
    """docs/columns.md suggests selecting the needed fields before collecting many groups:
    the projection sits above the aggregate, so the query's fingerprint, its key and its
    numbers are the ones of the whole struct."""
    df = spark.createDataFrame(_table(n=2000))  # type: ignore[attr-defined]
    out = df.groupBy("dept").agg(hs.hdp_mean("salary", eps="eps", lower=0, upper=250_000,
                                             keys="public").alias("m"))
    full = {r["dept"]: (r["m"]["estimate"], r["m"]["ci_low"], r["m"]["ci_high"])
            for r in out.collect()}
    part = {r["dept"]: (r["estimate"], r["ci_low"], r["ci_high"])
            for r in out.select("dept", "m.estimate", "m.ci_low", "m.ci_high").collect()}
    assert len(full) > 1
    assert part == full
