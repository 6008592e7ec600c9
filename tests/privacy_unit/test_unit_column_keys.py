"""Spark Column aggregators under a privacy unit with a public key list (issue 50):
``df.groupBy(...).agg(hdp_mean(..., keys=[...], privacy_unit=...))``.

* the Column releases, field for field, what ``hs.agg(..., by=, keys=<the same list>,
  privacy_unit=...)`` releases for the query's key: a group's position is its index in the
  list (the list's order matters), rows of other keys or a null key count for their
  person's ε only;
* every listed key has an output row, found in the data or not (which keys hold kept rows
  is private under a unit), with ``agg``'s W̃ and estimates for a key without rows;
* a person's kept rows do not depend on other persons' rows under a key list, on both
  engines (the release API's bounding, which the Column is tested equal to);
* every error path names its argument.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.spark as hs
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit import PrivacyUnit
from hdp_spark.errors import ParameterError
from tests.conftest import Engine
from tests.privacy_unit.test_unit_columns import CATS, UNIT, _events, _same, query_key

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def events(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("unit_column_keys") / "e.parquet"
    _events(seed=2).to_parquet(path)
    return spark.read.parquet(str(path))


def _column(kind: str, keys: Any, seed: int) -> Any:
    if kind == "mean":
        col = hs.hdp_mean("amount", eps="eps", lower=0, upper=500, keys=keys, **UNIT)
    else:
        col = hs.hdp_histogram("category", eps="eps", categories=CATS, keys=keys, **UNIT)
    return col.unsafe_seed(seed)


@pytest.mark.parametrize("kind", ["mean", "histogram"])
@pytest.mark.parametrize("keys", [["FR", "DE", "ZZ"], ["IT", "DE", "FR"]])
def test_key_list_column_equals_the_release_api(events: Any, kind: str,
                                                keys: list[str]) -> None:
    col = _column(kind, keys, 4)
    q = events.groupBy("country").agg(col.alias("out"))
    got = {r["country"]: r["out"] for r in q.collect()}
    ref = hs.agg(events, col, by="country", keys=keys, **UNIT,
                 unsafe_seed=query_key(q, col)).collect()
    assert sorted(got) == sorted(keys)  # every listed key, found or not; no other
    for r in ref:
        _same(got[r["country"]], r, col.spec.name, kind)
    if "ZZ" in keys:  # no row: W̃ is pure noise, as agg's for a key without rows
        assert got["ZZ"]["weight"] == next(r for r in ref if r["country"] == "ZZ")[
            f"{col.spec.name}_weight"]


def test_the_list_order_is_the_position(events: Any) -> None:
    """Two orders of one list keep different rows (the position enters the ranks): the
    Column follows the order it is given, as agg does (the equality test above, both
    orders); here the weights differ somewhere, so the order is not ignored."""
    one = _column("mean", ["DE", "FR", "IT"], 6)
    two = _column("mean", ["IT", "FR", "DE"], 6)
    a = hs.agg(events, one, by="country", keys=["DE", "FR", "IT"], **UNIT,
               unsafe_seed="order").collect()
    b = hs.agg(events, two, by="country", keys=["IT", "FR", "DE"], **UNIT,
               unsafe_seed="order").collect()
    wa = {r["country"]: r[f"{one.spec.name}_weight"] for r in a}
    wb = {r["country"]: r[f"{two.spec.name}_weight"] for r in b}
    assert wa != wb


def _kept(engine: Engine, df: pd.DataFrame, keys: list[str]) -> set[int]:
    key = ReleaseKey.resolve("keys-unit")
    unit = PrivacyUnit("user_id", UNIT["max_groups"], UNIT["max_rows"])
    specs = (hs.hdp_mean("amount", eps="eps", lower=0, upper=500).spec,)
    positions = tuple((k,) for k in keys)
    if engine.name == "pandas":
        from hdp_spark.pandas.privacy_unit import bound_frame as pandas_bound

        out = pandas_bound(df, unit, eps="eps", by=("country",), keys=positions,
                           specs=specs, key=key)
        return set(out["row"].tolist())
    from hdp_spark.spark.privacy_unit import bound_frame as spark_bound

    out = spark_bound(engine.frame(df), unit, eps="eps", by=("country",), keys=positions,
                      specs=specs, key=key)
    return {r["row"] for r in out.select("row").collect()}


def test_kept_rows_do_not_depend_on_other_persons(engine: Engine) -> None:
    df = _events(seed=3).dropna(subset=["country"]).reset_index(drop=True)
    df["row"] = range(len(df))
    # values inside the bounds: rows of one person and group with equal codes (clamped
    # values) are interchangeable, and Spark may keep either: compare distinct codes
    df["amount"] = np.random.default_rng(9).uniform(0, 500, len(df))
    keys = ["FR", "DE", "IT"]
    newcomer = pd.DataFrame({"row": [10**6, 10**6 + 1, 10**6 + 2], "user_id": [10**7] * 3,
                             "country": ["AA", "DE", "FR"], "amount": [1.0, 2.0, 3.0],
                             "category": ["a"] * 3, "eps": [1.0] * 3})
    before = _kept(engine, df, keys)
    after = _kept(engine, pd.concat([df, newcomer], ignore_index=True), keys)
    assert after - before == {10**6 + 1, 10**6 + 2}  # AA is not listed: counts for ε only
    assert before <= after
    assert len(before) < len(df)  # the bounds drop rows


@pytest.mark.parametrize(("build", "message"), [
    (lambda df: df.agg(_column("mean", ["DE"], 1)), "`keys=\\[...\\]` lists group keys"),
    (lambda df: df.groupBy(df.country.substr(1, 1)).agg(_column("mean", ["D"], 1)),
     "must group by columns of its input"),
    (lambda df: df.groupBy("country").agg(_column("mean", [1, 2], 1)),
     "the key value 1 in `keys` is not a value of the grouping column"),
])
def test_analysis_errors(events: Any, build: Any, message: str) -> None:
    with pytest.raises(Exception, match=message):
        build(events).collect()


@pytest.mark.parametrize(("keys", "needle"), [
    ("private", "`keys` of a Column aggregator under `privacy_unit` must be"),
    ([None], "`keys`"),
])
def test_parameter_errors(keys: Any, needle: str) -> None:
    with pytest.raises(ParameterError, match=needle):
        hs.hdp_mean("amount", eps="eps", lower=0, upper=500, keys=keys, **UNIT)


def test_public_groups_all_get_a_row(spark: Any, tmp_path: Any) -> None:
    """keys='public': ten persons alone in a group of their own, each with rows in three
    other groups (max_groups = 2: each drops about half of theirs). Every group found
    still has an output row, equal to agg's over the sorted list of the groups found (a
    group missing because its persons kept other groups would be a deterministic function
    of their rows)."""
    base = _events(seed=4)
    own = pd.DataFrame([{"user_id": 10**6 + i, "country": c, "amount": 100.0,
                         "category": "a", "eps": 1.0}
                        for i in range(10) for c in (f"X{i}", "DE", "FR", "IT")])
    frame = pd.concat([base, own], ignore_index=True)
    path = tmp_path / "own.parquet"
    frame.to_parquet(path)
    events = spark.read.parquet(str(path))
    col = hs.hdp_mean("amount", eps="eps", lower=0, upper=500, keys="public",
                      **UNIT).unsafe_seed(12)
    q = events.groupBy("country").agg(col.alias("out"))
    got = {r["country"]: r["out"] for r in q.collect()}
    found = sorted(frame["country"].dropna().unique())
    assert sorted(got) == found
    qkey = query_key(q, col)
    ref = hs.agg(events, col, by="country", keys=found, **UNIT, unsafe_seed=qkey).collect()
    for r in ref:
        _same(got[r["country"]], r, col.spec.name, "mean")
    from hdp_spark.pandas.privacy_unit import bound_frame

    kept = bound_frame(frame, PrivacyUnit("user_id", UNIT["max_groups"], UNIT["max_rows"]),
                       eps="eps", by=("country",), keys=tuple((k,) for k in found),
                       specs=(col.spec,), key=qkey)
    assert set(found) - set(kept["country"])  # not vacuous: some groups kept no row


def test_public_groups_need_columns(events: Any) -> None:
    col = hs.hdp_mean("amount", eps="eps", lower=0, upper=500, keys="public", **UNIT)
    with pytest.raises(Exception, match="must group by columns of its input"):
        events.groupBy(events.country.substr(1, 1)).agg(col).collect()
