"""A job's validated, frozen specification: its releases and the whole job.

The settings of the other sections are in :mod:`hdp_spark.jobs.settings`; the TOML format
is read by :mod:`hdp_spark.jobs.spec`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hdp_spark.core.privacy_unit.options import UnitOptions
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.errors import JobError
from hdp_spark.jobs.registry import get_kind
from hdp_spark.jobs.settings import (
    ENGINES,
    SQLITE_SUFFIXES,
    BudgetSpec,
    EngineName,
    InputSpec,
    LedgerBackend,
    LedgerSpec,
    OutputSpec,
    check_column,
    check_name,
    reject,
)

__all__ = [
    "AggregatorEntry",
    "JobSpec",
    "ReleaseSpec",
    "check_selection_release",
    "check_unit_release",
    "entry_name",
    "library_spec",
]

_SELECTION_KINDS = ("mean", "histogram")

@dataclass(frozen=True, slots=True)
class AggregatorEntry:
    """One aggregator of a release: its registered kind, its validated spec and the unit
    of its values (``unit = "years"``: for the report's words and axes only; none claimed
    when absent)."""

    kind: str
    spec: Any
    unit: str | None = None

    def bounds_users(self, user_id: str) -> bool:
        """Whether this is a partial-DP kind (one global ε per person) whose own
        ``privacy_unit`` is the job's user id: it counts each user with all their rows (at
        most ``max_rows``, else none), so a user with several rows loses the kind's
        per-person ε once, and the ledger charges it once per user."""
        params = getattr(self.spec, "params", None)
        return (get_kind(self.kind).unit == "person" and isinstance(params, Mapping)
                and params.get("privacy_unit") == user_id)


@dataclass(frozen=True, slots=True)
class ReleaseSpec:
    """One release: aggregators computed together over one grouping, committed atomically.

    Attributes:
        id: unique within the job (part of the idempotency key and of output paths).
        by: group-by columns (empty for a global release).
        keys: the public key set (required with ``by`` unless ``selection`` is given).
        aggregators: at least one.
        selection: DP partition selection (``[releases.select_keys]``) choosing the
            released keys privately instead of a public key set; needs ``by``, and
            ``mean`` / ``histogram`` aggregators on one ε column and grid (one ``agg``
            call, one selection, one δ; see :mod:`hdp_spark.jobs.selection`).
        unit: the privacy unit (``[releases.privacy_unit]``: the job's user id with its
            bounds): ``mean`` / ``histogram`` aggregators on one ε column and grid in one
            ``agg`` call, each user charged once (see :mod:`hdp_spark.jobs.unit`).
        weight: how much the analyst cares about this release's accuracy (a finite
            number >= 0, default 1): its predicted error's weight in the "optimal"
            budget allocation (``[budget] allocation``).
    """

    id: str
    aggregators: tuple[AggregatorEntry, ...]
    by: tuple[str, ...] = ()
    keys: tuple[tuple[object, ...], ...] | None = None
    weight: float = 1.0
    selection: SelectKeys | None = None
    unit: UnitOptions | None = None

    def __post_init__(self) -> None:
        check_name("[[releases]] id", self.id)
        where = f"[[releases]] id = {self.id!r}"
        if not self.aggregators:
            reject(f"{where}: aggregators", "must list at least one aggregator", [])
        for col in self.by:
            check_column(f"{where}: by", col)
        if len(set(self.by)) != len(self.by):
            reject(f"{where}: by", "must not repeat a column", list(self.by))
        if self.unit is not None:
            check_unit_release(where, self)
        if self.selection is not None:
            check_selection_release(where, self)
        elif bool(self.by) != (self.keys is not None):
            reject(f"{where}: keys", "is required with `by` (the public key set, or "
                        "`[releases.select_keys]`) and not allowed without it", self.keys)
        w = self.weight
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) \
                or w < 0:
            reject(f"{where}: weight", "must be a finite number >= 0", w)
        names = [entry_name(a) for a in self.aggregators]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            reject(f"{where}: aggregators", "must have distinct output names (set "
                        "`alias`)", sorted(dup))


def entry_name(entry: AggregatorEntry) -> str:
    """Output column prefix of an aggregator entry."""
    return get_kind(entry.kind).output_name(entry.spec)


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A release job (see ``docs/jobs.md``).

    Attributes:
        name: job name (part of every idempotency key; letters, digits, ``_.-``).
        input: the input table.
        budget: per-user budgets and the capping policy.
        ledger: the ledger location.
        output: the output location.
        releases: the releases, run in order, each committed on its own.
        engine: ``"pandas"`` (default) or ``"spark"``.
        description: free text for the report.
        unsafe_seed: reproducible noise for tests and examples. UNSAFE: anyone who knows
            the seed can remove the noise; outputs are marked ``unsafe_seed: true``.
        spark_conf: Spark settings used when the runner creates the session
            (e.g. ``spark.master``).
        source: the job file, if loaded from one.

    Privacy:
        Each release is charged once to the ledger; re-running a committed release
        re-publishes its stored outcome without recomputing (no fresh noise).
    """

    name: str
    input: InputSpec
    budget: BudgetSpec
    ledger: LedgerSpec
    output: OutputSpec
    releases: tuple[ReleaseSpec, ...]
    engine: EngineName = "pandas"
    description: str = ""
    unsafe_seed: str | None = None
    spark_conf: tuple[tuple[str, str], ...] = ()
    source: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_name("[job] name", self.name)
        if self.engine not in ENGINES:
            reject("[job] engine", f"must be one of {', '.join(ENGINES)}", self.engine)
        if not self.releases:
            reject("[[releases]]", "must define at least one release", [])
        ids = [r.id for r in self.releases]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            reject("[[releases]] id", "must be unique within the job", dup)
        if self.input.table is not None and self.engine != "spark":
            reject("[input] table", "needs engine = 'spark' (pandas reads files)",
                        self.input.table)
        if self.unsafe_seed is not None and not isinstance(self.unsafe_seed, str):
            reject("[job] unsafe_seed", "must be a string", self.unsafe_seed)
        for rel in self.releases:
            for a in rel.aggregators:
                user = get_kind(a.kind).user_column(a.spec)
                if user is not None and user != self.input.user_id:
                    reject(f"[[releases]] id = {rel.id!r}: {a.kind} user",
                            "must be the `[input] user_id` column (the ledger charges that "
                            "user; a different unit would let one ledger user lose more)",
                            user)

    @property
    def ledger_backend(self) -> LedgerBackend:
        """The ledger backend: ``[ledger] backend`` if set, else chosen by the path.

        A path ending in ``.sqlite``, ``.sqlite3`` or ``.db`` is a SQLite file and an
        existing file is SQLite; an existing directory is a parquet ledger. Only a new path
        without such a suffix depends on the engine (SQLite for pandas, parquet for Spark);
        once created, it is read back the same way by both engines.
        """
        if self.ledger.backend is not None:
            return self.ledger.backend
        path = self.ledger.path
        if path.suffix.lower() in SQLITE_SUFFIXES or path.is_file():
            return "sqlite"
        if path.is_dir():
            return "parquet"
        return "sqlite" if self.engine == "pandas" else "parquet"

    def check_ledger_path(self) -> None:
        """Raise before any work if the ledger path exists as the wrong kind of entry.

        Raises:
            JobError: a SQLite ledger path is a directory, or a parquet one is a file.
        """
        path = self.ledger.path
        backend = self.ledger_backend
        if backend == "sqlite" and path.is_dir():
            reject("[ledger] path", "must be a SQLite file (backend 'sqlite'), not a "
                    "directory", str(path))
        if backend == "parquet" and path.exists() and not path.is_dir():
            reject("[ledger] path", "must be a directory (backend 'parquet'), not a file",
                    str(path))

    def with_engine(self, engine: EngineName) -> JobSpec:
        """This job run on another engine (a table input needs Spark)."""
        return replace(self, engine=engine)


# -- parsing -------------------------------------------------------------------------------


def library_spec(entry_spec: Any) -> Any:
    """The library spec of a job aggregator (a histogram entry wraps its spec).

    Privacy:
        No data involved.
    """
    return getattr(entry_spec, "spec", entry_spec)


def check_selection_release(where: str, rel: ReleaseSpec) -> None:
    """Rules of a release under partition selection (checked when the job is loaded).

    Raises:
        JobError: no ``by``, a public ``keys`` list as well, a kind other than ``mean`` /
            ``histogram``, aggregators on different ε columns or grids, or a histogram
            with ``project = true``.

    Privacy:
        Checks public parameters of the job file only.
    """
    if not rel.by:
        msg = (f"`{where}: select_keys` chooses group keys: it needs `by`; got no `by` "
               "(a global release has nothing to select).")
        raise JobError(msg)
    if rel.keys is not None:
        msg = (f"`{where}: keys` must not be given with `select_keys` (either a public key "
               "set or partition selection); got a key list.")
        raise JobError(msg)
    kinds = sorted({a.kind for a in rel.aggregators} - set(_SELECTION_KINDS))
    if kinds:
        msg = (f"`{where}: select_keys` supports the kinds {', '.join(_SELECTION_KINDS)} only; got "
               f"{kinds!r}.")
        raise JobError(msg)
    columns = {(library_spec(a.spec).eps, library_spec(a.spec).eps_grid) for a in rel.aggregators}
    if len(columns) > 1:
        msg = (f"`{where}: aggregators` must all read the same `eps` column and `eps_grid` "
               "under `select_keys` (one κ_i per row drives the selection and every "
               f"statistic); got {sorted(str(c) for c, _ in columns)!r}.")
        raise JobError(msg)
    for a in rel.aggregators:
        if getattr(a.spec, "project", False):
            msg = (f"`{where}: histogram project` must be false under `select_keys` (the "
                   "selected frequencies are clip(C̃_j / W̃, 0, 1)); got True.")
            raise JobError(msg)


def check_unit_release(where: str, rel: ReleaseSpec) -> None:
    """Rules of a release under a privacy unit (checked when the job is loaded).

    Raises:
        JobError: ``eps_cap`` or ``weight_share`` with ``select_keys`` (whose ``c`` and
            ``share`` replace them), a kind other than ``mean`` / ``histogram``,
            aggregators on different ε columns or grids, a histogram with
            ``project = true``, or the user id read as data or grouped by.

    Privacy:
        Checks public parameters of the job file only.
    """
    assert rel.unit is not None
    if rel.selection is not None and (rel.unit.eps_cap is not None
                                      or rel.unit.weight_share is not None):
        named = "eps_cap" if rel.unit.eps_cap is not None else "weight_share"
        value = rel.unit.eps_cap if named == "eps_cap" else rel.unit.weight_share
        msg = (f"`{where}: privacy_unit: {named}` must not be given with `select_keys` "
               "(its `c` and `share` take the places of `eps_cap` and `weight_share`); "
               f"got {value!r}.")
        raise JobError(msg)
    kinds = sorted({a.kind for a in rel.aggregators} - set(_SELECTION_KINDS))
    if kinds:
        msg = (f"`{where}: privacy_unit` supports the kinds {', '.join(_SELECTION_KINDS)} so "
               f"far; got {kinds!r}.")
        raise JobError(msg)
    specs = [library_spec(a.spec) for a in rel.aggregators]
    columns = {(s.eps, s.eps_grid) for s in specs}
    if len(columns) > 1:
        msg = (f"`{where}: aggregators` must all read the same `eps` column and `eps_grid` "
               "under `privacy_unit` (one ε per person drives every statistic); got "
               f"{sorted(str(c) for c, _ in columns)!r}.")
        raise JobError(msg)
    for a in rel.aggregators:
        if getattr(a.spec, "project", False):
            msg = (f"`{where}: histogram project` must be false under `privacy_unit` (the "
                   "frequencies are clip(C̃_j / W̃, 0, 1)); got True.")
            raise JobError(msg)
    column = rel.unit.unit.column
    if column in rel.by or column in {s.column for s in specs}:
        msg = (f"`{where}: privacy_unit`: the user id column {column!r} identifies people; "
               "no aggregator may read it and `by` may not group by it.")
        raise JobError(msg)
