"""``histogram`` and ``histogram_release``, once for every engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hdp_spark.core.histogram.release import HistogramRelease, check_histogram_options
from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.kernels import HistogramKernel, release_specs
from hdp_spark.core.keys import normalize_by
from hdp_spark.core.pipeline import Engine
from hdp_spark.core.schema import TableSchema
from hdp_spark.front import spec_of

__all__ = ["histogram", "histogram_release"]


def histogram_release(
    engine: Engine,
    spec: HistogramSpec,
    *,
    by: str | Sequence[str] | None = None,
    keys: Any = None,
    unsafe_seed: int | str | bytes | None = None,
    project: bool = False,
    counts: bool = False,
    schema: TableSchema | None = None,
) -> HistogramRelease:
    """Run one histogram release and return the engine-neutral result.

    See :func:`histogram` for the arguments.

    Privacy:
        One release, exactly as :func:`histogram` (fresh noise unless ``unsafe_seed``).
    """
    spec = spec_of(spec)
    by_t = normalize_by(by, [spec])
    check_histogram_options(spec, by_t, project, counts)
    r = release_specs(engine, [spec], by=by_t or None, keys=keys, schema=schema,
                      unsafe_seed=unsafe_seed, kernels={0: HistogramKernel(project)})
    return HistogramRelease(r.by, r.keys, spec, r.results[spec.name], project, counts,
                            r.unsafe_seed)


def histogram(
    engine: Engine,
    spec: HistogramSpec,
    *,
    by: str | Sequence[str] | None = None,
    keys: Any = None,
    unsafe_seed: int | str | bytes | None = None,
    project: bool = False,
    counts: bool = False,
    schema: TableSchema | None = None,
) -> Any:
    """Release a heterogeneous-DP histogram of a DataFrame (pandas or Spark).

    Args:
        df: the input table, one row per user (ε column included).
        spec: from ``hdp_histogram(column, eps=..., categories=[...])``.
        by: optional group-by column(s), public grouping attributes only: a column a
            spec reads as data (value, category, report or user id column) or as its ε
            column is refused, as grouping by it would publish exact per-value counts
            through ``_n``.
        keys: the public key set of a grouped release (list of values, list of tuples for
            several ``by`` columns, or a DataFrame with the ``by`` columns). Every key gets
            all bins; rows with other keys are left out.
            Key sets must be public inputs from outside the data; the rules, what is
            refused and the output order are those of ``agg``.
        unsafe_seed: reproducible noise for tests and examples. UNSAFE in production:
            anyone who knows the seed can remove the noise.
        project: release the Euclidean projection of each group's noisy vector onto the
            probability simplex instead of per-bin clipping (post-processing; needs an
            ``other`` bin).
        counts: add the counts view ``count``, ``count_ci_low``, ``count_ci_high``
            (frequency columns × n; n is public).
        schema: optional :class:`~hdp_spark.schema.TableSchema` of ``df``: its release
            rules run first (one aggregate pass, counts only) and a violation raises
            before any noise is drawn, so a rejected release spends nothing.

    Returns:
        A long table, one row per (group, released bin); the columns are documented in
        :func:`hdp_spark.hdp_histogram`. ``category`` has the type of the labels.

    Engines:
        On Spark, one job; the result is a DataFrame built from the released rows, so
        ``show()`` then ``collect()`` return the same numbers (nothing downstream re-runs
        the mechanism). A Spark Column aggregator is accepted as its spec.

    Privacy:
        Each call is one release with fresh noise; calling it twice spends the budget
        twice. The returned frame is materialized: reading it again never redraws noise.
        Protected unit: one row; its privacy loss is at most its level's
        ``eps_effective`` <= ε_i. Public: ε_i (the per-group ε histogram and n are in the
        output), the domain, the ``other`` rule and the key set. See
        :func:`hdp_spark.hdp_histogram`.
    """
    result = histogram_release(
        engine, spec, by=by, keys=keys, unsafe_seed=unsafe_seed, project=project,
        counts=counts, schema=schema,
    )
    return engine.materialize(result.by, result.fields(), result.tuples(), result.unsafe_seed)
