"""The means-only view of a release: level plans and :class:`ReleaseResult`.

The orchestration itself is :mod:`hdp_spark.core.pipeline` (one for every aggregator);
this module keeps the mean's historical validation (:func:`plan_levels`) and result type.
Computing once and materializing is what makes ``show()`` followed by ``collect()`` return
the same numbers: the backends build their output from released rows, never from a lazy
plan that would run the mechanism again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hdp_spark.core.levels import EpsGrid
from hdp_spark.core.mean.finalize import MeanResult
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.errors import ParameterError

__all__ = ["LevelPlan", "ReleaseResult", "plan_levels"]

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
        from hdp_spark.core.kernels import MeanKernel

        kernel = MeanKernel()
        out = []
        for key in self.keys:
            row: dict[str, Any] = dict(zip(self.by, key, strict=True))
            for spec in self.specs:
                values = kernel.values(spec, self.results[spec.name][key])
                row.update((spec.name + f.suffix, v)
                           for f, v in zip(kernel.fields(spec), values, strict=True))
            out.append(row)
        return out
