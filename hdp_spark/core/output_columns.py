"""A release's output held as columns: what the engines turn into a frame without one Python
tuple per group or one dict per nested item.

:class:`OutputColumns` holds one list per output column (the group columns, then every
aggregator's fields); a list-of-structs field (the ε levels) is a :class:`ListColumn`:
flat lists per struct field and row offsets, the layout of an Arrow ``list<struct>``.
:meth:`OutputColumns.rows` gives the row tuples that the kernels' ``values`` give, so an
engine (or an output type) without a columnar path uses those, with the same values.

Privacy: none; a change of layout of released values.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, overload

from hdp_spark.errors import InternalError

__all__ = ["ColumnBatch", "ColumnResults", "GroupResults", "ListColumn", "OutputColumns"]


@dataclass(frozen=True, slots=True)
class ListColumn:
    """A list-of-structs column as flat lists.

    Attributes:
        offsets: row r's items are ``[offsets[r], offsets[r + 1])``; ``len(rows) + 1``
            entries, from 0.
        fields: per struct field (in the struct's order), its value for every item.
    """

    offsets: list[int]
    fields: dict[str, list[Any]]

    def __post_init__(self) -> None:
        items = self.offsets[-1] if self.offsets else -1
        if (not self.offsets or self.offsets[0] != 0
                or any(len(v) != items for v in self.fields.values())):
            msg = "ListColumn needs offsets from 0 to the number of items, one value per item"
            raise InternalError(msg)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def rows(self) -> list[list[dict[str, Any]]]:
        """Each row's items as dicts (field name to value), as the kernels' ``values``.

        Privacy:
            None: a change of layout of released values.
        """
        names = list(self.fields)
        items = [dict(zip(names, values, strict=True))
                 for values in zip(*self.fields.values(), strict=True)] if names else []
        bounds = zip(self.offsets, self.offsets[1:], strict=False)
        return [items[lo:hi] for lo, hi in bounds]


Column = list[Any] | ListColumn


@dataclass(frozen=True, slots=True)
class OutputColumns:
    """Released values as columns, one per output column, all of one length."""

    columns: Sequence[Column]

    def __post_init__(self) -> None:
        if len({len(c) for c in self.columns}) > 1:
            msg = "OutputColumns needs columns of one length"
            raise InternalError(msg)

    def __len__(self) -> int:
        return len(self.columns[0]) if self.columns else 0

    def rows(self) -> list[tuple[Any, ...]]:
        """The row tuples (group values, then every aggregator's values).

        Privacy:
            None: a change of layout of released values.
        """
        lists = [c.rows() if isinstance(c, ListColumn) else c for c in self.columns]
        return list(zip(*lists, strict=True))


class ColumnBatch(Protocol):
    """Many groups' results as a batch finalize produced them, column by column."""

    @property
    def size(self) -> int:
        """Number of groups."""
        ...

    def results(self) -> list[Any]:
        """One result record per group (what ``Release.results`` readers get)."""
        ...

    def value_columns(self) -> list[Column]:
        """The kernel's ``values`` of every group, as output columns."""
        ...


class ColumnResults(Sequence[Any]):
    """The records of a :class:`ColumnBatch`, built on first use: a sequence of results
    that the output path can read as columns without building them (no record per group
    and level when only the frame is needed).

    Privacy:
        None: released values in another layout.
    """

    __slots__ = ("_built", "batch")

    def __init__(self, batch: ColumnBatch) -> None:
        self.batch = batch
        self._built: list[Any] | None = None

    def _records(self) -> list[Any]:
        if self._built is None:
            self._built = self.batch.results()
        return self._built

    def __len__(self) -> int:
        return self.batch.size

    @overload
    def __getitem__(self, i: int) -> Any: ...

    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...

    def __getitem__(self, i: int | slice) -> Any:
        return self._records()[i]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._records())

    def __eq__(self, other: object) -> bool:
        return self._records() == (list(other) if isinstance(other, ColumnResults) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._records())


class GroupResults(Mapping[tuple[object, ...], Any]):
    """``{key: result}`` of a batch finalize: the keys in release order and the results in
    the same order, looked up through an index built on first use (no dict of 100,000s of
    entries when only the frame is read).

    Privacy:
        None: released values in another layout.
    """

    __slots__ = ("_index", "keys_in_order", "results")

    def __init__(self, keys: Sequence[tuple[object, ...]], results: Sequence[Any]) -> None:
        if len(keys) != len(results):
            msg = "GroupResults needs one result per key"
            raise InternalError(msg)
        self.keys_in_order = keys
        self.results = results
        self._index: dict[tuple[object, ...], int] | None = None

    def __getitem__(self, key: tuple[object, ...]) -> Any:
        if self._index is None:
            self._index = {k: i for i, k in enumerate(self.keys_in_order)}
        return self.results[self._index[key]]

    def __iter__(self) -> Iterator[tuple[object, ...]]:
        return iter(self.keys_in_order)

    def __len__(self) -> int:
        return len(self.keys_in_order)

    def in_order(self, keys: Sequence[tuple[object, ...]]) -> Sequence[Any]:
        """The results of ``keys`` in that order (the held sequence itself when ``keys``
        is the held order)."""
        if keys is self.keys_in_order or tuple(keys) == tuple(self.keys_in_order):
            return self.results
        return [self[k] for k in keys]
