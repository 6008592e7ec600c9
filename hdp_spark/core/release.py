"""Level plans of the mean: which means share one pass over an ε column and grid.

The orchestration itself is :mod:`hdp_spark.core.pipeline` (one for every aggregator);
this module keeps the mean's historical validation (:func:`plan_levels`). The means-only
result type, :class:`~hdp_spark.core.kernels.ReleaseResult`, lives with the mean's kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hdp_spark.core.levels import EpsGrid
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.errors import ParameterError

__all__ = ["LevelPlan", "plan_levels"]

AggSpec = MeanSpec


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
