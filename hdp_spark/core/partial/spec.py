"""Specifications of the partial-DP (per-attribute) releases, validated on construction.

Both backends take these frozen dataclasses, so every parameter rule and error text is
the same on pandas and Spark. Everything in a spec is public: attribute names and order,
domains, budgets, thresholds.

Out-of-domain rule (data-independent, never raises on data): a null, NaN or
out-of-domain value of attribute j is recoded to the public "other" value of j -- the
declared domain value named in ``other[j]``, or else an extra category appended to the
domain and reported as null. The recoding reads attribute j only, so a change of one
attribute still changes one attribute of the recoded record (per-attribute DP holds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hdp_spark.core.keys import normalize_key
from hdp_spark.core.mean.spec import check_column_name
from hdp_spark.core.partial.budget import TreeBudget, solve_budget
from hdp_spark.errors import ParameterError

__all__ = [
    "MAX_KEY_SPACE",
    "AttributeDomain",
    "AttributeHistogramSpec",
    "CodedSpec",
    "HeavyHittersSpec",
    "build_domains",
    "check_max_rows",
    "unit_neighbours",
]

MAX_KEY_SPACE = 2**62
"""Bound on the product of the (recoded) domain sizes: whole-record keys are int64."""

_EXACT_FLOAT_INT = 2**53


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "number"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "str"
    return "other"


@dataclass(frozen=True, slots=True)
class AttributeDomain:
    """The public domain of one attribute.

    Attributes:
        column: the attribute's column.
        values: declared values, in order (code i is ``values[i]``).
        other_index: index of the declared value that absorbs null/out-of-domain values,
            or None: they go to an extra category (code ``len(values)``, output as null).
    """

    column: str
    values: tuple[object, ...]
    other_index: int | None = None

    def __post_init__(self) -> None:
        check_column_name("cols", self.column)
        if not isinstance(self.values, tuple) or not self.values:
            msg = f"the domain of `{self.column}` must be a non-empty sequence of values."
            raise ParameterError(msg)
        kinds = {_kind(v) for v in self.values}
        if "other" in kinds or len(kinds) != 1:
            msg = (
                f"the domain of `{self.column}` must hold values of one kind: all str, all "
                f"numbers (int/float) or all bool; got types "
                f"{sorted({type(v).__name__ for v in self.values})}."
            )
            raise ParameterError(msg)
        for v in self.values:
            if isinstance(v, float) and not math.isfinite(v):
                msg = f"the domain of `{self.column}` must not contain NaN or inf, got {v!r}."
                raise ParameterError(msg)
        if any(isinstance(v, float) for v in self.values) and any(
            isinstance(v, int) and abs(v) > _EXACT_FLOAT_INT for v in self.values
        ):
            msg = (
                f"the domain of `{self.column}` mixes floats with integers beyond 2**53, which "
                "a float column cannot tell apart."
            )
            raise ParameterError(msg)
        if len(set(self.values)) != len(self.values):
            msg = f"the domain of `{self.column}` must not repeat a value."
            raise ParameterError(msg)
        if self.other_index is not None and not 0 <= self.other_index < len(self.values):
            msg = f"`other` of `{self.column}` must be a value of its domain."
            raise ParameterError(msg)

    @property
    def kind(self) -> str:
        """``"str"``, ``"number"`` or ``"bool"``."""
        return _kind(self.values[0])

    @property
    def output_type(self) -> str:
        """Type of the output column: ``"str"``, ``"int"``, ``"float"`` or ``"bool"``."""
        kind = self.kind
        if kind != "number":
            return kind
        return "int" if all(isinstance(v, int) for v in self.values) else "float"

    @property
    def size(self) -> int:
        """Number of codes, the extra "other" category included."""
        return len(self.values) + (1 if self.other_index is None else 0)

    @property
    def other_code(self) -> int:
        """The code of null/out-of-domain values."""
        return len(self.values) if self.other_index is None else self.other_index

    def value(self, code: int) -> object:
        """The output value of a code (None for the extra category)."""
        return self.values[code] if code < len(self.values) else None


class CodedSpec(Protocol):
    """A release over recoded attributes: what an engine's tree counter needs."""

    @property
    def domains(self) -> tuple[AttributeDomain, ...]:
        """One public domain per attribute."""
        ...

    @property
    def privacy_unit(self) -> str | None:
        """The privacy-unit id column, if any."""
        ...

    @property
    def max_rows(self) -> int:
        """With ``privacy_unit``: only persons with at most this many rows count."""
        ...


def _check_cols(cols: object) -> tuple[str, ...]:
    if isinstance(cols, str) or not isinstance(cols, Sequence) or not cols:
        msg = f"`cols` must be a non-empty list of column names, got {cols!r}."
        raise ParameterError(msg)
    out = tuple(cols)
    for c in out:
        check_column_name("cols", c)
    if len(set(out)) != len(out):
        msg = f"`cols` must not repeat a column, got {list(out)!r}."
        raise ParameterError(msg)
    return out


def build_domains(
    cols: object, domains: object, other: object = None
) -> tuple[AttributeDomain, ...]:
    """Validate ``cols``, ``domains`` and ``other`` into one domain per column."""
    names = _check_cols(cols)
    if not isinstance(domains, Mapping):
        msg = f"`domains` must map each column to its public values, got {type(domains).__name__}."
        raise ParameterError(msg)
    unknown = [k for k in domains if k not in names]
    missing = [c for c in names if c not in domains]
    if missing or unknown:
        msg = (
            f"`domains` must have exactly the columns of `cols`; missing {missing!r}, "
            f"unexpected {unknown!r}."
        )
        raise ParameterError(msg)
    if other is None:
        other = {}
    if not isinstance(other, Mapping):
        msg = f"`other` must map columns to a value of their domain, got {type(other).__name__}."
        raise ParameterError(msg)
    stray = [k for k in other if k not in names]
    if stray:
        msg = f"`other` names columns that are not in `cols`: {stray!r}."
        raise ParameterError(msg)
    out = []
    for c in names:
        raw = domains[c]
        if isinstance(raw, str | bytes | Mapping) or not hasattr(raw, "__iter__"):
            msg = f"the domain of `{c}` must be a list of values, got {type(raw).__name__}."
            raise ParameterError(msg)
        if isinstance(raw, set | frozenset):
            msg = f"the domain of `{c}` must be an ordered list (order fixes codes), got a set."
            raise ParameterError(msg)
        values = tuple(normalize_key(v) for v in raw)
        index = None
        if c in other:
            o = normalize_key(other[c])
            matches = [i for i, v in enumerate(values) if v == o and _kind(v) == _kind(o)]
            if not matches:
                msg = f"`other[{c!r}]` must be a value of the domain of `{c}`, got {other[c]!r}."
                raise ParameterError(msg)
            index = matches[0]
        out.append(AttributeDomain(c, values, index))
    return tuple(out)


def _positive(name: str, value: object, *, allow_inf: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"`{name}` must be a number, got {value!r}."
        raise ParameterError(msg)
    v = float(value)
    if not (v > 0 and (allow_inf or math.isfinite(v))):
        msg = f"`{name}` must be a positive finite number, got {value!r}."
        raise ParameterError(msg)
    return v


def _probability(name: str, value: object, upper: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"`{name}` must be a number, got {value!r}."
        raise ParameterError(msg)
    v = float(value)
    if not 0 < v < upper:
        msg = f"`{name}` must be in (0, {upper:g}), got {value!r}."
        raise ParameterError(msg)
    return v


def check_max_rows(max_rows: object, privacy_unit: object) -> None:
    """``max_rows``: a positive int, above 1 only with ``privacy_unit``.

    Raises:
        ParameterError: naming the parameter, the rule and the bad value.
    """
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1:
        msg = f"`max_rows` must be a positive int, got {max_rows!r}."
        raise ParameterError(msg)
    if privacy_unit is None and max_rows != 1:
        msg = (f"`max_rows` bounds the rows of a person: it needs `privacy_unit` (the id "
               f"column), got max_rows={max_rows!r} without it.")
        raise ParameterError(msg)


def unit_neighbours(privacy_unit: str | None, max_rows: int) -> str:
    """The neighbour relation a partial-DP report states: one person's record (row model,
    n public), or, with ``privacy_unit``, all of one person's rows replaced by any rows
    (any number of them), or a person added or removed: a person's number of rows, hence
    n, is private (a person counts with at most ``max_rows`` rows; each mechanism's
    module docstring proves its bound for this relation)."""
    if privacy_unit is None:
        return "replacement: one person's record changes, the number of rows n is public"
    return (f"person: all of one person's rows replaced by any rows (any number), or a "
            f"person added or removed; a person counts with at most {max_rows} row(s); "
            f"the number of rows is private")


def _check_unit(privacy_unit: object, cols: tuple[str, ...]) -> None:
    if privacy_unit is None:
        return
    check_column_name("privacy_unit", privacy_unit)
    if privacy_unit in cols:
        msg = f"`privacy_unit` must not be one of `cols`, got {privacy_unit!r}."
        raise ParameterError(msg)


@dataclass(frozen=True, slots=True)
class HeavyHittersSpec:
    """Partial-DP heavy hitters over whole records (see :func:`hdp_spark.hdp_heavy_hitters`).

    Attributes:
        domains: one public domain per attribute, in tree order.
        eps0: per-attribute budget ε₀ = ε_tree + ε_count (pure).
        delta: release guarantee: keys below the root threshold by μ are kept with
            probability <= δ; sets κ = ln(1/(2δ)).
        threshold: base (level-1) threshold τ, an absolute count; None: τ = μ.
        count_fraction: ε_count = count_fraction · ε₀ (0: release keys only).
        failure_prob: η of the reported detection count F_η.
        beta: the count intervals hold the count-stage noise with probability >= 1 - β.
        privacy_unit: optional id column: only persons with exactly one row are
            counted (rows of a repeated id, and rows without an id, are left out;
            no error).
        max_candidates: largest candidate product of a node; a larger one stops the
            release (post-processing of the DP lists; raise τ or lower δ).
        leaf_thresholding: threshold every attribute's values first (level 0, τ₀ = τ - μ)
            so that level 1 pairs only the surviving values: for large domains. Costs
            per person 2 d_real/t more (see :mod:`.budget`).
        max_rows: R, the most rows a counted person has (with ``privacy_unit``); the
            mechanism runs at ε₀/R per row (group privacy over R rows, :mod:`.budget`).
        budget: the solved public budget (derived).
    """

    domains: tuple[AttributeDomain, ...]
    eps0: float
    delta: float = 1e-6
    threshold: float | None = None
    count_fraction: float = 0.5
    failure_prob: float = 0.05
    beta: float = 0.05
    privacy_unit: str | None = None
    max_candidates: int = 10**8
    alias: str | None = None
    leaf_thresholding: bool = False
    max_rows: int = 1
    budget: TreeBudget = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.domains, tuple) or not all(
            isinstance(d, AttributeDomain) for d in self.domains
        ):
            msg = "`domains` must be a tuple of AttributeDomain (use hdp_heavy_hitters)."
            raise ParameterError(msg)
        cols = self.cols
        if len(cols) < 2:
            msg = (
                f"`cols` must name at least 2 attributes for heavy hitters, got {list(cols)!r}; "
                "use attribute_histograms for one attribute."
            )
            raise ParameterError(msg)
        if len(set(cols)) != len(cols):
            msg = f"`cols` must not repeat a column, got {list(cols)!r}."
            raise ParameterError(msg)
        space = math.prod(d.size for d in self.domains)
        if space >= MAX_KEY_SPACE:
            msg = (
                "the product of the domain sizes (each counting its extra null category unless "
                f"`other` names a value) must be < 2**62 so that whole-record keys fit in int64; "
                f"got about 2**{math.log2(space):.1f}."
            )
            raise ParameterError(msg)
        _positive("eps0", self.eps0)
        _probability("delta", self.delta, 0.5)
        if self.threshold is not None:
            tau = _positive("threshold", self.threshold)
            if tau > 2**53:
                msg = f"`threshold` must be <= 2**53, got {self.threshold!r}."
                raise ParameterError(msg)
        if isinstance(self.count_fraction, bool) or not isinstance(
            self.count_fraction, int | float
        ) or not 0 <= self.count_fraction < 1:
            msg = f"`count_fraction` must be in [0, 1), got {self.count_fraction!r}."
            raise ParameterError(msg)
        _probability("failure_prob", self.failure_prob)
        _probability("beta", self.beta)
        _check_unit(self.privacy_unit, cols)
        check_max_rows(self.max_rows, self.privacy_unit)
        if (isinstance(self.max_candidates, bool) or not isinstance(self.max_candidates, int)
                or self.max_candidates < 1):
            msg = f"`max_candidates` must be a positive int, got {self.max_candidates!r}."
            raise ParameterError(msg)
        if self.alias is not None and (not isinstance(self.alias, str) or not self.alias):
            msg = f"`alias` must be a non-empty column name or None, got {self.alias!r}."
            raise ParameterError(msg)
        if not isinstance(self.leaf_thresholding, bool):
            msg = f"`leaf_thresholding` must be True or False, got {self.leaf_thresholding!r}."
            raise ParameterError(msg)
        budget = solve_budget(
            len(cols),
            float(self.eps0),
            float(self.count_fraction),
            float(self.delta),
            None if self.threshold is None else float(self.threshold),
            float(self.failure_prob),
            self.leaf_thresholding,
            self.max_rows,
        )
        object.__setattr__(self, "budget", budget)

    @property
    def name(self) -> str:
        """Output name inside ``agg`` (default ``"heavy_hitters"``)."""
        return self.alias or "heavy_hitters"

    @property
    def cols(self) -> tuple[str, ...]:
        """Attribute columns in tree order."""
        return tuple(d.column for d in self.domains)


@dataclass(frozen=True, slots=True)
class AttributeHistogramSpec:
    """Per-attribute histograms released under ε₀ each (see ``attribute_histograms``).

    Attributes:
        domains: one public domain per attribute.
        eps0: per-attribute ε₀ (pure); each histogram cell gets discrete Laplace noise of
            scale >= 2/ε₀ (changing one attribute moves one person from one cell to another:
            two cells change by 1, an ℓ1 sensitivity of 2).
        beta: the count intervals hold the noise with probability >= 1 - β.
        privacy_unit: optional id column: only persons with at most ``max_rows`` rows
            are counted (rows of an id with more, and rows without an id, are left out;
            no error).
        alias: output name inside ``agg`` and of the Spark Column (default
            ``"attribute_histograms"``).
        max_rows: the most rows a person may have to be counted (with ``privacy_unit``);
            the noise grows with it (scale 2·max_rows/ε₀).
    """

    domains: tuple[AttributeDomain, ...]
    eps0: float
    beta: float = 0.05
    privacy_unit: str | None = None
    alias: str | None = None
    max_rows: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.domains, tuple) or not self.domains or not all(
            isinstance(d, AttributeDomain) for d in self.domains
        ):
            msg = "`domains` must be a non-empty tuple of AttributeDomain."
            raise ParameterError(msg)
        if len(set(self.cols)) != len(self.cols):
            msg = f"`cols` must not repeat a column, got {list(self.cols)!r}."
            raise ParameterError(msg)
        _positive("eps0", self.eps0)
        _probability("beta", self.beta)
        _check_unit(self.privacy_unit, self.cols)
        check_max_rows(self.max_rows, self.privacy_unit)
        if self.alias is not None and (not isinstance(self.alias, str) or not self.alias):
            msg = f"`alias` must be a non-empty column name or None, got {self.alias!r}."
            raise ParameterError(msg)

    @property
    def name(self) -> str:
        """Output name inside ``agg`` (default ``"attribute_histograms"``)."""
        return self.alias or "attribute_histograms"

    @property
    def cols(self) -> tuple[str, ...]:
        """Attribute columns."""
        return tuple(d.column for d in self.domains)
