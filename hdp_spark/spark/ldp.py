"""Spark implementation of the local-DP aggregators and of the simulation transform.

Aggregators: per row only native column expressions (ε -> level, report -> fixed-point
integer split in two limbs), per (group, ε level, index) native ``count``/``sum``; the driver
finalizes the small table (:mod:`hdp_spark.core.ldp.release`). No Python runs per row.
The expressions use the same IEEE-754 operations as :mod:`hdp_spark.pandas.ldp`, so both
engines produce identical tables and outputs for identical reports.

Simulation (:func:`ldp_simulate`) is the one place a vectorized Python function runs on
executors: ``mapInPandas`` randomizes each Arrow batch with numpy. It is a test and
reproduction helper; in production each device randomizes its own value.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from hdp_spark.core.keys import normalize_key
from hdp_spark.core.ldp.oracle import FrequencyOracle, Projection
from hdp_spark.core.ldp.release import REPORT_MARK, count_kind, report_roles
from hdp_spark.core.ldp.specs import LdpSpec, LdpVectorMeanSpec
from hdp_spark.core.ldp.stats import LdpCells, LdpGroupStats, build_ldp_groups
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.errors import EpsilonColumnError, ParameterError, SchemaError
from hdp_spark.ldp.randomizers import DuchiRandomizer, JLRandomizer, Randomizer, resolve_key
from hdp_spark.spark._common import (
    dataframe_schema,
    field,
    is_dataframe,
    key_frame,
    mark_unsafe,
)
from hdp_spark.spark.ldp_inputs import level_of, limbs, row_inputs, vector_parts, vector_q

__all__ = ["ldp_oracle", "ldp_simulate", "ldp_tables", "report_marks"]


_INF = float("inf")


def _collect_cells(
    frame: DataFrame, by: tuple[str, ...], sums: list[str]
) -> list[tuple[tuple[object, ...], float, int, int, list[int]]]:
    rows = (
        frame.groupBy(*by, "__level", "__idx")
        .agg(F.count(F.lit(1)).alias("__n"), *[F.sum(s).alias(s) for s in sums])
        .collect()
    )
    width = len(by)
    return [
        (
            tuple(normalize_key(k) for k in tuple(r)[:width]),
            float(r["__level"]),
            int(r["__idx"]),
            int(r["__n"]),
            [int(r[s]) if r[s] is not None else 0 for s in sums],
        )
        for r in rows
    ]


def _scalar_frame(df: DataFrame, spec: LdpSpec, by: tuple[str, ...]) -> DataFrame:
    """One row per report: (group, level, index, limbs of q)."""
    level = F.col("__level")
    idx, q = row_inputs(spec, "`__level`")
    return df.select(*by, level, idx.alias("__idx"), *limbs(q, "__"))


def _vector_frame(df: DataFrame, spec: LdpVectorMeanSpec, by: tuple[str, ...]) -> DataFrame:
    """One row per coordinate after ``posexplode``: small expressions that stay
    code-generated (one sum per coordinate was ~5x slower at d = 10, measured)."""
    level = F.col("__level")
    p = vector_parts(spec, "`__level`")
    exploded = df.select(*by, level, F.expr(p.valid).alias("__valid"),
                         F.expr(p.use).alias("__use"), F.expr(p.bound).alias("__bound"),
                         F.posexplode(F.expr(p.array)).alias("__pos", "__val"))
    q = vector_q("`__val`", "`__use`", "`__bound`", spec)
    return exploded.select(
        *by, "__level",
        F.when(F.col("__valid"), F.col("__pos")).otherwise(F.lit(-1)).alias("__idx"),
        *limbs(q, "__"),
    )


def _cells(
    df: DataFrame, spec: LdpSpec, by: tuple[str, ...]
) -> list[tuple[tuple[object, ...], float, int, int, int, int]]:
    frame = (_vector_frame(df, spec, by) if type(spec) is LdpVectorMeanSpec
             else _scalar_frame(df, spec, by))
    return [(k, lv, ix, n, s[0], s[1]) for k, lv, ix, n, s in
            _collect_cells(frame, by, ["__hi", "__lo"])]


def check_ldp_columns(schema: T.StructType, specs: Sequence[LdpSpec]) -> None:
    """Every spec's ε and report columns are in ``schema`` with a usable type.

    Raises:
        SchemaError: a column is missing or of the wrong type (public facts).
    """
    for spec in specs:
        field(schema, spec.eps, "ε", numeric=True)
        for role, column, mechanism in report_roles(spec):
            f = field(schema, column, role, numeric=mechanism != "duchi")
            if mechanism == "duchi" and not isinstance(f.dataType, T.ArrayType):
                msg = f"report column `{column}` must be an array, got " \
                      f"{f.dataType.simpleString()}."
                raise SchemaError(msg)


def ldp_tables(
    df: DataFrame,
    specs: Sequence[LdpSpec],
    by: tuple[str, ...],
    keys: tuple[tuple[object, ...], ...] | None,
) -> list[dict[tuple[object, ...], LdpGroupStats]]:
    """The per-(group, ε level, index) tables of each spec, one Spark job per spec."""
    schema = dataframe_schema(df)
    by_fields = [field(schema, c, "group", numeric=False) for c in by]
    check_ldp_columns(schema, specs)
    if keys is not None:
        key_df = key_frame(df.sparkSession, by_fields, keys)
        df = df.join(F.broadcast(key_df), on=list(by), how="left_semi")
    tables = []
    for spec in specs:
        cells = _cells(df.withColumn("__level", level_of(spec)), spec, by)
        tables.append(build_ldp_groups(spec.eps, LdpCells.from_rows(cells), count_kind(spec)))
    return tables


def report_marks(schema: T.StructType) -> dict[str, str]:
    """``{column: mechanism}`` of the fields whose metadata carries the report marker."""
    out = {}
    for f in schema.fields:
        mark = (f.metadata or {}).get(REPORT_MARK)
        if isinstance(mark, str):
            out[f.name] = mark
    return out


def ldp_oracle(
    df: DataFrame,
    *,
    eps: str,
    d: int,
    beta: float = 0.05,
    projection: Projection = "jl",
    m: int | None = None,
    phi_seed: int | None = None,
) -> FrequencyOracle:
    """Plan a :class:`~hdp_spark.ldp.FrequencyOracle` from the ε column (pass A).

    One native ``groupBy(ε).count()``; the driver sizes m from the ε histogram.

    Privacy:
        Reads the ε column only (public in this model).
    """
    field(df.schema, eps, "ε", numeric=True)
    rows = df.groupBy(F.col(eps).cast("double").alias("e")).count().collect()
    levels = [math.nan if r["e"] is None else float(r["e"]) for r in rows]
    counts = [int(r["count"]) for r in rows]
    bad = sum(c for lv, c in zip(levels, counts, strict=True) if not (0 <= lv < _INF))
    if bad:
        msg = f"Column `{eps}` must hold finite ε >= 0; {bad} row(s) break this rule."
        raise EpsilonColumnError(msg)
    return FrequencyOracle.from_levels(
        levels, counts, d, beta=beta, projection=projection, m=m, phi_seed=phi_seed
    )


_ID_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.StringType)


def _report_fields(randomizer: Randomizer, output: str) -> list[T.StructField]:
    if isinstance(randomizer, JLRandomizer):
        return [T.StructField(output + "_j", T.LongType()),
                T.StructField(output + "_b", T.ByteType())]
    if isinstance(randomizer, DuchiRandomizer):
        return [T.StructField(output, T.ArrayType(T.DoubleType()))]
    if randomizer.mechanism == "rr":
        return [T.StructField(output, T.ByteType())]
    return [T.StructField(output, T.DoubleType())]


def ldp_simulate(
    df: DataFrame,
    column: str,
    *,
    eps: str,
    randomizer: Randomizer,
    output: str | None = None,
    key: ReleaseKey | None = None,
    unsafe_seed: int | str | bytes | None = None,
    id: str | None = None,
) -> DataFrame:
    """SIMULATION ONLY: add LDP reports of ``column`` to a central Spark table.

    Real local DP randomizes on the device; this helper exists to test pipelines and
    reproduce experiments. It runs a vectorized numpy function per Arrow batch
    (``mapInPandas``). Each row draws from its own ChaCha20 stream keyed by the release
    key, the randomizer and the row's (id, value, ε), computed inside the task: a
    re-executed task (retry, second action, cache eviction), another batch size or
    another partitioning gives every row the same report, pandas gives the same reports
    for the same key and ids, and changed input gets unrelated ones.

    Same arguments as :func:`hdp_spark.pandas.ldp_simulate`, except that ``id`` is
    required: a Spark row has no stable position (``monotonically_increasing_id`` changes
    with the partitioning), so name a column that identifies each row (e.g. the user id).
    The report columns carry the field metadata ``{"hdp_ldp_report": mechanism}``; with
    ``unsafe_seed`` every column also carries ``{"hdp_unsafe_seed": true}``.

    Privacy:
        Each report is ε_i-LDP for its row's value; the input table is NOT protected.
        The release key is shipped to the executors (it only protects reproducibility in
        a simulation).
    """
    if not is_dataframe(df):
        msg = f"`df` must be a Spark DataFrame, got {type(df).__name__}."
        raise ParameterError(msg)
    if not isinstance(id, str):
        msg = (
            "`id` must name a column identifying each row (e.g. the user id), got "
            f"{type(id).__name__}: on Spark a row's report is keyed by its id, because a "
            "row has no position that survives repartitioning."
        )
        raise ParameterError(msg)
    field(df.schema, column, "value", numeric=False)
    field(df.schema, eps, "ε", numeric=True)
    id_field = field(df.schema, id, "id", numeric=False)
    if not isinstance(id_field.dataType, (*_ID_TYPES,)):
        msg = (
            f"id column `{id}` must hold integers or strings, got "
            f"{id_field.dataType.simpleString()}."
        )
        raise SchemaError(msg)
    k = resolve_key(key, unsafe_seed)
    name = output or f"{column}_report"
    fields = _report_fields(randomizer, name)
    taken = {f.name for f in df.schema.fields}
    clash = [f.name for f in fields if f.name in taken]
    if clash:
        msg = f"`output` would overwrite existing column(s) {clash!r}; choose another name."
        raise ParameterError(msg)
    schema = T.StructType([*df.schema.fields, *fields])
    material, unsafe = k.material, k.unsafe

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        from hdp_spark.pandas.ldp import simulate_frame

        task_key = ReleaseKey(material, unsafe)
        for pdf in batches:
            yield simulate_frame(pdf, column, eps, randomizer, task_key, name, id)

    out = df.mapInPandas(run, schema)  # design-ok: LDP simulation runs on the device in production
    reports = {f.name for f in fields}
    out = out.select(*[
        out[f.name].alias(f.name, metadata={**f.metadata, REPORT_MARK: randomizer.mechanism})
        if f.name in reports else out[f.name]
        for f in schema.fields
    ])
    return mark_unsafe(out, k.unsafe)
