"""The mean's specification (:class:`MeanSpec`) and the parameter checks every aggregator's
spec shares (:func:`check_column_name`, :func:`check_bounds`).

Backends take these frozen dataclasses and render them into native expressions, so the
validation and the error texts are identical on every engine.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Literal, get_args

from hdp_spark.core.levels import EpsGrid
from hdp_spark.errors import ParameterError

__all__ = [
    "MEAN_METHODS",
    "MeanMethod",
    "MeanSpec",
    "check_bounds",
    "check_column_name",
    "check_eps_grid",
]

MeanMethod = Literal[
    "adpm", "hpm-a", "hpm-cp", "hpm-ce", "hpm-wp", "hpm-we", "uniform", "proportional", "drop",
    "ldp-cp", "ldp-ce", "ldp-wp", "ldp-we", "auto",
]
MEAN_METHODS: tuple[str, ...] = get_args(MeanMethod)


def check_column_name(name: str, value: object) -> None:
    """Raise unless ``value`` is a non-empty column name."""
    if not isinstance(value, str) or not value:
        msg = f"`{name}` must be a non-empty column name, got {value!r}."
        raise ParameterError(msg)


def _check_number(name: str, value: object) -> float:
    # numbers.Real admits numpy scalars (np.int64, np.float32) as well as int and float.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        msg = f"`{name}` must be a number, got {value!r}."
        raise ParameterError(msg)
    return float(value)


def check_eps_grid(value: object) -> None:
    """Reject an ``eps_grid`` that is neither an :class:`EpsGrid` nor None (shared by the
    specs of every aggregator that rounds ε onto a grid)."""
    if value is not None and not isinstance(value, EpsGrid):
        msg = f"`eps_grid` must be an EpsGrid or None, got {type(value).__name__}."
        raise ParameterError(msg)


def check_bounds(lower: object, upper: object) -> tuple[float, float]:
    """Public bounds ``lower < upper`` whose every derived quantity is a finite double.

    Besides finite bounds, both ``upper - lower`` (the range every mechanism scales its
    noise by) and ``lower + upper`` (the default fill ``(lower + upper) / 2`` and the
    midpoint of the LDP scalings) must be finite: ``lower=1e308, upper=1.7e308`` has a
    finite range but its midpoint, computed as ``(lower + upper) / 2``, overflows to inf.

    The fixed-point encoding (:mod:`hdp_spark.core.encoding`) needs nothing more: a value is
    clamped into [lower, upper] before ``(x - lower) / (upper - lower)``, and rounding is
    monotone, so ``x - lower <= upper - lower`` (finite) and the unit value lies in [0, 1];
    its code ``floor(u * 2**31 + 0.5)`` is at most 2**31 for every accepted pair.

    Raises:
        ParameterError: a bound is not a finite number, ``lower >= upper``, or the range or
            the midpoint overflows.
    """
    lo = _check_number("lower", lower)
    hi = _check_number("upper", upper)
    for name, raw, value in (("lower", lower, lo), ("upper", upper, hi)):
        if not math.isfinite(value):
            msg = f"`{name}` must be finite, got {raw!r} (`lower` and `upper` must be finite)."
            raise ParameterError(msg)
    if not lo < hi:
        msg = f"`lower` must be < `upper`, got ({lower!r}, {upper!r})."
        raise ParameterError(msg)
    if not math.isfinite(hi - lo):
        msg = (
            "`upper - lower` must be a finite float; the bounds are too far apart, got "
            f"({lower!r}, {upper!r})."
        )
        raise ParameterError(msg)
    if not math.isfinite(hi + lo):
        msg = (
            "`lower + upper` must be a finite float (the midpoint (lower + upper) / 2 is the "
            f"default fill); the bounds are too large, got ({lower!r}, {upper!r})."
        )
        raise ParameterError(msg)
    return lo, hi


@dataclass(frozen=True, slots=True)
class MeanSpec:
    """A heterogeneous-DP mean of one bounded column (see :func:`hdp_spark.hdp_mean`).

    Attributes:
        column: value column.
        eps: column holding each row's privacy demand ε_i.
        lower: public lower bound; values below are clamped to it.
        upper: public upper bound; values above are clamped to it.
        method: weighting rule (see :func:`hdp_spark.hdp_mean`); ``"auto"`` chooses one per
            group from public facts (:mod:`hdp_spark.core.mean.auto`).
        beta: failure probability of the reported interval, and β of the PAC methods.
        clip_output: clip the released estimate to [lower, upper] (post-processing).
            ``None`` picks the method's default: False for ``adpm`` (paper-faithful,
            unbiased), True for every other method (with ``"auto"``: the chosen one's).
        fill: public value imputed for null or NaN values (default: the midpoint).
        eps_grid: optional geometric grid that ε is rounded down onto.
        alias: prefix of the output columns (default ``"<column>_mean"``).
    """

    column: str
    eps: str
    lower: float
    upper: float
    method: MeanMethod = "adpm"
    beta: float = 0.05
    clip_output: bool | None = None
    fill: float | None = None
    eps_grid: EpsGrid | None = None
    alias: str | None = None

    def __post_init__(self) -> None:
        check_column_name("column", self.column)
        check_column_name("eps", self.eps)
        lower, upper = check_bounds(self.lower, self.upper)
        if self.method not in MEAN_METHODS:
            msg = f"`method` must be one of {', '.join(MEAN_METHODS)}; got {self.method!r}."
            raise ParameterError(msg)
        beta = _check_number("beta", self.beta)
        if not 0 < beta < 1:
            msg = f"`beta` must be in (0, 1), got {self.beta!r}."
            raise ParameterError(msg)
        if self.clip_output is not None and not isinstance(self.clip_output, bool):
            msg = f"`clip_output` must be True, False or None, got {self.clip_output!r}."
            raise ParameterError(msg)
        if self.fill is not None:
            fill = _check_number("fill", self.fill)
            if not lower <= fill <= upper:
                msg = f"`fill` must lie in [lower, upper], got {self.fill!r}."
                raise ParameterError(msg)
        check_eps_grid(self.eps_grid)
        if self.alias is not None:
            check_column_name("alias", self.alias)

    @property
    def name(self) -> str:
        """Prefix of the output columns."""
        return self.alias or f"{self.column}_mean"

    @property
    def fill_value(self) -> float:
        """The public imputation value for null/NaN values."""
        return float(self.fill) if self.fill is not None else (self.lower + self.upper) / 2

    @property
    def clips(self) -> bool:
        """Whether the released estimate is clipped to [lower, upper]."""
        if self.clip_output is None:
            return self.method != "adpm"
        return self.clip_output
