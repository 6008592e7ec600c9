"""The one converter from engine values to the plain values a release's outcome holds.

Released rows come from the core (Python values), from pandas (numpy scalars and arrays,
``Timestamp``) or from Spark (``Row``, ``datetime``). :func:`plain` turns any of them into
what the ledger's canonical JSON stores: dicts with string keys, lists, Python scalars,
dates as ISO text.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

__all__ = ["plain"]


def plain(value: Any, *, nan_as_null: bool = False) -> Any:
    """``value`` as plain JSON-ready Python values (recursively).

    Rules, in order: a dict keeps its items with ``str`` keys; a list or tuple becomes a
    list; a Spark ``Row`` becomes its dict; a date, time or datetime (pandas ``Timestamp``
    included) becomes its ISO text; a numpy array becomes a list and a numpy scalar its
    Python value. ``nan_as_null``: a float NaN becomes None (a null cell of a pandas float
    column in a released table; off for released estimates, whose NaN is a value such as
    τ of a rule without one).

    Privacy:
        A change of representation only: the values are those of the release.
    """
    if isinstance(value, dict):
        return {str(k): plain(v, nan_as_null=nan_as_null) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v, nan_as_null=nan_as_null) for v in value]
    if hasattr(value, "asDict"):
        return plain(value.asDict(recursive=True), nan_as_null=nan_as_null)
    if isinstance(value, dt.date | dt.datetime | dt.time):
        return value.isoformat()
    if isinstance(value, str | bytes) or value is None:
        return value
    if hasattr(value, "tolist"):
        return plain(value.tolist(), nan_as_null=nan_as_null)
    if hasattr(value, "item"):
        return plain(value.item(), nan_as_null=nan_as_null)
    if nan_as_null and isinstance(value, float) and math.isnan(value):
        return None
    return value
