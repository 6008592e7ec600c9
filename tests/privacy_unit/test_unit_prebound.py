"""The privacy unit's map-side pre-bound (``UnitPreBound``, the node ``HdpUnitPreBound``
below the exchange by the id, where the session setting ``hdp_spark.unitPreBound`` turns
it on; off by default): the operator keeps exactly the rows and ε it keeps without it,
on randomized tables split into many chunks (a map budget of a few persons, so flushes
happen), persons spread over partitions, string and integer ids, global and grouped, G
and R of 1 and more; on tables built so the person's smallest ε is on a row the
pre-bound drops, on a row outside the keys, or in a chunk holding only rows outside the
keys (each checked to matter); the pre-bound in the plan below the exchange, the key in
no explain mode; the release API's and a Column aggregate's outputs unchanged."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

from hdp_spark.core.privacy_unit import PrivacyUnit, bounding_key
from hdp_spark.pandas.privacy_unit import bound_rows as pandas_bound
from tests.privacy_unit.test_unit_bound_jvm import KEY, _canonical, _frame, _skewed

MODES = ("simple", "extended", "codegen", "cost", "formatted")


@contextlib.contextmanager
def _pre(spark: Any, on: bool, persons: int | None = None, start: int = 1
         ) -> Iterator[None]:
    """The session with the pre-bound on or off (its map's budget of persons; ``start``:
    the row of an id from which its person is held, 1 by default: every row held)."""
    spark.conf.set("hdp_spark.unitPreBound", "true" if on else "false")
    spark.conf.set("hdp_spark.unitPreBound.from", str(start))
    if persons is not None:
        spark.conf.set("hdp_spark.unitPreBound.persons", str(persons))
    try:
        yield
    finally:
        for name in ("", ".from", ".persons"):
            spark.conf.unset("hdp_spark.unitPreBound" + name)


def _bounded(spark: Any, frame: Any, unit: PrivacyUnit, *, on: bool,
             persons: int | None = None, start: int = 1, **kwargs: Any) -> pd.DataFrame:
    """The operator's kept rows (canonical), the pre-bound on or off."""
    from hdp_spark.spark.privacy_unit import _jvm_bound

    with _pre(spark, on, persons, start):
        out = _jvm_bound(frame, unit, **kwargs)
        assert out is not None
        plan = out._jdf.queryExecution().executedPlan().toString()
        assert ("HdpUnitPreBound" in plan) == on, plan
        return _canonical(out.toPandas())


def _agree(spark: Any, df: pd.DataFrame, unit: PrivacyUnit, *, frame: Any = None,
           budgets: tuple[int | None, ...] = (1, 3, None), **kwargs: Any) -> pd.DataFrame:
    """The kept rows with the pre-bound (each map budget; every row held, and an id's
    first two rows let through) equal those without it, and pandas'; returns them."""
    frame = _frame(spark, df) if frame is None else frame
    off = _bounded(spark, frame, unit, on=False, **kwargs)
    for persons in budgets:
        on = _bounded(spark, frame, unit, on=True, persons=persons, **kwargs)
        pd.testing.assert_frame_equal(on, off)
    on = _bounded(spark, frame, unit, on=True, persons=3, start=3, **kwargs)
    pd.testing.assert_frame_equal(on, off)
    pd.testing.assert_frame_equal(off, _canonical(pandas_bound(df, unit, **kwargs)))
    return off


def _nulls(df: pd.DataFrame, seed: int) -> pd.DataFrame:
    """``df`` with some null ε (beside _skewed's NaN, negative and +∞)."""
    rng = np.random.default_rng(seed)
    eps = df["eps"].astype(object)
    eps[rng.random(len(df)) < 0.03] = None
    return df.assign(eps=eps)


@pytest.mark.parametrize(("max_groups", "max_rows"), [(1, 1), (2, 3), (3, 10)])
@pytest.mark.parametrize("ids", ["long", "string"])
def test_randomized_tables_keep_the_same_rows(spark: Any, max_groups: int, max_rows: int,
                                              ids: str) -> None:
    df = _nulls(_skewed(seed=max_groups * 11 + max_rows, n=1500, persons=90), seed=1)
    schema = "uid long, g long, x long, y long, eps double"
    if ids == "string":
        df["uid"] = [f"p{u % 7}\x1f{u}" for u in df["uid"]]
        schema = schema.replace("uid long", "uid string")
    unit = PrivacyUnit("uid", max_groups, max_rows)
    kept = _agree(spark, df, unit, frame=_frame(spark, df, schema), eps="eps", group="g",
                  codes=["x", "y"], key=KEY)
    assert 0 < len(kept) < len(df)


@pytest.mark.parametrize("max_rows", [1, 4])
def test_a_global_release(spark: Any, max_rows: int) -> None:
    df = _skewed(seed=40 + max_rows, n=1200, persons=60).drop(columns="g")
    kept = _agree(spark, df, PrivacyUnit("uid", 1, max_rows), eps="eps", group=None,
                  codes=["x", "y"], key=KEY)
    assert 0 < len(kept) < len(df)


def test_string_groups_null_outside(spark: Any) -> None:
    """select_keys' key texts (null outside the keys), ties on the codes."""
    df = _skewed(seed=44, n=1000, persons=50)
    df["g"] = [None if g < 0 else f"k{g % 4}" for g in df["g"]]
    df["y"] = 0  # many rows tying on their codes
    frame = _frame(spark, df, "uid long, g string, x long, y long, eps double")
    _agree(spark, df, PrivacyUnit("uid", 2, 2), frame=frame, eps="eps", group="g",
           codes=["x", "y"], key=KEY)


def _stream(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    """One partition holding ``rows`` in this order: with a map budget of one person,
    every change of person in it ends a chunk."""
    return spark.createDataFrame(rows, "uid long, g long, x long, eps double").coalesce(1)


def test_the_smallest_eps_on_a_dropped_row_outside_and_in_an_outside_only_chunk(
        spark: Any) -> None:
    """Person 1: their smallest ε on the row of theirs the rule drops (R = 1; the pre-bound
    drops it in its chunk). Person 2: on a row outside the keys, in a chunk that also holds
    rows inside. Person 3: on rows outside the keys forming a chunk of their own (the
    carrier row). Each minimum matters: without the row carrying it, person's ε differs."""
    unit = PrivacyUnit("uid", 1, 1)
    base = [(1, 0, x, 1.0) for x in range(6)] + [(2, 0, 0, 2.0), (2, 1, 1, 2.0)]
    base += [(3, 0, 0, 2.0), (3, 1, 1, 2.0)]
    kwargs: dict[str, Any] = {"eps": "eps", "group": "g", "codes": ["x"], "key": KEY}
    first = pandas_bound(pd.DataFrame(base, columns=["uid", "g", "x", "eps"]), unit,
                         **kwargs)
    kept_x = int(first[first["uid"] == 1]["x"].iloc[0])
    dropped_x = next(x for x in range(6) if x != kept_x)
    rows = [r if (r[0], r[2]) != (1, dropped_x) else (1, 0, dropped_x, 0.125)
            for r in base[:6]]
    rows += [(9, 0, 0, 1.0)]  # another person: the next chunk
    rows += [(2, 0, 0, 2.0), (2, -1, 5, 0.25), (2, 1, 1, 2.0), (9, 1, 1, 1.0)]
    rows += [(3, 0, 0, 2.0), (3, 1, 1, 2.0), (9, 2, 2, 1.0)]
    rows += [(3, -1, 7, 0.375), (3, -5, 8, float("nan")), (9, 0, 3, 1.0)]  # only outside
    df = pd.DataFrame(rows, columns=["uid", "g", "x", "eps"])
    want = {1: 0.125, 2: 0.25, 3: 0.0, 9: 1.0}
    out = pandas_bound(df, unit, **kwargs)
    assert out.groupby("uid")["eps"].min().to_dict() == want
    # each minimum matters: the rows a careless pre-bound would lose change the result
    for lost in ((1, dropped_x), (2, 5), (3, 8)):
        rest = df[(df["uid"] != lost[0]) | (df["x"] != lost[1])]
        eps = pandas_bound(rest, unit, **kwargs).groupby("uid")["eps"].min()
        assert eps[lost[0]] != want[lost[0]], lost
    kept = _agree(spark, df, unit, frame=_stream(spark, rows), budgets=(1, 2, None),
                  **kwargs)
    assert {int(u): float(e) for u, e in kept.groupby("uid")["eps"].first().items()} == want


def test_the_pre_bound_is_below_the_exchange_and_holds_no_key(spark: Any) -> None:
    import hdp_spark.pandas as hpd
    from hdp_spark.spark.privacy_unit import bound_frame, bound_rows
    from tests.privacy_unit.test_unit_bound_jvm import _events, _specs

    frame = _frame(spark, _skewed(seed=9, n=300))
    unit = PrivacyUnit("uid", 2, 2)
    with _pre(spark, True):
        out = bound_rows(frame, unit, eps="eps", group="g", codes=["x"], key=KEY)
        plan = out._jdf.queryExecution().executedPlan().toString()
    assert plan.count("HdpUnitPreBound") == 1, plan
    assert plan.count("Exchange hashpartitioning(uid") == 1, plan
    assert plan.index("HdpUnitBound") < plan.index("Exchange hashpartitioning(uid") \
        < plan.index("HdpUnitPreBound"), plan
    assert "max_groups=2, max_rows=2" in plan
    for mode in MODES:
        text = out._jdf.queryExecution().explainString(
            spark._jvm.org.apache.spark.sql.execution.ExplainMode.fromString(mode))
        assert bounding_key(KEY) not in text, mode
    assert bounding_key(KEY) not in out._jdf.queryExecution().toString()
    # the release API's frame: the positions (broadcast join) before the one exchange
    events = spark.createDataFrame(_events(seed=14, n=300))
    for on in (True, False):
        with _pre(spark, on):
            framed = bound_frame(events, PrivacyUnit("user_id", 1, 1), eps="eps",
                                 by=("country",), keys=(("DE",), ("FR",)),
                                 specs=_specs(hpd), key=KEY)
            physical = framed._jdf.queryExecution().executedPlan().toString()
        assert physical.count("Exchange hashpartitioning(user_id") == 1, physical
        assert physical.count("Sort [user_id") == 1, physical
        assert ("REPARTITION_BY_COL" in physical) != on, physical
        assert ("HdpUnitPreBound" in physical) == on, physical
        if on:
            assert physical.index("Exchange hashpartitioning(user_id") \
                < physical.index("HdpUnitPreBound") \
                < physical.index("BroadcastHashJoin"), physical


@pytest.mark.parametrize("name", ["persons", "bytes", "from"])
def test_the_map_settings_are_checked(spark: Any, name: str) -> None:
    from pyspark.errors import IllegalArgumentException

    from hdp_spark.spark.privacy_unit import _jvm_bound

    frame = _frame(spark, _skewed(seed=10, n=100))
    setting = f"hdp_spark.unitPreBound.{name}"
    for bad, rule in (("0", "must be at least 1, got 0"), ("many", "must be a whole number")):
        with _pre(spark, True):
            spark.conf.set(setting, bad)
            try:
                out = _jvm_bound(frame, PrivacyUnit("uid", 1, 1), eps="eps", group="g",
                                 codes=["x"], key=KEY)
                assert out is not None
                with pytest.raises(IllegalArgumentException,
                                   match=re.escape(f"{setting} {rule}")):
                    out.count()
            finally:
                spark.conf.unset(setting)


def test_release_and_column_outputs_are_unchanged(spark: Any) -> None:
    """The release API and a Column aggregate under the unit (both grouped over public
    keys) release the same with the pre-bound on (a budget of two persons) and off."""
    import hdp_spark.spark as hs
    from tests.privacy_unit.test_unit_bound_jvm import _events, _plain, _specs

    frame = spark.createDataFrame(_events(seed=15, n=3000, persons=200)).repartition(3)
    kwargs: dict[str, Any] = {"by": "country", "keys": ["DE", "FR", "IT", "ES"],
                              "privacy_unit": "user_id", "max_groups": 2, "max_rows": 3,
                              "unsafe_seed": 51}
    col = hs.hdp_mean("amount", eps="eps", lower=0, upper=100, keys="public",
                      privacy_unit="user_id", max_groups=2, max_rows=3).unsafe_seed(52)
    got = []
    for on, persons in ((True, 2), (True, None), (False, None)):
        with _pre(spark, on, persons):
            release = hs.agg(frame, *_specs(hs), **kwargs).toPandas()
            q = frame.groupBy("country").agg(col.alias("out"))
            plan = q._jdf.queryExecution().executedPlan().toString()
            assert ("HdpUnitPreBound" in plan) == on, plan
            got.append((_plain(release), sorted(q.collect())))
    assert len(got[0][0]) > 0
    assert got[0] == got[2]
    assert got[1] == got[2]
