"""Declarative schemas of ε-carrying tables (engine-agnostic model).

A :class:`TableSchema` says what a table that releases read must look like: its ε column
(which ε values the platform accepts), its user id column (whether one row per person is
required), and its other columns (types, nullability, public bounds, categorical domains).
The model is plain frozen dataclasses validated on construction; :meth:`TableSchema.rules`
turns it into the list of row rules (:class:`~hdp_spark.core.validation.Rule`) that every
engine counts in one aggregate pass.

Files are parsed by :func:`hdp_spark.schema.load_schema` into :meth:`TableSchema.from_dict`,
which rejects unknown keys (a misspelt safety setting must not be silently ignored).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

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

ColumnType = Literal["float", "integer", "string", "boolean"]
COLUMN_TYPES: tuple[str, ...] = get_args(ColumnType)
"""Declared column types. ``float`` accepts any numeric column (integers included)."""

_NUMERIC_TYPES = ("float", "integer")
_DOMAIN_TYPES = ("integer", "string", "boolean")
SCHEMA_FORMAT_VERSION = 1


def _name(path: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        msg = f"`{path}` must be a non-empty column name, got {value!r}."
        raise ParameterError(msg)
    return value


def _flag(path: str, value: object) -> bool:
    if not isinstance(value, bool):
        msg = f"`{path}` must be true or false, got {value!r}."
        raise ParameterError(msg)
    return value


def _finite(path: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"`{path}` must be a number, got {value!r}."
        raise ParameterError(msg)
    if not math.isfinite(value):
        msg = f"`{path}` must be finite, got {value!r}."
        raise ParameterError(msg)
    return float(value)


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
class EpsilonColumn:
    """The ε column: each row's privacy demand ε_i (public in this model; never null).

    Attributes:
        column: column name.
        allow_zero: accept ε = 0 ("do not use my value": the row gets weight 0). Default
            False: the schema enforces the rule ε > 0, for platforms that require a
            positive demand (a 0 is more often an upstream default than a real choice).
        allow_public: accept ε = +inf (a public row, released without noise). Default False:
            +inf turns protection off for the row, so a platform must opt in explicitly
            (a stray 1/0 upstream would otherwise publish a person's value exactly).
        min: smallest finite ε the platform accepts (> 0), or None.
        max: largest finite ε the platform accepts, or None.
    """

    column: str
    allow_zero: bool = False
    allow_public: bool = False
    min: float | None = None
    max: float | None = None

    def __post_init__(self) -> None:
        _name("epsilon.column", self.column)
        _flag("epsilon.allow_zero", self.allow_zero)
        _flag("epsilon.allow_public", self.allow_public)
        for key in ("min", "max"):
            value = getattr(self, key)
            if value is not None and not _finite(f"epsilon.{key}", value) > 0:
                msg = f"`epsilon.{key}` must be > 0, got {value!r}."
                raise ParameterError(msg)
        if self.min is not None and self.max is not None and not self.min <= self.max:
            msg = f"`epsilon.min` must be <= `epsilon.max`, got ({self.min!r}, {self.max!r})."
            raise ParameterError(msg)


@dataclass(frozen=True, slots=True)
class UserIdColumn:
    """The user id column (public in this model: who takes part, with which ε).

    Attributes:
        column: column name.
        type: ``"integer"`` or ``"string"``.
        unique: one row per user is required (row-level releases; rule ``unique``, which
            also rules out two ε for one user). Set False for tables with several rows per
            user (user-level releases): ε must then be constant within a user (rule
            ``constant_per_user`` on the ε column).
    """

    column: str
    type: Literal["integer", "string"] = "integer"
    unique: bool = True

    def __post_init__(self) -> None:
        _name("user_id.column", self.column)
        if self.type not in ("integer", "string"):
            msg = f"`user_id.type` must be integer or string, got {self.type!r}."
            raise ParameterError(msg)
        _flag("user_id.unique", self.unique)


@dataclass(frozen=True, slots=True)
class ColumnSchema:
    """One ordinary column (a value, an attribute or a category).

    Attributes:
        name: column name.
        type: one of :data:`COLUMN_TYPES`.
        nullable: nulls (and NaN) are expected. When False, they are counted under the
            rule ``not_null`` (a data-quality finding; releases impute a public default).
        lower: public lower bound of a numeric column (with ``upper``), or None.
        upper: public upper bound of a numeric column (with ``lower``), or None.
        domain: public set of allowed values of an integer, string or boolean column.
        description: free text for the operator.
    """

    name: str
    type: ColumnType
    nullable: bool = True
    lower: float | None = None
    upper: float | None = None
    domain: tuple[object, ...] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        path = f"columns.{self.name}"
        _name("columns", self.name)
        if self.type not in COLUMN_TYPES:
            msg = f"`{path}.type` must be one of {', '.join(COLUMN_TYPES)}; got {self.type!r}."
            raise ParameterError(msg)
        _flag(f"{path}.nullable", self.nullable)
        if (self.lower is None) != (self.upper is None):
            msg = f"`{path}` must set both `lower` and `upper`, or neither."
            raise ParameterError(msg)
        if self.lower is not None and self.upper is not None:
            if self.type not in _NUMERIC_TYPES:
                msg = f"`{path}`: bounds need a float or integer column, got {self.type!r}."
                raise ParameterError(msg)
            lower = _finite(f"{path}.lower", self.lower)
            upper = _finite(f"{path}.upper", self.upper)
            if not lower < upper:
                msg = f"`{path}.lower` must be < `upper`, got ({self.lower!r}, {self.upper!r})."
                raise ParameterError(msg)
        if self.domain is not None:
            self._check_domain(path)
        if not isinstance(self.description, str):
            msg = f"`{path}.description` must be text, got {type(self.description).__name__}."
            raise ParameterError(msg)

    def _check_domain(self, path: str) -> None:
        if isinstance(self.domain, str | bytes) or not isinstance(self.domain, Sequence):
            msg = f"`{path}.domain` must be a list of values, got {type(self.domain).__name__}."
            raise ParameterError(msg)
        object.__setattr__(self, "domain", tuple(self.domain))
        if self.type not in _DOMAIN_TYPES:
            msg = f"`{path}`: a domain needs an integer, string or boolean type, got {self.type!r}."
            raise ParameterError(msg)
        if not self.domain:
            msg = f"`{path}.domain` must not be empty."
            raise ParameterError(msg)
        expected: tuple[type, ...] = {"integer": (int,), "string": (str,), "boolean": (bool,)}[
            self.type
        ]
        for value in self.domain:
            ok = isinstance(value, expected) and (self.type == "boolean" or not isinstance(
                value, bool))
            if not ok:
                msg = f"`{path}.domain` must hold {self.type} values only, got {value!r}."
                raise ParameterError(msg)
        if len(set(self.domain)) != len(self.domain):
            msg = f"`{path}.domain` must not repeat a value."
            raise ParameterError(msg)

    @property
    def numeric(self) -> bool:
        """Whether the column holds numbers."""
        return self.type in _NUMERIC_TYPES


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
                out.extend(_column_rules(col))
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


def _column_rules(col: ColumnSchema) -> list[Rule]:
    """Data-quality rules of an ordinary column (never block a release)."""
    c = col.name
    out = []
    if not col.nullable:
        out.append(Rule(c, "not_null", RuleKind.MISSING, "value",
                        "values must not be null or NaN"))
    if col.type == "float":
        out.append(Rule(c, "finite", RuleKind.NONFINITE, "value",
                        "values must not be +inf or -inf (releases clamp them to the bounds)"))
    if col.lower is not None:
        out.append(Rule(c, "in_bounds", RuleKind.BOUNDS, "value",
                        f"finite values must lie in [{col.lower!r}, {col.upper!r}] "
                        "(releases clamp them)", (col.lower, col.upper)))
    if col.domain is not None:
        out.append(Rule(c, "in_domain", RuleKind.DOMAIN, "value",
                        "non-null values must belong to the declared domain", col.domain))
    return out
