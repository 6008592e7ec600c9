"""The SQL form of the user-level mean, ``hdp_user_mean(value, eps, user, lower, upper[,
'<JSON options>'][, 'public'])``: the Column's and the release API's numbers for the same
key (global and GROUP BY with public keys), one query re-evaluated repeats its numbers and
another query draws other noise, the fixed result type, and the refusals (at analysis, or
by the finalize in the release API's words)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import hdp_spark.spark as hs
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.spark.records_finalize import group_key
from hdp_spark.spark.sql_users import ROWS_CONF, user_mean_type

sys.path.insert(0, str(Path(__file__).parent))
from um_column_job import ARGS, plain, reference, table

sys.path.pop(0)

pytestmark = pytest.mark.spark

SEED = 13
OPTIONS: dict[str, Any] = {"cap": "paper", "beta": 0.1, "fill": 2.5}


@pytest.fixture(scope="module")
def users(spark: Any) -> Any:
    hs.register_sql(spark, unsafe_seed=SEED)
    df = spark.createDataFrame(table()).repartition(3)
    df.createOrReplaceTempView("users")
    return df


def _fingerprint(df: Any) -> str:
    """The query fingerprint in the analyzed plan (the one 64-digit hex constant)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(True)
    found = set(re.findall(r"\b[0-9a-f]{64}\b", out.getvalue()))
    assert len(found) == 1, found
    return found.pop()


def _call_key(options: dict[str, Any]) -> ReleaseKey:
    text = json.dumps(options, sort_keys=True)
    return ReleaseKey.resolve(SEED).for_query(f"sql-user-mean:{text}")


def test_global_sql_equals_the_column_and_the_release_api(spark: Any, users: Any) -> None:
    query = spark.sql(f"SELECT hdp_user_mean(x, eps, user, 0.0, 10.0, '{json.dumps(OPTIONS)}') "
                      "AS r FROM users")
    got = plain(query.collect()[0]["r"])
    assert got["users"] == 900
    assert plain(query.collect()[0]["r"]) == got  # one query re-evaluated: the same numbers
    call = _call_key(OPTIONS)
    col = hs.hdp_user_mean("x", **ARGS, **OPTIONS).unsafe_seed(call)  # type: ignore[operator]
    framed = users.agg(col.alias("r"))
    assert _fingerprint(framed) == _fingerprint(query)  # the same input: the same query
    assert plain(framed.collect()[0]["r"]) == got  # the Column under the call's key
    key = group_key(call.for_query(_fingerprint(query)), col.spec.name, "[]")
    assert reference(users, col, key) == got  # the release API under the group's key
    other = spark.sql(f"SELECT hdp_user_mean(x, eps, user, 0.0, 10.0, '{json.dumps(OPTIONS)}') "
                      "AS r FROM users WHERE x IS NULL OR x < 1e9").collect()[0]["r"]
    assert other["users"] == got["users"]
    assert other["estimate"] != got["estimate"]  # another query: independent noise


def test_grouped_sql_equals_the_release_api_per_group(spark: Any, users: Any) -> None:
    query = spark.sql("SELECT country, hdp_user_mean(x, eps, user, 0, 10, 'public') AS r "
                      "FROM users GROUP BY country")
    rows = query.collect()
    assert sorted(r["country"] for r in rows) == ["de", "fr", "it"]
    call = _call_key({})
    col = hs.hdp_user_mean("x", **{**ARGS, "lower": 0, "upper": 10}, keys="public")
    from hdp_spark.spark.columns_users import native_users

    cells = users.groupBy("country").agg(native_users(col.spec, "public").alias("c"))
    texts = {r["country"]: r["group"] for r in cells.select("country", "c.group").collect()}
    qkey = call.for_query(_fingerprint(query))
    for r in rows:
        c = r["country"]
        key = group_key(qkey, col.spec.name, texts[c])
        assert plain(r["r"]) == reference(users.filter(users.country == c), col, key), c
    seeded = hs.hdp_user_mean("x", **{**ARGS, "lower": 0, "upper": 10}, keys="public")
    framed = users.groupBy("country").agg(seeded.unsafe_seed(call).alias("r"))  # type: ignore[attr-defined]
    assert {r["country"]: plain(r["r"]) for r in framed.collect()} == {
        r["country"]: plain(r["r"]) for r in rows}


def test_result_type_is_the_columns(spark: Any, users: Any) -> None:
    query = spark.sql("SELECT hdp_user_mean(x, eps, user, 0, 10) AS r FROM users")
    assert query.schema["r"].dataType == user_mean_type()
    named = spark.sql("SELECT hdp_user_mean(x, eps, user, 0, 10) FROM users")
    assert named.columns == ["hdp_user_mean(x, eps, user, 0, 10)"]


@pytest.mark.parametrize(("call", "message"), [
    ("hdp_user_mean(x, eps, user, 0, 10, '{\"fill\": \"a\"}')", r"`fill` \(in the options"),
    ("hdp_user_mean(x, eps, user, 0, 10, 'nope')", "`options` of hdp_user_mean must be a JSON"),
    ("hdp_user_mean(x, eps, user, 0, 10, '{}', 'private')", "must be 'public' or omitted"),
    ("hdp_user_mean(x, eps, user, 0, 10, x)", r"`options` \(argument 6"),
    ("hdp_user_mean(x, eps, user, 0)", "hdp_user_mean takes"),
    ("hdp_user_mean(x, eps, user, x, 10)", "`lower` and `upper` .* must be constant numbers"),
    ("hdp_user_mean(x, eps, user, 10, 0)", "`lower` must be < `upper`"),
    ("hdp_user_mean(x, eps, user, 0, 10, '{\"eps_grid\": {\"ratio\": 2}}')",
     r"`eps_grid` \(in the options"),
    ("hdp_user_mean(x, eps, country, 0, 10)", None),  # a string user id is taken
    ("hdp_user_mean(x, eps, eps, 0, 10)", "user column `eps` must hold integers or strings"),
    ("hdp_user_mean(country, eps, user, 0, 10)", "value column `country` must be numeric"),
])
def test_bad_calls_are_refused_at_analysis(spark: Any, users: Any, call: str,
                                           message: str | None) -> None:
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("sql-users-refused", "refusals")
    if message is None:
        spark.sql(f"SELECT {call} AS r FROM users")  # analysed without an error
    else:
        with pytest.raises(Exception, match=message):
            spark.sql(f"SELECT {call} AS r FROM users")
    assert list(tracker.getJobIdsForGroup("sql-users-refused")) == []
    spark.sparkContext.setJobGroup("", "")


@pytest.mark.parametrize(("options", "message"), [
    ({"keys": "public"}, "`options` of hdp_user_mean has an unknown option `keys`"),
    ({"beta": 2.0}, r"`beta` must be in \(0, 1\)"),
    ({"fill": 11.0}, r"`fill` must lie in \[lower, upper\]"),
    ({"cap": "nope"}, "`cap` must be one of"),
])
def test_options_the_constructor_checks_are_refused(spark: Any, users: Any,
                                                     options: dict[str, Any], message: str
                                                     ) -> None:
    sql = f"SELECT hdp_user_mean(x, eps, user, 0, 10, '{json.dumps(options)}') AS r FROM users"
    with pytest.raises(Exception, match=message):
        spark.sql(sql).collect()


def test_a_grouped_call_needs_a_group_decision(spark: Any, users: Any) -> None:
    with pytest.raises(Exception, match="which groups appear is a privacy decision"):
        spark.sql("SELECT country, hdp_user_mean(x, eps, user, 0, 10) FROM users "
                  "GROUP BY country").collect()


def test_public_input_rules_fail_the_query_in_the_release_apis_words(spark: Any,
                                                                     users: Any) -> None:
    spark.createDataFrame([("u1", 1.0, 1.0), ("u1", 2.0, 2.0), ("u2", 1.0, 1.0)],
                          "user string, x double, eps double").createOrReplaceTempView("mixed")
    with pytest.raises(Exception, match=r"EpsilonColumnError: Column `eps` must hold one ε "
                                        r">= 0 per user.* 1 user\(s\) have rows with different"):
        spark.sql("SELECT hdp_user_mean(x, eps, user, 0, 10) FROM mixed").collect()


def test_without_register_sql_the_call_says_so(spark: Any, users: Any) -> None:
    saved = spark.conf.get(ROWS_CONF)
    spark.conf.unset(ROWS_CONF)
    try:
        with pytest.raises(Exception, match=r"call hdp_spark.spark.register_sql\(spark\)"):
            spark.sql("SELECT hdp_user_mean(x, eps, user, 0, 10) FROM users")
    finally:
        spark.conf.set(ROWS_CONF, saved)


def test_every_registered_sql_function_exists(spark: Any, users: Any) -> None:
    """Each registration's ``sql`` names a function of the session (the descriptor's word
    is kept); the user-level mean and the scalar local-DP aggregators have one."""
    from hdp_spark.aggregators.registry import aggregators

    named = {a.name: a.sql for a in aggregators() if a.sql is not None}
    assert {"user_mean", "ldp_mean", "ldp_distribution"} <= set(named)
    for function in named.values():
        assert spark.catalog.functionExists(function), function


def test_a_fill_the_jvm_reads_otherwise_is_refused(spark: Any, users: Any) -> None:
    """Integer bounds beyond 2**53: the midpoint the JVM computes in doubles is not the
    spec's exact one, so the finalize refuses the call rather than release a row whose
    encoding is not the release API's."""
    lower, upper = 484122828592498198, 4983806275120854179
    assert (float(lower) + float(upper)) / 2 != (lower + upper) / 2
    with pytest.raises(Exception, match="`fill` of hdp_user_mean cannot be read the same way"):
        spark.sql(f"SELECT hdp_user_mean(x, eps, user, {lower}, {upper}) FROM users").collect()


def test_options_that_are_not_an_object_are_refused_by_the_finalize_too() -> None:
    from hdp_spark.errors import ParameterError
    from hdp_spark.spark.sql_users import spec_of

    with pytest.raises(ParameterError, match="`options` of hdp_user_mean must be a JSON"):
        spec_of("[1]", "x", "user", "eps", 0, 10)
    spec, kwargs = spec_of('{"fill": 2}', "x", "user", "eps", 0, 10.0)
    assert (spec.lower, spec.upper, spec.fill_value, kwargs) == (0, 10.0, 2.0, {"fill": 2})
