"""Releases whose group keys are chosen by DP partition selection (``[releases.select_keys]``).

A job release with ``by`` and a ``[releases.select_keys]`` table (``delta``, ``c``,
``share``, optional ``step`` and ``neighbours``: the keywords of
:func:`hdp_spark.select_keys`) instead of a public ``keys`` list runs all its ``mean`` and
``histogram`` aggregators in ONE ``agg(..., by=..., keys=select_keys(...))`` call: one
selection, one δ (docs/partition_selection.md).

Charging rule (the mechanism's own privacy argument, :mod:`hdp_spark.core.selection.mechanism`):
every row of the table is charged κ_i = γ·⌊min(ε_i, c)/γ⌋ (<= min(ε_i, c) <= ε_i) ONCE
for the whole release (the selection's share f and the aggregators' shares (1 - f)/A add
up to κ_i), and the release's δ is recorded with it. Rows of groups that were NOT released
are charged too: the selection read them (its noisy weight summed their κ_i). The charge is
a function of the row's (capped) ε alone, never of the released output, so the ledger
cannot reveal which groups survived.

Budget rule: the demand of a row is min(ε_i, c) (κ_i before rounding to the step), not
A·ε_i, so the ε column is clipped at ``c`` (at the smallest ε grid point >= c with an
``eps_grid``, which leaves every row's κ_i unchanged) and then capped like one aggregator's
column (``[budget] policy``: cap, exclude or fail) BEFORE the selection runs: a user without
budget enters the selection with the capped ε (or ε = 0, weight 0, charged (0, δ)).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hdp_spark.core.kernels import release_specs
from hdp_spark.core.levels import EpsGrid
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.errors import HdpError, JobError
from hdp_spark.jobs.job_spec import ReleaseSpec, library_spec
from hdp_spark.jobs.kind import ReleaseAdapter
from hdp_spark.jobs.settings import reject_unknown

__all__ = [
    "SELECT_KEYS_PARAMS",
    "charge_table",
    "clip_point",
    "describe_selection",
    "parse_select_keys",
    "release_selected",
    "selection_eps",
]

Key = tuple[object, ...]

SELECT_KEYS_PARAMS = ("delta", "c", "share", "step", "neighbours")
_REQUIRED = ("delta", "c", "share")


def parse_select_keys(where: str, raw: object) -> SelectKeys:
    """The ``[releases.select_keys]`` table of a release as a validated :class:`SelectKeys`.

    Raises:
        JobError: not a table, an unknown or missing parameter, or a parameter that breaks
            its rule (the message names it and the value written in the file).
    """
    at = f"{where}: select_keys"
    if not isinstance(raw, Mapping):
        msg = f"`{at}` must be a table of {', '.join(SELECT_KEYS_PARAMS)}; got {raw!r}."
        raise JobError(msg)
    reject_unknown(at, raw, SELECT_KEYS_PARAMS)
    missing = [p for p in _REQUIRED if p not in raw]
    if missing:
        msg = f"`{at}` requires {', '.join(_REQUIRED)}; `{missing[0]}` is missing."
        raise JobError(msg)
    try:
        selection = SelectKeys(**dict(raw))
    except HdpError as exc:
        msg = f"`{at}`: {exc}"
        raise JobError(msg) from exc
    if selection.neighbours != "replace":
        # A job publishes public facts of the table (rows per ε level in the charge
        # classes, users charged): public under replacement, where n and the ε histogram
        # stay the same, but not under add/remove, where a person's presence changes them.
        msg = (f"`{at}: neighbours` must be 'replace' in a job (its ledger summary and "
               "report publish the table's row counts, which add/remove neighbours make "
               f"private); got {selection.neighbours!r}.")
        raise JobError(msg)
    return selection


def selection_eps(rel: ReleaseSpec) -> tuple[str, EpsGrid | None]:
    """The one ε column and grid every aggregator of a selection release reads."""
    spec = library_spec(rel.aggregators[0].spec)
    return spec.eps, spec.eps_grid


def clip_point(selection: SelectKeys, grid: EpsGrid | None) -> float:
    """Where the ε column is clipped before the budget rule: c, or with a grid the
    smallest grid point >= c (so every row's level, hence κ_i, is unchanged: levels >= c
    give κ = c either way, and rows below that point are not touched). Only when c lies
    above the grid's highest point does a public row (ε = +inf, whose level is c) get the
    grid's highest point instead: a smaller κ (safe; docs/jobs.md)."""
    c = float(selection.c)
    if grid is None:
        return c
    above = [p for p in grid.points() if p >= c]
    return min(above) if above else c


def charge_table(
    selection: SelectKeys, levels: Sequence[float]
) -> dict[tuple[Key, float], float]:
    """``{((), level): κ}`` for every ε level of the (capped) table: the whole release's
    charge of a row of that level, γ·⌊min(level, c)/γ⌋ (exact; ε = +inf gives c, 0 gives 0).

    Privacy:
        A function of the public ε levels and the public parameters only. Negative level
        codes (invalid ε: the release rejects such rows before anything is charged) get the
        largest charge, c, never less.
    """
    out: dict[tuple[Key, float], float] = {}
    for level in levels:
        lv = float(level)
        kappa = selection.charge(lv) if lv >= 0 else float(selection.gamma
                                                             * selection.cap_units)
        out[((), lv)] = kappa
    return out


def describe_selection(selection: SelectKeys) -> dict[str, Any]:
    """The selection's public parameters (part of the release definition and outcome)."""
    return {
        "delta": float(selection.delta),
        "c": float(selection.c),
        "share": float(selection.share),
        "step": float(selection.gamma),
        "neighbours": selection.neighbours,
    }


def release_selected(
    adapter: ReleaseAdapter, table: Any, rel: ReleaseSpec, unsafe_seed: str | None
) -> list[dict[str, Any]]:
    """Run the release's aggregators in ONE ``agg(..., keys=select_keys(...))`` call, through
    the core pipeline on the adapter's engine.

    Returns:
        One plain dict per RELEASED group, sorted by key (the output of ``agg``); the
        candidates never leave the call.

    Privacy:
        One release with one partition selection; the candidates never leave the call.
    """
    assert rel.selection is not None
    engine = adapter.engine(table)
    specs = [library_spec(a.spec) for a in rel.aggregators]
    out = release_specs(engine, specs, by=list(rel.by), keys=rel.selection,
                        unsafe_seed=unsafe_seed).materialize(engine)
    return adapter.to_records(out)
