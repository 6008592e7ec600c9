"""pandas backend of the partial-DP releases: same plan, names and columns as Spark's.

Per attribute, values are recoded once against the public domain (``pd.Categorical``:
hash lookups, null/out-of-domain -> the public "other" code). Each tree level is one
vectorized pass over the code matrix (mixed-radix keys, membership of the children's
lists, counts of the keys above the level's floor); the count stage reads the root pass's
aggregate.
The driver logic is :mod:`hdp_spark.core.partial`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from hdp_spark.core.partial.spec import AttributeDomain, AttributeHistogramSpec, CodedSpec
from hdp_spark.core.partial.tree import NodeRequest, key_space
from hdp_spark.errors import ParameterError, SchemaError
from hdp_spark.pandas._common import real_dtype

__all__ = [
    "PandasTreeCounter",
    "attribute_counts",
    "bounded_persons",
    "encode_codes",
]

_DENSE_FACTOR = 4
"""Count by bincount when a key space is at most this many times the number of rows."""

Codes = npt.NDArray[np.int64]


def _check_frame(df: object) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        msg = f"`df` must be a pandas DataFrame, got {type(df).__name__}."
        raise ParameterError(msg)
    return df


def _check_type(series: pd.Series, dom: AttributeDomain) -> None:
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_object_dtype(dtype):
        return
    kind = dom.kind
    if kind == "str":
        ok = pd.api.types.is_string_dtype(dtype)
    elif kind == "bool":
        ok = pd.api.types.is_bool_dtype(dtype)
    else:
        ok = real_dtype(dtype)
    if not ok:
        msg = (
            f"attribute column `{dom.column}` has dtype {dtype}, which cannot hold the "
            f"{kind} values of its domain."
        )
        raise SchemaError(msg)


def encode_codes(df: pd.DataFrame, domains: Sequence[AttributeDomain]) -> Codes:
    """The n x d matrix of attribute codes (null/out-of-domain -> the "other" code)."""
    out = np.empty((len(df), len(domains)), dtype=np.int64, order="F")  # columns contiguous
    for j, dom in enumerate(domains):
        if dom.column not in df.columns:
            msg = f"attribute column `{dom.column}` is not in the table."
            raise SchemaError(msg)
        series = df[dom.column]
        _check_type(series, dom)
        codes = pd.Categorical(series, categories=list(dom.values)).codes
        out[:, j] = np.where(codes < 0, dom.other_code, codes)
    return out


def bounded_persons(df: pd.DataFrame, privacy_unit: str | None,
                    max_rows: int = 1) -> pd.DataFrame:
    """The rows of the persons with at most ``max_rows`` rows (all of them), when
    ``privacy_unit`` names the id column (else ``df`` itself): the partial-DP family's
    privacy unit.

    Rule (data-independent, no error): a row with a null id, and every row of an id that
    appears more than ``max_rows`` times, is left out. Argument: whether a person's rows
    are kept depends only on how many rows the person has, never on a value, so a change
    of a counted person's values changes at most their ``max_rows`` rows, and a person who
    counts nowhere contributes nothing; the mechanisms scale their noise to the rows of a
    person (``hdp_spark.core.partial.histograms``; one row: the row model). Same rule on
    Spark (``hdp_spark.spark._heavy_hitters``).

    Raises:
        SchemaError: the id column is not in the table (a public fact).
    """
    if privacy_unit is None:
        return df
    if privacy_unit not in df.columns:
        msg = f"`privacy_unit` column `{privacy_unit}` is not in the table."
        raise SchemaError(msg)
    ids = df[privacy_unit]
    if max_rows == 1:
        keep = (ids.notna() & ~ids.duplicated(keep=False)).to_numpy(dtype=bool)
    else:
        rows = ids.map(ids.value_counts(dropna=True))
        keep = (ids.notna() & (rows <= max_rows)).to_numpy(dtype=bool)
    return df if keep.all() else df[keep]


def _key(codes: Codes, attrs: Sequence[int], weights: Sequence[int]) -> Codes:
    key = np.zeros(codes.shape[0], dtype=np.int64)
    for j, w in zip(attrs, weights, strict=True):
        key += codes[:, j] * np.int64(w)
    return key


def _count(keys: Codes, space: int) -> tuple[Codes, Codes]:
    """Distinct keys and their counts (dense bincount for small key spaces)."""
    if space <= max(_DENSE_FACTOR * keys.size, 1 << 16):
        counts = np.bincount(keys, minlength=space)
        present = np.flatnonzero(counts)
        return present.astype(np.int64), counts[present].astype(np.int64)
    uniq, cnt = np.unique(keys, return_counts=True)
    return uniq.astype(np.int64), cnt.astype(np.int64)


class PandasTreeCounter:
    """The :class:`~hdp_spark.core.partial.heavy_hitters.TreeCounter` of a pandas table."""

    def __init__(self, codes: Codes, sizes: Sequence[int]) -> None:
        self._codes = codes
        self._sizes = tuple(sizes)
        # The aggregate of the last single-node level (the root), reused by count_keys.
        self._root: tuple[tuple[int, ...], Codes, Codes] | None = None

    @classmethod
    def from_frame(cls, df: pd.DataFrame, spec: CodedSpec) -> PandasTreeCounter:
        """Recode ``df`` against the spec's domains."""
        codes = encode_codes(_check_frame(df), spec.domains)
        return cls(codes, [d.size for d in spec.domains])

    def count_level(
        self, requests: Sequence[NodeRequest], floor: int
    ) -> dict[int, dict[int, int]]:
        """One pass: per node, the counts of the candidate keys above ``floor``."""
        out: dict[int, dict[int, int]] = {}
        for r in requests:
            key = _key(self._codes, r.attrs, r.weights)
            mask: npt.NDArray[np.bool_] | None = None
            for f in r.filters:
                child = _key(self._codes, f.attrs, f.weights)
                inside = np.isin(child, np.asarray(f.members, dtype=np.int64))
                mask = inside if mask is None else mask & inside
            if mask is not None:
                key = key[mask]
            uniq, cnt = _count(key, key_space(r.attrs, self._sizes))
            self._root = (r.weights, uniq, cnt) if len(requests) == 1 else None
            keep = cnt > floor
            out[r.node] = dict(zip(uniq[keep].tolist(), cnt[keep].tolist(), strict=True))
        return out

    def count_keys(self, weights: Sequence[int], keys: Sequence[int]) -> dict[int, int]:
        """Exact counts of the given whole-record keys (from the root pass's aggregate when
        the last level was the root's; otherwise one pass)."""
        if self._root is not None and tuple(weights) == self._root[0]:
            uniq, cnt = self._root[1], self._root[2]
        else:
            key = _key(self._codes, range(len(self._sizes)), weights)
            uniq, cnt = np.unique(key, return_counts=True)
        keep = np.isin(uniq, np.asarray(keys, dtype=np.int64))
        return dict(zip(uniq[keep].tolist(), cnt[keep].tolist(), strict=True))


def attribute_counts(df: object, spec: AttributeHistogramSpec) -> list[dict[int, int]]:
    """Exact per-attribute counts ``{code: rows}`` of ``attribute_histograms`` (one pass).

    Privacy:
        NOT a release: exact counts for the finalizer (noise is added there); never
        publish them.
    """
    frame = bounded_persons(_check_frame(df), spec.privacy_unit, spec.max_rows)
    codes = encode_codes(frame, spec.domains)
    counts = []
    for j, dom in enumerate(spec.domains):
        cnt = np.bincount(codes[:, j], minlength=dom.size)
        counts.append({c: int(v) for c, v in enumerate(cnt.tolist()) if v})
    return counts
