"""Public group-key sets and group-by columns (the rules every engine shares).

A grouped release must not reveal which keys occur in the data: the caller passes the
public key set, every key in it gets an output row (empty groups included) and rows whose
key is outside the set are left out of the release.

Key sets must be public inputs from OUTSIDE the data (a list of departments from the HR
catalogue, a calendar of dates). A key set computed from the released table itself (its
distinct values) reveals which keys occur, whatever noise the release adds: the backends
reject the cases they can detect (their ``release_keys``), but a list of values
collected from the data cannot be told apart from a public list.

Grouping columns must be public attributes too: :func:`check_by_public` rejects a ``by``
column that a spec of the call reads as a value, ε, category, report or user column.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from hdp_spark.errors import ParameterError

__all__ = [
    "KEYS_FROM_DATA_MESSAGE",
    "check_by_public",
    "check_key_columns",
    "normalize_by",
    "normalize_key",
    "normalize_keys",
    "public_keys",
    "sort_keys",
]

KEYS_FROM_DATA_MESSAGE = (
    "`keys` must be a public input from outside the data (e.g. a list from a catalogue): "
    "a key set derived from the released table ({how}) reveals which keys occur in it, "
    "whatever noise the release adds."
)
"""The text of the error raised for a key set detected as derived from the input."""

# (attribute of a spec, role named in the error) for every column a spec reads as data or
# as its privacy demand. Engine-agnostic: specs of every aggregator use these names.
_SPEC_COLUMNS = (
    ("column", "value column"),
    ("user", "user id column"),
    ("eps", "ε column"),
    ("report", "report column"),
    ("index", "report index column"),
    ("sign", "report sign column"),
)

_PRIMITIVE = (str, int, float, bool, datetime.date, datetime.datetime, decimal.Decimal)


def normalize_by(
    by: str | Sequence[str] | None, specs: Iterable[object] = ()
) -> tuple[str, ...]:
    """The group-by columns as a tuple (empty for a global release).

    With ``specs`` (the specs of the call), also checks that no ``by`` column is one the
    specs read as data or as their ε column (:func:`check_by_public`).

    Raises:
        ParameterError: ``by`` is malformed, repeats a column or names a private column.
    """
    if by is None:
        return ()
    cols = (by,) if isinstance(by, str) else tuple(by)
    if not cols or not all(isinstance(c, str) and c for c in cols):
        msg = f"`by` must be a column name or a non-empty list of column names, got {by!r}."
        raise ParameterError(msg)
    if len(set(cols)) != len(cols):
        msg = f"`by` must not repeat a column, got {by!r}."
        raise ParameterError(msg)
    check_by_public(cols, specs)
    return cols


def _spec_columns(spec: object) -> list[tuple[str, str]]:
    """The (column, role) pairs a spec reads as private data or as its ε column."""
    out = []
    for attr, role in _SPEC_COLUMNS:
        value = getattr(spec, attr, None)
        if isinstance(value, str) and value:
            if attr == "column" and hasattr(spec, "categories"):
                role = "category column"  # a histogram's column
            out.append((value, role))
    return out


def check_by_public(by: tuple[str, ...], specs: Iterable[object]) -> None:
    """Reject a ``by`` column that a spec of the call reads as data or as its ε column.

    Grouping by a value column (a histogram's category column, a report column, a user-level
    mean's user column) makes each group one value: the group's ``_n`` and per-level counts
    would publish the exact count of every value, outside any mechanism. Grouping by the ε
    column of any spec in the call is refused too: it splits the release by privacy demand.

    Raises:
        ParameterError: naming ``by``, the rule and the column (never data).
    """
    for spec in specs:
        name = getattr(spec, "name", type(spec).__name__)
        for column, role in _spec_columns(spec):
            if column in by:
                msg = (
                    f"`by` must name public grouping attributes only, not a column the "
                    f"release reads as data or as its privacy demand: `by` names `{column}`, "
                    f"the {role} of `{name}`. Grouping by it would publish exact per-value "
                    "counts through `_n` and the per-level counts."
                )
                raise ParameterError(msg)


_PLAIN = frozenset({int, float, str})
"""Exact types :func:`normalize_key` returns as they are, without its checks (which return
them unchanged too); subclasses and bool take the checks."""


def normalize_key(value: object) -> object:
    """Turn an engine scalar into a plain Python value.

    numpy scalars (``np.str_``, ``np.int64``, ``np.float64``, ``np.bool_``,
    ``np.datetime64``) and pandas ``Timestamp`` become ``str``, ``int``, ``float``,
    ``bool`` and ``datetime``; plain values are returned unchanged.
    """
    if type(value) in _PLAIN:  # the common case, before the checks below (which keep it)
        return value
    if isinstance(value, np.datetime64):
        unit = np.datetime_data(value.dtype)[0]
        value = value.astype("datetime64[us]" if unit != "D" else "datetime64[D]").item()
    elif isinstance(value, np.generic):
        value = value.item()
    elif isinstance(value, str):
        return value if type(value) is str else str(value)
    elif isinstance(value, float) and type(value) is not float:
        return float(value)
    elif isinstance(value, int) and not isinstance(value, bool) and type(value) is not int:
        return int(value)
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, _PRIMITIVE):
        value = item()
    to_py = getattr(value, "to_pydatetime", None)
    if callable(to_py):
        value = to_py()
    return value


def _order(key: tuple[object, ...]) -> tuple[tuple[int, Any], ...]:
    """A sort key that orders numbers, strings, dates and datetimes without comparing
    values of different kinds (a TypeError remains for kinds that cannot be ordered)."""
    out: list[tuple[int, Any]] = []
    for k in key:
        if isinstance(k, bool | int | float | decimal.Decimal):
            out.append((0, k))
        elif isinstance(k, str):
            out.append((1, k))
        elif isinstance(k, bytes):
            out.append((2, k))
        elif isinstance(k, datetime.datetime):
            out.append((3, k))
        elif isinstance(k, datetime.date):
            out.append((4, k))
        else:
            out.append((5, k))
    return tuple(out)


def sort_keys(keys: Iterable[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """Keys in a canonical order (numbers, strings, bytes, datetimes, dates; each kind in its
    natural order), whatever order they came in: released keys never carry the order in
    which an engine found them. Keys that cannot be compared fall back to their text."""
    out = list(keys)
    try:
        out.sort(key=_order)
    except TypeError:
        out.sort(key=lambda k: tuple((type(v).__name__, str(v)) for v in k))
    return out


def _raw_key(raw: object) -> tuple[object, ...]:
    if isinstance(raw, tuple | list):
        return tuple(raw)
    if isinstance(raw, np.ndarray) and raw.ndim == 1:  # a row of a 2-D key array
        return tuple(raw.tolist())
    return (raw,)


def normalize_keys(keys: Iterable[object], width: int) -> tuple[tuple[object, ...], ...]:
    """Validate a public key set: tuples of ``width`` plain, non-null values, no duplicates.

    The caller's order is kept (it is the output order) for every ordered container: list,
    tuple, Series, array, DataFrame rows. A ``set`` or ``frozenset`` has no order: its keys
    are sorted (numbers, then strings, bytes, datetimes, dates; each kind in its natural
    order), so the output does not depend on hashing; keys that cannot be ordered are
    rejected. Values become plain Python values (:func:`normalize_key`).

    Raises:
        ParameterError: wrong width, null/NaN, duplicates, an empty set, or a set whose
            keys cannot be sorted.
    """
    unordered = isinstance(keys, set | frozenset)
    out: list[tuple[object, ...]] = []
    for raw in keys:
        key = _raw_key(raw)
        key = tuple(normalize_key(k) for k in key)
        if len(key) != width:
            msg = f"every key in `keys` must have {width} value(s), one per `by` column."
            raise ParameterError(msg)
        if any(k is None or (isinstance(k, float) and k != k) for k in key):
            msg = "`keys` must not contain null or NaN values."
            raise ParameterError(msg)
        out.append(key)
    if len(set(out)) != len(out):
        msg = "`keys` must not contain duplicates."
        raise ParameterError(msg)
    if not out:
        msg = "`keys` must contain at least one key."
        raise ParameterError(msg)
    if unordered:
        try:
            out.sort(key=_order)
        except TypeError:
            msg = (
                "`keys` given as a set must be sortable (the output follows the sorted "
                "order); its keys mix values that cannot be compared: pass a list instead."
            )
            raise ParameterError(msg) from None
    return tuple(out)


def context_keys(keys: Iterable[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """:func:`context_key` of every key (a one-column key of an exact ``int``, ``float`` or
    ``str`` is its own, without building a new tuple)."""
    return [k if len(k) == 1 and type(k[0]) in _PLAIN else context_key(k) for k in keys]


def context_key(key: tuple[object, ...]) -> tuple[object, ...]:
    """A key as primitives for the noise context (dates and decimals by their text)."""
    return tuple(
        k if isinstance(k, str | int | float | bool) else f"{type(k).__name__}:{k}" for k in key
    )


KeyTableRows = Callable[[object, tuple[str, ...]], "list[tuple[object, ...]] | None"]
"""An engine's reader of a key table: the ``by`` columns' rows of ``keys`` when it is a
table (DataFrame) of that engine, None when it is not a table."""


def check_key_columns(columns: Iterable[object], by: tuple[str, ...]) -> None:
    """A key table must hold every ``by`` column.

    Raises:
        ParameterError: a ``by`` column is missing (names only, never values).
    """
    present = {str(c) for c in columns}
    missing = [c for c in by if c not in present]
    if missing:
        msg = f"`keys` must have the `by` columns; missing {missing!r}."
        raise ParameterError(msg)


def public_keys(keys: object, by: tuple[str, ...], table_rows: KeyTableRows
                ) -> tuple[tuple[object, ...], ...] | None:
    """The public key set of a grouped release as normalized tuples (None when global).

    Args:
        keys: a list of keys (tuples for several ``by`` columns) or a key table that
            ``table_rows`` reads.
        by: the normalized group-by columns.
        table_rows: the engine's key-table reader (see :data:`KeyTableRows`).

    Raises:
        ParameterError: keys without ``by``, ``by`` without keys, a string, a key table
            without the ``by`` columns, or keys of the wrong width.

    Privacy:
        The keys come from the caller, never from the data, so a grouped release does not
        reveal which keys exist (the engines also refuse key sets detectably derived from
        the released table before calling this).
    """
    if not by:
        if keys is not None:
            msg = "`keys` needs `by`: a global release has no group keys."
            raise ParameterError(msg)
        return None
    if keys is None:
        msg = (
            "a grouped release needs `keys`, the public key set: releasing the keys found "
            "in the data would reveal which keys exist."
        )
        raise ParameterError(msg)
    rows = table_rows(keys, by)
    if rows is not None:
        keys = rows
    if isinstance(keys, str | bytes):
        msg = "`keys` must be a list of keys or a DataFrame, got a string."
        raise ParameterError(msg)
    if not isinstance(keys, Iterable):
        msg = f"`keys` must be a list of keys or a DataFrame, got {type(keys).__name__}."
        raise ParameterError(msg)
    return normalize_keys(keys, len(by))
