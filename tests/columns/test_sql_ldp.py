"""The SQL form of the local-DP aggregators, ``hdp_ldp_mean(report, eps, '<JSON
options>'[, 'public'])``, ``hdp_ldp_distribution(index, sign, eps, '<JSON options>'[,
'public'])`` and ``hdp_ldp_mean_vector(report, eps, '<JSON options>'[, 'public'])``: the
Column's and the release API's numbers field for field (global and GROUP BY with public
keys), the report marker, the fixed result types, and the refusals."""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import hdp_spark.spark as hs
from hdp_spark.core.ldp.common import sphere_constant
from hdp_spark.spark.sql_ldp import ROWS_CONF, ldp_type

sys.path.insert(0, str(Path(__file__).parents[1] / "ldp"))
from ldp_column_job import KEYS, marked
from test_ldp_engines import _reports, _same

sys.path.pop(0)

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore::hdp_spark.ldp.LdpEpsilonWarning")]


@pytest.fixture(scope="module")
def reports(spark: Any) -> Any:
    warnings.simplefilter("ignore")
    hs.register_sql(spark)
    pdf, oracle = _reports()
    df = marked(spark.createDataFrame(pdf).repartition(3))
    df.createOrReplaceTempView("reports")
    spark.createDataFrame(pdf).createOrReplaceTempView("unmarked")
    return df, oracle


def _oracle(oracle: Any) -> dict[str, Any]:
    return {"d": oracle.d, "m": oracle.m, "phi_seed": oracle.phi_seed,
            "projection": oracle.projection, "beta": oracle.beta}


def _cases(oracle: Any) -> list[tuple[str, dict[str, Any], Any]]:
    """(SQL call over ``{o}`` options, the options, the same Column)."""
    return [
        ("hdp_ldp_mean(lap, eps, '{o}'", {"mechanism": "laplace", "lower": 5, "upper": 15},
         lambda keys: hs.ldp_mean("lap", eps="eps", mechanism="laplace", lower=5, upper=15,
                                  keys=keys)),
        ("hdp_ldp_mean(rr, eps, '{o}'", {"mechanism": "rr", "weights": "uniform"},
         lambda keys: hs.ldp_mean("rr", eps="eps", mechanism="rr", weights="uniform",
                                  keys=keys)),
        ("hdp_ldp_distribution(j, b, eps, '{o}'", {"oracle": _oracle(oracle), "beta": 0.1},
         lambda keys: hs.ldp_distribution("j", "b", eps="eps", oracle=oracle, beta=0.1,
                                          keys=keys)),
        ("hdp_ldp_mean_vector(du40, eps, '{o}'",
         {"d": 40, "radius": 2.0, "weights": "inverse_variance"},
         lambda keys: hs.ldp_mean_vector("du40", eps="eps", d=40, radius=2.0,
                                         weights="inverse_variance", keys=keys)),
    ]

KINDS = ("mean", "mean", "distribution", "vector")


def _plain(row: Any) -> dict[str, Any]:
    out: dict[str, Any] = row.asDict(recursive=True)
    return out


@pytest.mark.parametrize("case", range(4))
def test_sql_equals_the_column_and_the_release_api(spark: Any, reports: Any, case: int
                                                   ) -> None:
    df, oracle = reports
    call, options, column = _cases(oracle)[case]
    head = call.format(o=json.dumps(options))
    got = _plain(spark.sql(f"SELECT {head}) AS r FROM reports").collect()[0]["r"])
    col = column(None)
    want = _plain(df.agg(col.alias("r")).collect()[0]["r"])
    assert got.keys() == want.keys()
    assert all(_same(got[k], want[k]) for k in want), case
    release = hs.ldp_release(df, col).rows()[0]
    assert _same(got["estimate"], release[col.spec.name])  # the release API's estimate
    assert got["n"] > 500
    grouped = spark.sql(f"SELECT g, {head}, 'public') AS r FROM reports GROUP BY g").collect()
    assert sorted(r["g"] for r in grouped) == KEYS
    framed = {r["g"]: _plain(r["r"])
              for r in df.groupBy("g").agg(column("public").alias("r")).collect()}
    by_key = {r["g"]: r for r in hs.ldp_release(df, col, by="g", keys=KEYS).rows()}
    for r in grouped:
        mine = _plain(r["r"])
        assert all(_same(mine[k], framed[r["g"]][k]) for k in mine), (case, r["g"])
        assert _same(mine["estimate"], by_key[r["g"]][col.spec.name])
    # each group its own numbers (the vector's estimate falls back to 0 here: its raw mean)
    field = "raw" if case == 3 else "estimate"
    assert grouped[0]["r"][field] != grouped[1]["r"][field]


def test_result_types_are_the_columns(spark: Any, reports: Any) -> None:
    _, oracle = reports
    for kind, (call, options, _) in zip(KINDS, _cases(oracle), strict=True):
        query = spark.sql(f"SELECT {call.format(o=json.dumps(options))}) AS r FROM reports")
        assert query.schema["r"].dataType == ldp_type(kind)


def test_unmarked_reports_need_already_randomized(spark: Any, reports: Any) -> None:
    with pytest.raises(Exception, match="hdp_ldp_report"):
        spark.sql("SELECT hdp_ldp_mean(rr, eps, '{\"mechanism\": \"rr\"}') FROM unmarked")
    declared = spark.sql("SELECT hdp_ldp_mean(rr, eps, '{\"mechanism\": \"rr\", "
                         "\"already_randomized\": true}') AS r FROM unmarked").collect()
    marked_rows = spark.sql("SELECT hdp_ldp_mean(rr, eps, '{\"mechanism\": \"rr\"}') AS r "
                            "FROM reports").collect()
    assert _same(_plain(declared[0]["r"]), _plain(marked_rows[0]["r"]))
    with pytest.raises(Exception, match="holds `laplace` reports, but its aggregator "
                                        "expects `rr` reports"):  # another mechanism's marker
        spark.sql("SELECT hdp_ldp_mean(lap, eps, '{\"mechanism\": \"rr\"}') FROM reports")


@pytest.mark.parametrize(("call", "message"), [
    ("hdp_ldp_mean(rr, eps)", "hdp_ldp_mean takes"),
    ("hdp_ldp_mean(rr, eps, 'nope')", "`options` of hdp_ldp_mean must be a JSON object"),
    ("hdp_ldp_mean(rr, eps, rr)", r"`options` \(argument 3 of hdp_ldp_mean"),
    ("hdp_ldp_mean(rr, eps, '{}')", r"`mechanism` \(in the options of hdp_ldp_mean\)"),
    ("hdp_ldp_mean(rr, eps, '{\"mechanism\": \"duchi\"}')", r"`mechanism` \(in the options"),
    ("hdp_ldp_mean(lap, eps, '{\"mechanism\": \"laplace\", \"lower\": \"a\"}')",
     r"`lower` \(in the options"),
    ("hdp_ldp_mean(rr, eps, '{\"mechanism\": \"rr\", \"already_randomized\": 1}')",
     r"`already_randomized` \(in the options"),
    ("hdp_ldp_mean(rr, eps, '{\"mechanism\": \"rr\"}', 'private')",
     "must be 'public' or omitted"),
    ("hdp_ldp_distribution(j, b, eps, '{}')", r"`oracle` \(in the options"),
    ("hdp_ldp_distribution(j, b, eps, '{\"oracle\": {\"m\": 0}}')", r"`oracle` \(in the"),
    ("hdp_ldp_mean(g, eps, '{\"mechanism\": \"rr\", \"already_randomized\": true}')",
     "SchemaError: report column `g`"),
    ("hdp_ldp_mean_vector(du40, eps, '[]')",
     r"`options` of hdp_ldp_mean_vector must be a JSON object such as '\{\"d\": 3"),
    ("hdp_ldp_mean_vector(du40, eps, '{}')",
     r"`d` \(in the options of hdp_ldp_mean_vector\) must be an integer from 1 to 1024 in "
     r"SQL \(the Column hs.ldp_mean_vector takes larger ones\), got null"),
    ("hdp_ldp_mean_vector(du40, eps, '{\"d\": 1025}')", r"from 1 to 1024 .* got 1025"),
    ("hdp_ldp_mean_vector(du40, eps, '{\"d\": 2.5}')", r"from 1 to 1024 .* got 2.5"),
    ("hdp_ldp_mean_vector(du40, eps, '{\"d\": 0}')", r"from 1 to 1024 .* got 0"),
    ("hdp_ldp_mean_vector(du40, eps, '{\"d\": 40, \"radius\": \"x\"}')",
     r"`radius` \(in the options of hdp_ldp_mean_vector\) must be a number"),
    ("hdp_ldp_mean(rr, eps, '{\"mechanism\": \"rr\"}', 'unit', 'g', 1, 2)",
     r"`max_rows` must be 1 for local-DP aggregators under `privacy_unit`"),
    ("hdp_ldp_distribution(j, b, eps, '{}', 'public', 'unit', 'g', 1, 1)",
     r"`keys`: local-DP aggregators under `privacy_unit` release the whole table only"),
    ("hdp_ldp_distribution(j, b, eps, '{}', 'public', 'unit', 'g')",
     r"hdp_ldp_distribution takes .*'unit', column, 1, 1\]\), got 7 arguments"),
])
def test_bad_calls_are_refused_at_analysis(spark: Any, reports: Any, call: str, message: str
                                           ) -> None:
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("sql-ldp-refused", "refusals")
    with pytest.raises(Exception, match=message):
        spark.sql(f"SELECT {call} AS r FROM reports")
    assert list(tracker.getJobIdsForGroup("sql-ldp-refused")) == []
    spark.sparkContext.setJobGroup("", "")


@pytest.mark.parametrize(("call", "message"), [
    ("hdp_ldp_mean(rr, eps, '{\"mechanism\": \"rr\", \"keys\": \"public\"}')",
     "`options` of hdp_ldp_mean has an unknown option"),
    ("hdp_ldp_mean(rr, eps, '{\"mechanism\": \"rr\", \"beta\": 2}')", "beta"),
    ("hdp_ldp_mean(lap, eps, '{\"mechanism\": \"laplace\", \"lower\": 5, \"upper\": 1}')",
     "`lower` must be < `upper`"),
    ("hdp_ldp_distribution(j, b, eps, '{\"oracle\": {\"m\": 4, \"d\": 2}}')",
     "takes the FrequencyOracle's fields"),
    ("hdp_ldp_distribution(j, b, eps, '{\"oracle\": {\"m\": 4, \"d\": 2, \"phi_seed\": -1}}')",
     "`phi_seed` must be an integer"),
    ("hdp_ldp_mean_vector(du40, eps, '{\"d\": 40, \"radius\": -1}')", "radius"),
    ("hdp_ldp_mean_vector(du40, eps, '{\"d\": 40, \"lower\": 0}')",
     "`options` of hdp_ldp_mean_vector has an unknown option"),
])
def test_options_the_constructor_checks_are_refused(spark: Any, reports: Any, call: str,
                                                     message: str) -> None:
    with pytest.raises(Exception, match=message):
        spark.sql(f"SELECT {call} AS r FROM reports").collect()


def test_a_grouped_call_needs_a_group_decision(spark: Any, reports: Any) -> None:
    with pytest.raises(Exception, match="which groups appear is a privacy decision"):
        spark.sql("SELECT g, hdp_ldp_mean(rr, eps, '{\"mechanism\": \"rr\"}') FROM reports "
                  "GROUP BY g").collect()


def test_without_register_sql_the_call_says_so(spark: Any, reports: Any) -> None:
    saved = spark.conf.get(ROWS_CONF)
    spark.conf.unset(ROWS_CONF)
    try:
        with pytest.raises(Exception, match=r"call hdp_spark.spark.register_sql\(spark\)"):
            spark.sql("SELECT hdp_ldp_mean(rr, eps, '{\"mechanism\": \"rr\"}') FROM reports")
    finally:
        spark.conf.set(ROWS_CONF, saved)


def test_constants_the_jvm_read_otherwise_are_refused() -> None:
    """The finalize's check of the JVM's constants against the spec's (the bounds of a
    mean, the oracle's m), on the values the JVM would pass."""
    from hdp_spark.errors import ParameterError
    from hdp_spark.spark.sql_ldp import _check_used, spec_of

    mean = spec_of("mean", '{"mechanism": "laplace", "lower": 5, "upper": 15}', ["r", "e"])
    _check_used("hdp_ldp_mean", mean, {"lower": 5.0, "upper": 15.0})
    with pytest.raises(ParameterError, match="constants of hdp_ldp_mean cannot be read"):
        _check_used("hdp_ldp_mean", mean, {"lower": 5.0, "upper": 15.000000000000002})
    text = '{"oracle": {"d": 2, "m": 4, "phi_seed": 1}}'
    pmf = spec_of("distribution", text, ["j", "b", "e"])
    _check_used("hdp_ldp_distribution", pmf, {"m": 4})
    with pytest.raises(ParameterError, match="constants of hdp_ldp_distribution"):
        _check_used("hdp_ldp_distribution", pmf, {"m": 5})
    with pytest.raises(ParameterError, match="`options` of hdp_ldp_mean must be a JSON"):
        spec_of("mean", "[]", ["r", "e"])
    with pytest.raises(ParameterError, match=r"`oracle` \(in the options"):
        spec_of("distribution", '{"oracle": 3}', ["j", "b", "e"])
    vector = spec_of("vector", '{"d": 40, "radius": 2}', ["r", "e"])
    sphere = sphere_constant(40)
    _check_used("hdp_ldp_mean_vector", vector, {"d": 40, "radius": 2.0, "sphere": sphere})
    for bad in ({"d": 41, "radius": 2.0, "sphere": sphere},
                {"d": 40, "radius": 2.5, "sphere": sphere},
                {"d": 40, "radius": 2.0, "sphere": math.nextafter(sphere, 0.0)}):
        with pytest.raises(ParameterError, match="constants of hdp_ldp_mean_vector"):
            _check_used("hdp_ldp_mean_vector", vector, bad)


def test_the_conf_holds_the_spheres_of_every_sql_dimension() -> None:
    """The A_d table the JVM reads: Python's values, exact through JSON."""
    from hdp_spark.spark.sql_ldp import MAX_SQL_VECTOR_DIM, _templates

    table = json.loads(json.dumps(_templates()))["sphere"]
    assert len(table) == MAX_SQL_VECTOR_DIM
    assert all(a == sphere_constant(d) for d, a in enumerate(table, start=1))
