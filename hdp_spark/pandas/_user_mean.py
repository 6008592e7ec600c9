"""pandas backend of the user-level heterogeneous mean (:mod:`hdp_spark.core.user_mean`).

Same function names, keywords and output columns as :mod:`hdp_spark.spark._user_mean`.
One ``groupby(user)`` turns the rows into a per-user table (k, Σ encoded value, ε, group);
every later stage is a vectorized operation or a ``groupby`` on that table. Order keys
(SHA-256 of salt || user id) are computed only for users in a k bucket that a group boundary
splits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from hdp_spark.core.encoding import encode_numpy
from hdp_spark.core.levels import BELOW_GRID_LEVEL, EPS_CAP, INVALID_LEVEL, levels_numpy
from hdp_spark.core.stats import check_cell_rows
from hdp_spark.core.user_mean import (
    Census,
    CensusCell,
    Cut,
    FinalCell,
    FirstStage,
    MeanCell,
    OrderKey,
    RankQuery,
    UserMeanSpec,
    VarUser,
    order_key,
)
from hdp_spark.errors import ParameterError, SchemaError
from hdp_spark.pandas._common import (
    numeric_column,
)

__all__ = ["PandasUsers"]


def _user_kind(df: pd.DataFrame, column: str) -> str:
    if column not in df.columns:
        msg = f"user column `{column}` is not in the table."
        raise SchemaError(msg)
    series = df[column]
    if pd.api.types.is_bool_dtype(series):
        msg = f"user column `{column}` must hold integers or strings, got dtype {series.dtype}."
        raise SchemaError(msg)
    if pd.api.types.is_integer_dtype(series):
        return "int"
    kind = pd.api.types.infer_dtype(series, skipna=True)
    if kind in ("string", "empty"):
        return "str"
    if kind == "integer":
        return "int"
    msg = f"user column `{column}` must hold integers or strings, got dtype {series.dtype}."
    raise SchemaError(msg)


def _group_ids(
    df: pd.DataFrame, by: tuple[str, ...], keys: tuple[tuple[object, ...], ...]
) -> np.ndarray:
    """Position of each row's key in ``keys`` (-1 outside the key set; 0 when global)."""
    if not by:
        return np.zeros(len(df), dtype=np.int64)
    for col in by:
        if col not in df.columns:
            msg = f"group column `{col}` is not in the table."
            raise SchemaError(msg)
    if len(by) == 1:
        index = pd.Index([k[0] for k in keys])
        return np.asarray(index.get_indexer(pd.Index(df[by[0]])), dtype=np.int64)
    multi = pd.MultiIndex.from_tuples(list(keys))
    return np.asarray(multi.get_indexer(pd.MultiIndex.from_frame(df[list(by)])), dtype=np.int64)


def _cells(frame: pd.DataFrame, value: str) -> list[tuple[int, int, float, int, int]]:
    """(gid, k, level, count, Σ value) per (gid, k, level) cell of ``frame``."""
    agg = frame.groupby(["gid", "k", "level"], sort=True)[value].agg(["size", "sum"])
    out = [
        (int(g), int(k), float(lvl), int(n), int(t))
        for g, k, lvl, n, t in agg.reset_index().itertuples(index=False, name=None)
    ]
    for _, k, _, n, _ in out:
        # n users of k rows each: the int64 sums hold at most MAX_CELL_ROWS rows (k, n public)
        check_cell_rows(k * n)
    return out


class PandasUsers:
    """The per-user table of one release and the native stages over it."""

    def __init__(
        self,
        df: pd.DataFrame,
        spec: UserMeanSpec,
        by: tuple[str, ...],
        keys: tuple[tuple[object, ...], ...],
    ) -> None:
        if not isinstance(df, pd.DataFrame):
            msg = f"`df` must be a pandas DataFrame, got {type(df).__name__}."
            raise ParameterError(msg)
        self.spec = spec
        kind = _user_kind(df, spec.user)
        values = numeric_column(df, spec.column, "value")
        eps = numeric_column(df, spec.eps, "ε")
        gid = _group_ids(df, by, keys)
        keep = gid >= 0
        users = df[spec.user].to_numpy()[keep]
        user_null = np.asarray(pd.isna(users), dtype=bool)
        self.null_user_rows = int(user_null.sum())
        e = eps[keep]
        invalid = np.isnan(e) | (e < 0)
        q = encode_numpy(values[keep], spec.lower, spec.upper, spec.fill_value)
        rows = pd.DataFrame(
            {
                "user": users,
                "q": q,
                "e": np.where(invalid, np.nan, e),
                "bad": invalid.astype(np.int64),
                "gid": gid[keep],
            }
        )[~user_null]
        per = rows.groupby("user", sort=False, dropna=True).agg(
            k=("q", "size"),
            s=("q", "sum"),
            emin=("e", "min"),
            emax=("e", "max"),
            nbad=("bad", "sum"),
            gmin=("gid", "min"),
            gmax=("gid", "max"),
        )
        ids = per.index.to_numpy()
        if kind == "int":
            text = np.array([str(int(u)) for u in ids], dtype=object)
        else:
            text = np.array([str(u) for u in ids], dtype=object)
        self._set_users(
            text, per["k"].to_numpy(dtype=np.int64), per["s"].to_numpy(dtype=np.int64),
            per["emin"].to_numpy(dtype=np.float64), per["emax"].to_numpy(dtype=np.float64),
            per["nbad"].to_numpy(dtype=np.int64), per["gmin"].to_numpy(dtype=np.int64),
            per["gmin"].to_numpy() != per["gmax"].to_numpy())

    @classmethod
    def from_users(cls, spec: UserMeanSpec, text: Sequence[str], k: Sequence[int],
                   s: Sequence[int], emin: Sequence[float], emax: Sequence[float],
                   nbad: Sequence[int], null_user_rows: int) -> PandasUsers:
        """The user table of one group from its per-user statistics (a Spark Column's native
        aggregate): ids as text, k, Σ encoded value, least and largest valid ε (NaN: none),
        rows with an invalid ε; and the rows with a null id. The same stages then run on it.

        Privacy:
            None by itself: exact statistics, read only by the release's mechanism.
        """
        self = cls.__new__(cls)
        self.spec = spec
        self.null_user_rows = int(null_user_rows)
        n = len(text)
        self._set_users(
            np.array(list(text), dtype=object), np.asarray(k, dtype=np.int64).reshape(n),
            np.asarray(s, dtype=np.int64).reshape(n), np.asarray(emin, dtype=np.float64),
            np.asarray(emax, dtype=np.float64), np.asarray(nbad, dtype=np.int64),
            np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool))
        return self

    def _set_users(self, text: np.ndarray, k: np.ndarray, s: np.ndarray, emin: np.ndarray,
                   emax: np.ndarray, nbad: np.ndarray, gid: np.ndarray, multi: np.ndarray
                   ) -> None:
        """The per-user arrays every stage reads, with the release's ε rules."""
        self.text, self.k, self.s, self.gid, self.multi = text, k, s, gid, multi
        level = levels_numpy(emin, self.spec.eps_grid)
        self.level = np.where(np.isposinf(level), EPS_CAP, level)
        self.invalid = nbad > 0
        self.mixed = ~self.invalid & (emin != emax)
        self.below = ~self.invalid & (level == BELOW_GRID_LEVEL)
        self.invalid |= level == INVALID_LEVEL
        self._keys: dict[int, OrderKey] = {}

    def _key(self, index: int) -> OrderKey:
        cached = self._keys.get(index)
        if cached is None:
            cached = order_key(str(self.text[index]), self.spec.salt)
            self._keys[index] = cached
        return cached

    # -- the four stages ---------------------------------------------------------------------

    def census(self) -> Census:
        """Users per (group id, k, ε level) and violation counts."""
        frame = pd.DataFrame({"gid": self.gid, "k": self.k, "level": self.level, "one": 1})
        cells: dict[int, list[CensusCell]] = {}
        for g, k, lvl, c, _ in _cells(frame, "one"):
            cells.setdefault(g, []).append(CensusCell(k, lvl, c))
        return Census(
            {g: tuple(v) for g, v in cells.items()},
            invalid_eps_users=int(self.invalid.sum()),
            mixed_eps_users=int(self.mixed.sum()),
            below_grid_users=int(self.below.sum()),
            mixed_group_users=int(self.multi.sum()),
            null_user_rows=self.null_user_rows,
        )

    def rank_keys(self, queries: Sequence[RankQuery]) -> dict[RankQuery, OrderKey]:
        """Exact order statistics of the order keys in each queried bucket."""
        out: dict[RankQuery, OrderKey] = {}
        for query in queries:
            idx = np.flatnonzero((self.gid == query.gid) & (self.k == query.k) & (self.level > 0))
            ranked = sorted(self._key(int(i)) for i in idx)
            out[query] = ranked[query.rank - 1]
        return out

    def _roles(self, cuts: Mapping[int, Cut]) -> np.ndarray:
        """Role per user: 'v' (G_var), 'm' (G_mean), 'f' (G_fin) or 'x' (not released)."""
        n = self.k.size
        role = np.full(n, "x", dtype="<U1")
        for gid, cut in cuts.items():
            in_group = (self.gid == gid) & (self.level > 0)
            is_var = in_group & (self.k > cut.var_k)
            for i in np.flatnonzero(in_group & (self.k == cut.var_k)):
                is_var[i] = self._key(int(i)) <= cut.var_key
            is_mean = in_group & ~is_var & (self.k < cut.mean_k)
            for i in np.flatnonzero(in_group & ~is_var & (self.k == cut.mean_k)):
                is_mean[i] = self._key(int(i)) > cut.mean_key
            role[in_group] = "f"
            role[is_var] = "v"
            role[is_mean] = "m"
        return role

    def first_stage(self, cuts: Mapping[int, Cut]) -> FirstStage:
        """G_mean per-class sums, G_var users and G_fin class counts."""
        role = self._roles(cuts)
        frame = pd.DataFrame(
            {"gid": self.gid, "k": self.k, "level": self.level, "s": self.s, "role": role}
        )
        mean: dict[int, list[MeanCell]] = {}
        for g, k, lvl, c, t in _cells(frame[frame["role"] == "m"], "s"):
            mean.setdefault(g, []).append(MeanCell(k, lvl, c, t))
        var: dict[int, list[VarUser]] = {}
        for i in np.flatnonzero(role == "v"):
            var.setdefault(int(self.gid[i]), []).append(
                VarUser(int(self.k[i]), float(self.level[i]), int(self.s[i]), self._key(int(i)))
            )
        fin: dict[int, dict[tuple[int, float], int]] = {}
        for g, k, lvl, c, _ in _cells(frame[frame["role"] == "f"], "s"):
            fin.setdefault(g, {})[(k, lvl)] = c
        return FirstStage(
            {g: tuple(v) for g, v in mean.items()},
            {g: tuple(v) for g, v in var.items()},
            fin,
        )

    def final_stage(
        self, cuts: Mapping[int, Cut], bounds: Mapping[int, Mapping[int, tuple[int, int]]]
    ) -> dict[int, tuple[FinalCell, ...]]:
        """Per (group id, k, ε): G_fin users and Σ clamp(s_i, A_k, B_k)."""
        role = self._roles(cuts)
        fin = np.flatnonzero(role == "f")
        lo = np.empty(fin.size, dtype=np.int64)
        hi = np.empty(fin.size, dtype=np.int64)
        for j, i in enumerate(fin):
            lo[j], hi[j] = bounds[int(self.gid[i])][int(self.k[i])]
        clamped = np.minimum(np.maximum(self.s[fin], lo), hi)
        frame = pd.DataFrame(
            {"gid": self.gid[fin], "k": self.k[fin], "level": self.level[fin], "c": clamped}
        )
        out: dict[int, list[FinalCell]] = {}
        for g, k, lvl, c, t in _cells(frame, "c"):
            out.setdefault(g, []).append(FinalCell(k, lvl, c, t))
        return {g: tuple(v) for g, v in out.items()}


