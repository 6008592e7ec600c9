"""Row rules, the validation report, and what a release does with it (engine-agnostic).

Each engine counts the violations of every :class:`Rule` in ONE aggregate pass and returns
a :class:`ValidationReport`: counts per rule, never data. The report serves two readers:

* the trusted pipeline operator (every rule: data quality of values, bounds, domains);
* the release path, through :meth:`ValidationReport.raise_for_release`, which raises only
  for *blocking* rules. Blocking rules look at public inputs only: the ε column, the user id
  column and the row count, all public in this model. Rules on values never block a release:
  raising because one row's value is bad would reveal that row (DESIGN.md, "An error is an
  output too"); releases clamp, impute or map such values instead.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from hdp_spark.errors import (
    DuplicateUserError,
    EpsilonColumnError,
    ParameterError,
    SchemaError,
    UserIdError,
)

__all__ = [
    "Rule",
    "RuleKind",
    "RuleRole",
    "Scope",
    "ValidationReport",
    "type_matches",
]

Scope = Literal["all", "release"]


class RuleKind(enum.Enum):
    """What a rule counts; each engine renders every kind as one native expression."""

    MISSING = "missing"  # null, or NaN in a floating-point column
    NEGATIVE = "negative"  # x < 0 (includes -inf)
    ZERO = "zero"  # x == 0
    POSINF = "posinf"  # x == +inf
    EPS_RANGE = "eps_range"  # finite x > 0 outside [min, max] (params: min, max; None = open)
    NONFINITE = "nonfinite"  # x is +inf or -inf
    BOUNDS = "bounds"  # finite x outside [lower, upper] (params: lower, upper)
    DOMAIN = "domain"  # non-null x not in the domain (params: the domain values)
    DUPLICATE = "duplicate"  # rows beyond the first of each non-null id
    EPS_VARIES = "eps_varies"  # extra distinct ε per user (params: the id column)
    MIN_ROWS = "min_rows"  # max(0, min_rows - n) (params: min_rows)


RuleRole = Literal["epsilon", "user_id", "table", "value"]
"""Which input a rule reads; all but ``value`` are public in this model and block releases."""

_ERRORS: dict[str, type[SchemaError]] = {
    "epsilon": EpsilonColumnError,
    "user_id": UserIdError,
    "table": SchemaError,
}


@dataclass(frozen=True, slots=True)
class Rule:
    """One countable rule of a schema.

    Attributes:
        column: the column it checks (``"table"`` for table-level rules).
        name: short rule name, unique per column (``not_null``, ``in_bounds``...).
        kind: what the engines count.
        role: which input it reads; rules on ``epsilon``, ``user_id`` and ``table`` (public
            in this model) block a release, rules on ``value`` columns never do.
        description: what must hold, for messages and reports (no data in it).
        params: the rule's parameters, all from the schema (public).
    """

    column: str
    name: str
    kind: RuleKind
    role: RuleRole
    description: str
    params: tuple[Any, ...] = ()

    @property
    def blocking(self) -> bool:
        """Whether a violation blocks a release (rules on public inputs only)."""
        return self.role != "value"

    @property
    def error(self) -> type[SchemaError]:
        """The error a release raises when this rule is violated."""
        if self.kind is RuleKind.DUPLICATE:
            return DuplicateUserError
        return _ERRORS.get(self.role, SchemaError)

    @property
    def key(self) -> str:
        """``"<column>:<rule>"``, the key of this rule in a report."""
        return f"{self.column}:{self.name}"


def type_matches(declared: str, observed: str) -> bool:
    """Whether a column of observed kind (``float``, ``integer``, ``string``, ``boolean``,
    ``other``) satisfies a declared type. ``float`` accepts integer columns too."""
    if declared == "float":
        return observed in ("float", "integer")
    return declared == observed


@dataclass(frozen=True, slots=True)
class ValidationReport:
    """Counts of rule violations of one table against one schema; holds no data.

    Attributes:
        schema: the schema's name.
        engine: ``"pandas"`` or ``"spark"``.
        scope: ``"all"`` (every rule) or ``"release"`` (blocking rules only).
        rows: number of rows in the table (public in this model).
        rules: the rules checked, in schema order.
        counts: violations of each rule (same order as ``rules``).
    """

    schema: str
    engine: str
    scope: Scope
    rows: int
    rules: tuple[Rule, ...]
    counts: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "rules", tuple(self.rules))
        object.__setattr__(self, "counts", tuple(int(c) for c in self.counts))
        if len(self.rules) != len(self.counts):
            msg = f"`counts` must have one entry per rule, got {len(self.counts)}."
            raise ParameterError(msg)
        if isinstance(self.rows, bool) or not isinstance(self.rows, int) or self.rows < 0:
            msg = f"`rows` must be a count >= 0, got {self.rows!r}."
            raise ParameterError(msg)
        if any(c < 0 for c in self.counts):
            msg = "`counts` must be >= 0."
            raise ParameterError(msg)

    def _pairs(self) -> list[tuple[Rule, int]]:
        return list(zip(self.rules, self.counts, strict=True))

    @property
    def violations(self) -> Mapping[str, int]:
        """Rule key (``"<column>:<rule>"``) -> count, for every rule with violations."""
        return MappingProxyType({r.key: c for r, c in self._pairs() if c})

    @property
    def all_counts(self) -> Mapping[str, int]:
        """Rule key -> count for every rule checked, zeros included."""
        return MappingProxyType({r.key: c for r, c in self._pairs()})

    @property
    def blocking(self) -> Mapping[str, int]:
        """Violations of the rules that block a release (ε, user id, row count)."""
        return MappingProxyType(
            {r.key: c for r, c in self._pairs() if c and r.blocking}
        )

    @property
    def ok(self) -> bool:
        """True when no rule checked has a violation (the data-quality verdict).

        Never gate a release on this: value rules depend on private data. Releases call
        :meth:`raise_for_release`, which looks at public columns only.
        """
        return not any(self.counts)

    @property
    def release_ok(self) -> bool:
        """True when no blocking rule has a violation."""
        return not self.blocking

    def raise_for_release(self) -> None:
        """Raise if a blocking rule has violations; do nothing otherwise.

        The error class is that of the first violated blocking rule in schema order
        (:class:`~hdp_spark.errors.EpsilonColumnError` for ε rules,
        :class:`~hdp_spark.errors.UserIdError` / :class:`~hdp_spark.errors.DuplicateUserError`
        for the user id, :class:`~hdp_spark.errors.SchemaError` for the row count); the
        message lists every violated blocking rule with its column, name and count.

        Raises:
            SchemaError: (or a subclass) naming column, rule and count, never values.
        """
        bad = [(r, c) for r, c in self._pairs() if c and r.blocking]
        if not bad:
            return
        first = bad[0][0]
        lines = [
            f"  - column `{r.column}`, rule `{r.name}` ({r.description}): {c} violation(s)."
            if r.role != "table"
            else f"  - rule `{r.name}` ({r.description}): the table has {self.rows} row(s)."
            for r, c in bad
        ]
        msg = (
            f"The table breaks {len(bad)} release rule(s) of schema `{self.schema}`; no "
            "release was made and no budget was spent:\n" + "\n".join(lines)
            + "\n\nHint: these rules read public columns only (ε, user id, row count); fix "
            "the input upstream."
        )
        raise first.error(msg)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready plain data (counts only)."""
        return {
            "schema": self.schema,
            "engine": self.engine,
            "scope": self.scope,
            "rows": self.rows,
            "ok": self.ok,
            "release_ok": self.release_ok,
            "violations": dict(self.violations),
            "rules": [
                {"rule": r.key, "column": r.column, "name": r.name, "blocking": r.blocking,
                 "count": c, "description": r.description}
                for r, c in self._pairs()
            ],
        }


def number(name: str, value: object) -> float:
    """``value`` as a float; a ParameterError naming ``name`` unless it is an int or float
    (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"`{name}` must be a number, got {value!r}."
        raise ParameterError(msg)
    return float(value)
