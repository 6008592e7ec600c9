"""Local-DP aggregations under a privacy unit: ONE report per person.

Privacy-critical (the rule every engine implements and the argument it rests on).

A person (every row with the same non-null id, :mod:`hdp_spark.core.privacy_unit.spec`)
may have sent many reports, each randomized on their device at its own ε_j. A release
under ``privacy_unit`` reads exactly one report of each person, chosen by this rule:

1. ε_person = the smallest ε of the person's rows, each made safe as the unit rule reads
   it (null, NaN and negative count as 0: the person spends nothing).
2. The candidates are the person's m reports whose ε equals ε_person, sorted by their
   codes (the integers the aggregator reads from a report: the index — -1 for a missing
   or malformed report, the projection row of a frequency-oracle report — then the
   fixed-point value, sign or coordinates; ties are reports the aggregator cannot tell
   apart).
3. The kept report is the candidate at position J = rank(``report_rank_text``(bounding key,
   aggregator name, person)) mod m: a PRF of the release key, the aggregator and the
   person, never of a value.

**Why a person loses at most ε_person** (neighbours: all of person p's rows replaced by
any other rows — any number, any values — with the same ε_person). Every other person's
kept report is a function of their own rows and their own J, unchanged. For p, let
y_1..y_m be the randomized candidates, each y_j = M(x_j) drawn independently by the
ε_person-LDP randomizer M of the aggregator, and π(y) the sorting permutation. J is
uniform on [m] and independent of the reports (a PRF under a secret key the data never
reaches), so for every output set S

    P(kept ∈ S) = E_y[(1/m) Σ_j 1{y_π(y)(j) ∈ S}] = E_y[(1/m) Σ_i 1{y_i ∈ S}]
                = (1/m) Σ_i P(M(x_i) ∈ S),

a mixture of ε_person-LDP laws with weights that do not depend on the data (any fixed
order would do; sorting makes it independent of table order, so every engine and every
re-evaluation keep the same report). As M(x_i)(S) <= e^ε M(z)(S) for every input z,
P(kept ∈ S | D) <= e^ε (1/m') Σ_k M(x'_k)(S) = e^ε P(kept ∈ S | D') for any m' candidates
x' of the neighbour: loss <= ε_person. Two aggregators of one call keep independent
positions (their J read their names), so their losses add (the call spends the sum, as
every release does).

**What must not be done** (tests/privacy_unit/test_ldp_unit.py checks it): choosing the
report by its value, e.g. keeping the report whose value has the smallest (keyed) hash,
is an order statistic, not a mixture. Binary randomized response with k = 2 reports
and h(0) < h(1): the kept report is 1 only when both are 1, so
P(kept = 1 | x = (1, 1)) / P(kept = 1 | x = (0, 0)) = p²/(1 - p)² = e^{2ε}. The same holds
for the sorted rule with a KNOWN position: the rule needs J unknown to whoever reads the
output. The bounding key is derived from the release key (fresh from OS entropy, never
published) by :func:`~hdp_spark.core.privacy_unit.spec.bounding_key`; on Spark with the
extension (classic, or Connect with its plugin) it is held in a field no printed plan
shows, otherwise (no extension) it is a literal of the release job's plan, which the
operator who runs the job sees, as they see the reports. Under ``unsafe_seed`` anyone can
compute J (the output is marked unsafe).
Should the key leak, the loss falls back to the one-row guarantee, never below it: the
output is a function of the person's reports, jointly (Σ_j ε_j)-LDP.

**What is public.** The release publishes ``_n`` (the number of kept usable reports: one
per person), ``_skipped`` and the ε histogram ``_eps_levels`` of the persons, and its
interval widths depend on them: the analogues of n and the ε histogram, public facts in
the one-row model. So the guarantee is for the neighbours above (replace one person's
rows, keeping their ε); adding or removing a person changes the published count exactly
and is NOT covered. A grouped release is refused: a report was randomized once, so it
cannot be split over groups, and LDP hides a report's value, not its group, while under
a unit a person's group membership is private.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hdp_spark.core.ldp.specs import LdpDistributionSpec, LdpMeanSpec, LdpVectorMeanSpec
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit.spec import PrivacyUnit
from hdp_spark.errors import ParameterError

__all__ = ["LDP_SPECS", "check_id_unread", "check_ldp_unit", "is_ldp_release", "kept_position",
           "ldp_unit_cells"]

LDP_SPECS = (LdpMeanSpec, LdpVectorMeanSpec, LdpDistributionSpec)
"""The local-DP aggregators' spec classes."""


def is_ldp_release(specs: Sequence[object]) -> bool:
    """True if any of ``specs`` is a local-DP aggregator."""
    return any(isinstance(s, LDP_SPECS) for s in specs)


def kept_position(rank: int, m: int) -> int:
    """The 0-based position of the kept report among ``m`` sorted candidates: ``rank mod
    m`` (Spark: ``pmod``). The modulo bias is below m/2**60.

    Privacy:
        The position reads the person's PRF rank and m only, never a report.
    """
    if m < 1:
        msg = f"`m` must be >= 1, got {m!r}."
        raise ParameterError(msg)
    return rank % m


def check_ldp_unit(specs: Sequence[object], by: tuple[str, ...], keys: object,
                   unit: PrivacyUnit, eps_cap: object, weight_share: object) -> None:
    """The checks on public inputs of a local-DP release under ``unit`` (module
    docstring): local-DP aggregators only, global (no ``by``, no ``keys``), bounds 1, no
    private-weight options, the id column read by no aggregator.

    Raises:
        ParameterError: a check fails (naming the parameter, the rule and its value).
    """
    others = [type(s).__name__ for s in specs if not isinstance(s, LDP_SPECS)]
    if others:
        msg = ("under `privacy_unit` local-DP aggregators cannot share a call with other "
               f"aggregators (one report per person is their rule), got {others[0]}.")
        raise ParameterError(msg)
    if by or keys is not None:
        name, value = ("by", by) if by else ("keys", keys)
        msg = (f"`{name}`: local-DP aggregators under `privacy_unit` release the whole "
               "table only (a report cannot be split over groups, and a person's group "
               f"membership is private): grouped releases are not supported yet, got "
               f"{value!r}.")
        raise ParameterError(msg)
    for name, value in (("max_groups", unit.max_groups), ("max_rows", unit.max_rows)):
        if value != 1:
            msg = (f"`{name}` must be 1 for local-DP aggregators under `privacy_unit` "
                   f"(they keep one report per person), got {value!r}.")
            raise ParameterError(msg)
    for name, value in (("eps_cap", eps_cap), ("weight_share", weight_share)):
        if value is not None:
            msg = (f"`{name}` is an option of the private-weight means and histograms; "
                   f"local-DP aggregators under `privacy_unit` take none, got {value!r}.")
            raise ParameterError(msg)
    for spec in specs:
        check_id_unread(spec, unit)


def check_id_unread(spec: object, unit: PrivacyUnit) -> None:
    """The unit's id column is read by ``spec`` neither as a report nor as its ε column.

    Raises:
        ParameterError: it is (naming the column).
    """
    read = {str(getattr(spec, a)) for a in ("report", "index", "sign", "eps")
            if hasattr(spec, a)}
    if unit.column in read:
        msg = (f"`privacy_unit` column {unit.column!r} identifies people: no aggregator "
               "may read it as a report or ε column.")
        raise ParameterError(msg)


def ldp_unit_cells(engine: Any, unit: PrivacyUnit, specs: Sequence[object],
                   requests: Sequence[Any], key: ReleaseKey) -> list[Any]:
    """The cell tables of a local-DP release under ``unit``: per aggregator, the engine's
    cells over the one report per person it keeps (:meth:`~hdp_spark.core.pipeline.
    Engine.ldp_bounded`), global.

    Privacy:
        The rule of the module docstring, keyed by ``key``.
    """
    tables: list[Any] = []
    for spec, request in zip(specs, requests, strict=True):
        bounded = engine.ldp_bounded(unit, spec, key)
        try:
            tables.extend(bounded.cells([request], (), None))
        finally:
            close = getattr(bounded, "close", None)
            if close is not None:
                close()
    return tables
