"""The privacy unit's bounding rule (issue 50): a person's contribution is bounded, the
choice is the release's keyed PRF, depends on the person's own rows only, and is the same
on both engines.

The person-locality tests are the sensitivity argument of
``hdp_spark/core/privacy_unit/spec.py`` checked on tables: adding, removing or replacing
all of one person's rows changes no other person's kept rows or ε.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit import (
    MAX_GROUPS_LIMIT,
    MAX_ROWS_LIMIT,
    PrivacyUnit,
    bounding_key,
    group_rank_text,
    rank,
    row_rank_text,
)
from hdp_spark.errors import ParameterError, SchemaError
from hdp_spark.pandas.privacy_unit import bound_rows as pandas_bound
from tests.conftest import Engine

KEY = ReleaseKey(bytes(range(32)), unsafe=True)
OTHER = ReleaseKey(bytes(range(1, 33)), unsafe=True)


def _events(seed: int = 0, n: int = 600, persons: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "uid": rng.integers(0, persons, n).astype(np.int64),
        "g": rng.integers(-1, 6, n).astype(np.int64),   # -1: outside the public keys
        "x": rng.integers(0, 4, n).astype(np.int64),
        "eps": rng.choice([0.25, 0.5, 1.0, 2.0, np.inf], n),
    })


def _bound(engine: Engine, df: pd.DataFrame, unit: PrivacyUnit, key: ReleaseKey = KEY,
           codes: tuple[str, ...] = ("x",), group: str | None = "g") -> pd.DataFrame:
    if engine.name == "pandas":
        out = pandas_bound(df, unit, eps="eps", group=group, codes=list(codes), key=key)
    else:
        from hdp_spark.spark.privacy_unit import bound_rows

        out = bound_rows(engine.frame(df), unit, eps="eps", group=group, codes=list(codes),
                         key=key).toPandas()
    return _canonical(out)


def _canonical(out: pd.DataFrame) -> pd.DataFrame:
    cols = sorted(out.columns)
    return out[cols].sort_values(cols, kind="stable").reset_index(drop=True)


def _reference(df: pd.DataFrame, unit: PrivacyUnit, key: ReleaseKey) -> pd.DataFrame:
    """The rule read literally from the spec, one row at a time (the oracle)."""
    bkey = bounding_key(key)
    safe = [0.0 if (e != e or e < 0) else float(e) for e in df["eps"]]
    eps_p: dict[str, float] = {}
    for uid, e in zip(df["uid"], safe, strict=True):
        eps_p[str(uid)] = min(eps_p.get(str(uid), np.inf), e)
    groups: dict[str, set[int]] = {}
    for uid, g in zip(df["uid"], df["g"], strict=True):
        if g >= 0:
            groups.setdefault(str(uid), set()).add(int(g))
    kept_groups = {p: set(sorted(gs, key=lambda g: (rank(group_rank_text(bkey, p, g)), g))
                          [:unit.max_groups]) for p, gs in groups.items()}
    cells: dict[tuple[str, int], list[tuple[str, int]]] = {}
    for i, (uid, g, x) in enumerate(zip(df["uid"], df["g"], df["x"], strict=True)):
        p = str(uid)
        if g >= 0 and g in kept_groups[p]:
            cells.setdefault((p, int(g)), []).append(
                (rank(row_rank_text(bkey, p, int(g), str(int(x)))), str(int(x)), i))
    rows = sorted(i for ranked in cells.values() for _, _, i in sorted(ranked)[:unit.max_rows])
    out = df.iloc[rows].copy()
    out["eps"] = [eps_p[str(u)] for u in out["uid"]]
    return _canonical(out)


@pytest.mark.parametrize(("max_groups", "max_rows"), [(1, 1), (2, 3), (10, 100)])
def test_bounds_hold_and_match_the_reference(engine: Engine, max_groups: int,
                                              max_rows: int) -> None:
    df = _events()
    unit = PrivacyUnit("uid", max_groups, max_rows)
    out = _bound(engine, df, unit)
    assert out.groupby("uid")["g"].nunique().max() <= max_groups
    assert out.groupby(["uid", "g"]).size().max() <= max_rows
    assert (out["g"] >= 0).all()
    pd.testing.assert_frame_equal(out, _reference(df, unit, KEY), check_dtype=False)


def test_a_skewed_table_matches_the_reference(engine: Engine) -> None:
    """Light persons (at most G groups, at most R rows a group: kept whole, no rank read)
    beside heavy ones (ranks decide): the kept rows are still the rule's exactly."""
    rng = np.random.default_rng(21)
    light = _events(seed=22, n=400, persons=200)
    heavy = pd.DataFrame({
        "uid": rng.choice([1000, 1001, 1002], 900).astype(np.int64),
        "g": rng.integers(-1, 6, 900).astype(np.int64),
        "x": rng.integers(0, 9, 900).astype(np.int64),
        "eps": rng.choice([0.5, 1.0], 900),
    })
    df = pd.concat([light, heavy], ignore_index=True)
    unit = PrivacyUnit("uid", 3, 4)
    pd.testing.assert_frame_equal(_bound(engine, df, unit), _reference(df, unit, KEY),
                                  check_dtype=False)


def test_the_pandas_ranks_are_the_rule_s_ranks() -> None:
    """The pandas bounding hashes its texts in one pass (no hex detour): the same numbers
    as :func:`rank` of the rule's texts, ids with any characters included."""
    from hdp_spark.core.privacy_unit.spec import SEPARATOR
    from hdp_spark.pandas.privacy_unit import _ranks, _tagged

    bkey = bounding_key(KEY)
    persons = np.array(["7", "é\x1fü", "", "a" * 300], dtype=object)
    groups = np.array(["0", "12", "3:abc2:de", "-5"], dtype=object)
    got = _ranks(f"{bkey}{SEPARATOR}g{SEPARATOR}", _tagged(persons), groups)
    assert got == [rank(group_rank_text(bkey, p, g))
                   for p, g in zip(persons, groups, strict=True)]
    codes = np.array(["1", "2,3", "", "-4"], dtype=object)
    got = _ranks(f"{bkey}{SEPARATOR}r{SEPARATOR}", _tagged(persons), groups, codes)
    assert got == [rank(row_rank_text(bkey, p, g, c))
                   for p, g, c in zip(persons, groups, codes, strict=True)]


def test_person_eps_is_the_smallest_safe_eps_of_all_their_rows(engine: Engine) -> None:
    df = pd.DataFrame({"uid": [1, 1, 1, 2, 2, 3], "g": [0, 0, -1, 1, 1, 0],
                       "x": [0, 1, 2, 0, 1, 0],
                       "eps": [1.0, 2.0, 0.5, np.nan, 3.0, np.inf]})
    out = _bound(engine, df, PrivacyUnit("uid", 5, 5))
    by_person = out.groupby("uid")["eps"].agg(["min", "max"])
    # person 1's smallest ε is on a row outside the keys: still theirs
    assert by_person.loc[1].tolist() == [0.5, 0.5]
    assert by_person.loc[2].tolist() == [0.0, 0.0]  # a NaN ε: the person spends nothing
    assert by_person.loc[3].tolist() == [np.inf, np.inf]
    negative = df.assign(eps=[1.0, -1.0, 1.0, 1.0, 1.0, 1.0])
    assert set(_bound(engine, negative, PrivacyUnit("uid", 5, 5))
               .query("uid == 1")["eps"]) == {0.0}


def test_null_ids_are_dropped_and_strings_work(engine: Engine) -> None:
    df = pd.DataFrame({"uid": ["a", None, "b", "a", "b\x1fc"], "g": [0, 0, 0, 1, 0],
                       "x": [1, 2, 3, 4, 5], "eps": [1.0] * 5})
    out = _bound(engine, df, PrivacyUnit("uid", 2, 2))
    assert sorted(out["uid"]) == ["a", "a", "b", "b\x1fc"]


def test_person_locality(engine: Engine) -> None:
    """Adding, removing or replacing all of one person's rows changes only that person's
    kept rows and ε (the bounding rule's sensitivity argument)."""
    df = _events(seed=3)
    unit = PrivacyUnit("uid", 2, 2)
    base = _bound(engine, df, unit)
    target = int(df["uid"].iloc[0])
    without = df[df["uid"] != target]
    others = base[base["uid"] != target].reset_index(drop=True)
    pd.testing.assert_frame_equal(_bound(engine, without, unit), others, check_dtype=False)
    rng = np.random.default_rng(9)
    replacement = pd.DataFrame({"uid": np.full(50, target, dtype=np.int64),
                                "g": rng.integers(0, 6, 50).astype(np.int64),
                                "x": rng.integers(0, 4, 50).astype(np.int64),
                                "eps": np.full(50, 0.1)})
    replaced = _bound(engine, pd.concat([without, replacement], ignore_index=True), unit)
    pd.testing.assert_frame_equal(replaced[replaced["uid"] != target].reset_index(drop=True),
                                  others, check_dtype=False)
    mine = replaced[replaced["uid"] == target]
    assert mine["g"].nunique() <= 2
    assert mine.groupby("g").size().max() <= 2
    assert set(mine["eps"]) == {0.1}


def test_order_does_not_matter_and_keys_choose_independently() -> None:
    df = _events(seed=5, n=2000, persons=30)
    unit = PrivacyUnit("uid", 1, 2)
    engine = Engine("pandas")
    base = _bound(engine, df, unit)
    shuffled = df.sample(frac=1.0, random_state=1)
    pd.testing.assert_frame_equal(_bound(engine, shuffled, unit), base)
    pd.testing.assert_frame_equal(_bound(engine, df, unit), base)  # re-evaluation
    other = _bound(engine, df, unit, key=OTHER)
    # 30 persons each choose 1 of ~6 groups: under an independent key the choice differs
    # for most of them (all equal by chance: probability about (1/6)^30)
    chosen = base.groupby("uid")["g"].first()
    chosen_other = other.groupby("uid")["g"].first()
    assert (chosen != chosen_other).sum() >= 10


def test_the_rank_reads_codes_not_other_columns() -> None:
    """Rows with equal codes are interchangeable: what else the row holds (or where it
    sits) never changes which codes are kept."""
    df = pd.DataFrame({"uid": [7] * 6, "g": [0] * 6, "x": [1, 1, 1, 2, 2, 3],
                       "eps": [1.0] * 6, "note": list("abcdef")})
    unit = PrivacyUnit("uid", 1, 3)
    kept = _bound(Engine("pandas"), df, unit)
    relabelled = _bound(Engine("pandas"), df.assign(note=list("zyxwvu")), unit)
    assert kept["x"].tolist() == relabelled["x"].tolist()


def test_global_release_and_several_codes(engine: Engine) -> None:
    df = _events(seed=11).assign(y=lambda d: (d["x"] * 7) % 5)
    out = _bound(engine, df.drop(columns="g"), PrivacyUnit("uid", 1, 3), codes=("x", "y"),
                 group=None)
    assert out.groupby("uid").size().max() <= 3
    assert len(out) == sum(min(3, n) for n in df.groupby("uid").size())


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"column": ""}, "`privacy_unit` must be a non-empty column name"),
    ({"column": 3}, "`privacy_unit` must be a non-empty column name, got 3"),
    ({"column": "u", "max_groups": 0}, "`max_groups` must be an int in [1, 10000], got 0"),
    ({"column": "u", "max_groups": True}, "`max_groups` must be an int"),
    ({"column": "u", "max_groups": MAX_GROUPS_LIMIT + 1}, "`max_groups`"),
    ({"column": "u", "max_rows": 2.0}, "`max_rows` must be an int in [1, 1000000], got 2.0"),
    ({"column": "u", "max_rows": MAX_ROWS_LIMIT + 1}, "`max_rows`"),
])
def test_bad_parameters(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(ParameterError) as err:
        PrivacyUnit(**kwargs)
    assert needle in str(err.value)


def test_bad_id_columns(engine: Engine) -> None:
    df = _events().assign(uid=lambda d: d["uid"].astype(float))
    with pytest.raises(SchemaError, match="must hold integers or strings"):
        _bound(engine, df, PrivacyUnit("uid", 1, 1))
    with pytest.raises(SchemaError, match="which the table does not have"):
        _bound(engine, _events(), PrivacyUnit("person", 1, 1))


def test_spark_bounding_is_one_shuffle_of_the_rows(spark: Any) -> None:
    from hdp_spark.spark.privacy_unit import bound_rows

    df = spark.createDataFrame(_events())
    out = bound_rows(df, PrivacyUnit("uid", 2, 2), eps="eps", group="g", codes=["x"], key=KEY,
                     jvm=False)  # the native path (the JVM operator's: test_unit_bound_jvm)
    plan = out._jdf.queryExecution().executedPlan().toString()
    # the rows: one shuffle, by the id (ranks after it); the other exchange carries the
    # per-person partial aggregate (ε, whether a rank decides), combined map-side
    assert plan.count("Exchange") == 2, plan
    assert plan.count("Exchange hashpartitioning(uid") == 2, plan
    assert plan.count("REPARTITION_BY_COL") == 1, plan
    assert "partial_min" in plan, plan
    assert plan.count("Sort [") == 1, plan  # both windows share one sort
    assert "ShuffledHashJoin" in plan, plan


@pytest.mark.parametrize(("max_groups", "max_rows"), [(1, 3), (2, 2), (3, 1), (4, 6)])
def test_persons_whose_ranks_decide_nothing_keep_everything(engine: Engine, max_groups: int,
                                                             max_rows: int) -> None:
    """Each way a rank can be skipped (one group; at most G rows; at most R rows) beside
    persons where the group ranks, the row ranks or both decide: the rule's rows."""
    rows = []
    for uid, (groups, per_group) in enumerate([(1, 1), (1, 3), (1, 5), (2, 1), (2, 2),
                                               (3, 1), (3, 2), (4, 1), (5, 3), (6, 1)]):
        for g in range(groups):
            for j in range(per_group):
                rows.append((uid, g, (uid + j) % 4, 0.5 + 0.25 * ((uid + g + j) % 3)))
        rows.append((uid, -1, 0, 0.1 * (uid % 2) + 0.2))  # outside the keys: ε only
    df = pd.DataFrame(rows, columns=["uid", "g", "x", "eps"])
    unit = PrivacyUnit("uid", max_groups, max_rows)
    pd.testing.assert_frame_equal(_bound(engine, df, unit), _reference(df, unit, KEY),
                                  check_dtype=False)
