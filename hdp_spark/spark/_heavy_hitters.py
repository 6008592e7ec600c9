"""Spark backend of the partial-DP releases (classic PySpark and Spark Connect).

Same plan, names and output columns as :mod:`hdp_spark.pandas._heavy_hitters`; only
native operations touch rows:

* recoding: per attribute, arithmetic for a domain of consecutive integers, a CASE WHEN
  chain of equalities up to 64 values, a broadcast hash join above; null/out-of-domain ->
  the "other" code. Unless the input is cached, the n x d code table is persisted for
  the release and unpersisted at the end;
* one pass per tree level: per noisy node a mixed-radix ``long`` key expression (shifted
  into a node-private range), the children's lists tested with ``isin`` (Spark turns long
  literal lists into a hash-set ``InSet``), the keys exploded and counted by
  ``groupBy(key).count()`` with a ``count > floor`` filter, collected (at most
  n/(floor+1) rows per node);
* the exact counts of the released keys, read from the root pass's persisted aggregate
  (one small job over at most n aggregated rows, not over the data).

The driver logic is :mod:`hdp_spark.core.partial`.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.window import Window

from hdp_spark.core.partial.spec import AttributeDomain, AttributeHistogramSpec, CodedSpec
from hdp_spark.core.partial.tree import NodeRequest, key_space
from hdp_spark.errors import InternalError, ParameterError, SchemaError
from hdp_spark.spark._common import INTEGRAL, NUMERIC

__all__ = [
    "SparkTreeCounter",
    "attribute_counts",
    "bounded_persons",
    "encode_codes",
]

LOOKUP_JOIN_MIN = 64
"""Domains with more values than this are recoded by a broadcast join, not a literal scan."""


def _check_frame(df: object) -> DataFrame:
    if not (type(df).__name__ == "DataFrame" and type(df).__module__.startswith("pyspark")):
        msg = f"`df` must be a Spark DataFrame, got {type(df).__name__}."
        raise ParameterError(msg)
    return df  # type: ignore[return-value]


def _field(df: DataFrame, column: str, role: str) -> T.StructField:
    for f in df.schema.fields:
        if f.name == column:
            return f
    msg = f"{role} column `{column}` is not in the table."
    raise SchemaError(msg)


def _check_type(field: T.StructField, dom: AttributeDomain) -> None:
    dt = field.dataType
    kind = dom.kind
    if kind == "str":
        ok = isinstance(dt, T.StringType | T.VarcharType | T.CharType)
    elif kind == "bool":
        ok = isinstance(dt, T.BooleanType)
    else:
        ok = isinstance(dt, NUMERIC)
    if not ok:
        msg = (
            f"attribute column `{dom.column}` has type {dt.simpleString()}, which cannot hold "
            f"the {kind} values of its domain."
        )
        raise SchemaError(msg)


def _lookup_type(dom: AttributeDomain) -> str:
    return {"str": "string", "int": "bigint", "float": "double", "bool": "boolean"}[
        dom.output_type
    ]


def _int_range_start(dom: AttributeDomain) -> int | None:
    """a if the domain is exactly the integers a, a+1, ..., a+m-1 (in order), else None."""
    values = dom.values
    if dom.output_type != "int":
        return None
    first = values[0]
    if not isinstance(first, int):
        return None
    return first if list(values) == list(range(first, first + len(values))) else None


def encode_codes(df: DataFrame, domains: Sequence[AttributeDomain]) -> DataFrame:
    """A table of int columns ``__c0..`` (attribute codes; "other" for null/out-of-domain)."""
    df = _check_frame(df)
    for dom in domains:
        _check_type(_field(df, dom.column, "attribute"), dom)
    cur = df
    exprs = []
    for j, dom in enumerate(domains):
        start = _int_range_start(dom)
        col = F.col(dom.column)
        if start is not None:  # values start..start+m-1: arithmetic, O(1) per row
            inside = (col >= F.lit(start)) & (col <= F.lit(start + len(dom.values) - 1))
            if not isinstance(_field(df, dom.column, "attribute").dataType, INTEGRAL):
                inside = inside & (col == F.floor(col))
            code = F.when(inside, (col - F.lit(start)).cast("int")).otherwise(
                F.lit(dom.other_code))
        elif len(dom.values) <= LOOKUP_JOIN_MIN:  # a CASE WHEN chain of primitive equalities
            code = F.lit(dom.other_code)
            for i in reversed(range(len(dom.values))):
                code = F.when(col == F.lit(dom.values[i]), F.lit(i)).otherwise(code)
        else:
            v, k = f"__hh_v{j}", f"__hh_k{j}"
            lookup = cur.sparkSession.createDataFrame(
                [(val, i) for i, val in enumerate(dom.values)],
                schema=f"{v} {_lookup_type(dom)}, {k} int",
            )
            cur = cur.join(F.broadcast(lookup), cur[dom.column] == lookup[v], "left")
            code = F.coalesce(F.col(k), F.lit(dom.other_code))
        exprs.append(code.cast("int").alias(f"__c{j}"))
    return cur.select(*exprs)


def bounded_persons(df: DataFrame, privacy_unit: str | None, max_rows: int = 1) -> DataFrame:
    """The rows of the persons with at most ``max_rows`` rows, when ``privacy_unit`` names
    the id column (else ``df``): the rule and its argument are
    :func:`hdp_spark.pandas._heavy_hitters.bounded_persons`'s (a null or NaN id, and every
    row of an id with more rows, left out; no error). One native window over the id: one
    shuffle, no Spark job of its own.

    Raises:
        SchemaError: the id column is not in the table (a public fact).
    """
    if privacy_unit is None:
        return df
    _field(df, privacy_unit, "`privacy_unit`")
    uid = F.col(privacy_unit)
    present = uid.isNotNull()
    if isinstance(df.schema[privacy_unit].dataType, T.FloatType | T.DoubleType):
        present = present & ~F.isnan(uid)
    rows = F.count(F.lit(1)).over(Window.partitionBy(uid))
    return (df.where(present).withColumn("__hdp_person_rows", rows)
            .where(F.col("__hdp_person_rows") <= F.lit(max_rows)).drop("__hdp_person_rows"))


def _is_cached(df: DataFrame) -> bool:
    try:
        level = df.storageLevel
    except Exception:  # an engine without the property: assume not cached
        return False
    return bool(level.useMemory or level.useDisk)


def _key(attrs: Sequence[int], weights: Sequence[int]) -> Column:
    terms = [F.col(f"__c{j}").cast("long") * F.lit(w).cast("long")
             for j, w in zip(attrs, weights, strict=True)]
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


class SparkTreeCounter:
    """The :class:`~hdp_spark.core.partial.heavy_hitters.TreeCounter` of a Spark table.

    Holds the persisted code table; use as a context manager (or call :meth:`close`).
    """

    def __init__(self, codes: DataFrame, sizes: Sequence[int], persist: bool = True) -> None:
        self._codes = codes.persist(StorageLevel.MEMORY_AND_DISK) if persist else codes
        self._persisted = persist
        self._sizes = tuple(sizes)
        # The aggregate of the last single-node level (the root): the released keys' exact
        # counts are read from it instead of a further pass over the rows.
        self._root: tuple[tuple[int, ...], DataFrame] | None = None

    @classmethod
    def from_frame(cls, df: DataFrame, spec: CodedSpec) -> SparkTreeCounter:
        """Recode ``df`` against the spec's domains (lazy).

        The code table is persisted for the release unless ``df`` is itself cached:
        recoding a cached table on each level pass is cheaper than building a second
        cache, while an uncached source would otherwise be re-read by every pass.
        """
        return cls(encode_codes(df, spec.domains), [d.size for d in spec.domains],
                   persist=not _is_cached(df))

    def close(self) -> None:
        """Release the persisted tables."""
        self._drop_root()
        if self._persisted:
            self._codes.unpersist()
            self._persisted = False

    def _drop_root(self) -> None:
        if self._root is not None:
            self._root[1].unpersist()
            self._root = None

    def __enter__(self) -> SparkTreeCounter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def count_level(
        self, requests: Sequence[NodeRequest], floor: int
    ) -> dict[int, dict[int, int]]:
        """One Spark job: per node, the counts of the candidate keys above ``floor``.

        Each node's keys are shifted by the total key space of the nodes before it, so one
        ``long`` column carries (node, key): the sum of the key spaces is at most the
        product of all domain sizes plus the node count, below 2^63 because
        :class:`~hdp_spark.core.partial.spec.HeavyHittersSpec` bounds that product by 2^62.
        """
        if not requests:
            return {}
        offsets: list[int] = []
        entries = []
        total = 0
        for r in requests:
            offsets.append(total)
            total += key_space(r.attrs, self._sizes)
            cond: Column | None = None
            for f in r.filters:
                inside = _key(f.attrs, f.weights).isin(list(f.members))
                cond = inside if cond is None else cond & inside
            entry = F.lit(offsets[-1]).cast("long") + _key(r.attrs, r.weights)
            entries.append(entry if cond is None else F.when(cond, entry))
        if total >= 2**63:  # pragma: no cover - excluded by MAX_KEY_SPACE
            msg = "level key space overflows int64"
            raise InternalError(msg)
        counts = (
            self._codes.select(F.explode(F.array(*entries)).alias("k"))
            .where(F.col("k").isNotNull())
            .groupBy("k")
            .count()
        )
        self._drop_root()
        if len(requests) == 1:
            counts = counts.persist(StorageLevel.MEMORY_AND_DISK)
            self._root = (requests[0].weights, counts)
        rows = counts.where(F.col("count") > F.lit(floor)).collect()
        out: dict[int, dict[int, int]] = {r.node: {} for r in requests}
        for row in rows:
            k = int(row["k"])
            i = bisect.bisect_right(offsets, k) - 1
            out[requests[i].node][k - offsets[i]] = int(row["count"])
        return out

    def count_keys(self, weights: Sequence[int], keys: Sequence[int]) -> dict[int, int]:
        """Exact counts of the given whole-record keys.

        When the last level pass was the root's (same key weights, offset 0), its
        aggregate already holds every root candidate's count: one small job over it.
        Otherwise one pass over the rows.
        """
        if self._root is not None and tuple(weights) == self._root[0]:
            counts = self._root[1]
        else:
            key = _key(range(len(self._sizes)), weights)
            counts = self._codes.select(key.alias("k")).groupBy("k").count()
        rows = counts.where(F.col("k").isin(list(keys))).collect()
        return {int(r["k"]): int(r["count"]) for r in rows}


def attribute_counts(df: object, spec: AttributeHistogramSpec) -> list[dict[int, int]]:
    """Exact per-attribute counts ``{code: rows}`` of ``attribute_histograms``: one Spark
    job (plus one with ``privacy_unit``).

    Privacy:
        NOT a release: exact counts for the finalizer (noise is added there); never
        publish them.
    """
    frame = bounded_persons(_check_frame(df), spec.privacy_unit, spec.max_rows)
    codes = encode_codes(frame, spec.domains)
    pairs = F.array(*[
        F.struct(F.lit(j).alias("a"), F.col(f"__c{j}").alias("c"))
        for j in range(len(spec.domains))
    ])
    rows = (
        codes.select(F.explode(pairs).alias("e"))
        .select(F.col("e.a").alias("a"), F.col("e.c").alias("c"))
        .groupBy("a", "c")
        .count()
        .collect()
    )
    counts: list[dict[int, int]] = [{} for _ in spec.domains]
    for r in rows:
        counts[int(r["a"])][int(r["c"])] = int(r["count"])
    return counts
