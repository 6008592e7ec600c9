"""One partial-DP MWEM release on any engine: count, run the rounds, materialize."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hdp_spark.core.kernels import MwemKernel
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial.mwem import MwemResult, MwemSpec
from hdp_spark.core.partial.output import PartialRelease
from hdp_spark.errors import ParameterError

if TYPE_CHECKING:
    from hdp_spark.core.pipeline import Engine

__all__ = ["release_mwem"]


def release_mwem(engine: Engine, spec: MwemSpec,
                 unsafe_seed: int | str | bytes | None) -> PartialRelease:
    """Count every cell of every marginal in one native pass of ``engine``, run the MWEM
    rounds on the driver over the public domain, and materialize the answers (the same
    kernel as ``agg``).

    Privacy:
        See :func:`hdp_spark.hdp_mwem`: ρ = ½ε₀² per attribute, (ℓ² + ℓ)ε₀²/4 per person
        (zCDP; replacement neighbours, n public). Each call is one release.
    """
    if not isinstance(spec, MwemSpec):
        msg = f"`spec` must come from hdp_mwem(...), got {type(spec).__name__}."
        raise ParameterError(msg)
    kernel = MwemKernel()
    result: MwemResult = kernel.run(spec, engine, (), ((),), ReleaseKey.resolve(unsafe_seed))[()]
    table = engine.materialize((), [(f.suffix, f) for f in kernel.items(spec)],
                               kernel.table_rows(spec, result), result.report["unsafe_seed"])
    return PartialRelease(table, result.report)
