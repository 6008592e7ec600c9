"""The release API under a privacy unit on Spark Connect: a server started with the extension
bounds with the streaming operator (``HdpUnitBound``), reached by the request the
extension's analyzer rule answers (``UnitRequest``, ``hdp_unit_bound``); a server without it
bounds in native windows. Both release what pandas releases for the same key; the key is in
no printed plan of the operator's path. The request's function and rule are checked on the
classic session too (same rows as the py4j route; refused arguments; fail closed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import hdp_spark.pandas as hpd
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit import PrivacyUnit, bounding_key
from hdp_spark.pandas.privacy_unit import bound_frame as pandas_frame
from tests.privacy_unit.test_unit_bound_jvm import KEY, _canonical, _frame, _skewed
from tests.privacy_unit.unit_release_connect_job import (
    CASES,
    case_table,
    plain,
    release_args,
)

JOB = Path(__file__).with_name("unit_release_connect_job.py")


def test_connect_releases_what_pandas_releases(connect_server: Any) -> None:
    """Integer and string ids, public keys, none, select_keys: the rows equal pandas' for
    the same key. With the extension the bounding step is the operator (one shuffle by the
    id, one sort, no window; the request gone from the analyzed plan; a persisted bounded
    table found again by later queries) and the key is in no explain mode's output."""
    _check(connect_server, extension=True)


def test_a_server_without_the_extension_falls_back_and_agrees(
        bare_connect_server: Any) -> None:
    """Without the extension the native windows, the key a literal of the plan (the
    documented fallback); the same rows."""
    _check(bare_connect_server, extension=False)


def test_connect_with_the_pre_bound_releases_what_pandas_releases(
        connect_server: Any) -> None:
    """The session's map-side pre-bound on (a map of two persons, so it flushes; an id's
    first row let through): the same rows, the pre-bound in the plan with the one
    exchange by the id."""
    _check(connect_server, extension=True, pre=True)


def _check(server: Any, *, extension: bool, pre: bool = False) -> None:
    pytest.importorskip("pyspark.sql.connect")
    conf = {"spark.sql.shuffle.partitions": "3"}
    if pre:
        conf.update({"hdp_spark.unitPreBound": "true", "hdp_spark.unitPreBound.persons": "2",
                     "hdp_spark.unitPreBound.from": "2"})
    got = server.run(JOB, conf=conf)
    assert "connect" in got["session"]
    for case in CASES:
        specs, kwargs = release_args(case, hpd)
        df = case_table(case)
        want = plain(hpd.agg(df, *specs, **kwargs).to_dict("records"))
        assert len(want) > 0, case
        assert got["rows"][case] == want, case
        if case not in got["plans"]:
            continue
        plan = got["plans"][case]
        by = () if case.endswith("global") else ("country",)
        keys = (("DE",), ("FR",), ("IT",), ("ES",)) if case.endswith("grouped") else None
        kept = pandas_frame(df, PrivacyUnit("user_id", 2, 3), eps="eps", by=by, keys=keys,
                            specs=specs, key=ReleaseKey.resolve(kwargs["unsafe_seed"]))
        assert plan["kept"] == len(kept) < len(df), case  # the bounds bite
        assert plan["operator"] is extension, case
        assert plan["request_left"] is False, case
        assert plan["cached"] is True, case  # the release's cells read the bounded rows
        assert plan["key_in_plans"] is not extension, case
        assert plan["prebound"] is pre, case
        if extension:
            assert (plan["exchanges"], plan["sorts"], plan["windows"]) == (1, 1, 0), plan
        else:
            assert plan["windows"] > 0, plan
    assert set(got["plans"]) == set(CASES) - {"int-global"}


def _request(spark: Any, frame: Any, unit: PrivacyUnit, key: str, *, group: str | None,
             codes: list[str], secret: Any = None) -> Any:
    """``frame`` filtered by the request, its key built through py4j as on Connect the
    plugin builds it."""
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    if secret is None:
        secret = Column(spark._jvm.org.hdpspark.HdpSecret.column(key))
    rows = frame.withColumn("eps", F.col("eps").cast("double"))
    return rows.where(F.call_function(
        "hdp_unit_bound", F.col(unit.column), F.col("eps"), F.lit(unit.max_groups),
        F.lit(unit.max_rows), secret, F.lit(None) if group is None else F.col(group),
        *(F.col(c) for c in codes)))


@pytest.mark.parametrize("group", ["g", None])
def test_the_request_keeps_the_py4j_operator_s_rows(spark: Any, group: str | None) -> None:
    """On a classic session with the extension the rule answers the request too: the same
    rows as ``UnitBound.bound`` (py4j), the same plan shape, the key in no printed plan."""
    from hdp_spark.spark.privacy_unit import _jvm_bound

    frame = _frame(spark, _skewed(seed=31, n=1500))
    unit = PrivacyUnit("uid", 2, 3)
    out = _request(spark, frame, unit, bounding_key(KEY), group=group, codes=["x", "y"])
    ref = _jvm_bound(frame, unit, eps="eps", group=group, codes=["x", "y"], key=KEY)
    assert ref is not None
    execution = out._jdf.queryExecution()
    physical = execution.executedPlan().toString()  # before it runs: AQE's initial plan
    pd.testing.assert_frame_equal(_canonical(out.toPandas()), _canonical(ref.toPandas()))
    assert "HdpUnitBound" in physical, physical
    assert "Window" not in physical, physical
    assert physical.count("Exchange hashpartitioning(uid") == 1, physical
    assert "hdp_unit_bound(" not in execution.analyzed().toString()
    assert bounding_key(KEY) not in execution.toString()  # what explain(True) prints
    assert "hdp_secret()" in execution.logical().toString()  # the parsed plan: no key


def test_the_request_refuses_a_literal_key_and_bad_bounds(spark: Any) -> None:
    from pyspark.errors import AnalysisException, IllegalArgumentException
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    frame = _frame(spark, _skewed(seed=32, n=50))
    key = bounding_key(KEY)
    secret = Column(spark._jvm.org.hdpspark.HdpSecret.column(key))
    refused = (AnalysisException, IllegalArgumentException)

    def request(*args: Any) -> Any:
        return frame.where(F.call_function("hdp_unit_bound", *args)).schema

    with pytest.raises(refused, match="the key built by hdp_spark, never a literal"):
        request(F.col("uid"), F.col("eps"), F.lit(1), F.lit(1), F.lit(key), F.col("g"))
    with pytest.raises(refused, match="the key built by hdp_spark, never a literal"):
        request(F.col("uid"), F.col("eps"), F.lit(1), F.lit(1), secret)  # too few
    with pytest.raises(refused, match="the bounds: constant integers >= 1"):
        request(F.col("uid"), F.col("eps"), F.lit(0), F.lit(1), secret, F.col("g"))
    with pytest.raises(refused, match="the bounds: constant integers >= 1"):
        request(F.col("uid"), F.col("eps"), F.lit(1), F.col("x"), secret, F.col("g"))
    with pytest.raises(refused, match="its columns: columns of its input"):
        request(F.col("uid"), F.col("eps"), F.lit(1), F.lit(1), secret, F.col("g"),
                F.col("x") + F.lit(1))
    with pytest.raises(refused, match="reads no code column of type double"):
        request(F.col("uid"), F.col("eps"), F.lit(1), F.lit(1), secret, F.col("g"),
                F.col("eps"))
    with pytest.raises(refused, match="reads its epsilon column as a double"):
        request(F.col("uid"), F.col("x"), F.lit(1), F.lit(1), secret, F.col("g"))


def test_a_request_the_rule_does_not_answer_fails_closed(spark: Any) -> None:
    """A request combined with another condition is no filter on the request alone: the
    rule leaves it, and the query fails instead of reading unbounded rows."""
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    frame = _frame(spark, _skewed(seed=33, n=50)).withColumn(
        "eps", F.col("eps").cast("double"))
    secret = Column(spark._jvm.org.hdpspark.HdpSecret.column(bounding_key(KEY)))
    request = F.call_function("hdp_unit_bound", F.col("uid"), F.col("eps"), F.lit(1),
                              F.lit(1), secret, F.col("g"), F.col("x"))
    with pytest.raises(Exception, match=r"is never evaluated|cannot be code-generated"):
        frame.where(request & F.lit(True)).collect()


@pytest.mark.parametrize(("channel", "function", "ready"), [
    (True, True, True), (True, False, False), (False, True, False)])
def test_the_connect_operator_needs_the_channel_and_the_request_s_function(
        channel: bool, function: bool, ready: bool, monkeypatch: Any) -> None:
    """A Connect server without the secret channel, or with an extension that predates the
    request (no ``hdp_unit_bound``), gets the native path; the answer is cached per Connect
    session; a classic session never asks."""
    from pyspark.sql import utils

    from hdp_spark.spark import ldp_unit
    from hdp_spark.spark import privacy_unit as pu

    class Session:
        session_id = f"req-{channel}-{function}"
        asked = 0

        def __init__(self) -> None:
            self.catalog = self

        def functionExists(self, name: str) -> bool:
            assert name == "hdp_unit_bound"
            self.asked += 1
            return function

    class Frame:
        sparkSession = Session()

    frame = Frame()
    monkeypatch.setattr(ldp_unit, "connect_secret_ready", lambda session: channel)
    monkeypatch.setattr(utils, "is_remote", lambda: False)
    assert pu._connect_operator(frame) is False  # type: ignore[arg-type]
    monkeypatch.setattr(utils, "is_remote", lambda: True)
    assert pu._connect_operator(frame) is ready  # type: ignore[arg-type]
    assert pu._connect_operator(frame) is ready  # type: ignore[arg-type]
    assert frame.sparkSession.asked == (1 if channel else 0)  # one probe, then the cache
