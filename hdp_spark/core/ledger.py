"""Pure logic of the per-user privacy ledger: units, composition, capping and charges.

Engine-agnostic (numpy only). The job runner applies the same rules with native Spark
expressions (:mod:`hdp_spark.spark.job_adapter`); tests check that both engines agree.

Accounting model
----------------
* **Sequential composition.** Every release charges every user the privacy loss it actually
  gave them. A user's total spend is the sum of the charges of all committed releases, and it
  never exceeds their total budget. Several aggregators of one release read the same row, so
  their charges add up too. Users in different groups of one grouped release are charged
  once per aggregator (each row is in one group only; parallel composition across groups).
* **What is charged.** For an aggregator, the charge of a row is its level's *effective* ε
  (``eps_effective`` of the mean: ``min(ε_i, τ)`` for ADPM, i.e. weight / noise scale), not
  the demand; 0 for rows with weight 0 and for rows outside the release's public key set.
* **Exact arithmetic.** Budgets and charges are integers in units of :data:`UNIT` = 2**-30 ε.
  Conversions from a float ε are exact (multiplication by a power of two), charges are rounded
  UP and capped demands rounded DOWN, so float round-off can only make the ledger record more
  spend than happened, never less. Sums of integers never drift.

Capping rule (a user whose remaining budget R is below the release's demand)
----------------------------------------------------------------------------
A release of ``k`` aggregators demands ``D = Σ_a ceil_units(ε_a)`` from a row (ε_a is the row's
value in the ε column aggregator ``a`` reads; +inf counts as more than any budget). If
``D <= R`` nothing changes. Otherwise, by the job's policy:

* ``"cap"``: every aggregator gets ``min(ε_a, floor(R / k) units)``; the row stays in the release
  with a smaller ε (rounding down can only strengthen its guarantee);
* ``"exclude"``: every ε_a := 0 (weight 0: the row is counted in n but its value is not used);
* ``"fail"``: the release is refused (:class:`~hdp_spark.errors.BudgetExceededError`).

Because the mechanism delivers at most the (capped) demand, each charge is
``min(ceil_units(eps_effective), ceil_units(capped ε))`` and the charges of a row sum to at most
``R``: the ledger is never overspent. (Charge mode ``"demand"`` charges ``ceil_units(capped ε)``
instead; see below.)

Privacy:
    The capped ε vector is the ε vector of the release, which is public in this model: the
    remaining budgets therefore become visible through the released ε histograms (a user's ε
    drops to their remaining budget). Budgets, like ε, must be treated as public. Invalid ε
    (null, NaN, negative) is left unchanged so that the release rejects it with a count.

    With the default charge mode ``"effective"``, a grouped release charges ``min(ε, τ_g)``
    where τ_g depends on the user's group: the remaining budget of a user who was above τ_g
    then encodes τ_g, i.e. which group they were in, and a later release that caps that user
    publishes it through its (group, ε level) counts. Charge mode ``"demand"`` charges the
    capped demand instead, so remaining budgets depend only on ε, budgets and key-set
    membership (at the price of losing the "privacy for free" saving in the ledger).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from hdp_spark.errors import ParameterError

__all__ = [
    "BUDGET_MAX",
    "CAPPED",
    "CHARGE_MODES",
    "DEMAND_CLAMP",
    "EXCLUDED",
    "FULL",
    "POLICIES",
    "UNIT",
    "UNIT_BITS",
    "BudgetPolicy",
    "CapOutcome",
    "ChargeMode",
    "budget_units_numpy",
    "canonical_json",
    "cap_numpy",
    "ceil_units",
    "ceil_units_numpy",
    "charge_units_numpy",
    "floor_units",
    "idempotency_key",
    "remaining_units_numpy",
    "units_to_eps",
]

UNIT_BITS = 30
UNIT = 2.0**-UNIT_BITS
"""One ledger unit of ε. Every integer number of units below 2**53 is an exact float."""
_SCALE = float(1 << UNIT_BITS)

BUDGET_MAX = 2.0**20
"""Largest total budget a user may hold (in ε); keeps every sum of units far below 2**63."""

DEMAND_CLAMP = 2.0**21
"""ε values are clamped to this before conversion to units: more than any budget (inf too)."""

BudgetPolicy = Literal["cap", "exclude", "fail"]
POLICIES: tuple[str, ...] = get_args(BudgetPolicy)

ChargeMode = Literal["effective", "demand"]
CHARGE_MODES: tuple[str, ...] = get_args(ChargeMode)

FULL, CAPPED, EXCLUDED = 0, 1, 2
"""Status codes of a row after the capping rule."""


def floor_units(eps: float) -> int:
    """``eps`` rounded DOWN to whole ledger units (``eps`` finite, >= 0)."""
    return math.floor(min(float(eps), DEMAND_CLAMP) * _SCALE)


def ceil_units(eps: float) -> int:
    """``eps`` rounded UP to whole ledger units (+inf and huge values clamp to DEMAND_CLAMP)."""
    return math.ceil(min(float(eps), DEMAND_CLAMP) * _SCALE)


def units_to_eps(units: int) -> float:
    """The exact ε value of a number of units."""
    return float(units) * UNIT


def ceil_units_numpy(eps: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Vectorized :func:`ceil_units`; NaN and negative values give 0."""
    x = np.asarray(eps, dtype=np.float64)
    x = np.where(np.isnan(x) | (x < 0), 0.0, np.minimum(x, DEMAND_CLAMP))
    return np.ceil(x * _SCALE).astype(np.int64)


def budget_units_numpy(
    budget: npt.ArrayLike | None, default: float | None, n: int
) -> tuple[npt.NDArray[np.int64], int]:
    """Per-row total budgets in units, and the number of rows without a valid budget.

    Args:
        budget: the budget column (NaN = null) or None when budgets come from the job only.
        default: the job's default budget, used where the column is null.
        n: number of rows.

    Returns:
        ``(units, invalid)``: budgets rounded DOWN to units (0 where invalid) and the count of
        rows whose budget is missing (no default), negative, NaN-without-default, infinite or
        above :data:`BUDGET_MAX`.
    """
    if budget is None:
        if default is None:
            return np.zeros(n, dtype=np.int64), n
        return np.full(n, floor_units(default), dtype=np.int64), 0
    b = np.asarray(budget, dtype=np.float64)
    if default is not None:
        b = np.where(np.isnan(b), float(default), b)
    bad = np.isnan(b) | (b < 0) | ~np.isfinite(b) | (b > BUDGET_MAX)
    safe = np.where(bad, 0.0, b)
    units = np.floor(safe * _SCALE).astype(np.int64)
    return units, int(bad.sum())


def remaining_units_numpy(
    budget_units: npt.NDArray[np.int64], spent_units: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Remaining budget: ``max(0, budget - spent)`` (0 when a budget was lowered below spend)."""
    return np.maximum(np.asarray(budget_units) - np.asarray(spent_units), 0).astype(np.int64)


@dataclass(frozen=True, slots=True)
class CapOutcome:
    """Result of the capping rule on one release.

    Attributes:
        eps: the capped ε columns, in the order given.
        status: per row :data:`FULL`, :data:`CAPPED` or :data:`EXCLUDED`.
    """

    eps: tuple[npt.NDArray[np.float64], ...]
    status: npt.NDArray[np.int8]


def _valid(x: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    return ~np.isnan(x) & (x >= 0)


def cap_numpy(
    columns: Sequence[tuple[npt.ArrayLike, int]],
    remaining_units: npt.ArrayLike,
    policy: BudgetPolicy,
) -> CapOutcome:
    """Apply the capping rule (module docstring) to the ε columns of one release.

    Args:
        columns: ``(ε values, m)`` per distinct ε column, ``m`` = how many of the release's
            aggregators read it (``k = Σ m``).
        remaining_units: each row's remaining budget in units.
        policy: ``"cap"``, ``"exclude"`` or ``"fail"`` (``"fail"`` only reports the status;
            the caller refuses the release when any row is over).

    Returns:
        The capped columns and each row's status.

    Privacy:
        Capping only lowers ε, so every row gets at least the privacy it asked for; the
        charges computed from the capped release never exceed the remaining budget.
    """
    if policy not in POLICIES:
        msg = f"`policy` must be one of {', '.join(POLICIES)}; got {policy!r}."
        raise ParameterError(msg)
    rem = np.asarray(remaining_units, dtype=np.int64)
    arrays = [np.asarray(c, dtype=np.float64) for c, _ in columns]
    k = sum(int(m) for _, m in columns)
    if k < 1:
        msg = "a release needs at least one aggregator (k >= 1)."
        raise ParameterError(msg)
    demand = np.zeros(rem.shape, dtype=np.int64)
    valid_all = np.ones(rem.shape, dtype=bool)
    for x, (_, m) in zip(arrays, columns, strict=True):
        demand += int(m) * ceil_units_numpy(x)
        valid_all &= _valid(x)
    over = (demand > rem) & valid_all
    share = (rem // k).astype(np.float64) * UNIT
    out = []
    for x in arrays:
        if policy == "cap":
            out.append(np.where(over, np.minimum(x, share), x))
        elif policy == "exclude":
            out.append(np.where(over, 0.0, x))
        else:
            out.append(x.copy())
    status = np.where(over, EXCLUDED if policy == "exclude" else CAPPED, FULL).astype(np.int8)
    return CapOutcome(tuple(out), status)


def charge_units_numpy(
    eps_effective: npt.ArrayLike, eps_capped: npt.ArrayLike, mode: ChargeMode = "effective"
) -> npt.NDArray[np.int64]:
    """Charge of one aggregator per row, in units.

    Args:
        eps_effective: the effective ε of each row's (group, level) cell; NaN for rows
            outside the release (charged 0).
        eps_capped: each row's ε after the capping rule.
        mode: ``"effective"``: ``min(ceil_units(eps_effective), ceil_units(eps_capped))``
            (weight-0 rows are charged 0); ``"demand"``: ``ceil_units(eps_capped)`` for every
            row of the release.

    Privacy:
        The effective ε of a row never exceeds its capped demand mathematically; the ``min``
        only removes float round-off of ``weight / η`` so that the sum of a row's charges is
        bounded by its remaining budget exactly. ``"demand"`` charges more, but makes the
        remaining budgets (hence later ε vectors) independent of the rows' groups.
    """
    eff = np.asarray(eps_effective, dtype=np.float64)
    demand = ceil_units_numpy(eps_capped)
    if mode == "demand":
        return np.where(np.isnan(eff), 0, demand).astype(np.int64)
    if mode != "effective":
        msg = f"`mode` must be one of {', '.join(CHARGE_MODES)}; got {mode!r}."
        raise ParameterError(msg)
    return np.minimum(ceil_units_numpy(eff), demand)


def _default(obj: object) -> object:
    if hasattr(obj, "isoformat"):
        return {"__date__": obj.isoformat()}
    if isinstance(obj, tuple | frozenset | set):
        return list(obj)
    msg = f"cannot encode a {type(obj).__name__} in a release definition"
    raise ParameterError(msg)


def canonical_json(value: Any) -> str:
    """Canonical JSON text (sorted keys, no spaces, exact float repr) of plain values."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_default,
                      allow_nan=True)


def idempotency_key(
    job: str, release_id: str, fingerprint: str, definition: Mapping[str, Any]
) -> str:
    """The idempotency key of a release: SHA-256 of (job, release id, input, definition).

    Two runs with the same key are the same release: the second one re-publishes the
    committed outcome and charges nothing.

    Privacy:
        A committed release is never recomputed, so its noise is never redrawn; a change of
        the input data or of the release definition gives a new key (a new, charged release).
    """
    payload = canonical_json(
        {"job": job, "release": release_id, "input": fingerprint, "definition": definition}
    )
    return hashlib.sha256(b"hdp_spark/release/v1\x00" + payload.encode()).hexdigest()
