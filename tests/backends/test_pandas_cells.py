"""The numpy cells of the pandas mean (``hdp_spark.pandas._cells``) equal, bit for bit, the
tables of the earlier implementation, which grouped the encoded rows with a pandas
``groupby``; that implementation is kept below as the oracle.

Covered: many ε levels (and more distinct ε than the perfect hash takes), ε values the
sample misses, -0.0 next to 0.0, huge and tiny ε, ε = 0 and +inf, EpsGrid with continuous
ε; invalid ε (null, NaN, negative, -inf, below the grid) raising the same errors, also
only outside the key set (no error then); null/NaN/±inf/out-of-range values; global and
grouped releases with public keys absent from the data, integer (int8, int64, uint16,
wide range), float, string, categorical, datetime and multi-column keys; empty tables;
exact sums of cells above 2**22 rows (chunked) and the compacted cell index.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.pandas as hpd
from hdp_spark import EpsGrid, hdp_mean
from hdp_spark.core.encoding import encode_numpy
from hdp_spark.core.keys import normalize_key
from hdp_spark.core.levels import EPS_CAP, levels_numpy
from hdp_spark.core.release import LevelPlan, plan_levels
from hdp_spark.core.stats import GroupStats, build_groups
from hdp_spark.errors import EpsilonColumnError, ParameterError, SchemaError
from hdp_spark.pandas import _cells
from hdp_spark.pandas._cells import mean_cells
from hdp_spark.pandas._common import numeric_column

INF, NAN = math.inf, math.nan
GRID = EpsGrid(ratio=1.25, lowest=1e-3, highest=100.0)
Keys = tuple[tuple[object, ...], ...] | None


def oracle_level_tables(
    df: pd.DataFrame,
    plans: Any,
    by: tuple[str, ...],
    keys: Keys,
) -> list[dict[tuple[object, ...], GroupStats]]:
    """Copy of ``hdp_spark.pandas._mean.level_tables`` before issue 16 (the oracle)."""
    if not isinstance(df, pd.DataFrame):
        msg = f"`df` must be a pandas DataFrame, got {type(df).__name__}."
        raise ParameterError(msg)
    for col in by:
        if col not in df.columns:
            msg = f"group column `{col}` is not in the table."
            raise SchemaError(msg)
    if keys is not None:
        if len(by) == 1:
            mask = df[by[0]].isin([k[0] for k in keys]).to_numpy()
        else:
            index = pd.MultiIndex.from_frame(df[list(by)])
            mask = np.asarray(index.isin(list(keys)))
        df = df.loc[mask]
    tables = []
    for plan in plans:
        eps = numeric_column(df, plan.eps, "ε")
        frame: dict[str, Any] = {f"__by{i}": df[c].to_numpy() for i, c in enumerate(by)}
        frame["__level"] = levels_numpy(eps, plan.grid)
        for i, spec in enumerate(plan.specs):
            values = numeric_column(df, spec.column, "value")
            frame[f"__q{i}"] = encode_numpy(values, spec.lower, spec.upper, spec.fill_value)
        work = pd.DataFrame(frame)
        group_cols = [f"__by{i}" for i in range(len(by))] + ["__level"]
        sums = [f"__q{i}" for i in range(len(plan.specs))]
        named = {"__n": ("__level", "size")} | {q: (q, "sum") for q in sums}
        res = work.groupby(group_cols, sort=False, dropna=False).agg(**named).reset_index()
        width = len(by)
        cells = [
            (
                tuple(normalize_key(k) for k in row[:width]),
                float(row[width]),
                int(row[width + 1]),
                [int(x) for x in row[width + 2 :]],
            )
            for row in res.itertuples(index=False, name=None)
        ]
        tables.append(build_groups(plan.eps, cells))
    return tables


def outcome(fn: Any, *args: Any) -> Any:
    """The tables, or the error's type and message."""
    try:
        return fn(*args)
    except Exception as exc:  # the comparison covers every error type
        return (type(exc).__name__, str(exc))


def assert_same(df: pd.DataFrame, plans: Any, by: tuple[str, ...], keys: Keys) -> Any:
    expected = outcome(oracle_level_tables, df, plans, by, keys)
    got = outcome(mean_cells, df, plans, by, keys)
    assert got == expected
    if isinstance(expected, list):  # the same key objects (types too), the same levels
        for e, g in zip(expected, got, strict=True):
            assert sorted(map(repr, e)) == sorted(map(repr, g))
            for key, stats in e.items():
                assert [repr(x) for x in stats.levels] == [repr(x) for x in g[key].levels]
    return got


def specs(eps: str = "eps", grid: EpsGrid | None = None) -> list[Any]:
    tag = f"{eps}_{'grid' if grid else 'exact'}"
    return [
        hdp_mean("x", eps=eps, lower=0, upper=10, eps_grid=grid, alias=f"a_{tag}"),
        hdp_mean("y", eps=eps, lower=-50.5, upper=300, fill=0.0, eps_grid=grid,
                 alias=f"b_{tag}"),
        hdp_mean("x", eps=eps, lower=-1e300, upper=1e300, fill=7.0, eps_grid=grid,
                 alias=f"c_{tag}"),
    ]


def random_frame(seed: int, n: int, levels: int, specials: bool = True) -> pd.DataFrame:
    """Random rows; ``specials`` adds ε values that share a level (0, -0.0, tiny, above the
    cap) and ε = +inf, so that cells are merged; without them every ε is its own level."""
    rng = np.random.default_rng(seed)
    specials_x = np.array([NAN, INF, -INF, -5.0, 12.0, 0.0, 10.0, 1e308, -1e308, 5e-324])
    x = rng.uniform(-2, 12, n)
    pick = rng.random(n) < 0.2
    x[pick] = rng.choice(specials_x, pick.sum())
    y = rng.normal(100, 200, n)
    y[rng.random(n) < 0.1] = NAN
    extra = [INF, 0.0, -0.0, 1e-300, 5e-324, 2 * EPS_CAP, 1e300, GRID.points()[3]]
    eps_pool = np.concatenate([0.05 * 1.1 ** np.arange(levels), extra if specials else []])
    eps = rng.choice(eps_pool, n)
    eps[rng.random(n) < 0.002] = 0.123456  # rare: the sample may miss it
    return pd.DataFrame({
        "x": x,
        "y": y,
        "eps": eps,
        "eps_cont": rng.uniform(0.001, 50, n),
        "k_int": rng.integers(0, 30, n),
        "k_i8": rng.integers(-5, 5, n).astype(np.int8),
        "k_u16": rng.integers(0, 12, n).astype(np.uint16),
        "k_wide": rng.integers(0, 10, n) * 10**12,
        "k_float": rng.integers(0, 6, n) / 2,
        "k_str": rng.choice(np.array(["a", "b", "c", "d"], dtype=object), n),
        "k_cat": pd.Categorical(rng.choice(["u", "v", "w"], n), categories=["w", "v", "u"]),
        "k_date": pd.to_datetime("2024-01-01") + pd.to_timedelta(rng.integers(0, 4, n), "D"),
    })


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("levels", [1, 8, 64, 300])
def test_global_cells_equal_the_oracle(seed: int, levels: int) -> None:
    df = random_frame(seed, 3000, levels)
    plans = plan_levels([*specs(), *specs(grid=GRID), *specs("eps_cont", GRID)])
    assert len(plans) == 3
    got = assert_same(df, plans, (), None)
    assert isinstance(got, list)
    assert len({r.level for r in got[0][()].rows}) > min(levels, 256) // 2


KEY_CASES: list[tuple[tuple[str, ...], Keys]] = [
    (("k_int",), tuple((i,) for i in [*range(0, 30, 2), 31, 99, -4])),
    (("k_int",), (*((float(i),) for i in range(10)), (2.5,), ("3",), (True,))),
    (("k_i8",), ((-5,), (0,), (4,), (7,))),
    (("k_i8",), tuple((i,) for i in [4, 3, 2, 1, 0, -1, -2, -3, -4, -5])),  # the full range
    (("k_int",), (*((i,) for i in range(30)), (30,))),
    (("k_u16",), ((0,), (3,), (11,), (40,))),
    (("k_wide",), (*((i * 10**12,) for i in range(0, 10, 3)), (5,))),
    (("k_float",), ((0.0,), (0.5,), (2.5,), (9.0,), (1,))),
    (("k_str",), (("a",), ("c",), ("zz",))),
    (("k_cat",), (("u",), ("w",), ("x",))),
    (("k_date",), ((dt.datetime(2024, 1, 2),), (dt.datetime(2024, 1, 4),),
                   (dt.datetime(2030, 1, 1),))),
    (("k_str", "k_int"), (("a", 1), ("b", 2), ("c", 99), ("zz", 1))),
    (("k_i8", "k_float", "k_str"), ((0, 0.5, "a"), (1, 1.0, "b"), (4, 2.5, "d"))),
    (("k_int",), None),
    (("k_str", "k_float"), None),
]


@pytest.mark.parametrize("slots", [True, False], ids=["slot-codes", "dense-codes"])
@pytest.mark.parametrize("specials", [True, False])
@pytest.mark.parametrize(("by", "keys"), KEY_CASES)
def test_grouped_cells_equal_the_oracle(
    by: tuple[str, ...], keys: Keys, specials: bool, slots: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not slots:  # ε codes index the distinct values instead of being hash slots
        monkeypatch.setattr(_cells, "_MAX_SLOT_CELLS", 0)
    df = random_frame(5, 4000, 12, specials)
    df = df[df["eps"] == df["eps"]]  # valid ε (NaN/negative ε: see the error tests)
    plans = plan_levels([*specs(), *specs(grid=GRID), *specs("eps_cont", GRID)])
    got = assert_same(df, plans, by, keys)
    assert isinstance(got, list)
    assert got[0]
    if keys is not None:
        assert set(got[0]) <= set(keys)


def test_cells_of_a_wide_continuous_exact_eps_equal_the_oracle() -> None:
    df = random_frame(3, 2000, 4)
    plans = plan_levels(specs("eps_cont"))
    got = assert_same(df, plans, ("k_str",), (("a",), ("b",)))
    assert sum(len(s.rows) for s in got[0].values()) > 900  # one level per distinct ε


@pytest.mark.parametrize("specials", [True, False])
@pytest.mark.parametrize(
    "bad", [NAN, -1.0, -INF, None, 1e-5], ids=["nan", "negative", "-inf", "null", "below"]
)
def test_invalid_eps_raises_the_same_error(bad: Any, specials: bool) -> None:
    df = random_frame(4, 500, 8, specials)
    eps = df["eps"].astype(object) if bad is None else df["eps"].copy()
    eps.iloc[[3, 250]] = bad
    df["eps"] = pd.to_numeric(eps)
    plans = plan_levels(specs(grid=GRID) if bad == 1e-5 else specs())
    got = assert_same(df, plans, (), None)
    assert got[0] == "EpsilonColumnError"
    # invalid ε only outside the key set: no error, on both
    df["k_int"] = 1
    df.loc[df.index[[3, 250]], "k_int"] = 2
    assert isinstance(assert_same(df, plans, ("k_int",), ((1,), (3,))), list)
    assert assert_same(df, plans, ("k_int",), ((1,), (2,)))[0] == "EpsilonColumnError"


def test_column_errors_are_the_same() -> None:
    df = random_frame(6, 200, 3)
    df["s"] = "text"
    for plan_specs in ([hdp_mean("nope", eps="eps", lower=0, upper=1)],
                       [hdp_mean("x", eps="nope", lower=0, upper=1)],
                       [hdp_mean("s", eps="eps", lower=0, upper=1)],
                       [hdp_mean("x", eps="s", lower=0, upper=1)],
                       [hdp_mean("x", eps="eps", lower=0, upper=1),
                        hdp_mean("nope", eps="eps2", lower=0, upper=1)]):
        got = assert_same(df, plan_levels(plan_specs), (), None)
        assert got[0] == "SchemaError"
    assert assert_same(df, plan_levels(specs()), ("nope",), (("a",),))[0] == "SchemaError"
    assert outcome(mean_cells, df.to_dict(), plan_levels(specs()), (), None)[0] == (
        "ParameterError")
    bad = df.assign(eps=-1.0)  # the first plan's ε error comes before the second's column
    two = plan_levels([*specs(), hdp_mean("x", eps="nope", lower=0, upper=1)])
    with pytest.raises(EpsilonColumnError):
        mean_cells(bad, two, (), None)


def test_empty_tables_equal_the_oracle() -> None:
    df = random_frame(7, 50, 3)
    plans = plan_levels(specs())
    assert assert_same(df.iloc[:0], plans, (), None) == [{}]
    assert assert_same(df.iloc[:0], plans, ("k_int",), ((1,),)) == [{}]
    assert assert_same(df, plans, ("k_int",), ((1000,),)) == [{}]
    assert assert_same(df, plans, ("k_str",), (("none",),)) == [{}]


def test_chunked_sums_and_compacted_cells_equal_the_oracle(monkeypatch: pytest.MonkeyPatch) -> None:
    df = random_frame(8, 3000, 16)
    plans = plan_levels([*specs(), *specs(grid=GRID)])
    expected = oracle_level_tables(df, plans, ("k_int",), tuple((i,) for i in range(30)))
    one = plan_levels([hdp_mean("x", eps="k_float", lower=0, upper=10)])  # few ε: big cells
    expected_global = oracle_level_tables(df, one, (), None)
    monkeypatch.setattr(_cells, "_EXACT_CELL_ROWS", 70)  # cells are summed in chunks
    assert mean_cells(df, plans, ("k_int",), tuple((i,) for i in range(30))) == expected
    assert mean_cells(df, one, (), None) == expected_global
    assert mean_cells(df.assign(k_float=1.0), one, (), None) == oracle_level_tables(
        df.assign(k_float=1.0), one, (), None)  # one ε value: chunked np.sum
    monkeypatch.setattr(_cells, "_MAX_DENSE_CELLS", 5)  # compact the cell index first
    assert mean_cells(df, plans, ("k_int",), tuple((i,) for i in range(30))) == expected


def test_large_sums_stay_exact() -> None:
    # 2**22 rows encoded 2**31 (a sum of 2**53), then 5 rows encoded 1: one float64 pass
    # would round 2**53 + 1 back to 2**53
    n = 2**22 + 5
    x = np.where(np.arange(n) < 2**22, 10.0, 10.0 / 2**31)
    q = encode_numpy(x, 0, 10, 5.0)
    assert set(np.unique(q).tolist()) == {1, 2**31}
    df = pd.DataFrame({"x": x, "eps": np.ones(n)})
    table = mean_cells(df, plan_levels([hdp_mean("x", eps="eps", lower=0, upper=10)]), (), None)
    assert table[0][()].rows[0].totals == (int(q.sum()),)
    assert table[0][()].rows[0].count == n


def test_hash_codes_verify_every_row() -> None:
    a = np.array([1.0, 2.0] * 5000 + [3.0], dtype=np.float64)  # 3.0 is never sampled
    for max_slots in (0, 1 << 16):  # codes index the distinct values, or are hash slots
        codes, distinct = _cells._level_codes(a, None, max_slots)
        assert codes is not None
        assert distinct[codes].tolist() == a.tolist()
        assert (len(distinct) == 3) == (max_slots == 0)
    with_nan = a.copy()
    with_nan[17] = NAN
    assert _cells._hash_codes(with_nan) is None  # NaN never verifies: the general path
    one = np.full(5000, 0.5)
    one[4321] = 0.25  # a second value the sample misses
    codes, distinct = _cells._level_codes(one, None)
    assert codes is not None
    assert distinct[codes].tolist() == one.tolist()
    codes, distinct = _cells._level_codes(np.full(100, 0.5), None)
    assert codes is None  # one value: every row has code 0
    assert distinct.tolist() == [0.5]
    zeros = np.array([0.0, -0.0] * 600)
    codes, levels = _cells._level_codes(zeros, None)
    row_levels = levels[codes] if codes is not None else np.repeat(levels, len(zeros))
    assert set(row_levels.tolist()) == {0.0}
    assert not any(math.copysign(1, v) < 0 for v in row_levels)


def test_level_tables_is_the_cells() -> None:
    df = random_frame(9, 300, 5)
    plans: tuple[LevelPlan, ...] = plan_levels(specs())
    assert hpd.level_tables(df, plans, ("k_str",), (("a",), ("b",))) == mean_cells(
        df, plans, ("k_str",), (("a",), ("b",)))


@pytest.mark.parametrize("specials", [True, False])
def test_oversized_cells_raise_the_same_error(
    monkeypatch: pytest.MonkeyPatch, specials: bool
) -> None:
    import hdp_spark.core.stats as stats

    monkeypatch.setattr(stats, "MAX_CELL_ROWS", 60)  # read by check_cell_rows at call time
    df = random_frame(10, 2000, 8, specials)
    plans = plan_levels(specs())
    assert assert_same(df, plans, (), None)[0] == "SchemaError"
    assert assert_same(df.assign(k_int=1), plans, ("k_int",), ((1,), (2,)))[0] == (
        "SchemaError")
    df.loc[df.index[5], "eps"] = -1.0  # the cell size is checked before the ε rules
    assert assert_same(df, plans, (), None)[0] == "SchemaError"
    small = df.iloc[:50]  # every cell within the limit: the ε error again
    assert assert_same(small, plans, (), None)[0] == "EpsilonColumnError"


@pytest.mark.parametrize(
    ("lower", "upper", "fill"),
    [(0, 10, None), (0.0, 1e-300, None), (-0.0, 3.0, 1.0), (-50.5, 300, 0.0),
     (-1e300, 1e300, 7.0), (1e-320, 2e-320, None), (5, 6, 6.0)],
)
def test_encoding_is_encode_numpy(lower: float, upper: float, fill: float | None) -> None:
    rng = np.random.default_rng(11)
    span = upper - lower
    x = np.concatenate([
        lower + span * rng.random(5000),
        lower + span * (np.arange(2001) / 2000),  # exact fractions and half-way points
        [NAN, INF, -INF, 0.0, -0.0, 1e308, -1e308, 5e-324, -5e-324, lower, upper],
        rng.normal(0, 1e3, 500),
    ])
    spec = hdp_mean("x", eps="eps", lower=lower, upper=upper, fill=fill)
    expected = encode_numpy(x, spec.lower, spec.upper, spec.fill_value)
    got = _cells._encode(x, spec)
    assert got.tolist() == expected.astype(np.float64).tolist()


@pytest.mark.parametrize(("by", "keys"), [((), None), (("k_int",), [0, 3, 7, 99])])
def test_released_numbers_are_unchanged(
    by: tuple[str, ...], keys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole release (pipeline, finalize, output) over the new cells equals the same
    release over the oracle's cells, bit for bit."""
    import hdp_spark.pandas._mean as pandas_mean

    df = random_frame(12, 3000, 8, specials=False)
    release_specs = [*specs(), *specs(grid=GRID), *specs("eps_cont", GRID)]
    new = hpd.release(df, *release_specs, by=by or None, keys=keys, unsafe_seed=1234)
    monkeypatch.setattr(pandas_mean, "level_tables", oracle_level_tables)
    old = hpd.release(df, *release_specs, by=by or None, keys=keys, unsafe_seed=1234)
    assert repr(new.rows()) == repr(old.rows())  # bit for bit, NaN included
