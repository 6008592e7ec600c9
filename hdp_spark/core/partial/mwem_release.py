"""One partial-DP MWEM release on any engine: count, run the rounds, materialize."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial.mwem import MWEM_COLUMNS, MwemSpec, mwem_requests, run_mwem
from hdp_spark.core.partial.output import PartialRelease
from hdp_spark.core.pipeline import OutputField
from hdp_spark.errors import ParameterError

if TYPE_CHECKING:
    from hdp_spark.core.pipeline import Engine

__all__ = ["release_mwem"]


def release_mwem(engine: Engine, spec: MwemSpec,
                 unsafe_seed: int | str | bytes | None) -> PartialRelease:
    """Count every cell of every marginal in one native pass of ``engine``, run the MWEM
    rounds on the driver over the public domain, and materialize the answers.

    Privacy:
        See :func:`hdp_spark.hdp_mwem`: ρ = ½ε₀² per attribute, (ℓ² + ℓ)ε₀²/4 per person
        (zCDP; replacement neighbours, n public). Each call is one release.
    """
    if not isinstance(spec, MwemSpec):
        msg = f"`spec` must come from hdp_mwem(...), got {type(spec).__name__}."
        raise ParameterError(msg)
    with engine.tree_counter(spec) as counter:
        counts = counter.count_level(mwem_requests(spec), -1)
    result = run_mwem(spec, [counts.get(i, {}) for i in range(len(spec.workload))],
                      ReleaseKey.resolve(unsafe_seed))
    fields = [OutputField("marginal", "str"),
              *(OutputField(d.column, d.output_type + "?") for d in spec.domains),
              *(OutputField(c, "float") for c in MWEM_COLUMNS)]
    rows = [(r["marginal"], *(float(r[d.column]) if r[d.column] is not None
                              and d.output_type == "float" else r[d.column]
                              for d in spec.domains), r["mwem_fraction"])
            for r in result.rows]
    table = engine.materialize((), [(f.suffix, f) for f in fields], rows,
                               result.report["unsafe_seed"])
    return PartialRelease(table, result.report)
