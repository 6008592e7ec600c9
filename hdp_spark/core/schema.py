"""Declarative schemas of ε-carrying tables (engine-agnostic model).

A :class:`TableSchema` says what a table that releases read must look like: its ε column
(which ε values the platform accepts), its user id column (whether one row per person is
required), and its other columns (types, nullability, public bounds, categorical domains),
declared in :mod:`hdp_spark.core.columns` (re-exported here). The model is plain frozen
dataclasses validated on construction; :meth:`TableSchema.rules`
turns it into the list of row rules (:class:`~hdp_spark.core.validation.Rule`) that every
engine counts in one aggregate pass.

Files are parsed by :func:`hdp_spark.schema.load_schema` into :meth:`TableSchema.from_dict`,
which rejects unknown keys (a misspelt safety setting must not be silently ignored).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hdp_spark.core.columns import (
    COLUMN_TYPES,
    ColumnSchema,
    ColumnType,
    EpsilonColumn,
    UserIdColumn,
    column_rules,
)
from hdp_spark.core.validation import Rule, RuleKind, Scope, type_matches
from hdp_spark.errors import EpsilonColumnError, ParameterError, SchemaError, UserIdError

__all__ = [
    "COLUMN_TYPES",
    "ColumnSchema",
    "ColumnType",
    "EpsilonColumn",
    "TableSchema",
    "UserIdColumn",
]

SCHEMA_FORMAT_VERSION = 1


def _keys(path: str, data: object, allowed: Sequence[str], required: Sequence[str]) -> None:
    if not isinstance(data, Mapping):
        msg = f"`{path}` must be a mapping, got {type(data).__name__}."
        raise ParameterError(msg)
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        msg = f"`{path}` has unknown key(s) {unknown}; allowed: {', '.join(allowed)}."
        raise ParameterError(msg)
    missing = [k for k in required if k not in data]
    if missing:
        msg = f"`{path}` must set {', '.join(missing)}."
        raise ParameterError(msg)


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A declarative schema of one ε-carrying table.

    Attributes:
        name: schema name (used in messages and reports).
        epsilon: the ε column and which ε values the platform accepts.
        user_id: the user id column, or None when the table has none.
        columns: every other column the releases may read.
        min_rows: fewer rows than this block a release (n is public). 0 disables the rule.
        description: free text for the operator.

    Raises:
        ParameterError: a field breaks its rule (the message names the field path).
    """

    name: str
    epsilon: EpsilonColumn
    user_id: UserIdColumn | None = None
    columns: tuple[ColumnSchema, ...] = field(default=())
    min_rows: int = 0
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            msg = f"`name` must be a non-empty string, got {self.name!r}."
            raise ParameterError(msg)
        if not isinstance(self.epsilon, EpsilonColumn):
            msg = f"`epsilon` must be an EpsilonColumn, got {type(self.epsilon).__name__}."
            raise ParameterError(msg)
        if self.user_id is not None and not isinstance(self.user_id, UserIdColumn):
            msg = f"`user_id` must be a UserIdColumn or None, got {type(self.user_id).__name__}."
            raise ParameterError(msg)
        object.__setattr__(self, "columns", tuple(self.columns))
        if not all(isinstance(c, ColumnSchema) for c in self.columns):
            msg = "`columns` must hold ColumnSchema objects only."
            raise ParameterError(msg)
        names = [c.name for c in self.columns] + [self.epsilon.column]
        if self.user_id is not None:
            names.append(self.user_id.column)
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            msg = (
                f"every column must be declared once (the ε and user id columns only in their "
                f"own sections); repeated: {repeated}."
            )
            raise ParameterError(msg)
        if isinstance(self.min_rows, bool) or not isinstance(self.min_rows, int):
            msg = f"`min_rows` must be an integer, got {self.min_rows!r}."
            raise ParameterError(msg)
        if self.min_rows < 0:
            msg = f"`min_rows` must be >= 0, got {self.min_rows!r}."
            raise ParameterError(msg)
        if not isinstance(self.description, str):
            msg = f"`description` must be text, got {type(self.description).__name__}."
            raise ParameterError(msg)

    # -- lookup -------------------------------------------------------------------------

    def column(self, name: str) -> ColumnSchema | None:
        """The declared ordinary column ``name`` (None for ε, user id or undeclared)."""
        for col in self.columns:
            if col.name == name:
                return col
        return None

    @property
    def column_names(self) -> tuple[str, ...]:
        """Every declared column: ε, user id (if any), then the ordinary columns."""
        head = [self.epsilon.column]
        if self.user_id is not None:
            head.append(self.user_id.column)
        return (*head, *(c.name for c in self.columns))

    def declared_type(self, name: str) -> str | None:
        """Declared type of any column (``float`` for ε), or None if undeclared."""
        if name == self.epsilon.column:
            return "float"
        if self.user_id is not None and name == self.user_id.column:
            return self.user_id.type
        col = self.column(name)
        return col.type if col is not None else None

    def public_columns(self) -> tuple[str, ...]:
        """Columns whose rules may block a release: ε and the user id (public here)."""
        if self.user_id is None:
            return (self.epsilon.column,)
        return (self.epsilon.column, self.user_id.column)

    def check_columns(
        self,
        observed: Mapping[str, tuple[str, str]],
        scope: Scope = "all",
        integer_hint: str = "",
    ) -> None:
        """Raise if a declared column is missing or has the wrong type (table metadata).

        Args:
            observed: the table's columns, name -> (kind, dtype text), where kind is
                ``float``, ``integer``, ``string``, ``boolean`` or ``other``.
            scope: ``"all"`` checks every declared type; ``"release"`` the types of the ε
                and user id columns only (presence is checked for every column).
            integer_hint: appended when an integer column arrives as float.

        Raises:
            SchemaError: naming the column and its dtype; :class:`EpsilonColumnError` for the
                ε column, :class:`UserIdError` for the user id column.
        """
        for name in self.column_names:
            if name not in observed:
                msg = f"Column `{name}` declared in schema `{self.name}` is not in the table."
                raise SchemaError(msg)
        for name in self.column_names if scope == "all" else self.public_columns():
            declared = self.declared_type(name)
            kind, dtype = observed[name]
            if declared is None or type_matches(declared, kind):
                continue
            error: type[SchemaError] = SchemaError
            if name == self.epsilon.column:
                error = EpsilonColumnError
            elif self.user_id is not None and name == self.user_id.column:
                error = UserIdError
            hint = f" {integer_hint}" if integer_hint and (declared, kind) == (
                "integer", "float") else ""
            msg = (
                f"Column `{name}` must have type {declared} (schema `{self.name}`), "
                f"got {dtype}.{hint}"
            )
            raise error(msg)

    def check_reads(self, specs: Sequence[object], by: Sequence[str]) -> None:
        """Check that a release reads only columns this schema declares.

        Args:
            specs: the aggregators; an attribute ``eps`` must be the schema's ε column, and
                every column a spec reads (``column``, ``user``, ``report``, ``index``,
                ``sign``, ``privacy_unit``, the heavy hitters' ``cols``) a declared column
                (each aggregator checks the type it needs).
            by: group-by columns, which must be declared.

        Raises:
            ParameterError: an aggregator reads another ε column than the schema's.
            SchemaError: a column the release reads is not declared.
        """
        for spec in specs:
            eps = getattr(spec, "eps", None)
            if isinstance(eps, str) and eps != self.epsilon.column:
                msg = (
                    f"`eps` of the aggregator on {getattr(spec, 'column', '?')!r} must be the "
                    f"ε column of schema `{self.name}` ({self.epsilon.column!r}), got {eps!r}."
                )
                raise ParameterError(msg)
            read = [getattr(spec, a, None) for a in ("column", "user", "report", "index",
                                                      "sign", "privacy_unit")]
            cols = getattr(spec, "cols", ())
            read += list(cols) if isinstance(cols, tuple) else []
            for column in read:
                if isinstance(column, str) and self.declared_type(column) is None:
                    msg = f"Column `{column}` is not declared in schema `{self.name}`."
                    raise SchemaError(msg)
        for col in by:
            if self.declared_type(col) is None:
                msg = f"Group column `{col}` is not declared in schema `{self.name}`."
                raise SchemaError(msg)

    # -- rules --------------------------------------------------------------------------

    def rules(self, scope: Scope = "all") -> tuple[Rule, ...]:
        """The row rules of this schema, in a fixed order.

        Args:
            scope: ``"all"`` for the data-quality report, ``"release"`` for the rules that
                block a release only (rules on public columns: ε, user id, row count).
        """
        if scope not in ("all", "release"):
            msg = f"`scope` must be 'all' or 'release', got {scope!r}."
            raise ParameterError(msg)
        eps = self.epsilon
        e = eps.column
        out = [
            Rule(e, "not_null", RuleKind.MISSING, "epsilon", "ε must not be null or NaN"),
            Rule(e, "non_negative", RuleKind.NEGATIVE, "epsilon",
                 "ε must not be negative or -inf"),
        ]
        if not eps.allow_zero:
            out.append(Rule(e, "positive", RuleKind.ZERO, "epsilon",
                            "ε must be > 0 (this schema does not accept ε = 0)"))
        if not eps.allow_public:
            out.append(Rule(e, "finite", RuleKind.POSINF, "epsilon",
                            "ε must be finite (this schema does not accept public rows, +inf)"))
        if eps.min is not None or eps.max is not None:
            lo = "0" if eps.min is None else repr(eps.min)
            hi = "inf" if eps.max is None else repr(eps.max)
            out.append(Rule(e, "in_range", RuleKind.EPS_RANGE, "epsilon",
                            f"finite positive ε must lie in [{lo}, {hi}]", (eps.min, eps.max)))
        uid = self.user_id
        if uid is not None:
            u = uid.column
            out.append(Rule(u, "not_null", RuleKind.MISSING, "user_id",
                            "user ids must not be null"))
            if uid.unique:
                # One row per id implies one ε per user: `constant_per_user` is not counted
                # separately, which keeps the Spark pass at ONE distinct aggregate.
                out.append(Rule(u, "unique", RuleKind.DUPLICATE, "user_id",
                                "one row per user id (count: rows beyond the first of each id)"))
            else:
                out.append(Rule(e, "constant_per_user", RuleKind.EPS_VARIES, "epsilon",
                                f"ε must be the same on every row of a `{u}` (count: extra "
                                "distinct ε values over all users)", (u,)))
        if self.min_rows:
            out.append(Rule("table", "min_rows", RuleKind.MIN_ROWS, "table",
                            f"the table must have at least {self.min_rows} row(s) "
                            "(count: rows missing)", (self.min_rows,)))
        if scope == "all":
            for col in self.columns:
                out.extend(column_rules(col))
        return tuple(out)

    # -- (de)serialization --------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TableSchema:
        """Build a schema from the parsed contents of a schema file (see docs/schemas.md)."""
        _keys("schema", data, ("version", "name", "description", "min_rows", "epsilon",
                               "user_id", "columns"), ("name", "epsilon"))
        version = data.get("version", SCHEMA_FORMAT_VERSION)
        if version != SCHEMA_FORMAT_VERSION:
            msg = f"`version` must be {SCHEMA_FORMAT_VERSION}, got {version!r}."
            raise ParameterError(msg)
        eps_data = data["epsilon"]
        _keys("epsilon", eps_data, ("column", "allow_zero", "allow_public", "min", "max"),
              ("column",))
        epsilon = EpsilonColumn(**dict(eps_data))
        user_id = None
        if data.get("user_id") is not None:
            _keys("user_id", data["user_id"], ("column", "type", "unique"), ("column",))
            user_id = UserIdColumn(**dict(data["user_id"]))
        columns: list[ColumnSchema] = []
        raw_columns = data.get("columns") or {}
        if not isinstance(raw_columns, Mapping):
            msg = f"`columns` must map column names to specs, got {type(raw_columns).__name__}."
            raise ParameterError(msg)
        for name, spec in raw_columns.items():
            path = f"columns.{name}"
            _keys(path, spec, ("type", "nullable", "lower", "upper", "domain", "description"),
                  ("type",))
            columns.append(ColumnSchema(name=name, **dict(spec)))
        return cls(
            name=data["name"],
            epsilon=epsilon,
            user_id=user_id,
            columns=tuple(columns),
            min_rows=data.get("min_rows", 0),
            description=data.get("description", "") or "",
        )

    def to_dict(self) -> dict[str, Any]:
        """The schema as plain data (the inverse of :meth:`from_dict`)."""
        out: dict[str, Any] = {"version": SCHEMA_FORMAT_VERSION, "name": self.name}
        if self.description:
            out["description"] = self.description
        if self.min_rows:
            out["min_rows"] = self.min_rows
        eps = self.epsilon
        out["epsilon"] = {"column": eps.column, "allow_zero": eps.allow_zero,
                          "allow_public": eps.allow_public}
        for key in ("min", "max"):
            if getattr(eps, key) is not None:
                out["epsilon"][key] = getattr(eps, key)
        if self.user_id is not None:
            out["user_id"] = {"column": self.user_id.column, "type": self.user_id.type,
                              "unique": self.user_id.unique}
        cols: dict[str, Any] = {}
        for col in self.columns:
            spec: dict[str, Any] = {"type": col.type, "nullable": col.nullable}
            if col.lower is not None:
                spec["lower"], spec["upper"] = col.lower, col.upper
            if col.domain is not None:
                spec["domain"] = list(col.domain)
            if col.description:
                spec["description"] = col.description
            cols[col.name] = spec
        out["columns"] = cols
        return out
