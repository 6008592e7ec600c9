"""The settings of a job file's sections: ``[input]``, ``[budget]``, ``[ledger]``,
``[output]``, validated and frozen (the releases: :mod:`hdp_spark.jobs.job_spec`).

Every rule is checked when the job is loaded; errors name the setting as ``[section] key``,
the rule and the value written in the file.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, NoReturn, get_args

from hdp_spark.core.ledger import (
    BUDGET_MAX,
    CHARGE_MODES,
    POLICIES,
    BudgetPolicy,
    ChargeMode,
)
from hdp_spark.errors import JobError

__all__ = [
    "ALLOCATIONS",
    "COLUMN_TYPES",
    "ENGINES",
    "SQLITE_SUFFIXES",
    "AllocationMethod",
    "BudgetSpec",
    "ColumnType",
    "EngineName",
    "InputSpec",
    "LedgerBackend",
    "LedgerSpec",
    "OutputSpec",
    "check_column",
    "check_name",
    "check_witness_apart",
    "reject",
    "reject_unknown",
]

AllocationMethod = Literal["sequential", "equal", "optimal"]
ALLOCATIONS: tuple[str, ...] = get_args(AllocationMethod)


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


def reject(setting: str, rule: str, value: object) -> NoReturn:
    """Raise the JobError of a setting that breaks its rule.

    Privacy:
        The message shows the setting's value as written in the job file (public), never data.
    """
    msg = f"`{setting}` {rule}; got {value!r}."
    raise JobError(msg)


def reject_unknown(where: str, keys: Iterable[str], allowed: Iterable[str]) -> None:
    """Raise the JobError of a table with a key outside ``allowed``, naming the key as
    typed and the closest valid key (``unknown key `colum` in [x] (did you mean `column`?)``).

    Privacy:
        Names keys of the job file (public), never data.
    """
    valid = sorted(set(allowed))
    unknown = sorted(set(keys) - set(valid))
    if not unknown:
        return
    parts = []
    for key in unknown:
        close = difflib.get_close_matches(key, valid, n=1)
        parts.append(f"`{key}`" + (f" (did you mean `{close[0]}`?)" if close else ""))
    noun = "key" if len(unknown) == 1 else "keys"
    msg = f"unknown {noun} {', '.join(parts)} in {where}; valid keys: {', '.join(valid)}."
    raise JobError(msg)


def check_name(setting: str, value: object) -> None:
    """Raise unless ``value`` is a name (letters, digits, ``_``, ``.``, ``-``).

    Privacy:
        Checks a public name of the job file.
    """
    if not isinstance(value, str) or not _NAME.match(value):
        reject(setting, "must be a name of letters, digits, '_', '.' or '-' "
                             "(starting with a letter or digit, at most 128 characters)", value)


def check_column(setting: str, value: object) -> None:
    """Raise unless ``value`` is a non-empty column name.

    Privacy:
        Checks a column name of the job file (public).
    """
    if not isinstance(value, str) or not value:
        reject(setting, "must be a non-empty column name", value)


def _check_positive(setting: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 \
            or not math.isfinite(value):
        reject(setting, "must be a finite number > 0", value)
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
        expectations: also run the schema's great-expectations suite (the ``quality``
            extra) into the operator's data-quality report. Off by default: the schema's
            own vectorized validation enforces every rule, and importing great-expectations
            alone takes seconds.

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
    expectations: bool = False

    def __post_init__(self) -> None:
        if (self.path is None) == (self.table is None):
            reject("[input] path / table", "must give exactly one of them",
                        (str(self.path) if self.path else None, self.table))
        if self.table is not None and (not isinstance(self.table, str) or not self.table):
            reject("[input] table", "must be a non-empty table name", self.table)
        if self.format is not None and self.format not in ("csv", "parquet"):
            reject("[input] format", "must be 'csv' or 'parquet'", self.format)
        check_column("[input] user_id", self.user_id)
        if self.eps is not None:
            check_column("[input] eps", self.eps)
        for setting, pairs in (("[input.types]", self.types),
                               ("[input] schema", self.schema_types)):
            for col, kind in pairs:
                check_column(f"{setting} column", col)
                if kind not in COLUMN_TYPES:
                    reject(f"{setting} {col}", f"must be one of {', '.join(COLUMN_TYPES)}",
                            kind)
        if self.fingerprint not in ("content", "stat"):
            reject("[input] fingerprint", "must be 'content' or 'stat'", self.fingerprint)
        if not isinstance(self.expectations, bool):
            reject("[input] expectations", "must be true or false", self.expectations)
        if self.expectations and self.schema is None:
            reject("[input] expectations", "needs `[input] schema` (the suite is built from "
                   "it)", self.expectations)

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
            reject("[budget] default / column", "must give at least one of them", None)
        if self.default is not None:
            value = _check_positive("[budget] default", self.default)
            if value > BUDGET_MAX:
                reject("[budget] default", f"must be <= {BUDGET_MAX:g}", self.default)
        if self.column is not None:
            check_column("[budget] column", self.column)
        if self.policy not in POLICIES:
            reject("[budget] policy", f"must be one of {', '.join(POLICIES)}", self.policy)
        if self.charge not in CHARGE_MODES:
            reject("[budget] charge", f"must be one of {', '.join(CHARGE_MODES)}",
                        self.charge)
        if self.allocation not in ALLOCATIONS:
            reject("[budget] allocation", f"must be one of {', '.join(ALLOCATIONS)}",
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
        compact_every: at most this many commits between two full snapshots of the
            per-user totals (both backends also write one once the commits since the last
            hold as many charges as there are users; docs/jobs.md, "Ledger storage
            format").
        witness: the rollback witness file (:mod:`hdp_spark.ledger.witness`), kept apart
            from the ledger and its backups; None: a rollback cannot be detected (a run says
            so at WARNING).
    """

    path: Path
    backend: LedgerBackend | None = None
    lock_timeout: float = 600.0
    compact_every: int = 20
    witness: Path | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, Path):
            reject("[ledger] path", "must be a path", self.path)
        if self.backend is not None and self.backend not in ("sqlite", "parquet"):
            reject("[ledger] backend", "must be 'sqlite' or 'parquet'", self.backend)
        if self.backend == "parquet" and self.path.suffix.lower() in SQLITE_SUFFIXES:
            reject("[ledger] path", "must not end in .sqlite, .sqlite3 or .db with "
                    "`backend` = 'parquet' (a parquet ledger is a directory)", str(self.path))
        _check_positive("[ledger] lock_timeout", self.lock_timeout)
        if isinstance(self.compact_every, bool) or not isinstance(self.compact_every, int) \
                or self.compact_every < 1:
            reject("[ledger] compact_every", "must be an integer >= 1", self.compact_every)
        if self.witness is not None:
            if not isinstance(self.witness, Path):
                reject("[ledger] witness", "must be a path", self.witness)
            check_witness_apart(self.witness, self.path)


def check_witness_apart(
    witness: Path, ledger: Path, setting: str = "[ledger] witness"
) -> None:
    """Raise unless the rollback witness ``witness`` lies outside the ledger ``ledger``
    (the one rule, for the job file's ``[ledger] witness`` and the CLI's ``--witness``,
    named ``setting`` in the error).

    Privacy:
        Checks public paths only.
    """
    w, led = witness.resolve(), ledger.resolve()
    if w == led or led in w.parents:
        reject(setting, "must lie outside the ledger (a copy of the ledger must not carry "
               "its witness)", str(witness))


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
            reject("[output] path", "must be a path", self.path)
        if not isinstance(self.report, bool):
            reject("[output] report", "must be true or false", self.report)
