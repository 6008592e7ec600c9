"""The partition-selection specification (:class:`SelectKeys`) and its public constants.

Engine-agnostic. Everything here is a function of the caller's public parameters (δ, the
cap c, the selection share f, the grid step γ, the neighbour notion) and of a row's ε:
no data enters. The mechanism and its privacy argument are in
:mod:`hdp_spark.core.selection.mechanism`.

A row's weight is κ_i = min(ε_i, c) rounded DOWN to the public step γ, held as the integer
k_i = ⌊min(ε_i, c)/γ⌋ computed in exact rational arithmetic on the decimals ε, c and γ
print as (``1.7`` is 17/10, within half a unit in the last place of the float), so an ε on
the grid keeps all its steps and γ·k_i <= min(ε_i, c) holds exactly for those decimals
(float division drops a step for about a third of grid values, which the review box of the
design note "DP partition selection with per-row ε" found). ε = +inf counts as c; ε = 0
gives k_i = 0. The same k_i drives the selection and the released statistic.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, get_args

from hdp_spark.core.validation import number
from hdp_spark.errors import InternalError, ParameterError

__all__ = ["DEFAULT_STEPS", "NEIGHBOURS", "Neighbours", "SelectKeys", "guarantee_words",
           "select_keys"]

Neighbours = Literal["replace", "add_remove"]
NEIGHBOURS: tuple[str, ...] = get_args(Neighbours)

DEFAULT_STEPS = 1024
"""Without ``step``, γ = c / 1024 (a row's κ_i loses at most 0.1% of c to rounding)."""

MAX_STEPS = 2**40
"""Most grid steps below c (c / γ); keeps the integer weights and the threshold small."""

_SLACK = 1e-9
"""Upward slack on the threshold's float computation: only ever raises T (safer)."""


@dataclass(frozen=True, slots=True)
class SelectKeys:
    """DP partition selection with per-row ε: which group keys a grouped release publishes.

    Pass it as ``keys=`` to ``agg`` instead of a public key set. The groups present in the
    data are candidates; a group is released iff its noisy weight Σ κ_i + noise reaches the
    threshold T, set so that a group holding one person is released with probability at
    most ``delta``.

    Attributes:
        delta: the δ of the guarantee (0 < δ < 1; 1e-6 or smaller in practice): the
            largest probability that a group holding one person is released.
        c: the cap of a row's weight and charge, κ_i = min(ε_i, c) (finite, > 0).
        share: f, the share of each row's κ_i spent on the selection (0 < f < 1); the
            other 1 - f is split evenly among the aggregators of the call.
        step: γ, the public step κ_i is rounded down to (default c / 1024; 0 < γ <= c).
        neighbours: ``"replace"`` (default, the library's model: one person's row changes,
            possibly to another group, so two groups are touched and the noise doubles) or
            ``"add_remove"`` (one person's row is added or removed).
        max_groups, max_rows: the privacy unit's public bounds (``agg(...,
            privacy_unit=...)`` sets them; 1 and 1 otherwise): a person contributes at most
            ``max_rows`` rows to each of at most ``max_groups`` groups, and each row's weight
            is k = ⌊⌊min(ε_person/max_groups, c)/γ⌋ / max_rows⌋, so one person's weight in
            one group is at most ⌊min(ε_person/max_groups, c)/γ⌋ <= K_c (the argument is in
            :mod:`hdp_spark.core.selection.mechanism`, "Privacy unit").
        keys_public: the privacy unit over public keys (or a global release): every public
            key is released with its noisy weight, no threshold and no δ (``delta`` 0).

    Privacy:
        Protected unit: one person with one row, in one group. Each row is charged
        (κ_i, δ) in total, κ_i <= ε_i: f·κ_i for the selection and (1 - f)·κ_i for the
        released statistics; a row with ε_i > c leaves ε_i - c unspent and a row with
        ε = 0 is charged (0, δ). c, δ, f and γ must come from public or prior
        information, never from the data (choosing c from the groups' members leaks).
        Under ``"replace"`` the guarantee assumes the person's ε is the same before and
        after the replacement.
    """

    delta: float
    c: float
    share: float
    step: float | None = None
    neighbours: Neighbours = "replace"
    max_groups: int = 1
    max_rows: int = 1
    keys_public: bool = False

    def __post_init__(self) -> None:
        delta = number("delta", self.delta)
        if not (0 < delta < 1 or (self.keys_public and delta == 0)):
            msg = f"`delta` must be in (0, 1), got {self.delta!r}."
            raise ParameterError(msg)
        for name in ("max_groups", "max_rows"):
            bound = getattr(self, name)
            if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
                msg = f"`{name}` must be an int >= 1, got {bound!r}."
                raise ParameterError(msg)
        c = number("c", self.c)
        if not (math.isfinite(c) and c > 0):
            msg = f"`c` must be a finite number > 0, got {self.c!r}."
            raise ParameterError(msg)
        share = number("share", self.share)
        if not 0 < share < 1:
            msg = f"`share` must be in (0, 1), got {self.share!r}."
            raise ParameterError(msg)
        if self.step is not None:
            step = number("step", self.step)
            if not (math.isfinite(step) and 0 < step <= c):
                msg = f"`step` must be a number in (0, c], got {self.step!r}."
                raise ParameterError(msg)
            if c / step > MAX_STEPS:
                msg = f"`step` must be at least c / 2**40, got {self.step!r}."
                raise ParameterError(msg)
        if self.neighbours not in NEIGHBOURS:
            msg = f"`neighbours` must be one of {', '.join(NEIGHBOURS)}; got {self.neighbours!r}."
            raise ParameterError(msg)

    # -- public constants of the mechanism (functions of the parameters only) ------------

    @property
    def cap(self) -> Fraction:
        """c as the exact decimal the caller wrote (``1.1`` is 11/10)."""
        return _decimal(self.c)

    @property
    def gamma(self) -> Fraction:
        """The step γ as an exact rational: the decimal the caller wrote, or c / 1024."""
        if self.step is not None:
            return _decimal(self.step)
        return self.cap / DEFAULT_STEPS

    @property
    def touched(self) -> int:
        """u: how many groups one neighbour change can touch (2 under replacement)."""
        return 2 if self.neighbours == "replace" else 1

    @property
    def cap_units(self) -> int:
        """K_c = ⌊c/γ⌋, the largest integer weight of one row."""
        return math.floor(self.cap / self.gamma)

    def units(self, level: float) -> int:
        """k = ⌊min(level, c)/γ⌋ of an ε level, exact on the decimals (+inf gives K_c, 0
        gives 0; ``1.7`` with γ = 0.1 is 17 steps, where float division gives 16 or 17
        depending on the value). Under a privacy unit (``level`` the person's ε):
        ⌊⌊min(level/max_groups, c)/γ⌋ / max_rows⌋."""
        return _units(self, float(level))

    def charge(self, eps: float) -> float:
        """The κ_i a row of this ε is charged: γ·⌊min(ε, c)/γ⌋ (<= min(ε, c)).

        Raises:
            ParameterError: ε is NaN or negative (NaN ε is rejected, never charged).
        """
        value = number("eps", eps)
        if not value >= 0:
            msg = "`eps` must be >= 0 or +inf (not NaN or negative)."
            raise ParameterError(msg)
        return float(self.gamma * self.units(value))

    @property
    def selection_scale(self) -> Fraction:
        """t_S = u/(f·γ): the two-sided geometric scale of the selection weight, in steps
        (P[Z = z] ∝ exp(-|z|/t_S), i.e. Laplace scale b_S = u/f in κ units)."""
        return Fraction(self.touched) / (_decimal(self.share) * self.gamma)

    @property
    def margin(self) -> int:
        """m*: the smallest m >= 1 with q^m/(1 + q) <= δ/max_groups, q = exp(-1/t_S) (a
        person alone in up to ``max_groups`` groups: δ in total)."""
        if self.keys_public:
            msg = "a release over public keys has no threshold"
            raise InternalError(msg)
        t = self.selection_scale
        inv_t = t.denominator / t.numerator
        q = math.exp(-inv_t)
        x = ((math.log(self.max_groups / float(self.delta)) - math.log1p(q))
             * (t.numerator / t.denominator))
        return max(1, math.ceil(x * (1 + _SLACK) + _SLACK))

    @property
    def threshold(self) -> int:
        """T = K_c + m* (in steps): a group is released iff its noisy weight is >= T."""
        return self.cap_units + self.margin

    def statistic_share(self, parts: int) -> Fraction:
        """s = (1 - f)/parts: each aggregator's share of κ_i when ``parts`` share a call."""
        return (1 - _decimal(self.share)) / parts

    def mean_scale(self, parts: int) -> Fraction:
        """Laplace scale of a mean numerator in steps: u/(2·s·γ)."""
        return Fraction(self.touched) / (2 * self.statistic_share(parts) * self.gamma)

    def count_scale(self, parts: int) -> Fraction:
        """Two-sided geometric scale of each weighted bin count in steps: u/(s·γ)."""
        return Fraction(self.touched) / (self.statistic_share(parts) * self.gamma)

    def context(self) -> tuple[object, ...]:
        """The parameters as noise-context parts (domain separation between settings)."""
        head = (float(self.delta), float(self.c), float(self.share), self.gamma,
                self.neighbours)
        if (self.max_groups, self.max_rows, self.keys_public) == (1, 1, False):
            return head  # the streams of a release without a privacy unit, unchanged
        return (*head, "privacy-unit", self.max_groups, self.max_rows, self.keys_public)

    def describe(self) -> str:
        """The guarantee in plain words (public parameters only)."""
        return (
            f"partition selection: each person is charged (min(ε_i, {self.c:g}), "
            f"δ = {self.delta:g}), ε rounded down to steps of {float(self.gamma):g}; "
            f"{self.share:g} of it selects the groups, the rest releases the statistics"
        )


def guarantee_words(params: Mapping[str, Any]) -> str:
    """The release's guarantee in plain words, from its public parameters."""
    delta, c = float(params["delta"]), float(params["c"])
    return (
        f"each person who contributed a row is protected with (κ_i, δ)-DP for this release, "
        f"where κ_i = min(ε_i, {c:g}) (their ε, capped at c = {c:g} and rounded down to "
        f"steps of {float(params['step']):g}) and δ = {delta:g}: δ bounds the chance that a "
        "group holding one person is published. Which groups appear is itself private: a "
        "group is published only if its noisy total weight reaches a threshold, so small "
        "groups are left out"
    )


@functools.lru_cache(maxsize=4096)
def _units(selection: SelectKeys, level: float) -> int:
    if not level > 0:
        return 0
    if math.isinf(level):
        per_group = selection.cap_units
    else:
        kappa = min(_decimal(level) / selection.max_groups, selection.cap)
        per_group = math.floor(kappa / selection.gamma)
    return per_group // selection.max_rows  # exact: R·k <= the (person, group)'s steps


@functools.lru_cache(maxsize=1024)
def _decimal(value: float) -> Fraction:
    """The shortest decimal of a float as an exact rational (``0.1`` is 1/10). Cached: the
    mechanism's constants (c, γ, f) are read several times per group."""
    return Fraction(repr(float(value)))


def select_keys(
    *,
    delta: float,
    c: float,
    share: float,
    step: float | None = None,
    neighbours: Neighbours = "replace",
) -> SelectKeys:
    """Choose the released group keys privately (DP partition selection with per-row ε).

    Pass the result as ``keys=`` of ``agg`` when the group keys are not public::

        hpd.agg(table, hpd.hdp_mean("spend", eps="eps", lower=0, upper=500),
                by="merchant", keys=hpd.select_keys(delta=1e-7, c=1.0, share=0.4))

    Args and privacy: see :class:`SelectKeys` (the docs page is
    ``docs/partition_selection.md``).

    Raises:
        ParameterError: a parameter breaks its rule (named with the value passed).
    """
    return SelectKeys(delta, c, share, step, neighbours)
