"""Engine-agnostic orchestration of one release.

A release is: validate specs and keys -> the engine computes one level table per
(ε column, ε grid) plan -> this module finalizes every (spec, group) on the driver with
one fresh release key -> plain rows that the backend turns into a native table.

Computing once and materializing is what makes ``show()`` followed by ``collect()`` return
the same numbers: the backends build their output from these rows, never from a lazy plan
that would run the mechanism again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hdp_spark.core.levels import EpsGrid
from hdp_spark.core.mean import MeanResult, finalize_mean
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.specs import MeanSpec
from hdp_spark.core.stats import GroupStats
from hdp_spark.errors import ParameterError

__all__ = ["OUTPUT_FIELDS", "LevelPlan", "ReleaseResult", "finalize_release", "plan_levels"]

AggSpec = MeanSpec

OUTPUT_FIELDS: tuple[tuple[str, str], ...] = (
    ("", "float"),
    ("_noise_scale", "float"),
    ("_ci_low", "float"),
    ("_ci_high", "float"),
    ("_n", "int"),
    ("_tau", "float"),
    ("_method", "str"),
    ("_fallback", "bool"),
    ("_eps_levels", "levels"),
)
"""Output columns of a mean, as (suffix after the alias, kind)."""


@dataclass(frozen=True, slots=True)
class LevelPlan:
    """Specs that share one ε column and grid, hence one level table (one engine pass)."""

    eps: str
    grid: EpsGrid | None
    specs: tuple[AggSpec, ...]


def plan_levels(specs: Sequence[AggSpec]) -> tuple[LevelPlan, ...]:
    """Validate the specs of one release and group them by (ε column, grid)."""
    if not specs:
        msg = "a release needs at least one aggregator, got none."
        raise ParameterError(msg)
    names: set[str] = set()
    plans: dict[tuple[str, EpsGrid | None], list[AggSpec]] = {}
    for spec in specs:
        if not isinstance(spec, MeanSpec):
            msg = f"aggregators must come from hdp_mean(...), got {type(spec).__name__}."
            raise ParameterError(msg)
        if spec.name in names:
            msg = f"two aggregators share the output name {spec.name!r}; set `alias`."
            raise ParameterError(msg)
        names.add(spec.name)
        plans.setdefault((spec.eps, spec.eps_grid), []).append(spec)
    return tuple(LevelPlan(e, g, tuple(s)) for (e, g), s in plans.items())


@dataclass(frozen=True, slots=True)
class ReleaseResult:
    """Everything one release computed.

    Attributes:
        by: group-by columns.
        keys: group keys in output order.
        specs: the aggregators.
        results: ``results[spec.name][key]`` is the released value of one group.
        unsafe_seed: True if the noise came from a caller's seed (not private).
    """

    by: tuple[str, ...]
    keys: tuple[tuple[object, ...], ...]
    specs: tuple[AggSpec, ...]
    results: Mapping[str, Mapping[tuple[object, ...], MeanResult]] = field(repr=False)
    unsafe_seed: bool = False

    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per group: group columns, then each aggregator's fields."""
        out = []
        for key in self.keys:
            row: dict[str, Any] = dict(zip(self.by, key, strict=True))
            for spec in self.specs:
                r = self.results[spec.name][key]
                p = spec.name
                row[p] = r.estimate
                row[p + "_noise_scale"] = r.noise_scale
                row[p + "_ci_low"] = r.ci_low
                row[p + "_ci_high"] = r.ci_high
                row[p + "_n"] = r.n
                row[p + "_tau"] = r.tau
                row[p + "_method"] = r.method
                row[p + "_fallback"] = r.fallback
                row[p + "_eps_levels"] = [
                    {"eps": lv.eps, "n": lv.n, "weight": lv.weight,
                     "eps_effective": lv.eps_effective}
                    for lv in r.levels
                ]
            out.append(row)
        return out


def finalize_release(
    specs: Sequence[AggSpec],
    plans: Sequence[LevelPlan],
    tables: Sequence[Mapping[tuple[object, ...], GroupStats]],
    by: tuple[str, ...],
    keys: tuple[tuple[object, ...], ...] | None,
    release_key: ReleaseKey,
) -> ReleaseResult:
    """Finalize every (spec, group) of a release.

    Args:
        specs: the aggregators in the caller's order (the output column order).
        plans: from :func:`plan_levels`.
        tables: one level table per plan, keyed by group key (``()`` for global).
        by: group-by columns.
        keys: the public key set (None for a global release).
        release_key: the release's secret key.
    """
    order = keys if keys is not None else ((),)
    empty = GroupStats(())
    results: dict[str, dict[tuple[object, ...], MeanResult]] = {}
    for plan, table in zip(plans, tables, strict=True):
        for index, spec in enumerate(plan.specs):
            per_key = {}
            for key in order:
                stats = table.get(key, empty)
                per_key[key] = finalize_mean(spec, stats, index, release_key, key, spec.name)
            results[spec.name] = per_key
    return ReleaseResult(by, order, tuple(specs), results, release_key.unsafe)
