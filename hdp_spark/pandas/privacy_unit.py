"""The privacy unit's bounding rule on pandas (the rule and its argument:
:mod:`hdp_spark.core.privacy_unit.spec`).

Vectorized over the table: the per-person ε by a ``groupby`` minimum, each rank's SHA-256
computed once per distinct (person, group) or (person, group, codes) — hashing is the only
per-item Python, as on the Spark engine the ``sha2`` expression is per row — and the kept
groups and rows by a stable sort and a cumulative count. Ties of the 60-bit ranks (about
2**-60 per pair) break by the group, then by the codes' text, as on Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit.spec import (
    PrivacyUnit,
    bounding_key,
    group_rank_text,
    rank,
    report_rank_text,
    row_rank_text,
)
from hdp_spark.errors import ParameterError, SchemaError

__all__ = ["bound_rows", "keep_one_report", "person_texts", "safe_eps", "unit_eps"]

_PERSON, _GROUP, _CODES, _EPS, _ROW = (
    "__pu_person", "__pu_group", "__pu_codes", "__pu_eps", "__pu_row")


def person_texts(df: pd.DataFrame, unit: PrivacyUnit) -> pd.Series:
    """Each row's person id as text (integers in decimal, strings as they are; null ids as
    None).

    Raises:
        SchemaError: the column is missing or neither integer nor string (public facts).
    """
    if unit.column not in df.columns:
        msg = f"`privacy_unit` names column {unit.column!r}, which the table does not have."
        raise SchemaError(msg)
    ids = df[unit.column]
    if pd.api.types.is_integer_dtype(ids.dtype) and not pd.api.types.is_bool_dtype(ids.dtype):
        out = ids.astype("Int64").astype("string").astype(object)
        return out.where(ids.notna(), None)
    if pd.api.types.is_string_dtype(ids.dtype):
        texts = ids.astype(object)
        kinds = {type(v) for v in texts if v is not None and v is not pd.NA
                 and not (isinstance(v, float) and np.isnan(v))}
        if kinds <= {str}:
            return texts.where(texts.map(lambda v: isinstance(v, str)), None)
    msg = (f"`privacy_unit` column {unit.column!r} must hold integers or strings, got dtype "
           f"{ids.dtype}.")
    raise SchemaError(msg)


def safe_eps(values: pd.Series) -> npt.NDArray[np.float64]:
    """A row's ε as the bounding rule reads it: null, NaN and negative as 0, +∞ kept."""
    eps = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    return np.where(np.isnan(eps) | (eps < 0), 0.0, eps)


def _hashes(texts: Sequence[str]) -> list[int]:
    return [rank(t) for t in texts]


def bound_rows(
    df: pd.DataFrame,
    unit: PrivacyUnit,
    *,
    eps: str,
    group: str | None,
    codes: Sequence[str],
    key: ReleaseKey,
) -> pd.DataFrame:
    """The rows a release reads under ``unit``: at most ``max_groups`` groups per person and
    ``max_rows`` rows per person and group, chosen by the release's keyed ranks; ``eps``
    replaced by the person's ε (the smallest safe ε of all their rows).

    Args:
        df: the table.
        unit: the privacy unit and its bounds.
        eps: the ε column.
        group: the integer column of each row's group: its position in the public key
            order, or -1 for a row outside the public keys (dropped after the person's ε is
            taken: the ε is over all the person's rows); or, under ``select_keys``, an
            object column of each group's canonical text (:func:`group_key_text`; None for
            a row whose key holds a null, never released); None: a global release (group
            0).
        codes: the integer columns of the codes the release reads from each row.
        key: the release key.

    Returns:
        The kept rows (original index and columns), ``eps`` holding the person's ε.

    Privacy:
        The rule of :mod:`hdp_spark.core.privacy_unit.spec`: which of a person's rows are
        kept, and their ε, depend on that person's rows and the key only.
    """
    person = person_texts(df, unit)
    texts = group is not None and df[group].dtype == object  # select_keys: key texts
    frame = pd.DataFrame({_PERSON: person.to_numpy(dtype=object),
                          _GROUP: (np.zeros(len(df), dtype=np.int64) if group is None
                                   else df[group].to_numpy(dtype=object) if texts
                                   else df[group].to_numpy(dtype=np.int64)),
                          _EPS: safe_eps(df[eps])}, index=pd.RangeIndex(len(df)))
    if codes:
        parts = [pd.Series(df[c].to_numpy(dtype=np.int64)).astype(str) for c in codes]
        text = parts[0]
        for part in parts[1:]:
            text = text + "," + part
        frame[_CODES] = text.to_numpy(dtype=object)
    else:
        frame[_CODES] = ""
    frame = frame[frame[_PERSON].notna()]
    person_eps = frame.groupby(_PERSON, sort=False)[_EPS].transform("min")
    frame = frame.assign(**{_EPS: person_eps})
    frame = frame[frame[_GROUP].notna()] if texts else frame[frame[_GROUP] >= 0]
    bkey = bounding_key(key)

    pairs = frame[[_PERSON, _GROUP]].drop_duplicates()
    pairs = pairs.assign(__h=_hashes([group_rank_text(bkey, p, g) for p, g in zip(
        pairs[_PERSON], pairs[_GROUP].tolist(), strict=True)]))
    pairs = pairs.sort_values([_PERSON, "__h", _GROUP], kind="stable")
    pairs = pairs[pairs.groupby(_PERSON, sort=False).cumcount() < unit.max_groups]
    kept_pairs = pd.MultiIndex.from_frame(pairs[[_PERSON, _GROUP]])
    frame = frame[pd.MultiIndex.from_frame(frame[[_PERSON, _GROUP]]).isin(kept_pairs)]

    distinct = frame[[_PERSON, _GROUP, _CODES]].drop_duplicates()
    distinct = distinct.assign(__h=_hashes([row_rank_text(bkey, p, g, c) for p, g, c in zip(
        distinct[_PERSON], distinct[_GROUP].tolist(), distinct[_CODES], strict=True)]))
    frame = frame.reset_index(names=_ROW).merge(distinct, on=[_PERSON, _GROUP, _CODES],
                                                how="left", sort=False)
    frame = frame.sort_values([_PERSON, _GROUP, "__h", _CODES, _ROW], kind="stable")
    frame = frame[frame.groupby([_PERSON, _GROUP], sort=False).cumcount() < unit.max_rows]
    kept = frame.sort_values(_ROW, kind="stable")
    out = df.iloc[kept[_ROW].to_numpy()].copy()
    out[eps] = kept[_EPS].to_numpy()
    return out


def _codes(df: pd.DataFrame, spec: object) -> npt.NDArray[np.int64]:
    """The integer code a spec reads from each row: a mean's fixed-point value, a
    histogram's category code (the cells' own encodings)."""
    from hdp_spark.core.histogram.spec import HistogramSpec
    from hdp_spark.core.mean.spec import MeanSpec
    from hdp_spark.pandas._cells import _encode
    from hdp_spark.pandas._common import numeric_column
    from hdp_spark.pandas._histogram import category_codes

    if isinstance(spec, MeanSpec):
        values = numeric_column(df, spec.column, "value")
        return _encode(values.copy(), spec).astype(np.int64)
    if isinstance(spec, HistogramSpec):
        return category_codes(df, spec).astype(np.int64)
    msg = f"{type(spec).__name__} takes no privacy unit yet"
    raise SchemaError(msg)


def group_texts(df: pd.DataFrame, by: tuple[str, ...]) -> npt.NDArray[np.object_]:
    """Each row's group as its canonical text (:func:`group_key_text`), None where a
    grouping value is null: the groups of a release under ``select_keys``, whose order is
    not public.

    Raises:
        ParameterError: a ``by`` column holds neither integers nor strings (a public fact:
            its type).
    """
    parts = []
    for col in by:
        values = df[col]
        if pd.api.types.is_integer_dtype(values.dtype) and not pd.api.types.is_bool_dtype(
                values.dtype):
            text = values.astype("Int64").astype("string").astype(object)
            parts.append(text.where(values.notna(), None).to_numpy(dtype=object))
            continue
        obj = values.astype(object)
        if pd.api.types.is_string_dtype(values.dtype) and all(
                isinstance(v, str) or v is None or v is pd.NA or (isinstance(v, float) and
                                                                  np.isnan(v)) for v in obj):
            parts.append(obj.where(obj.map(lambda v: isinstance(v, str)), None)
                         .to_numpy(dtype=object))
            continue
        msg = (f"under `privacy_unit` with `keys=select_keys(...)` every `by` column must "
               f"hold integers or strings (a group's text enters the ranks), got dtype "
               f"{values.dtype} for {col!r}.")
        raise ParameterError(msg)
    # group_key_text, vectorized: "<len>:<text>" per value, joined; a null anywhere: None
    joined: pd.Series | None = None
    for part in parts:
        text = pd.Series(part, dtype=object)
        piece = text.str.len().astype("Int64").astype("string") + ":" + text.astype("string")
        joined = piece if joined is None else joined + piece
    assert joined is not None  # `by` is not empty here
    return joined.astype(object).where(joined.notna(), None).to_numpy(dtype=object)


def group_positions(df: pd.DataFrame, by: tuple[str, ...],
                    keys: tuple[tuple[object, ...], ...] | None) -> npt.NDArray[Any]:
    """Each row's position in the public key order (-1: outside the keys); 0 for every row
    of a global release; under ``select_keys`` (``by`` without public keys) each row's
    :func:`group_texts`."""
    from hdp_spark.pandas._cells import _group_codes

    if not by:
        return np.zeros(len(df), dtype=np.int64)
    if keys is None:
        return group_texts(df, by)
    groups = _group_codes(df, by, keys)
    at = {k: i for i, k in enumerate(keys)}
    lookup = np.array([at.get(k, -1) for k in groups.keys] + [-1], dtype=np.int64)
    if groups.codes is None:
        return np.full(len(df), lookup[0], dtype=np.int64)
    return lookup[groups.codes]


def bound_frame(df: pd.DataFrame, unit: PrivacyUnit, *, eps: str, by: tuple[str, ...],
                keys: tuple[tuple[object, ...], ...] | None, specs: Sequence[object],
                key: ReleaseKey) -> pd.DataFrame:
    """:func:`bound_rows` for a release of ``specs`` grouped by ``by`` over public ``keys``
    (None: a global release): the groups are the keys' positions, the codes the specs'.

    Privacy:
        As :func:`bound_rows`.
    """
    helpers = {"__pu_g": group_positions(df, by, keys)}
    for i, spec in enumerate(specs):
        helpers[f"__pu_c{i}"] = _codes(df, spec)
    framed = df.assign(**helpers)
    out = bound_rows(framed, unit, eps=eps, group="__pu_g",
                     codes=[f"__pu_c{i}" for i in range(len(specs))], key=key)
    return out.drop(columns=list(helpers))


def unit_eps(values: pd.Series) -> npt.NDArray[np.float64]:
    """:func:`safe_eps` with every non-positive ε as +0.0 (a -0.0 sorts with 0.0, as on
    Spark)."""
    eps = safe_eps(values)
    return np.where(eps <= 0, 0.0, eps)


def keep_one_report(df: pd.DataFrame, unit: PrivacyUnit, spec: Any, key: ReleaseKey
                    ) -> pd.DataFrame:
    """The one report per person a local-DP ``spec`` reads under ``unit``: among the
    person's rows whose safe ε is their smallest, sorted by their codes (index, then q:
    :func:`hdp_spark.pandas.ldp.report_codes`), the one at position
    ``rank(report_rank_text(bounding key, spec.name, person)) mod m``; the ε column holds
    the safe ε (null, NaN, negative: 0).

    Privacy:
        The rule of :mod:`hdp_spark.core.privacy_unit.ldp`: the position reads the key and
        the person only, never a report.
    """
    from hdp_spark.pandas._common import numeric_column
    from hdp_spark.pandas.ldp import report_codes

    eps = numeric_column(df, spec.eps, "ε")  # a SchemaError if missing or not numeric
    person = person_texts(df, unit).to_numpy(dtype=object)
    safe = df.assign(**{spec.eps: unit_eps(pd.Series(eps, index=df.index))})
    level = safe[spec.eps].to_numpy(dtype=np.float64)
    index, q = report_codes(safe, spec)
    known = pd.notna(person)
    rows = np.flatnonzero(known)
    codes, persons = pd.factorize(person[rows])
    smallest = pd.Series(level[rows]).groupby(codes).transform("min").to_numpy()
    rows, codes = rows[level[rows] == smallest], codes[level[rows] == smallest]
    # sorted by (person, index, q_1..q_k, row): np.lexsort's last key sorts first
    keys = [rows, *(q[rows, k] for k in reversed(range(q.shape[1]))), index[rows], codes]
    order = np.lexsort(keys)
    rows, codes = rows[order], codes[order]
    m = np.bincount(codes, minlength=len(persons))
    first = np.concatenate(([0], np.cumsum(m)[:-1]))
    bkey = bounding_key(key)
    ranks = np.array(_hashes([report_rank_text(bkey, spec.name, p) for p in persons]),
                     dtype=np.int64)
    kept = np.sort(rows[first + ranks % m])  # every person has a row at their smallest ε
    return safe.iloc[kept]
