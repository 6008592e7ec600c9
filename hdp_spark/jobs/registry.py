"""Aggregator kinds the job runner knows, by name (``kind = "mean"`` in a job file).

What a kind is: :mod:`hdp_spark.jobs.kind`. The built-in kinds
(:mod:`hdp_spark.jobs.kinds_central`, :mod:`hdp_spark.jobs.kinds_partial`) are registered
here; new aggregator kinds plug in with :func:`register_kind`, and nothing else in the
runner changes.
"""

from __future__ import annotations

from hdp_spark.errors import JobError, ParameterError
from hdp_spark.jobs.kind import (
    AggregatorKind,
    ChargeUnit,
    Interval,
    Key,
    KindResult,
    ReleaseAdapter,
)
from hdp_spark.jobs.kinds_central import CENTRAL
from hdp_spark.jobs.kinds_partial import PARTIAL

__all__ = [
    "AggregatorKind",
    "ChargeUnit",
    "Interval",
    "Key",
    "KindResult",
    "ReleaseAdapter",
    "check_kind_result",
    "get_kind",
    "kinds",
    "register_kind",
    "unregister_kind",
]

_KINDS: dict[str, AggregatorKind] = {kind.name: kind for kind in (*CENTRAL, *PARTIAL)}


def register_kind(kind: AggregatorKind, *, replace: bool = False) -> None:
    """Make ``kind`` available to job files as ``kind = "<name>"``.

    Raises:
        ParameterError: a kind of that name exists and ``replace`` is False.

    Privacy:
        The kind's ``release`` and ``effective`` must meet the contract of
        :class:`~hdp_spark.jobs.kind.AggregatorKind`: the ledger charges what it reports.
    """
    if kind.name in _KINDS and not replace:
        msg = f"aggregator kind {kind.name!r} is already registered; pass replace=True."
        raise ParameterError(msg)
    _KINDS[kind.name] = kind


def unregister_kind(name: str) -> None:
    """Forget the kind ``name`` (an aggregator unregistered: tests and plugins).

    Privacy:
        None.
    """
    _KINDS.pop(name, None)


def kinds() -> tuple[str, ...]:
    """Names of the registered kinds."""
    return tuple(sorted(_KINDS))


def get_kind(name: str, *, setting: str = "kind") -> AggregatorKind:
    """The registered kind ``name``.

    Raises:
        JobError: no such kind.
    """
    try:
        return _KINDS[name]
    except KeyError:
        msg = f"`{setting}` must be one of {', '.join(sorted(_KINDS))}; got {name!r}."
        raise JobError(msg) from None


def check_kind_result(kind: str, result: KindResult, n_keys: int) -> None:
    """Raise if a kind broke its contract (one row per key)."""
    if len(result.rows) != n_keys:
        msg = f"aggregator kind {kind!r} returned {len(result.rows)} rows for {n_keys} keys."
        raise JobError(msg)
