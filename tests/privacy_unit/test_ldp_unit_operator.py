"""Local DP under a privacy unit as one streaming JVM operator (``LdpUnitBound``, printed
``HdpLdpUnitBound``; issue 50): the reports it keeps equal the native windows' and pandas'
on tables with long and string ids, null ids, ties in ε, NaN/null/negative/0/+∞ ε and
persons with many candidate rows, for every local-DP aggregator, on classic Spark and on
Spark Connect (with the extension: the operator; without it: the windows); the Columns
and the SQL functions release the same numbers on either path; the key is in no printed
plan; the operator refuses an input that is not what it requires (fail closed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import hdp_spark.spark as hs
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit import PrivacyUnit
from hdp_spark.pandas.ldp import report_codes
from hdp_spark.pandas.privacy_unit import keep_one_report, unit_eps
from tests.privacy_unit.ldp_unit_column_job import _same, columns, explained
from tests.privacy_unit.ldp_unit_data import ldp_specs, unit_table
from tests.privacy_unit.ldp_unit_operator_job import SEED, TABLES, run

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore::hdp_spark.ldp.LdpEpsilonWarning")]

JOB = Path(__file__).with_name("ldp_unit_operator_job.py")
UNIT = PrivacyUnit("uid", 1, 1)


def _canonical(df: pd.DataFrame, spec: Any, rows: list[int]) -> list[tuple[str, float, str]]:
    """(person, safe ε, codes) of the kept rows: rows tying on all three are
    interchangeable (either may be kept: Spark's order of ties varies); a missing report's
    codes are "-1" (its q is not read)."""
    at = {int(r): i for i, r in enumerate(df["row"])}
    safe = df.assign(eps=unit_eps(df["eps"]))
    index, q = report_codes(safe, spec)
    out = []
    for r in rows:
        i = at[int(r)]
        codes = str([int(index[i]), *q[i].tolist()]) if index[i] >= 0 else "-1"
        out.append((str(safe["uid"].iloc[i]), float(safe["eps"].iloc[i]), codes))
    return sorted(out)


def _check(got: dict[str, Any], operator: bool) -> int:
    """Each path's kept reports equal pandas'; the plans show the operator where
    ``operator`` (and the windows otherwise), and the key only without the extension (the
    documented fallback: a plan literal). Returns the comparisons."""
    assert got["key_in_plans"] is not operator
    compared = 0
    for strings, seed in TABLES:
        pdf, oracle = unit_table(seed, strings)
        persons = pdf["uid"].dropna().nunique()
        for spec in ldp_specs(oracle):
            want = _canonical(pdf, spec, keep_one_report(pdf, UNIT, spec,
                                                         ReleaseKey.resolve(SEED))["row"])
            assert len(want) == persons  # one report per person, null ids dropped
            for path in ("operator", "windows"):
                name = f"{strings}/{seed}/{spec.name}/{path}"
                assert _canonical(pdf, spec, got["kept"][name]) == want, name
                used = operator and path == "operator"
                assert got["operator"][name] is used, name
                assert got["windows"][name] is not used, name
                compared += 1
    return compared


def test_operator_windows_and_pandas_keep_the_same_reports(spark: Any) -> None:
    assert _check(run(spark), operator=True) == 2 * 4 * 2


@pytest.mark.parametrize("server", ["connect_server", "bare_connect_server"])
def test_connect_keeps_pandas_reports(server: str, request: Any) -> None:
    """With the extension the request ``hdp_ldp_keep`` becomes the operator; on a server
    without it the native windows keep the same reports."""
    pytest.importorskip("pyspark.sql.connect")
    got = request.getfixturevalue(server).run(JOB, conf={"spark.sql.shuffle.partitions": "3"})
    assert "connect" in got["session"]
    assert _check(got, operator=server == "connect_server") == 2 * 4 * 2


def _release(df: Any, col: Any, setting: str, sql: str | None = None
             ) -> tuple[dict[str, Any], str]:
    spark = df.sparkSession
    spark.conf.set("hdp_spark.unitOperator", setting)
    try:
        q = spark.sql(sql) if sql else df.agg(col)
        return q.collect()[0][0].asDict(recursive=True), explained(q)
    finally:
        spark.conf.unset("hdp_spark.unitOperator")


def test_columns_release_the_same_on_either_path(spark: Any) -> None:
    """The Columns keep their reports by the operator (no key in any explain mode) and
    release what the window plan releases, field for field."""
    from hdp_spark.core.privacy_unit.spec import bounding_key, query_bounding_key
    from tests.privacy_unit.ldp_unit_column_job import fingerprint
    from tests.privacy_unit.ldp_unit_data import spark_frame

    pdf, oracle = unit_table(5, False)
    df = spark_frame(spark, pdf, False)
    for i, col in enumerate(columns(oracle)):
        seeded = col.unsafe_seed(f"op{i}")
        got, plans = _release(df, seeded, "true")
        want, windows = _release(df, seeded, "false")
        assert "HdpLdpUnitBound" in plans
        assert "row_number()" not in plans
        assert "HdpLdpUnitBound" not in windows
        assert "hdp_ldp_position" in windows
        assert _same(got, want), seeded.spec.name
        assert 0 < got["n"] + got["skipped"] <= pdf["uid"].dropna().nunique()
        bkey = bounding_key(seeded.key)
        for secret in (seeded.key.material.hex(), bkey,
                       query_bounding_key(bkey, fingerprint(df.agg(seeded)))):
            assert secret not in plans


def test_sql_releases_the_same_on_either_path(spark: Any) -> None:
    from tests.privacy_unit.ldp_unit_data import spark_frame
    from tests.privacy_unit.ldp_unit_sql_job import calls

    session = spark.newSession()
    pdf, oracle = unit_table(6, True)
    spark_frame(session, pdf, True).createOrReplaceTempView("ldp_operator_reports")
    hs.register_sql(session, unsafe_seed="sql-operator")
    for call, _ in calls(oracle):
        text = f"SELECT {call} AS r FROM ldp_operator_reports"
        got, plans = _release(session.table("ldp_operator_reports"), None, "true", text)
        want, windows = _release(session.table("ldp_operator_reports"), None, "false", text)
        assert "HdpLdpUnitBound" in plans
        assert "HdpLdpUnitBound" not in windows
        assert _same(got, want), call


def test_the_operator_refuses_an_unsafe_eps(spark: Any) -> None:
    """The operator reads the safe ε its callers compute below it; a raw ε (NaN,
    negative) fails the task rather than choose the person's ε from it (fail closed)."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([(1, float("nan"), 0, 1), (1, 0.5, 0, 1), (2, -1.0, 0, 0)],
                                  "uid long, eps double, i long, q long")
    operator = spark._jvm.org.hdpspark.LdpUnitBound
    kept = DataFrame(operator.keep(frame._jdf, "uid", "eps", "i", "q", "0" * 64, "a"), spark)
    with pytest.raises(Exception, match="reads the safe epsilon"):
        kept.collect()
    safe = frame.withColumn("eps", F.when(F.isnan("eps") | (F.col("eps") <= 0), 0.0)
                            .otherwise(F.col("eps")))
    kept = DataFrame(operator.keep(safe._jdf, "uid", "eps", "i", "q", "0" * 64, "a"), spark)
    assert sorted(r["uid"] for r in kept.collect()) == [1, 2]  # one row per person
    with pytest.raises(Exception, match="64 hex digits"):
        operator.keep(safe._jdf, "uid", "eps", "i", "q", "secret", "a")
    with pytest.raises(Exception, match="reads an integral or string id, a double epsilon"):
        operator.keep(safe._jdf, "uid", "eps", "eps", "q", "0" * 64, "a")
