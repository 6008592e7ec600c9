"""Declared columns of a table schema: the ε column, the user id column, ordinary columns.

Plain frozen dataclasses validated on construction (each message names the field path
and the value the caller passed), and the data-quality rules of an ordinary column.
:class:`~hdp_spark.core.schema.TableSchema` assembles them into one table's schema.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from hdp_spark.core.validation import Rule, RuleKind, number
from hdp_spark.errors import ParameterError

__all__ = [
    "COLUMN_TYPES",
    "ColumnSchema",
    "ColumnType",
    "EpsilonColumn",
    "UserIdColumn",
    "column_rules",
]

ColumnType = Literal["float", "integer", "string", "boolean"]
COLUMN_TYPES: tuple[str, ...] = get_args(ColumnType)
"""Declared column types. ``float`` accepts any numeric column (integers included)."""

_NUMERIC_TYPES = ("float", "integer")
_DOMAIN_TYPES = ("integer", "string", "boolean")


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
    out = number(path, value)
    if not math.isfinite(out):
        msg = f"`{path}` must be finite, got {value!r}."
        raise ParameterError(msg)
    return out


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


def column_rules(col: ColumnSchema) -> list[Rule]:
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
