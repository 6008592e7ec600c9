"""Spark backend of the user-level heterogeneous mean (:mod:`hdp_spark.core.user_mean`).

Same function names, keywords and output columns as :mod:`hdp_spark.pandas._user_mean`.
No per-row Python: every stage is native.

* pass 1: ``groupBy(user)`` over native per-row expressions (clamp + fixed-point encoding,
  ε validity, group id from a broadcast join with the public key set) gives one row per
  user: k, Σ encoded value, min/max ε, group. It is persisted for the later stages.
* census: ``groupBy(group, k, ε level)`` of the user table, O(#groups × #(k, ε)) rows.
* boundary cuts: only when a group boundary splits a k bucket, the order-key threshold is
  found by a radix selection (``groupBy(prefix of the hash)``, then collecting at most
  16,384 (hash, id) pairs of public ids); one or two small jobs.
* first stage: one ``groupBy(group, role, k, ε level)`` with the G_var users (at most
  ``var_users`` per group) kept apart; the role is a native expression of (k, order key)
  against the broadcast cut table.
* final stage: clamp bounds per (group, k) are broadcast and joined; one
  ``groupBy(group, k, ε level)`` of ``least(greatest(s, A), B)``.

Only these small tables reach the driver, never the per-user table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from hdp_spark.core.levels import BELOW_GRID_LEVEL, EPS_CAP, INVALID_LEVEL
from hdp_spark.core.user_mean import (
    HASH_HEX,
    Census,
    CensusCell,
    Cut,
    FinalCell,
    FirstStage,
    MeanCell,
    OrderKey,
    RankQuery,
    UserMeanSpec,
    VarUser,
    order_key,
)
from hdp_spark.errors import InternalError, ParameterError, SchemaError
from hdp_spark.spark._common import (
    INTEGRAL,
    NUMERIC,
    field,
    is_dataframe,
)
from hdp_spark.spark.expressions import encode_text, level_expr
from hdp_spark.spark.sql_text import double_lit, ident

__all__ = ["SparkUsers", "row_exprs", "row_sql"]


RADIX_BITS = 12
"""Bits of the order-key hash resolved per radix-selection job."""

COLLECT_LIMIT = 16384
"""A queried hash range with at most this many users is collected (ids are public)."""


def _hash(text: Column, salt: str) -> Column:
    """Native order-key hash: the first 60 bits of SHA-256(salt || id) (see order_key)."""
    digest = F.sha2(F.concat(F.lit(salt), text), 256)
    return F.conv(F.substring(digest, 1, HASH_HEX), 16, 10).cast("long")


def _key_le(h: Column, text: Column, bound_h: Column, bound_t: Column) -> Column:
    return (h < bound_h) | ((h == bound_h) & (text <= bound_t))


def _key_gt(h: Column, text: Column, bound_h: Column, bound_t: Column) -> Column:
    return (h > bound_h) | ((h == bound_h) & (text > bound_t))


def row_sql(value: str, eps: str, lower: str, upper: str, span: str, fill: str
            ) -> tuple[str, str, str]:
    """The SQL text of :func:`row_exprs` over SQL texts (``value`` and ``eps`` identifiers,
    the bounds, their span and the fill double expressions): the one template of the
    release API's, the Column's and the SQL function's per-row expressions.

    Privacy:
        None: public, data-independent per-row rules.
    """
    e = f"CAST({eps} AS DOUBLE)"
    invalid = f"({e} IS NULL OR isnan({e}) OR {e} < 0.0D)"
    return (encode_text(value, lower, upper, span, fill), f"CASE WHEN NOT {invalid} THEN {e} END",
            f"CAST({invalid} AS BIGINT)")


def row_exprs(spec: UserMeanSpec) -> tuple[Column, Column, Column]:
    """The per-row expressions of pass 1 (the release API's and the Column's ``hdp_users``):
    the clamped, imputed, fixed-point encoded value (bigint), the row's ε when valid (double;
    null when null, NaN or negative) and the invalid flag (bigint 0/1).

    Privacy:
        None: public, data-independent per-row rules; a bad value never raises.
    """
    texts = row_sql(ident(spec.column), ident(spec.eps), double_lit(spec.lower),
                    double_lit(spec.upper), double_lit(spec.span), double_lit(spec.fill_value))
    q, e, bad = (F.expr(t) for t in texts)
    return q, e, bad


class SparkUsers:
    """The persisted per-user table of one release and the native stages over it."""

    def __init__(
        self,
        df: DataFrame,
        spec: UserMeanSpec,
        by: tuple[str, ...],
        keys: tuple[tuple[object, ...], ...],
    ) -> None:
        if not is_dataframe(df):
            msg = f"`df` must be a Spark DataFrame, got {type(df).__name__}."
            raise ParameterError(msg)
        self.spec = spec
        self.session = df.sparkSession
        schema = df.schema
        for column, role in ((spec.column, "value"), (spec.eps, "ε")):
            f = field(schema, column, role)
            if not isinstance(f.dataType, NUMERIC):
                msg = f"{role} column `{column}` must be numeric, got {f.dataType.simpleString()}."
                raise SchemaError(msg)
        uf = field(schema, spec.user, "user")
        if not isinstance(uf.dataType, (*INTEGRAL, T.StringType)):
            msg = (
                f"user column `{spec.user}` must hold integers or strings, got "
                f"{uf.dataType.simpleString()}."
            )
            raise SchemaError(msg)
        by_fields = [field(schema, c, "group") for c in by]
        if by:
            key_schema = T.StructType(
                [T.StructField(f.name, f.dataType, False) for f in by_fields]
                + [T.StructField("__gid", T.IntegerType(), False)]
            )
            key_df = self.session.createDataFrame(
                [[*k, gid] for gid, k in enumerate(keys)], schema=key_schema
            )
            rows = df.join(F.broadcast(key_df), on=list(by), how="inner")
        else:
            rows = df.withColumn("__gid", F.lit(0))
        q, e, bad = row_exprs(spec)
        per_user = (
            rows.select(
                F.col(spec.user).alias("__user"),
                q.alias("__q"),
                e.alias("__e"),
                bad.alias("__bad"),
                F.col("__gid"),
            )
            .groupBy("__user")
            .agg(
                F.count(F.lit(1)).alias("__k"),
                F.sum("__q").alias("__s"),
                F.min("__e").alias("__emin"),
                F.max("__e").alias("__emax"),
                F.sum("__bad").alias("__nbad"),
                F.min("__gid").alias("__gmin"),
                F.max("__gid").alias("__gmax"),
            )
        )
        raw_level = level_expr("__emin", spec.eps_grid)
        invalid_user = (F.col("__nbad") > 0) | (raw_level == F.lit(INVALID_LEVEL))
        self.users = per_user.select(
            F.col("__user").cast("string").alias("__text"),
            # the order key's hash, once per user here rather than in every rank round and
            # in both stages (SHA-256 per user per pass was a third of the release's time)
            _hash(F.col("__user").cast("string"), spec.salt).alias("__h"),
            F.col("__user").isNull().alias("__null"),
            F.col("__gmin").alias("__gid"),
            F.col("__k"),
            F.col("__s"),
            F.when(raw_level == F.lit(float("inf")), F.lit(EPS_CAP))
            .otherwise(raw_level)
            .alias("__level"),
            invalid_user.cast("long").alias("__invalid"),
            (~invalid_user & (F.col("__emin") != F.col("__emax"))).cast("long").alias("__mixed"),
            (~invalid_user & (raw_level == F.lit(BELOW_GRID_LEVEL))).cast("long").alias("__below"),
            (F.col("__gmin") != F.col("__gmax")).cast("long").alias("__multi"),
        ).persist(StorageLevel.MEMORY_AND_DISK)
        self.bucket_sizes: dict[tuple[int, int], int] = {}

    def close(self) -> None:
        """Drop the persisted per-user table."""
        self.users.unpersist()

    # -- the four stages ---------------------------------------------------------------------

    def census(self) -> Census:
        """Users per (group id, k, ε level) and violation counts (one job)."""
        rows = (
            self.users.groupBy("__gid", "__k", "__level", "__null")
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.sum("__k").alias("rows"),
                F.sum("__invalid").alias("invalid"),
                F.sum("__mixed").alias("mixed"),
                F.sum("__below").alias("below"),
                F.sum("__multi").alias("multi"),
            )
            .collect()
        )
        cells: dict[int, list[CensusCell]] = {}
        totals = {"invalid": 0, "mixed": 0, "below": 0, "multi": 0, "null": 0}
        for r in rows:
            if r["__null"]:
                totals["null"] += int(r["rows"])
                continue
            for name in ("invalid", "mixed", "below", "multi"):
                totals[name] += int(r[name])
            gid, k, level, n = int(r["__gid"]), int(r["__k"]), float(r["__level"]), int(r["n"])
            cells.setdefault(gid, []).append(CensusCell(k, level, n))
            if level > 0:
                self.bucket_sizes[(gid, k)] = self.bucket_sizes.get((gid, k), 0) + n
        return Census(
            {g: tuple(v) for g, v in cells.items()},
            invalid_eps_users=totals["invalid"],
            mixed_eps_users=totals["mixed"],
            below_grid_users=totals["below"],
            mixed_group_users=totals["multi"],
            null_user_rows=totals["null"],
        )

    def _candidates(self, ranges: Mapping[int, tuple[RankQuery, int, int, bool]]) -> DataFrame:
        """Users of each queried bucket whose hash lies in the query's [lo, hi)."""
        schema = T.StructType(
            [
                T.StructField("__qid", T.IntegerType(), False),
                T.StructField("__gid", T.IntegerType(), False),
                T.StructField("__k", T.LongType(), False),
                T.StructField("__lo", T.LongType(), False),
                T.StructField("__hi", T.LongType(), False),
                T.StructField("__small", T.BooleanType(), False),
            ]
        )
        qdf = self.session.createDataFrame(
            [[qid, q.gid, q.k, lo, hi, small] for qid, (q, lo, hi, small) in ranges.items()],
            schema=schema,
        )
        base = self.users.filter(~F.col("__null") & (F.col("__level") > F.lit(0.0)))
        joined = base.join(F.broadcast(qdf), on=["__gid", "__k"], how="inner")
        return joined.filter((F.col("__h") >= F.col("__lo")) & (F.col("__h") < F.col("__hi")))

    def rank_keys(self, queries: Sequence[RankQuery]) -> dict[RankQuery, OrderKey]:
        """Exact order statistics of the order keys by radix selection on the hash.

        One job per round: queries whose range holds at most :data:`COLLECT_LIMIT` users
        get their (hash, id) pairs; larger ones get a histogram of the next
        :data:`RADIX_BITS` bits of the hash and narrow their range to one bin.
        """
        full = 1 << (4 * HASH_HEX)
        # qid -> (query, lo, hi, residual rank, users in [lo, hi))
        state = {
            qid: (q, 0, full, q.rank, self.bucket_sizes.get((q.gid, q.k), 0))
            for qid, q in enumerate(queries)
        }
        out: dict[RankQuery, OrderKey] = {}
        changed = "the user table changed between passes; cache the input table"
        while state:
            small = {i for i, st in state.items() if st[4] <= COLLECT_LIMIT}
            widths = [st[2] - st[1] for i, st in state.items() if i not in small]
            shift = max((max(widths) - 1).bit_length() - RADIX_BITS, 0) if widths else 0
            cand = self._candidates(
                {i: (st[0], st[1], st[2], i in small) for i, st in state.items()}
            )
            is_small = F.col("__small")
            bin_expr = F.when(is_small, F.col("__h")).otherwise(
                F.shiftright(F.col("__h") - F.col("__lo"), shift)
            )
            rows = (
                cand.groupBy("__qid", bin_expr.alias("__b"),
                             F.when(is_small, F.col("__text")).alias("__t"))
                .count()
                .collect()
            )
            found: dict[int, list[tuple[int, str, int]]] = {i: [] for i in state}
            for r in rows:
                found[int(r["__qid"])].append((int(r["__b"]), str(r["__t"]), int(r["count"])))
            for i, (q, lo, hi, rank, _n) in list(state.items()):
                if i in small:
                    ranked = sorted((b, t) for b, t, _ in found[i])
                    if not 1 <= rank <= len(ranked):
                        raise InternalError(changed)
                    out[q] = ranked[rank - 1]
                    del state[i]
                    continue
                below = 0
                for b, _t, count in sorted(found[i]):
                    if below + count >= rank:
                        new_lo = lo + (b << shift)
                        new_hi = min(lo + ((b + 1) << shift), hi)
                        # a range of width 1 holds one hash: collect it whatever its size
                        size = count if new_hi - new_lo > 1 else min(count, COLLECT_LIMIT)
                        state[i] = (q, new_lo, new_hi, rank - below, size)
                        break
                    below += count
                else:
                    raise InternalError(changed)
        return out

    def _roles(self, cuts: Mapping[int, Cut]) -> DataFrame:
        """The user table of the cut groups with a native role column."""
        schema = T.StructType(
            [
                T.StructField("__gid", T.IntegerType(), False),
                T.StructField("__vk", T.LongType(), False),
                T.StructField("__vh", T.LongType(), False),
                T.StructField("__vu", T.StringType(), False),
                T.StructField("__mk", T.LongType(), False),
                T.StructField("__mh", T.LongType(), False),
                T.StructField("__mu", T.StringType(), False),
            ]
        )
        cdf = self.session.createDataFrame(
            [[g, c.var_k, c.var_key[0], c.var_key[1], c.mean_k, c.mean_key[0], c.mean_key[1]]
             for g, c in cuts.items()],
            schema=schema,
        )
        joined = self.users.filter(~F.col("__null")).join(F.broadcast(cdf), on="__gid")
        k, text = F.col("__k"), F.col("__text")
        h = F.col("__h")
        is_var = (k > F.col("__vk")) | (
            (k == F.col("__vk")) & _key_le(h, text, F.col("__vh"), F.col("__vu"))
        )
        is_mean = (k < F.col("__mk")) | (
            (k == F.col("__mk")) & _key_gt(h, text, F.col("__mh"), F.col("__mu"))
        )
        role = (
            F.when(F.col("__level") <= F.lit(0.0), F.lit("x"))
            .when(is_var, F.lit("v"))
            .when(is_mean, F.lit("m"))
            .otherwise(F.lit("f"))
        )
        return joined.select("__gid", "__k", "__level", "__s", "__text", role.alias("__role"))

    def first_stage(self, cuts: Mapping[int, Cut]) -> FirstStage:
        """G_mean per-class sums, G_var users and G_fin class counts (one job)."""
        roles = self._roles(cuts)
        role = F.col("__role")
        rows = (
            roles.filter(role != F.lit("x"))
            .groupBy(
                "__gid", "__role", "__k", "__level",
                F.when(role == F.lit("v"), F.col("__text")).alias("__vt"),
            )
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.sum(F.when(role != F.lit("f"), F.col("__s"))).alias("t"),
            )
            .collect()
        )
        mean: dict[int, list[MeanCell]] = {}
        var: dict[int, list[VarUser]] = {}
        fin: dict[int, dict[tuple[int, float], int]] = {}
        for r in rows:
            gid, k, level, n = int(r["__gid"]), int(r["__k"]), float(r["__level"]), int(r["n"])
            if r["__role"] == "m":
                mean.setdefault(gid, []).append(MeanCell(k, level, n, int(r["t"])))
            elif r["__role"] == "v":
                text = str(r["__vt"])
                var.setdefault(gid, []).append(
                    VarUser(k, level, int(r["t"]), order_key(text, self.spec.salt))
                )
            else:
                fin.setdefault(gid, {})[(k, level)] = n
        return FirstStage(
            {g: tuple(sorted(v, key=lambda c: (c.k, c.eps))) for g, v in mean.items()},
            {g: tuple(v) for g, v in var.items()},
            fin,
        )

    def final_stage(
        self, cuts: Mapping[int, Cut], bounds: Mapping[int, Mapping[int, tuple[int, int]]]
    ) -> dict[int, tuple[FinalCell, ...]]:
        """Per (group id, k, ε): G_fin users and Σ clamp(s_i, A_k, B_k) (one job)."""
        schema = T.StructType(
            [
                T.StructField("__gid", T.IntegerType(), False),
                T.StructField("__k", T.LongType(), False),
                T.StructField("__a", T.LongType(), False),
                T.StructField("__b", T.LongType(), False),
            ]
        )
        bdf = self.session.createDataFrame(
            [[g, k, a, b] for g, per_k in bounds.items() for k, (a, b) in per_k.items()],
            schema=schema,
        )
        roles = self._roles(cuts).filter(F.col("__role") == F.lit("f"))
        clamped = F.least(F.greatest(F.col("__s"), F.col("__a")), F.col("__b"))
        rows = (
            roles.join(F.broadcast(bdf), on=["__gid", "__k"], how="inner")
            .groupBy("__gid", "__k", "__level")
            .agg(F.count(F.lit(1)).alias("n"), F.sum(clamped).alias("t"))
            .collect()
        )
        out: dict[int, list[FinalCell]] = {}
        for r in rows:
            out.setdefault(int(r["__gid"]), []).append(
                FinalCell(int(r["__k"]), float(r["__level"]), int(r["n"]), int(r["t"]))
            )
        return {g: tuple(sorted(v, key=lambda c: (c.k, c.eps))) for g, v in out.items()}


