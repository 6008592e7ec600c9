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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hdp_spark.errors import InternalError

__all__ = ["ListColumn", "OutputColumns"]


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
