"""Releases under a privacy unit (``[releases.privacy_unit]``): many rows per person.

A job release with a ``[releases.privacy_unit]`` table (``max_groups``, ``max_rows``,
optional ``eps_cap`` and ``weight_share``: the keywords of ``agg``) runs all its ``mean``
and ``histogram`` aggregators in ONE ``agg(..., privacy_unit=<[input] user_id>, ...)`` call
(docs/privacy_unit.md). The person is the job's user: the ledger's account.

Charging rule (the mechanism's own bound, :mod:`hdp_spark.core.privacy_unit.weights`):
each user is charged ONCE per release, G·R·k·γ of their capped ε level (G = max_groups,
R = max_rows, k the weight of one of their rows: at most min(ε, G·eps_cap)), however many
rows or groups they have, read or not (a function of their ε alone, never of the output).
Where a user's rows carry different ε, every row gets the person's ε (the smallest of
their rows, null/NaN/negative as 0: the ε the release spends) before the budget rule
(``EngineAdapter.person_eps``), so the cap, the charge and the plan all see exactly what
the release spends.

Budget rule: a user's demand is their ε once, whatever the number of aggregators (they
share the person's ε: the weight's share and each aggregator's add up to it), so the ε
column is capped like one aggregator's column (``[budget] policy``).

With ``[releases.select_keys]`` as well (private groups, no public ``keys``): the one
``agg`` call selects the groups over the bounded rows (``select_keys``' ``c`` and
``share`` take the places of ``eps_cap`` and ``weight_share``). The charge is the same
G·R·k·γ per user, once, every user (the selection's noisy weights are part of the same
mechanism: its share f is inside the person's G·R·k·γ, :mod:`hdp_spark.core.privacy_unit.
weights`), plus the release's δ (a group that exists only because of one person holds
that person alone, weight <= K_c, released with probability <= δ/G; at most G such
groups: δ per person), recorded in the outcome as for partition selection. The charge
never depends on which groups were released, so the ledger reveals none of them. The ε
column is not clipped at c first (unlike a selection release without a unit): the charge
already saturates at G·R·⌊K_c/R⌋·γ <= G·c, as over public keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hdp_spark.core.kernels import release_specs
from hdp_spark.core.privacy_unit.options import UnitOptions
from hdp_spark.core.privacy_unit.spec import PrivacyUnit
from hdp_spark.core.privacy_unit.weights import person_charge, unit_selection
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.errors import HdpError, JobError
from hdp_spark.jobs.job_spec import ReleaseSpec, library_spec
from hdp_spark.jobs.kind import ReleaseAdapter
from hdp_spark.jobs.settings import reject_unknown

__all__ = ["UNIT_PARAMS", "describe_unit", "parse_privacy_unit", "release_unit",
           "unit_charge_table", "unit_parameters"]

Key = tuple[object, ...]

UNIT_PARAMS = ("max_groups", "max_rows", "eps_cap", "weight_share")
_REQUIRED = ("max_groups", "max_rows")


def parse_privacy_unit(where: str, raw: object, user_id: str) -> UnitOptions:
    """The ``[releases.privacy_unit]`` table as :class:`UnitOptions` over the job's user id.

    Raises:
        JobError: not a table, an unknown or missing parameter, or a parameter that breaks
            its rule (the message names it and the value written in the file).
    """
    at = f"{where}: privacy_unit"
    if not isinstance(raw, Mapping):
        msg = f"`{at}` must be a table of {', '.join(UNIT_PARAMS)}; got {raw!r}."
        raise JobError(msg)
    reject_unknown(at, raw, UNIT_PARAMS)
    missing = [p for p in _REQUIRED if p not in raw]
    if missing:
        msg = f"`{at}` requires {', '.join(_REQUIRED)}; `{missing[0]}` is missing."
        raise JobError(msg)
    try:
        options = UnitOptions(PrivacyUnit(user_id, raw["max_groups"], raw["max_rows"]),
                              raw.get("eps_cap"), raw.get("weight_share"))
        unit_selection(options.unit, (), eps_cap=options.eps_cap,
                       weight_share=options.weight_share)  # the ranges, now
    except HdpError as exc:
        msg = f"`{at}`: {exc}"
        raise JobError(msg) from exc
    return options


def unit_parameters(rel: ReleaseSpec) -> SelectKeys:
    """The mechanism's public parameters of a privacy-unit release."""
    assert rel.unit is not None
    keys: object = rel.selection if rel.selection is not None else rel.keys or ()
    return unit_selection(rel.unit.unit, keys, eps_cap=rel.unit.eps_cap,
                          weight_share=rel.unit.weight_share)


def unit_charge_table(selection: SelectKeys, levels: Sequence[float]
                      ) -> dict[tuple[Key, float], float]:
    """``{((), level): G·R·k·γ}`` for every ε level of the (capped) table: a user's charge
    for the whole release (charged once per user).

    Privacy:
        A function of the public ε levels and parameters only.
    """
    return {((), float(lv)): person_charge(selection, float(lv)) for lv in levels}


def describe_unit(rel: ReleaseSpec) -> dict[str, Any]:
    """The unit's public parameters (part of the release definition and outcome); under
    ``select_keys`` also its δ (the selection's other parameters are ``eps_cap``,
    ``weight_share`` and ``step`` here)."""
    assert rel.unit is not None
    sel = unit_parameters(rel)
    out: dict[str, Any] = {
        "column": rel.unit.unit.column, "max_groups": rel.unit.unit.max_groups,
        "max_rows": rel.unit.unit.max_rows, "eps_cap": float(sel.c),
        "weight_share": float(sel.share), "step": float(sel.gamma)}
    if rel.selection is not None:
        out["delta"] = float(sel.delta)
    return out


def release_unit(adapter: ReleaseAdapter, table: Any, rel: ReleaseSpec,
                 unsafe_seed: str | None) -> list[dict[str, Any]]:
    """Run the release's aggregators in ONE ``agg(..., privacy_unit=...)`` call through the
    core pipeline on the adapter's engine; one plain dict per public key (under
    ``select_keys``: per released group, sorted by key; the candidates never leave the
    call).

    Privacy:
        One release: each person's loss at most their ε, plus δ under ``select_keys``
        (docs/privacy_unit.md).
    """
    assert rel.unit is not None
    engine = adapter.engine(table)
    specs = [library_spec(a.spec) for a in rel.aggregators]
    keys = rel.selection if rel.selection is not None else rel.keys
    out = release_specs(engine, specs, by=list(rel.by), keys=keys,
                        unsafe_seed=unsafe_seed, unit=rel.unit).materialize(engine)
    return adapter.to_records(out)
