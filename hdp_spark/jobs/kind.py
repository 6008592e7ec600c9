"""What an aggregator kind of a job is: its description, its result, its parameters.

A kind (``kind = "mean"`` in a job file) tells the runner how to build its spec from the
job file's parameters, which ε column (and ε grid) it reads, how to run a release of its
specs through the adapter's core engine, and what effective ε each (group, ε level)
received, which is what the ledger charges. The kinds are registered by name in
:mod:`hdp_spark.jobs.registry`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from hdp_spark.core.levels import EpsGrid
from hdp_spark.core.pipeline import Engine
from hdp_spark.errors import ParameterError

__all__ = [
    "AggregatorKind",
    "ChargeUnit",
    "Interval",
    "Key",
    "KindResult",
    "ReleaseAdapter",
    "ReleaseFn",
    "keywords",
    "parse_grid",
    "require",
]

Key = tuple[object, ...]


@dataclass(frozen=True, slots=True)
class Interval:
    """Columns of the released rows that hold one estimate and its interval (for reports)."""

    label: str
    estimate: str
    low: str
    high: str


@dataclass(frozen=True, slots=True)
class KindResult:
    """What one kind released in one release.

    Attributes:
        rows: one plain dict per public key (in the order of the key set; one row for a
            global release): the group columns, then the kind's output columns.
        effective: ``effective[spec name][(group key, ε level)]`` = the effective ε every row
            of that cell received (0 for weight-0 cells).
        tau: ``tau[spec name][group key]`` = the "privacy for free" level τ of capped rules
            (rows above it are charged τ only), or absent.
    """

    rows: list[dict[str, Any]]
    effective: Mapping[str, Mapping[tuple[Key, float], float]]
    tau: Mapping[str, Mapping[Key, float]] = dataclasses.field(default_factory=dict)


ChargeUnit = Literal["row", "user", "person", "none"]
"""How the ledger charges a kind (see :class:`AggregatorKind`)."""

class ReleaseAdapter(Protocol):
    """What a kind's ``release`` may ask of the job's engine adapter
    (:class:`~hdp_spark.jobs.adapter.EngineAdapter` is one)."""

    name: str

    def engine(self, df: Any) -> Engine:
        """The core pipeline's engine over ``df``: every built-in kind releases through it."""

    def count(self, df: Any) -> int:
        """Rows of ``df`` (public n)."""

    def to_records(self, table: Any) -> list[dict[str, Any]]:
        """The rows of a released table as dicts of plain Python values."""


ReleaseFn = Callable[[ReleaseAdapter, Any, Sequence[Any], tuple[str, ...],
                      "tuple[Key, ...] | None", "str | None"], KindResult]


@dataclass(frozen=True, slots=True)
class AggregatorKind:
    """How the job runner builds, runs and charges one kind of aggregator.

    Attributes:
        name: the ``kind`` of the job file.
        build: job-file parameters -> a validated spec (raises ``ParameterError``/``TypeError``).
        release: ``(adapter, df, specs, by, keys, unsafe_seed) -> KindResult``; ``adapter``
            is the job's :class:`ReleaseAdapter` (``adapter.name`` is ``"pandas"`` or
            ``"spark"``; ``adapter.engine(df)`` the core engine to release through) and
            ``df`` the engine's native table.
        eps_column: the ε column a spec reads.
        eps_grid: the ε grid a spec rounds onto (None for exact levels).
        output_name: the spec's output column prefix.
        intervals: the spec's estimate/interval columns (for the report).
        describe: canonical parameters of a spec (part of the release's idempotency key).
        numeric_columns: the value columns a spec reads as numbers. The runner reads them
            as doubles (unless the schema or ``[input.types]`` types them), so a malformed
            private cell becomes null instead of changing the column's type.
        unit: how the ledger charges the kind.

            * ``"row"``: the protected unit is a row; each row is charged the effective ε
              of its (group, ε level) cell; the table must hold one row per user.
            * ``"user"``: the protected unit is a user with all their rows; ε is constant
              within a user, and the user is charged the effective ε of their cell ONCE
              (the largest over their rows), not once per row. Repeated user ids allowed.
            * ``"person"``: one global ε for everybody (no ε column); each person (row) is
              charged :attr:`uniform_eps`'s effective value; a person without that much
              budget left is left out of the release (policy "cap"/"exclude") or the
              release is refused ("fail"). One row per person, no ``by``.
            * ``"none"``: post-processing of data randomized elsewhere (LDP reports):
              charges nothing and its ε column is never capped (ε must stay exact).
        uniform_eps: a ``"person"`` kind's per-person ε demand, from the spec only.
        grouped: whether the kind accepts ``by`` / ``keys``.
        user_column: the user column a ``"user"`` spec reads (must be ``[input] user_id``).
        parameters: the keys an aggregator table of this kind may hold besides ``kind`` and
            ``unit``; the job loader rejects any other key, naming it and the closest valid
            key. None: ``build`` checks its keys itself.

    Privacy:
        ``release`` must be a complete, noise-adding release (its rows are published as
        is) or, for ``unit = "none"``, post-processing of already-private reports; and
        ``effective`` must bound each unit's privacy loss: the ledger charges it.
    """

    name: str
    build: Callable[[Mapping[str, Any]], Any]
    release: ReleaseFn
    eps_column: Callable[[Any], str]
    eps_grid: Callable[[Any], EpsGrid | None]
    output_name: Callable[[Any], str]
    intervals: Callable[[Any], Sequence[Interval]]
    describe: Callable[[Any], Mapping[str, Any]]
    numeric_columns: Callable[[Any], tuple[str, ...]] = lambda _spec: ()
    unit: ChargeUnit = "row"
    uniform_eps: Callable[[Any], float] = lambda _spec: 0.0
    grouped: bool = True
    user_column: Callable[[Any], str | None] = lambda _spec: None
    parameters: Callable[[], Collection[str]] | None = None


def keywords(function: str, *, rename: Mapping[str, str] | None = None,
             extra: Collection[str] = ()) -> Callable[[], frozenset[str]]:
    """The :attr:`AggregatorKind.parameters` of a kind built by the public function
    ``hdp_spark.<function>``: its keywords (``rename`` maps a keyword to its job-file key),
    plus ``extra`` (job-only keys). Read when asked, so the function's signature is the one
    source of truth.

    Privacy:
        Names of public parameters only.
    """
    def names() -> frozenset[str]:
        import inspect

        import hdp_spark

        fn = getattr(hdp_spark, function)
        mapping = rename or {}
        return frozenset({mapping.get(k, k) for k in inspect.signature(fn).parameters}
                         | set(extra))

    return names


def parse_grid(raw: object) -> EpsGrid | None:
    """An ``eps_grid`` parameter of a job file (a table of ratio, lowest, highest).

    Privacy:
        A job-file parameter (public); the message shows the value written in the file.
    """
    if raw is None or isinstance(raw, EpsGrid):
        return raw
    if not isinstance(raw, Mapping):
        msg = f"`eps_grid` must be a table with ratio, lowest, highest; got {raw!r}."
        raise ParameterError(msg)
    return EpsGrid(**dict(raw))


def require(params: Mapping[str, Any], *names: str) -> None:
    """Raise unless every one of ``names`` is a parameter.

    Privacy:
        Names a missing parameter of the job file only.
    """
    for name in names:
        if name not in params:
            msg = f"`{name}` is required."
            raise ParameterError(msg)
