"""The privacy unit's bounding rule on pandas (the rule and its argument:
:mod:`hdp_spark.core.privacy_unit.spec`).

Vectorized over the table: the per-person ε by a ``groupby`` minimum, each rank's SHA-256
computed once per distinct (person, group) or (person, group, codes) — hashing is the only
per-item Python, as on the Spark engine the ``sha2`` expression is per row — and the kept
groups and rows by a stable sort and a cumulative count. Ties of the 60-bit ranks (about
2**-60 per pair) break by the group, then by the codes' text, as on Spark.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit.spec import (
    SEPARATOR,
    PrivacyUnit,
    bounding_key,
    report_rank_text,
)
from hdp_spark.errors import ParameterError, SchemaError

__all__ = ["bound_rows", "keep_one_report", "person_texts", "safe_eps", "unit_eps"]

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


def _person_codes(df: pd.DataFrame, unit: PrivacyUnit
                  ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[Any]]:
    """The rows that have an id, each one's person (a code), and the persons' ids
    (integers or strings) by code — without turning every row's id into text: a person is
    an equal id, and only the persons whose ranks are read need their text.

    Raises:
        SchemaError: as :func:`person_texts`.
    """
    if unit.column in df.columns:
        ids = df[unit.column]
        if pd.api.types.is_integer_dtype(ids.dtype) and not pd.api.types.is_bool_dtype(
                ids.dtype):
            rows = np.flatnonzero(ids.notna().to_numpy())
            valid = ids.iloc[rows]
            wide = np.uint64 if pd.api.types.is_unsigned_integer_dtype(ids.dtype) else np.int64
            values = valid.to_numpy(dtype=wide)
            codes, persons = pd.factorize(values)
            return rows, codes.astype(np.int64), np.asarray(persons)
    texts = person_texts(df, unit).to_numpy(dtype=object)
    rows = np.flatnonzero(pd.notna(texts))
    codes, persons = pd.factorize(texts[rows])
    return rows, codes.astype(np.int64), np.asarray(persons, dtype=object)


def safe_eps(values: pd.Series) -> npt.NDArray[np.float64]:
    """A row's ε as the bounding rule reads it: null, NaN and negative as 0, +∞ kept."""
    eps = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    return np.where(np.isnan(eps) | (eps < 0), 0.0, eps)


def _first_in_run(codes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """For codes sorted into runs, each item's place in its run (0 for the run's first)."""
    n = len(codes)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))
    lengths = np.diff(np.append(starts, n))
    return np.arange(n, dtype=np.int64) - np.repeat(starts, lengths)


def _ranks(prefix: str, *parts: npt.NDArray[np.object_]) -> list[int]:
    """:func:`~hdp_spark.core.privacy_unit.spec.rank` of ``prefix`` followed by each item's
    parts joined by the separator, built and hashed in one pass (the texts of
    :func:`~hdp_spark.core.privacy_unit.spec.group_rank_text` and ``row_rank_text``)."""
    sha, number, sep = hashlib.sha256, int.from_bytes, SEPARATOR
    columns = [part.tolist() for part in parts]
    return [number(sha((prefix + sep.join(t)).encode("utf-8")).digest()[:8], "big") >> 4
            for t in zip(*columns, strict=True)]


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
        kept, and their ε, depend on that person's rows and the key only. A rank is computed
        only where it decides something — for a person with more than ``max_groups``
        groups, for a (person, group) with more than ``max_rows`` rows — since otherwise
        every group (row) is kept whatever the ranks: the kept rows are the rule's exactly
        (tests/privacy_unit/test_bounding.py checks them against the rule read literally).
    """
    rows, pcode, persons = _person_codes(df, unit)
    texts = group is not None and df[group].dtype == object  # select_keys: key texts
    values: npt.NDArray[Any]
    if group is None:
        values = np.zeros(len(df), dtype=np.int64)
        inside = np.ones(len(df), dtype=bool)
    elif texts:
        values = df[group].to_numpy(dtype=object)
        inside = pd.notna(values)
    else:
        values = df[group].to_numpy(dtype=np.int64)
        inside = values >= 0
    level = safe_eps(df[eps])
    # the person's ε: the smallest safe ε of ALL their rows (outside the keys too)
    person_eps = np.full(len(persons), np.inf)
    np.minimum.at(person_eps, pcode, level[rows])
    rows, pcode = rows[inside[rows]], pcode[inside[rows]]
    gcode, groups = pd.factorize(values[rows], sort=True)
    width = max(len(groups), 1)
    pair = pcode * width + gcode
    pairs, pair_of_row = np.unique(pair, return_inverse=True)
    p_of, g_of = pairs // width, pairs % width
    bkey = bounding_key(key)
    group_text = (np.asarray(groups, dtype=object) if texts
                  else np.array([str(int(g)) for g in groups], dtype=object))

    # groups: a person with at most G groups keeps all of them (no rank needed)
    grank = np.zeros(len(pairs), dtype=np.int64)
    need = np.flatnonzero(np.bincount(p_of, minlength=len(persons))[p_of] > unit.max_groups)
    if len(need):
        grank[need] = _ranks(f"{bkey}{SEPARATOR}g{SEPARATOR}", _tagged(persons[p_of[need]]),
                             group_text[g_of[need]])
    order = np.lexsort((g_of, grank, p_of))  # by person, then rank, ties by the group
    place = np.empty(len(pairs), dtype=np.int64)
    place[order] = _first_in_run(p_of[order])
    keep = (place < unit.max_groups)[pair_of_row]
    rows, pcode, pair_of_row = rows[keep], pcode[keep], pair_of_row[keep]

    # rows: a (person, group) with at most R rows keeps all of them (no rank needed)
    many = np.bincount(pair_of_row, minlength=len(pairs))[pair_of_row] > unit.max_rows
    if many.any():
        sub = np.flatnonzero(many)
        at, cell = rows[sub], pair_of_row[sub]
        code_text = _code_texts(df, codes, at)
        ccode, ctexts = pd.factorize(code_text, sort=True)  # rank ties: by the codes' text
        distinct, of = np.unique(cell * max(len(ctexts), 1) + ccode, return_inverse=True)
        first = np.zeros(len(distinct), dtype=np.int64)
        first[of] = np.arange(len(of))
        who = _tagged(persons[p_of[cell[first]]])
        rrank = np.asarray(_ranks(f"{bkey}{SEPARATOR}r{SEPARATOR}", who,
                                  group_text[g_of[cell[first]]], code_text[first]),
                           dtype=np.int64)[of]
        order = np.lexsort((at, ccode, rrank, cell))
        place = np.empty(len(sub), dtype=np.int64)
        place[order] = _first_in_run(cell[order])
        dropped = sub[place >= unit.max_rows]
        keep = np.ones(len(rows), dtype=bool)
        keep[dropped] = False
        rows, pcode = rows[keep], pcode[keep]
    order = np.argsort(rows, kind="stable")
    out = df.iloc[rows[order]].copy()
    out[eps] = person_eps[pcode[order]]
    return out


def _tagged(persons: npt.NDArray[Any]) -> npt.NDArray[np.object_]:
    """Each person's id text length-prefixed (``<length>:<id>``; an integer id in decimal),
    as the rule's texts hold it (:func:`hdp_spark.core.privacy_unit.spec.group_rank_text`)."""
    return np.array([f"{len(t)}:{t}" for t in map(str, persons.tolist())], dtype=object)


def _code_texts(df: pd.DataFrame, codes: Sequence[str], rows: npt.NDArray[np.int64]
                ) -> npt.NDArray[np.object_]:
    """The codes of ``rows`` as the rule's text: each integer in decimal, joined by ``,``."""
    if not codes:
        return np.full(len(rows), "", dtype=object)
    text = pd.Series(df[codes[0]].to_numpy(dtype=np.int64)[rows]).astype(str)
    for c in codes[1:]:
        text = text + "," + pd.Series(df[c].to_numpy(dtype=np.int64)[rows]).astype(str)
    return text.to_numpy(dtype=object)


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
    rows, codes, persons = _person_codes(df, unit)
    safe = df.assign(**{spec.eps: unit_eps(pd.Series(eps, index=df.index))})
    level = safe[spec.eps].to_numpy(dtype=np.float64)
    index, q = report_codes(safe, spec)
    smallest = pd.Series(level[rows]).groupby(codes).transform("min").to_numpy()
    rows, codes = rows[level[rows] == smallest], codes[level[rows] == smallest]
    # sorted by (person, index, q_1..q_k, row): np.lexsort's last key sorts first
    keys = [rows, *(q[rows, k] for k in reversed(range(q.shape[1]))), index[rows], codes]
    order = np.lexsort(keys)
    rows, codes = rows[order], codes[order]
    m = np.bincount(codes, minlength=len(persons))
    first = np.concatenate(([0], np.cumsum(m)[:-1]))
    bkey = bounding_key(key)
    texts = np.array([report_rank_text(bkey, spec.name, p)
                      for p in map(str, persons.tolist())], dtype=object)
    ranks = np.array(_ranks("", texts), dtype=np.int64)
    kept = np.sort(rows[first + ranks % m])  # every person has a row at their smallest ε
    return safe.iloc[kept]
