"""Declarative release jobs: the TOML format and its validated, frozen specification.

A job file names the input table, its schema, the engine, the budget rule, the ledger, the
output location and the releases (see ``docs/jobs.md`` and ``jobs/sample_employees.toml``).
Relative paths are resolved against the directory of the job file, so a job runs the same
from any working directory.

Every rule is checked when the job is loaded; errors name the setting as ``[section] key``,
the rule and the value written in the file.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, NoReturn, get_args

from hdp_spark.core.keys import normalize_keys
from hdp_spark.core.ledger import (
    BUDGET_MAX,
    CHARGE_MODES,
    POLICIES,
    BudgetPolicy,
    ChargeMode,
)
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.errors import HdpError, JobError

AllocationMethod = Literal["sequential", "equal", "optimal"]
ALLOCATIONS: tuple[str, ...] = get_args(AllocationMethod)

__all__ = [
    "AggregatorEntry",
    "BudgetSpec",
    "InputSpec",
    "JobSpec",
    "LedgerSpec",
    "OutputSpec",
    "ReleaseSpec",
    "load_job",
    "parse_job",
]

EngineName = Literal["pandas", "spark"]
ENGINES: tuple[str, ...] = get_args(EngineName)
ColumnType = Literal["double", "long", "string", "boolean"]
COLUMN_TYPES: tuple[str, ...] = get_args(ColumnType)
LedgerBackend = Literal["sqlite", "parquet"]
SQLITE_SUFFIXES: tuple[str, ...] = (".sqlite", ".sqlite3", ".db")
"""Ledger paths with these suffixes are SQLite files, whatever the engine."""
_SCHEMA_CASTS: dict[str, ColumnType] = {
    "float": "double", "integer": "long", "string": "string", "boolean": "boolean",
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def _reject(setting: str, rule: str, value: object) -> NoReturn:
    """Raise the JobError of a setting that breaks its rule."""
    msg = f"`{setting}` {rule}; got {value!r}."
    raise JobError(msg)


def _check_name(setting: str, value: object) -> None:
    if not isinstance(value, str) or not _NAME.match(value):
        _reject(setting, "must be a name of letters, digits, '_', '.' or '-' "
                             "(starting with a letter or digit, at most 128 characters)", value)


def _check_column(setting: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        _reject(setting, "must be a non-empty column name", value)


def _check_positive(setting: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 \
            or not math.isfinite(value):
        _reject(setting, "must be a finite number > 0", value)
    return float(value)


@dataclass(frozen=True, slots=True)
class InputSpec:
    """The input table.

    Attributes:
        path: a CSV file, a parquet file or a directory of parquet files (or None).
        table: a Spark table name (Spark engine only; or None).
        format: ``"csv"`` or ``"parquet"``; None infers it from the path.
        schema: the table schema file checked before any release (issue 5), or None.
        user_id: the column identifying users (the ledger's key; one row per user).
        eps: the default ε column of the aggregators.
        types: columns cast on load (``[input.types]``), ``(column, "double" | "long" |
            "string" | "boolean")``; values that do not parse become null (handled by the
            aggregators, never an error).
        fingerprint: ``"content"`` hashes the input files' bytes; ``"stat"`` hashes their
            names, sizes and modification times (cheap for very large inputs).
        schema_types: casts of the schema's ordinary (value, group) columns, set by the
            runner from ``schema`` (:meth:`with_schema_types`); ``types`` overrides them.

    Privacy:
        A cell of a value column that does not parse as its declared type becomes null
        when the table is read, so no release depends on whether one private cell is
        well-formed (the aggregators impute nulls with a public default). The ε and user id
        columns (public in this model) are not cast from the schema: a malformed cell there
        fails the schema's type or null rule, before any release.
    """

    path: Path | None = None
    table: str | None = None
    format: Literal["csv", "parquet"] | None = None
    schema: Path | None = None
    user_id: str = "user_id"
    eps: str | None = None
    types: tuple[tuple[str, ColumnType], ...] = ()
    fingerprint: Literal["content", "stat"] = "content"
    schema_types: tuple[tuple[str, ColumnType], ...] = ()

    def __post_init__(self) -> None:
        if (self.path is None) == (self.table is None):
            _reject("[input] path / table", "must give exactly one of them",
                        (str(self.path) if self.path else None, self.table))
        if self.table is not None and (not isinstance(self.table, str) or not self.table):
            _reject("[input] table", "must be a non-empty table name", self.table)
        if self.format is not None and self.format not in ("csv", "parquet"):
            _reject("[input] format", "must be 'csv' or 'parquet'", self.format)
        _check_column("[input] user_id", self.user_id)
        if self.eps is not None:
            _check_column("[input] eps", self.eps)
        for setting, pairs in (("[input.types]", self.types),
                               ("[input] schema", self.schema_types)):
            for col, kind in pairs:
                _check_column(f"{setting} column", col)
                if kind not in COLUMN_TYPES:
                    _reject(f"{setting} {col}", f"must be one of {', '.join(COLUMN_TYPES)}",
                            kind)
        if self.fingerprint not in ("content", "stat"):
            _reject("[input] fingerprint", "must be 'content' or 'stat'", self.fingerprint)

    @property
    def casts(self) -> tuple[tuple[str, ColumnType], ...]:
        """Every cast applied on load: the schema's columns, then ``[input.types]`` (wins)."""
        merged = dict(self.schema_types)
        merged.update(self.types)
        return tuple(sorted(merged.items()))

    def with_value_types(self, columns: Any) -> InputSpec:
        """This input with ``double`` casts for the aggregators' numeric value ``columns``
        that neither the schema nor ``[input.types]`` types.

        Without it a reader that infers types (Spark's CSV ``inferSchema``) would read a
        column holding one malformed private cell as strings, and whether the release runs
        would depend on that cell.
        """
        typed = dict(self.casts)
        extra: dict[str, ColumnType] = {
            c: "double" for c in columns if c not in typed and c not in (self.user_id, self.eps)
        }
        if not extra:
            return self
        merged: dict[str, ColumnType] = {**extra, **dict(self.schema_types)}
        return replace(self, schema_types=tuple(sorted(merged.items())))

    def with_schema_types(self, schema: Any) -> InputSpec:
        """This input with the casts of ``schema``'s ordinary columns (a TableSchema).

        float -> double, integer -> long, string -> string, boolean -> boolean. The ε and
        user id columns are left alone (public columns: a malformed cell must fail).
        """
        pairs = tuple(sorted((c.name, _SCHEMA_CASTS[c.type]) for c in schema.columns))
        return replace(self, schema_types=pairs)

    @property
    def resolved_format(self) -> Literal["csv", "parquet"]:
        """The file format (explicit, or from the path's suffix; directories are parquet)."""
        if self.format is not None:
            return self.format
        if self.path is not None and self.path.suffix.lower() in (".csv", ".txt"):
            return "csv"
        return "parquet"


@dataclass(frozen=True, slots=True)
class BudgetSpec:
    """Per-user total budgets and what happens when a release asks for more than is left.

    Attributes:
        default: total ε of every user (and of users whose budget column is null).
        column: a column of per-user total budgets (finite, 0 <= budget <= 2**20).
        policy: ``"cap"`` (ε := what remains, rounded down), ``"exclude"`` (ε := 0) or
            ``"fail"`` (refuse the release); see :mod:`hdp_spark.core.ledger`.
        charge: ``"effective"`` (default: charge the effective ε, e.g. min(ε, τ)) or
            ``"demand"`` (charge the capped demand).
        allocation: how each user's remaining budget is split among the job's releases:
            ``"sequential"`` (default: each release may use all that is left, first come
            first served), ``"equal"`` (each of the K releases at most 1/K of what was
            left when the job started) or ``"optimal"`` (the shares with the smallest
            weighted predicted error); see :mod:`hdp_spark.jobs.allocation`.

    Privacy:
        Budgets cap the ε vector of each release, which is public in this model: treat
        budgets as public too. With ``charge = "effective"`` and grouped releases, the
        remaining budget of a user depends on their group's τ, and a later release that caps
        the user reveals it through its ε levels; ``"demand"`` avoids this (see
        :mod:`hdp_spark.core.ledger`).
    """

    default: float | None = None
    column: str | None = None
    policy: BudgetPolicy = "cap"
    charge: ChargeMode = "effective"
    allocation: AllocationMethod = "sequential"

    def __post_init__(self) -> None:
        if self.default is None and self.column is None:
            _reject("[budget] default / column", "must give at least one of them", None)
        if self.default is not None:
            value = _check_positive("[budget] default", self.default)
            if value > BUDGET_MAX:
                _reject("[budget] default", f"must be <= {BUDGET_MAX:g}", self.default)
        if self.column is not None:
            _check_column("[budget] column", self.column)
        if self.policy not in POLICIES:
            _reject("[budget] policy", f"must be one of {', '.join(POLICIES)}", self.policy)
        if self.charge not in CHARGE_MODES:
            _reject("[budget] charge", f"must be one of {', '.join(CHARGE_MODES)}",
                        self.charge)
        if self.allocation not in ALLOCATIONS:
            _reject("[budget] allocation", f"must be one of {', '.join(ALLOCATIONS)}",
                    self.allocation)


@dataclass(frozen=True, slots=True)
class LedgerSpec:
    """Where the ledger lives.

    Attributes:
        path: SQLite file or parquet directory. Both engines use either backend, so one
            ledger serves pandas and Spark runs alike.
        backend: ``"sqlite"`` or ``"parquet"``; None chooses by the path (see
            :meth:`resolved_backend`).
        lock_timeout: seconds to wait for a concurrent run.
        compact_every: commits between two full snapshots of the per-user totals (both
            backends; docs/jobs.md, "Ledger storage format").
    """

    path: Path
    backend: LedgerBackend | None = None
    lock_timeout: float = 600.0
    compact_every: int = 20

    def __post_init__(self) -> None:
        if not isinstance(self.path, Path):
            _reject("[ledger] path", "must be a path", self.path)
        if self.backend is not None and self.backend not in ("sqlite", "parquet"):
            _reject("[ledger] backend", "must be 'sqlite' or 'parquet'", self.backend)
        if self.backend == "parquet" and self.path.suffix.lower() in SQLITE_SUFFIXES:
            _reject("[ledger] path", "must not end in .sqlite, .sqlite3 or .db with "
                    "`backend` = 'parquet' (a parquet ledger is a directory)", str(self.path))
        _check_positive("[ledger] lock_timeout", self.lock_timeout)
        if isinstance(self.compact_every, bool) or not isinstance(self.compact_every, int) \
                or self.compact_every < 1:
            _reject("[ledger] compact_every", "must be an integer >= 1", self.compact_every)


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """Where released values and the report go.

    Attributes:
        path: output directory (``<path>/<release id>/<commit id>/values.{parquet,json}``,
            ``<path>/manifest.json``, ``<path>/report.md``).
        report: write the Markdown report (with PNG plots when matplotlib is installed).
    """

    path: Path
    report: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.path, Path):
            _reject("[output] path", "must be a path", self.path)
        if not isinstance(self.report, bool):
            _reject("[output] report", "must be true or false", self.report)


@dataclass(frozen=True, slots=True)
class AggregatorEntry:
    """One aggregator of a release: its registered kind, its validated spec and the unit
    of its values (``unit = "years"``: for the report's words and axes only; none claimed
    when absent)."""

    kind: str
    spec: Any
    unit: str | None = None


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

    def __post_init__(self) -> None:
        _check_name("[[releases]] id", self.id)
        where = f"[[releases]] id = {self.id!r}"
        if not self.aggregators:
            _reject(f"{where}: aggregators", "must list at least one aggregator", [])
        for col in self.by:
            _check_column(f"{where}: by", col)
        if len(set(self.by)) != len(self.by):
            _reject(f"{where}: by", "must not repeat a column", list(self.by))
        if self.selection is not None:
            from hdp_spark.jobs.selection import check_selection_release

            check_selection_release(where, self)
        elif bool(self.by) != (self.keys is not None):
            _reject(f"{where}: keys", "is required with `by` (the public key set, or "
                        "`[releases.select_keys]`) and not allowed without it", self.keys)
        w = self.weight
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) \
                or w < 0:
            _reject(f"{where}: weight", "must be a finite number >= 0", w)
        names = [entry_name(a) for a in self.aggregators]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            _reject(f"{where}: aggregators", "must have distinct output names (set "
                        "`alias`)", sorted(dup))


def entry_name(entry: AggregatorEntry) -> str:
    """Output column prefix of an aggregator entry."""
    from hdp_spark.jobs.registry import get_kind

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
        _check_name("[job] name", self.name)
        if self.engine not in ENGINES:
            _reject("[job] engine", f"must be one of {', '.join(ENGINES)}", self.engine)
        if not self.releases:
            _reject("[[releases]]", "must define at least one release", [])
        ids = [r.id for r in self.releases]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            _reject("[[releases]] id", "must be unique within the job", dup)
        if self.input.table is not None and self.engine != "spark":
            _reject("[input] table", "needs engine = 'spark' (pandas reads files)",
                        self.input.table)
        if self.unsafe_seed is not None and not isinstance(self.unsafe_seed, str):
            _reject("[job] unsafe_seed", "must be a string", self.unsafe_seed)
        from hdp_spark.jobs.registry import get_kind

        for rel in self.releases:
            for a in rel.aggregators:
                user = get_kind(a.kind).user_column(a.spec)
                if user is not None and user != self.input.user_id:
                    _reject(f"[[releases]] id = {rel.id!r}: {a.kind} user",
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
            _reject("[ledger] path", "must be a SQLite file (backend 'sqlite'), not a "
                    "directory", str(path))
        if backend == "parquet" and path.exists() and not path.is_dir():
            _reject("[ledger] path", "must be a directory (backend 'parquet'), not a file",
                    str(path))

    def with_engine(self, engine: EngineName) -> JobSpec:
        """This job run on another engine (a table input needs Spark)."""
        return replace(self, engine=engine)


# -- parsing -------------------------------------------------------------------------------

_SECTIONS = {"job", "input", "budget", "ledger", "output", "releases", "spark"}


def _table(data: Mapping[str, Any], name: str, allowed: set[str]) -> dict[str, Any]:
    section = data.get(name, {})
    if not isinstance(section, Mapping):
        _reject(f"[{name}]", "must be a table", type(section).__name__)
    unknown = sorted(set(section) - allowed)
    if unknown:
        _reject(f"[{name}]", f"accepts only {', '.join(sorted(allowed))}",
                    unknown)
    return dict(section)


def _path(base: Path, setting: str, value: object) -> Path:
    if not isinstance(value, str) or not value:
        _reject(setting, "must be a non-empty path", value)
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def _release(
    raw: object, index: int, default_eps: str | None, user_id: str = "user_id"
) -> ReleaseSpec:
    from hdp_spark.jobs.registry import get_kind

    where = f"[[releases]] #{index + 1}"
    if not isinstance(raw, Mapping):
        _reject(where, "must be a table", type(raw).__name__)
    unknown = sorted(set(raw) - {"id", "by", "keys", "aggregators", "weight", "select_keys"})
    if unknown:
        _reject(where, "accepts only id, by, keys, select_keys, aggregators, weight", unknown)
    rid = raw.get("id")
    _check_name(f"{where}: id", rid)
    where = f"[[releases]] id = {rid!r}"
    by_raw = raw.get("by", [])
    by = (by_raw,) if isinstance(by_raw, str) else by_raw
    if not isinstance(by, list | tuple) or not all(isinstance(c, str) and c for c in by):
        _reject(f"{where}: by", "must be a column name or a list of column names", by_raw)
    keys = None
    if "keys" in raw:
        raw_keys = raw["keys"]
        if not isinstance(raw_keys, list):
            _reject(f"{where}: keys", "must be a list", type(raw_keys).__name__)
        try:
            keys = normalize_keys(raw_keys, len(by) or 1)
        except HdpError as exc:
            msg = f"{where}: {exc}"
            raise JobError(msg) from exc
    aggs_raw = raw.get("aggregators", [])
    if not isinstance(aggs_raw, list):
        _reject(f"{where}: aggregators", "must be an array of tables", aggs_raw)
    entries = []
    for j, agg in enumerate(aggs_raw):
        at = f"{where}: aggregator #{j + 1}"
        if not isinstance(agg, Mapping) or not isinstance(agg.get("kind"), str):
            _reject(f"{at}: kind", "must name an aggregator kind", agg)
        kind = get_kind(str(agg["kind"]), setting=f"{at}: kind")
        params = {k: v for k, v in agg.items() if k not in ("kind", "unit")}
        unit = agg.get("unit")
        if unit is not None and (not isinstance(unit, str) or not unit.strip()):
            _reject(f"{at}: unit", "must be a non-empty text (e.g. \"years\")", unit)
        if "eps" not in params and default_eps is not None:
            params["eps"] = default_eps
        if kind.unit == "user" and "user" not in params:
            params["user"] = user_id
        try:
            spec = kind.build(params)
        except HdpError as exc:
            msg = f"{at} ({kind.name}): {exc}"
            raise JobError(msg) from exc
        except TypeError as exc:
            msg = f"{at} ({kind.name}): unknown or missing parameter ({exc})."
            raise JobError(msg) from exc
        entries.append(AggregatorEntry(kind.name, spec, unit))
    _check_kinds(where, entries, tuple(by))
    selection = None
    if "select_keys" in raw:
        from hdp_spark.jobs.selection import parse_select_keys

        selection = parse_select_keys(where, raw["select_keys"])
    return ReleaseSpec(id=str(rid), aggregators=tuple(entries), by=tuple(by), keys=keys,
                       weight=raw.get("weight", 1.0), selection=selection)


def _check_kinds(where: str, entries: list[AggregatorEntry], by: tuple[str, ...]) -> None:
    """Rules between a release's kinds (see ``docs/jobs.md``, "Charging rules per kind").

    A kind with one global ε per person (``unit = "person"``: heavy hitters, attribute
    histograms) has no per-row ε to cap: its release may hold only such kinds, and no
    ``by`` (its output is not per group).
    """
    from hdp_spark.jobs.registry import get_kind

    kinds = [get_kind(e.kind) for e in entries]
    for kind in kinds:
        if by and not kind.grouped:
            _reject(f"{where}: by", f"is not allowed with kind {kind.name!r} (it releases "
                    "one global table, not one row per public key)", list(by))
    person = [k.name for k in kinds if k.unit == "person"]
    if person and len(person) != len(kinds):
        _reject(f"{where}: aggregators", "must not mix kinds with one global ε per person "
                f"({', '.join(sorted(set(person)))}) with kinds that read a per-row ε column "
                "(the budget rule caps per-row ε; a global ε cannot be capped per row): put "
                "them in separate releases", sorted({k.name for k in kinds}))


def parse_job(data: Mapping[str, Any], base_dir: Path, source: Path | None = None) -> JobSpec:
    """Build a :class:`JobSpec` from a parsed TOML document.

    Args:
        data: the document (``tomllib.load`` output).
        base_dir: directory that relative paths are resolved against.
        source: the job file, for messages and the report.

    Raises:
        JobError: a setting breaks its rule.
    """
    unknown = sorted(set(data) - _SECTIONS)
    if unknown:
        _reject("job file", f"accepts only the sections {', '.join(sorted(_SECTIONS))}",
                    unknown)
    job = _table(data, "job", {"name", "engine", "description", "unsafe_seed"})
    inp = _table(data, "input", {"path", "table", "format", "schema", "user_id", "eps",
                                 "types", "fingerprint"})
    bud = _table(data, "budget", {"default", "column", "policy", "charge", "allocation"})
    led = _table(data, "ledger", {"path", "backend", "lock_timeout", "compact_every"})
    out = _table(data, "output", {"path", "report"})
    spark = data.get("spark", {})
    if not isinstance(spark, Mapping):
        _reject("[spark]", "must be a table of Spark settings", spark)

    types_raw = inp.pop("types", {})
    if not isinstance(types_raw, Mapping):
        _reject("[input] types", "must be a table of column = type", types_raw)
    input_spec = InputSpec(
        path=_path(base_dir, "[input] path", inp["path"]) if "path" in inp else None,
        table=inp.get("table"),
        format=inp.get("format"),
        schema=_path(base_dir, "[input] schema", inp["schema"]) if "schema" in inp else None,
        user_id=inp.get("user_id", "user_id"),
        eps=inp.get("eps"),
        types=tuple(sorted((str(k), v) for k, v in types_raw.items())),
        fingerprint=inp.get("fingerprint", "content"),
    )
    if "path" not in led:
        _reject("[ledger] path", "is required", None)
    if "path" not in out:
        _reject("[output] path", "is required", None)
    releases_raw = data.get("releases", [])
    if not isinstance(releases_raw, list):
        _reject("[[releases]]", "must be an array of tables", releases_raw)
    releases = tuple(
        _release(r, i, input_spec.eps, input_spec.user_id) for i, r in enumerate(releases_raw)
    )
    if "name" not in job:
        _reject("[job] name", "is required", None)
    return JobSpec(
        name=job["name"],
        engine=job.get("engine", "pandas"),
        description=str(job.get("description", "")),
        unsafe_seed=job.get("unsafe_seed"),
        input=input_spec,
        budget=BudgetSpec(
            default=bud.get("default"), column=bud.get("column"),
            policy=bud.get("policy", "cap"), charge=bud.get("charge", "effective"),
            allocation=bud.get("allocation", "sequential"),
        ),
        ledger=LedgerSpec(
            path=_path(base_dir, "[ledger] path", led["path"]),
            backend=led.get("backend"),
            lock_timeout=led.get("lock_timeout", 600.0),
            compact_every=led.get("compact_every", 20),
        ),
        output=OutputSpec(
            path=_path(base_dir, "[output] path", out["path"]), report=out.get("report", True)
        ),
        releases=releases,
        spark_conf=tuple(sorted((str(k), str(v)) for k, v in spark.items())),
        source=source,
    )


def load_job(path: str | Path, *, engine: EngineName | None = None) -> JobSpec:
    """Load and validate a TOML job file.

    Args:
        path: the job file. Relative paths inside it are resolved against its directory.
        engine: run on this engine instead of the file's (``"pandas"`` or ``"spark"``).

    Raises:
        JobError: the file is missing, is not valid TOML, or a setting breaks its rule.
    """
    p = Path(path)
    try:
        with p.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        _reject("job file", "must exist", str(p))
    except tomllib.TOMLDecodeError as exc:
        msg = f"`job file` {p} is not valid TOML: {exc}."
        raise JobError(msg) from exc
    job = parse_job(data, p.resolve().parent, source=p.resolve())
    if engine is not None:
        if engine not in ENGINES:
            _reject("--engine", f"must be one of {', '.join(ENGINES)}", engine)
        job = job.with_engine(engine)
    return job
