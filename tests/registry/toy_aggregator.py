"""A toy aggregator defined outside the library and registered once: the descriptor test of
issue 49 (``test_toy_aggregator.py``). Nothing else in the package knows it.

``toy_count(eps=, eps0=)``: the number of rows whose ε_i >= ε₀, plus discrete Laplace noise
of scale 1/ε₀. Sensitivity argument: adding or removing one row with ε_i >= ε₀ moves the
count by exactly 1, and a row with ε_i < ε₀ is not counted at all (the ε column is public),
so the release is ε₀-DP for the counted rows and 0-DP for the others; every row's loss is at
most its own ε_i. The noise is keyed by (release key, group, name, exact count), as the
library's own kernels bind theirs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hdp_spark import Aggregator, SqlForm
from hdp_spark.core.kernels import release_specs
from hdp_spark.core.noise import ReleaseKey, discrete_laplace, encode_context
from hdp_spark.core.pipeline import (
    Engine,
    GroupCells,
    LevelRequest,
    NoiseContext,
    OutputField,
)
from hdp_spark.core.stats import GroupStats
from hdp_spark.errors import ParameterError
from hdp_spark.jobs.kind import AggregatorKind, KindResult

NAME = "toy_count"


@dataclass(frozen=True, slots=True)
class ToyCountSpec:
    """The toy's spec: the ε column, ε₀ and the output name. ``column``, ``lower``,
    ``upper``, ``fill_value`` and ``eps_grid`` are what a level request reads (the count
    reads no value: the ε column itself stands in, its sums unused)."""

    eps: str
    eps0: float
    alias: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.eps0, int | float) or not 0 < self.eps0 < math.inf:
            msg = f"`eps0` must be a positive finite number, got {self.eps0!r}."
            raise ParameterError(msg)

    @property
    def name(self) -> str:
        return self.alias or f"{self.eps}_toy_count"

    column = property(lambda self: self.eps)
    lower = property(lambda self: 0.0)
    upper = property(lambda self: 1.0)
    fill_value = property(lambda self: 0.5)  # the midpoint: the SQL call's default fill
    eps_grid = property(lambda self: None)


def toy_count(*, eps: str, eps0: float, alias: str | None = None) -> ToyCountSpec:
    """The toy aggregator's constructor.

    Privacy:
        Each row with ε_i >= ε₀ is protected at ε₀, the others are not read (0); the ε
        column is public.
    """
    return ToyCountSpec(eps, eps0, alias)


@dataclass(frozen=True, slots=True)
class ToyResult:
    count: int
    levels: tuple[tuple[float, int], ...]


def _eligible(spec: ToyCountSpec, stats: GroupStats) -> int:
    return sum(c for v, c in zip(stats.levels, stats.counts, strict=True) if v >= spec.eps0)


def _draw(spec: ToyCountSpec, stats: GroupStats, key: ReleaseKey, group: tuple[object, ...],
          label: str) -> ToyResult:
    exact = _eligible(spec, stats)
    stream = key.stream(encode_context((NAME, label, tuple(group), exact)))
    noise = discrete_laplace(1 / Fraction(spec.eps0), stream)
    levels = tuple(zip(stats.levels, stats.counts, strict=True))
    return ToyResult(exact + noise, levels)


@dataclass(frozen=True, slots=True)
class ToyKernel:
    """A batch cell kernel over the level request (counts per ε level)."""

    def fields(self, spec: ToyCountSpec) -> tuple[OutputField, ...]:
        return (OutputField("", "int"), OutputField("_eps0", "float"))

    def values(self, spec: ToyCountSpec, r: ToyResult) -> tuple[Any, ...]:
        return (r.count, float(spec.eps0))

    def request(self, spec: ToyCountSpec) -> LevelRequest:
        return LevelRequest(spec.eps, None, (spec,))  # type: ignore[arg-type]

    def finalize(self, spec: ToyCountSpec, cells: GroupCells, noise: NoiseContext
                 ) -> ToyResult:
        return _draw(spec, cells.stats, noise.key, noise.group, noise.label)

    def finalize_batch(self, spec: ToyCountSpec, stats: Sequence[GroupStats], slot: int,
                       key: ReleaseKey, groups: tuple[tuple[object, ...], ...], label: str
                       ) -> list[ToyResult]:
        return [_draw(spec, s, key, g, label) for s, g in zip(stats, groups, strict=True)]


def _release(adapter: Any, df: Any, specs: Sequence[Any], by: tuple[str, ...],
             keys: Any, unsafe_seed: str | None) -> KindResult:
    result = release_specs(adapter.engine(df), specs, by=list(by) or None,
                           keys=list(keys) if keys is not None else None,
                           unsafe_seed=unsafe_seed)
    rows = [dict(zip([*result.by, *(n for n, _ in result.columns())], row, strict=True))
            for row in result.rows()]
    effective: dict[str, dict[tuple[Any, float], float]] = {}
    for spec in specs:
        per = result.results[spec.name]
        effective[spec.name] = {
            (key, eps): (float(spec.eps0) if eps >= spec.eps0 else 0.0)
            for key in result.keys for eps, _ in per[key].levels}
    return KindResult(rows, effective)


def _build(params: Mapping[str, Any]) -> ToyCountSpec:
    return toy_count(**dict(params))


def _explain(engine: Engine, specs: Sequence[Any], *, by: Any, keys: Any) -> Any:
    """The toy's explain: rows per (group, aggregator) with the rows counted and the noise's
    (1 - 0.05) half-width, from a counts-only pass (the ε column only)."""
    from hdp_spark.core.keys import normalize_by

    by_t = normalize_by(by, specs)
    found = engine.release_keys(keys, by_t)
    tables = engine.cells([ToyKernel().request(s) for s in specs], by_t, found)
    order = found if found is not None else tuple(tables[0]) or ((),)
    rows = []
    for key in order:
        for spec, table in zip(specs, tables, strict=True):
            stats = table.get(key, GroupStats(()))
            half = math.log(1 / 0.05) / float(spec.eps0)
            rows.append((*key, spec.name, NAME, _eligible(spec, stats), half))
    columns = [(f.suffix, f) for f in (OutputField("aggregator", "str"),
                                      OutputField("kind", "str"),
                                      OutputField("n", "int"),
                                      OutputField("half_width", "float"))]
    return by_t, columns, rows


KIND = AggregatorKind(
    name=NAME,
    build=_build,
    release=_release,
    eps_column=lambda s: s.eps,
    eps_grid=lambda s: None,
    output_name=lambda s: s.name,
    intervals=lambda s: (),
    describe=dataclasses.asdict,
    parameters=lambda: {"eps", "eps0", "alias"},
)

def _sql_spec(column: str, eps: str, bounds: Any, options: dict[str, Any]) -> ToyCountSpec:
    """``hdp_aggregate('toy_count', eps, eps, 0, 1, '{"eps0": 1.0}')``: the value column is
    the ε column itself, on [0, 1] (its sums are not used)."""
    return toy_count(eps=eps, **options)


TOY = Aggregator(NAME, (ToyCountSpec,), ToyKernel(), toy_count, column_field="count",
                 job_kind=KIND, explain=_explain,
                 sql_form=SqlForm("level", _sql_spec, toy_count(eps="eps", eps0=1.0)))
