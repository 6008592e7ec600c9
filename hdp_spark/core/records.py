"""Fast construction of frozen, slotted dataclass records on the hot paths of a release.

The ``__init__`` that ``@dataclass(frozen=True)`` generates stores each field through
``object.__setattr__(self, name, value)`` (a name lookup per field): about half the cost
of a small record. A release builds thousands of records that hold their values as given
(per-cell statistics, per-level results), so :func:`records` and the builders made from
:func:`slot_setters` store the fields through the slots' own descriptors instead. The
objects are the same: same class, same field values, equal to and hashing like
``cls(*values)``, still frozen.

Only for record classes without ``__post_init__`` (checked): their ``__init__`` validates
and converts nothing, so going around it skips no check.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any, TypeVar

from hdp_spark.errors import InternalError

__all__ = ["new_record", "records", "slot_setters"]

T = TypeVar("T")

new_record: Callable[[type[Any]], Any] = object.__new__
"""An instance of a record class with no field set yet (fill it with :func:`slot_setters`)."""


def slot_setters(cls: type[Any]) -> tuple[Callable[[Any, Any], None], ...]:
    """Setters of the fields of ``cls`` in field order: ``setters[i](obj, value)`` stores
    field i of ``obj`` as ``cls.__init__`` would (it stores the arguments unchanged).

    Raises:
        InternalError: ``cls`` is not a frozen, slotted dataclass whose fields are all
            ``__init__`` parameters, or it has a ``__post_init__``.
    """
    params = getattr(cls, "__dataclass_params__", None)
    fields = dataclasses.fields(cls) if params is not None else ()
    names = tuple(f.name for f in fields)
    if (
        params is None
        or not params.frozen
        or tuple(getattr(cls, "__slots__", ())) != names
        or hasattr(cls, "__post_init__")
        or not all(f.init for f in fields)
    ):
        msg = f"slot_setters needs a frozen, slotted dataclass without __post_init__: {cls!r}."
        raise InternalError(msg)
    return tuple(cls.__dict__[name].__set__ for name in names)


def records(cls: type[T], *columns: Sequence[Any]) -> list[T]:
    """``[cls(*row) for row in zip(*columns, strict=True)]``: one column per field, in
    field order, built column by column (for many records at once).

    Raises:
        InternalError: as :func:`slot_setters`, or the columns do not match the fields
            (their number or their lengths).
    """
    setters = slot_setters(cls)
    if len(columns) != len(setters) or len({len(c) for c in columns}) > 1:
        msg = f"records of {cls.__name__} need one column per field, all of one length."
        raise InternalError(msg)
    out: list[T] = list(map(new_record, repeat(cls, len(columns[0]) if columns else 0)))
    for set_field, column in zip(setters, columns, strict=True):
        deque(map(set_field, out, column), maxlen=0)
    return out
