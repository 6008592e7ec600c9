"""The SQL form of the privacy unit (issue 50): ``hdp_mean(amount, eps, 0, 500[, 'public'],
'unit', 'user_id', max_groups, max_rows)`` (and ``hdp_histogram``) releases what
``hs.agg(..., privacy_unit=...)`` releases for the registration's key derived with the
query's fingerprint (the kept rows, the per-person weights through W̃, every field), and
refuses what it cannot do, naming the argument ('select' with 'unit':
``test_unit_column_select.py``)."""

from __future__ import annotations

import contextlib
import io
import re
from typing import Any

import pytest

import hdp_spark.spark as hs
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit.spec import bounding_key, query_bounding_key
from tests.privacy_unit.test_unit_columns import CATS, KEYS, UNIT, _events, _same

pytestmark = pytest.mark.spark

SEED = 8


@pytest.fixture(scope="module")
def view(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("unit_sql") / "e.parquet"
    _events(seed=2).to_parquet(path)
    frame = spark.read.parquet(str(path))
    frame.createOrReplaceTempView("hdp_unit_events")
    hs.register_sql(spark, unsafe_seed=SEED)
    return frame


def _query_key(q: Any) -> Any:
    """The registration's key derived with the query's fingerprint: the plan's one 64-hex
    literal besides the registration's bounding key (the query bounding key the JVM
    derives from both is held by the bounding operator, no literal of the plan)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        q.explain(True)
    text = out.getvalue()
    found = set(re.findall(r"\b[0-9a-f]{64}\b", text.split("== Physical Plan ==")[1]))
    key = ReleaseKey.resolve(SEED)
    found.discard(bounding_key(key))  # the registration's, in the finalize's decision text
    assert len(found) == 1, found
    fingerprint = found.pop()
    assert query_bounding_key(bounding_key(key), fingerprint) not in text
    assert "HdpUnitBound" in text
    return key.for_query(fingerprint)


@pytest.mark.parametrize("kind", ["mean", "histogram"])
def test_grouped_sql_equals_the_release_api(spark: Any, view: Any, kind: str) -> None:
    call = ("hdp_mean(amount, eps, 0, 500" if kind == "mean"
            else "hdp_histogram(category, eps, array('a', 'b', 'c')")
    q = spark.sql(f"SELECT country, {call}, 'public', 'unit', 'user_id', 2, 3) AS out "
                  "FROM hdp_unit_events GROUP BY country")
    got = q.orderBy("country").collect()
    spec = (hs.hdp_mean("amount", eps="eps", lower=0, upper=500) if kind == "mean"
            else hs.hdp_histogram("category", eps="eps", categories=CATS))
    ref = hs.agg(view, spec, by="country", keys=KEYS, **UNIT,
                 unsafe_seed=_query_key(q)).orderBy("country").collect()
    assert [r["country"] for r in got] == [r["country"] for r in ref] == KEYS
    for g, r in zip(got, ref, strict=True):
        _same(g["out"], r, spec.spec.name, kind)  # type: ignore[attr-defined,arg-type]


def test_global_sql_equals_the_release_api(spark: Any, view: Any) -> None:
    q = spark.sql("SELECT hdp_mean(amount, eps, 0, 500, 'unit', 'user_id', 2, 3) AS out "
                  "FROM hdp_unit_events")
    got = q.collect()
    ref = hs.agg(view, hs.hdp_mean("amount", eps="eps", lower=0, upper=500), **UNIT,
                 unsafe_seed=_query_key(q)).collect()
    _same(got[0]["out"], ref[0], "amount_mean", "mean")


@pytest.mark.parametrize(("call", "message"), [
    ("hdp_mean(amount, eps, 0, 500, 'public', 'unit', 'user_id', 0, 3)",
     "`max_groups` must be an int in \\[1, 10000\\]"),
    ("hdp_mean(amount, eps, 0, 500, 'public', 'unit', 'user_id', 2, 2.5)",
     "`max_rows` must be an int"),
    ("hdp_mean(amount, eps, 0, 500, 'public', 'unit', 'nobody', 2, 3)",
     "`privacy_unit` names column 'nobody'"),
    ("hdp_mean(amount, eps, 0, 500, 'unit', 'user_id', 2, 3)", "privacy decision"),
    ("hdp_mean(amount, eps, 0, 500, 'public', 'unit', 'user_id', 2, 3), count(*)",
     "exact Spark aggregate"),
])
def test_sql_refusals(spark: Any, view: Any, call: str, message: str) -> None:
    with pytest.raises(Exception, match=message):
        spark.sql(f"SELECT country, {call} FROM hdp_unit_events GROUP BY country").collect()


@pytest.mark.parametrize("grouped", [False, True])
def test_sql_plan_is_the_bounding_operator(spark: Any, view: Any, grouped: bool) -> None:
    """The SQL form is bounded by the operator too: one shuffle by the id, one sort by it,
    no window or join of its own (grouped: the groups found numbered, as before); the
    query's bounding key is no literal of any plan, the bounds are printed."""
    call = ("country, hdp_mean(amount, eps, 0, 500, 'public', 'unit', 'user_id', 2, 3)"
            if grouped else "hdp_mean(amount, eps, 0, 500, 'unit', 'user_id', 2, 3)")
    q = spark.sql(f"SELECT {call} AS out FROM hdp_unit_events"
                  + (" GROUP BY country" if grouped else ""))
    _query_key(q)  # no query bounding key in the plan
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        q.explain(True)
    text = out.getvalue()
    assert "HdpUnitBound" in text
    assert "max_groups=2, max_rows=3" in text
    physical = text.split("== Physical Plan ==")[1]
    assert physical.count("HdpUnitBound") == 1, physical
    assert physical.count("Exchange hashpartitioning(user_id") == 1, physical
    assert physical.count("Sort [user_id") == 1, physical
    assert physical.count("Window [") == (1 if grouped else 0), physical
    assert physical.count("Join") == (1 if grouped else 0), physical
