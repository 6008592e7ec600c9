"""The local-DP Column aggregators under a privacy unit (issue 50):
``df.agg(hs.ldp_mean(..., privacy_unit="uid"))`` keeps one report per person.

Every refusal names its parameter (here). That each Column releases, field for field, what
``hs.ldp_agg(..., privacy_unit=...)`` releases under the query's key, repeats on
re-evaluation, keeps other reports under another key, and that no key reaches a plan, the
event log or the INFO logs, on classic Spark and on Spark Connect, is
``test_ldp_unit_logged.py`` (one logged session per mode, with the SQL functions' job).
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import functions as F

import hdp_spark.spark as hs
from hdp_spark.errors import ParameterError

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore::hdp_spark.ldp.LdpEpsilonWarning")]


@pytest.fixture(scope="module")
def frame(spark: Any) -> Any:
    return spark.createDataFrame([(1, 0.5, 0.1, 1.5), (1, 1.0, 0.2, 2.5), (2, 1.0, -0.3, 3.5)],
                                 "uid long, eps double, lap double, amount double")


UNIT = {"eps": "eps", "mechanism": "laplace", "already_randomized": True,
        "privacy_unit": "uid"}


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"keys": "public"}, "`keys`"),
    ({"keys": ["a"]}, "`keys`"),
    ({"max_groups": 2}, "`max_groups` must be 1"),
    ({"max_rows": 3}, "`max_rows` must be 1"),
    ({"privacy_unit": "eps"}, "`privacy_unit` column 'eps' identifies people"),
    ({"privacy_unit": ""}, "`privacy_unit`"),
])
def test_parameter_errors(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(ParameterError, match=needle):
        hs.ldp_mean("lap", **{**UNIT, **kwargs})


@pytest.mark.parametrize("name", ["max_groups", "max_rows"])
def test_bounds_need_a_unit(name: str) -> None:
    with pytest.raises(ParameterError, match=f"`{name}`.*`privacy_unit`"):
        hs.ldp_mean("lap", eps="eps", mechanism="laplace", **{name: 1})


def test_no_key_without_a_unit() -> None:
    col = hs.ldp_mean("lap", eps="eps", mechanism="laplace")
    with pytest.raises(ParameterError, match="no key"):
        col.key  # noqa: B018
    with pytest.raises(ParameterError, match="no seed"):
        col.unsafe_seed(1)


@pytest.mark.parametrize(("build", "message"), [
    (lambda df: df.groupBy("amount").agg(hs.ldp_mean("lap", **UNIT)),
     "release the whole table only"),
    (lambda df: df.agg(hs.ldp_mean("lap", **UNIT), hs.ldp_mean("lap", **UNIT, alias="l2")),
     "the only hdp_spark aggregator"),
    (lambda df: df.agg(hs.ldp_mean("lap", **UNIT),
                       hs.hdp_mean("amount", eps="eps", lower=0, upper=5)),
     "the only hdp_spark aggregator"),
    (lambda df: df.withColumnRenamed("uid", "u").agg(hs.ldp_mean("lap", **UNIT)),
     "`privacy_unit` names column 'uid'"),
    (lambda df: df.withColumn("uid", F.col("amount")).agg(hs.ldp_mean("lap", **UNIT)),
     "must hold integers or strings, got type double"),
    (lambda df: df.agg(hs.ldp_mean("lap", **{**UNIT, "eps": "amount"}),),
     None),
])
def test_analysis_errors(frame: Any, build: Any, message: str | None) -> None:
    if message is None:  # a control: the ε column may be any numeric column but the id
        assert build(frame).collect()[0][0]["n"] == 2
        return
    with pytest.raises(Exception, match=message):
        build(frame).collect()


class _Server:
    """A Connect session's answers for :func:`connect_secret_ready`: the rank function
    exists or not; the plugin turns the probe into an expression or the server refuses."""

    def __init__(self, sid: str, function: bool, plugin: bool) -> None:
        self.session_id, self.function, self.plugin, self.probes = sid, function, plugin, 0
        self.catalog = self

    def functionExists(self, name: str) -> bool:
        assert name == "hdp_ldp_rank"
        return self.function

    def range(self, n: int) -> Any:
        return self

    def select(self, *cols: Any) -> Any:
        self.probes += 1
        if not self.plugin:
            raise RuntimeError("Expression with ID: 999 is not supported")
        return spark_frame_schema()


def spark_frame_schema() -> Any:
    from pyspark.sql import types as T

    class _Frame:
        schema = T.StructType([T.StructField("r", T.LongType())])

    return _Frame()


@pytest.mark.parametrize(("function", "plugin", "ready"), [
    (True, True, True), (True, False, False), (False, True, False)])
def test_the_connect_channel_needs_the_function_and_the_plugin(
        function: bool, plugin: bool, ready: bool, monkeypatch: Any) -> None:
    """Without the rank function or the plugin the release API falls back to the literal
    (``connect_secret_ready`` is False); the answer is cached per Connect session."""
    from pyspark.sql import functions

    from hdp_spark.spark import ldp_unit

    monkeypatch.setattr(ldp_unit, "secret_column", lambda bkey: None)  # no JVM needed
    monkeypatch.setattr(functions, "call_function", lambda *args: None)
    monkeypatch.setattr(functions, "lit", lambda value: None)
    server = _Server(f"s-{function}-{plugin}", function, plugin)
    assert ldp_unit.connect_secret_ready(server) is ready
    assert ldp_unit.connect_secret_ready(server) is ready
    assert server.probes == (1 if function else 0)  # one probe, then the cache
