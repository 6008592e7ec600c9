"""The privacy unit's bounding rule on Spark (the rule and its argument:
:mod:`hdp_spark.core.privacy_unit.spec`).

On classic Spark with the extension's jar, :func:`bound_rows` is one streaming operator of
the JVM extension (``UnitBound``, :func:`_jvm_bound`): the rows with an id cross one shuffle
by the id and one sort by it within each partition (both inserted by Spark's planner, which
the operator requires), and the operator reads each partition person by person over Spark's
own rows, holding one person's kept rows at a time (no aggregate, join or window; ranks
only where they decide). On Spark Connect (no py4j) the same operator, where the server was
started with the extension and its plugin: the client sends a request the extension's
analyzer rule turns into the operator's node (:func:`_request`). Elsewhere (no jar, a
Connect server without the extension, columns it does not read, ``jvm=False``) the
native-expression path below, which keeps the same rows:

Per person, one native aggregate combined map-side (as Spark's own per-person aggregate):
the person's ε (the minimum of the safe ε of all their rows) and whether a rank can decide
anything for them (more inside rows than ``max_groups`` in more than one group; more inside
rows than ``max_rows``). The rows inside the keys cross one shuffle, by the id column
itself, and meet their person's line in a hash join on that partitioning; the texts and
ranks are computed after the shuffle (they never cross it), and only where they can decide
(elsewhere a rank reads 0: every group, or every row, is kept whatever the ranks). The kept
groups are a ``dense_rank`` over the person's group ranks and the kept rows a
``row_number`` over the (person, group)'s row ranks: both windows partitioned by the id and
ordered by a prefix of one order, so one sort. So the step costs one shuffle of the rows,
one shuffle of per-person partial aggregates and one sort; no Python runs per row. The
ranks are the same numbers as the pandas engine's, so both engines keep the same rows.
The local-DP rule (one report per person, :func:`keep_one_report`) is, with the extension,
one more streaming operator (``LdpUnitBound``: one shuffle and one sort by the id, each
person ranked once) and, without it, one more window spec of the same shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit.spec import PrivacyUnit, bounding_key
from hdp_spark.errors import ParameterError, SchemaError

__all__ = ["bound_rows", "keep_one_report", "person_text", "safe_eps"]

_SEP = "\x1f"
_PERSON, _GROUP, _EPS, _GRANK, _RRANK, _CODES = (
    "__pu_person", "__pu_group", "__pu_eps", "__pu_grank", "__pu_rrank", "__pu_codes")
_PEPS, _GFREE, _RFREE = "__pu_person_eps", "__pu_gfree", "__pu_rfree"
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def person_text(df: DataFrame, unit: PrivacyUnit) -> Column:
    """Each row's person id as text (integers in decimal, strings as they are; null ids
    null), from the schema (a public fact).

    Raises:
        SchemaError: the column is missing or neither integer nor string.
    """
    fields = {f.name: f.dataType for f in df.schema.fields}
    if unit.column not in fields:
        msg = f"`privacy_unit` names column {unit.column!r}, which the table does not have."
        raise SchemaError(msg)
    dtype = fields[unit.column]
    if isinstance(dtype, T.StringType):
        return F.col(unit.column)
    if isinstance(dtype, _INTEGRAL):
        return F.col(unit.column).cast("string")
    msg = (f"`privacy_unit` column {unit.column!r} must hold integers or strings, got type "
           f"{dtype.simpleString()}.")
    raise SchemaError(msg)


def safe_eps(eps: str) -> Column:
    """A row's ε as the bounding rule reads it: null, NaN and negative as 0, +∞ kept."""
    value = F.col(eps).cast("double")
    return F.when(value.isNull() | F.isnan(value) | (value < F.lit(0.0)), F.lit(0.0)
                  ).otherwise(value)


def _rank(text: Column) -> Column:
    """:func:`~hdp_spark.core.privacy_unit.spec.rank` of ``text``: the first 15 hex digits
    of its SHA-256 as a long (8 bytes through the shuffle, not 64 characters)."""
    return F.conv(F.substring(F.sha2(text, 256), 1, 15), 16, 10).cast("long")


def _secret_rank(df: DataFrame, bkey: str, name: str, tagged: Column, literal: Column
                 ) -> Column:
    """The one-report rank ``rank(report_rank_text(bkey, name, person))``, wherever the JVM
    extension is loaded as ``HdpSecretRank``, which holds the key in a field no printed
    plan, UI page, event log or INFO log shows: on classic Spark built through py4j, on
    Spark Connect as ``hdp_ldp_rank(tagged, name, <secret>)`` whose secret argument travels
    as the Columns' does (an expression extension that the server's ``HdpConnectSecret``
    plugin turns into the key, :func:`~hdp_spark.spark.ldp_unit.secret_column`). Only
    without the extension (no jar on a classic session; a Connect server without the
    extension's functions or its plugin) the same number comes from native expressions with
    the key as a plan literal (docs/ldp.md says so).

    Privacy:
        The same rank either way (tests/privacy_unit/test_ldp_unit.py: engines keep the
        same reports); only where the key appears differs.
    """
    from pyspark.sql.utils import is_remote

    from hdp_spark.spark.ldp_unit import RANK_FUNCTION, connect_secret_ready, secret_column

    if not is_remote():
        try:
            jvm = df.sparkSession._jvm  # type: ignore[attr-defined]
            secret = jvm.org.hdpspark.HdpSecret  # type: ignore[union-attr]
            return Column(secret.rank(tagged._jc, bkey, name))  # type: ignore[attr-defined]
        except Exception:  # no extension jar on this session's class path
            pass
    elif connect_secret_ready(df.sparkSession):
        out: Column = F.call_function(RANK_FUNCTION, tagged, F.lit(name), secret_column(bkey))
        return out
    return _rank(F.concat_ws(_SEP, literal, F.lit("ldp"), F.lit(name), tagged))


def _tagged(person: Column) -> Column:
    return F.concat(F.length(person).cast("string"), F.lit(":"), person)


def _operator(df: DataFrame, name: str = "UnitBound") -> Any:
    """The extension's class ``name`` (``UnitBound``, ``LdpUnitBound``) on ``df``'s classic
    session (py4j), or None: on Spark Connect, or without the extension's jar on the
    session's class path."""
    from pyspark.sql.utils import is_remote

    if is_remote() or not hasattr(df, "_jdf"):
        return None
    try:
        from py4j.java_gateway import JavaClass

        package = df.sparkSession._jvm.org.hdpspark  # type: ignore[union-attr]
        operator = getattr(package, name)
    except Exception:  # no JVM view on this session
        return None
    return operator if isinstance(operator, JavaClass) else None


_REQUEST_READY: dict[tuple[str, str], bool] = {}


def _connect_operator(df: DataFrame, function: str = "hdp_unit_bound") -> bool:
    """Whether ``df`` is on a Spark Connect session whose server answers the release API's
    request ``function`` (``hdp_unit_bound``: the bounding operator, :func:`_request`;
    ``hdp_ldp_keep``: the local-DP one-report operator, :func:`_ldp_operator`): it has the
    secret channel (:func:`~hdp_spark.spark.ldp_unit.connect_secret_ready`: the extension's
    functions and its ``HdpConnectSecret`` plugin) and the request's function (whose
    analyzer rule and planner strategy come with it). Cached per Connect session.

    Privacy:
        The probes read no data and carry a public key.
    """
    from pyspark.sql.utils import is_remote

    from hdp_spark.spark.ldp_unit import connect_secret_ready

    if not is_remote():
        return False
    session = df.sparkSession
    sid = (str(getattr(session, "session_id", "")), function)
    if sid in _REQUEST_READY:
        return _REQUEST_READY[sid]
    try:
        ready = connect_secret_ready(session) and bool(
            session.catalog.functionExists(function))
    except Exception:  # a server without the extension: the native path
        ready = False
    if sid[0]:
        _REQUEST_READY[sid] = ready
    return ready


_REQUEST = "hdp_unit_bound"
_LDP_REQUEST = "hdp_ldp_keep"


def _request(df: DataFrame, unit: PrivacyUnit, *, eps: str, group: str | None,
             codes: Sequence[str], key: ReleaseKey) -> DataFrame:
    """The operator on Spark Connect: ``df`` (ε as a double, as ``UnitBound.bound`` reads
    it) filtered by ``hdp_unit_bound(id, ε, G, R, <secret>, group | null, code...)``, which
    the extension's analyzer rule (``UnitRequest``) replaces by the operator's node over
    the same rows, the plan ``UnitBound.bound`` builds on classic Spark.

    Privacy:
        The bounding key travels as the secret argument
        (:func:`~hdp_spark.spark.ldp_unit.secret_column`: the request's bytes, which the
        server's plugin turns into an expression printed ``hdp_secret()``), moves into the
        node's non-printed field, and is no literal of any plan; the rule's output is the
        operator's, a per-person function of the person's own rows, the key and the public
        bounds. A request the rule did not replace cannot be evaluated: the query fails
        rather than read unbounded rows (why not a hint: Spark drops an unknown hint
        silently).
    """
    from hdp_spark.spark.ldp_unit import secret_column

    rows = df.withColumn(eps, F.col(eps).cast("double"))
    request = F.call_function(
        _REQUEST, F.col(unit.column), F.col(eps), F.lit(unit.max_groups),
        F.lit(unit.max_rows), secret_column(bounding_key(key)),
        F.lit(None) if group is None else F.col(group), *(F.col(c) for c in codes))
    return rows.where(request)


def _jvm_bound(df: DataFrame, unit: PrivacyUnit, *, eps: str, group: str | None,
               codes: Sequence[str], key: ReleaseKey, sorted_stream: bool = True
               ) -> DataFrame | None:
    """:func:`bound_rows` as the JVM extension's streaming operator (``UnitBound``): the
    rows with an id cross one shuffle by the id, sorted by it within each partition, and
    the operator reads each partition person by person, holding one person's kept rows at
    a time (no aggregate, join or window). ``sorted_stream=False``: no sort, the operator
    holds a partition's persons in a hash map (measured: no faster; the benchmark's
    alternative; classic Spark only). On Spark Connect the request of :func:`_request`.
    None where it does not apply: no extension jar on the classic session, a Connect
    server without the extension or its plugin, or columns of types it does not read (a
    group that is neither integral nor string, codes that are not integral): the native
    path then.

    Privacy:
        The same rule and ranks (the Java class's comment argues it, the tests check the
        same rows as the native path and pandas). The bounding key reaches the operator
        through py4j or, on Spark Connect, the secret channel, never as a literal of the
        plan.
    """
    fields = {f.name: f.dataType for f in df.schema.fields}
    if any(not isinstance(fields[c], _INTEGRAL) for c in codes) or (
            group is not None
            and not isinstance(fields[group], (*_INTEGRAL, T.StringType))):
        return None
    if _connect_operator(df):
        return _request(df, unit, eps=eps, group=group, codes=codes, key=key)
    operator = _operator(df)
    if operator is None:
        return None
    session = df.sparkSession
    jvm = session._jvm  # type: ignore[attr-defined]
    gateway = session.sparkContext._gateway  # type: ignore[union-attr]
    names = gateway.new_array(jvm.java.lang.String, len(codes))  # type: ignore[union-attr]
    for i, c in enumerate(codes):
        names[i] = c
    jdf = operator.bound(df._jdf, unit.column, group, names, eps, unit.max_groups,
                         unit.max_rows, bounding_key(key), sorted_stream)
    return DataFrame(jdf, session)  # the Java operator's errors (none expected) propagate


def bound_rows(
    df: DataFrame,
    unit: PrivacyUnit,
    *,
    eps: str,
    group: str | None,
    codes: Sequence[str],
    key: ReleaseKey,
    jvm: bool = True,
) -> DataFrame:
    """The rows a release reads under ``unit`` (see
    :func:`hdp_spark.pandas.privacy_unit.bound_rows`, with the same arguments: ``group``
    names the integer column of each row's position in the public key order, -1 outside
    the keys, None for a global release; ``codes`` the integer columns the release reads).

    Privacy:
        The rule of :mod:`hdp_spark.core.privacy_unit.spec`. A rank is read only where it
        can decide (as on pandas): a person whose rows lie in one group or number at most
        ``max_groups`` keeps every group whatever the group ranks, and one with at most
        ``max_rows`` rows keeps every row of a kept group whatever the row ranks, so the
        kept rows are the rule's exactly. On classic Spark with the extension's jar, and
        on a Spark Connect server started with the extension (``jvm``, the default), the
        rule runs as one streaming operator (:func:`_jvm_bound`), which keeps the same rows
        and holds the bounding key in a field no printed plan shows; elsewhere (no jar, a
        Connect server without the extension, ``jvm=False``) the native expressions below
        hold it as a literal of the plan; it orders rows and keys no noise.
    """
    person_text(df, unit)  # the id column's type, or SchemaError
    if jvm:
        streamed = _jvm_bound(df, unit, eps=eps, group=group, codes=codes, key=key)
        if streamed is not None:
            return streamed
    bkey = F.lit(bounding_key(key))
    texts = group is not None and isinstance(df.schema[group].dataType, T.StringType)
    where = F.lit(0).cast("long") if group is None else F.col(group)  # select_keys: texts
    inside = where.isNotNull() if texts else where >= F.lit(0)
    # Per person, one native aggregate (combined map-side, as Spark's own per-person
    # aggregate): the person's ε over all their rows, and what decides whether a rank can
    # matter (the inside rows, their smallest and largest group).
    inner = F.when(inside, where)
    count = F.count(inner)
    persons = df.where(F.col(unit.column).isNotNull()).groupBy(unit.column).agg(
        F.min(safe_eps(eps)).alias(_PEPS),
        # at most G inside rows, or all in one group: at most G groups
        ((count <= F.lit(unit.max_groups)) | (F.min(inner) == F.max(inner))).alias(_GFREE),
        (count <= F.lit(unit.max_rows)).alias(_RFREE))  # at most R rows in any group
    g_free, r_free = F.col(_GFREE), F.col(_RFREE)
    # The inside rows cross one shuffle, by the id itself (one id, one text), without
    # their ε (the person's replaces it), and meet their person's line in a hash join on
    # that partitioning (no sort, no second exchange of the rows).
    cols = [c for c in df.columns if c != eps]
    rows = df.where(F.col(unit.column).isNotNull() & inside).select(*cols).repartition(
        unit.column)
    ranked = rows.join(persons.hint("shuffle_hash"), on=unit.column)
    ranked = ranked.withColumn(_PERSON, person_text(ranked, unit))
    tagged = _tagged(F.col(_PERSON))
    group_text = where.cast("string")
    code_text = (F.concat_ws(",", *(F.col(c).cast("long").cast("string")
                                          for c in codes)) if codes
                 else F.lit(""))
    zero = F.lit(0).cast("long")
    # a rank is read only where it can decide; elsewhere 0 (every group, row kept anyway)
    ranked = ranked.withColumns({
        _GROUP: where if texts else where.cast("long"),
        _CODES: F.when(r_free, F.lit("")).otherwise(code_text),
        _GRANK: F.when(g_free, zero).otherwise(
            _rank(F.concat_ws(_SEP, bkey, F.lit("g"), tagged, group_text))),
        _RRANK: F.when(r_free, zero).otherwise(
            _rank(F.concat_ws(_SEP, bkey, F.lit("r"), tagged, group_text, code_text))),
    })
    # One sort serves both windows (partitioned by the person, ordered by a prefix of
    # (group rank, group, row rank, codes)), on the join's partitioning (no exchange).
    groups = Window.partitionBy(unit.column).orderBy(_GRANK, _GROUP)
    within = Window.partitionBy(unit.column).orderBy(_GRANK, _GROUP, _RRANK, _CODES)
    ranked = ranked.withColumns({
        "__pu_gpos": F.dense_rank().over(groups),
        # a row's place in its (person, group): its place in the person's order minus the
        # place of the group's first row (rank: 1 + the rows of earlier groups)
        "__pu_rpos": F.row_number().over(within) - F.rank().over(groups) + F.lit(1),
    })
    kept = ranked.where((F.col("__pu_gpos") <= F.lit(unit.max_groups))
                        & (F.col("__pu_rpos") <= F.lit(unit.max_rows)))
    return kept.withColumnRenamed(_PEPS, eps).select(*df.columns)


def _codes(df: DataFrame, spec: object) -> Column:
    """The integer code a spec reads from each row (the cells' own encodings): a mean's
    fixed-point value, a histogram's category code (its unmatched code for null or out of
    domain), as the pandas engine's."""
    from hdp_spark.core.histogram.spec import HistogramSpec
    from hdp_spark.core.mean.spec import MeanSpec
    from hdp_spark.spark._histogram import category_expr
    from hdp_spark.spark.expressions import encode_expr

    if isinstance(spec, MeanSpec):
        return encode_expr(spec.column, spec.lower, spec.upper, spec.fill_value)
    if isinstance(spec, HistogramSpec):
        label = category_expr(df.schema, spec)
        domain = F.array(*(F.lit(c) for c in spec.categories))
        found = F.array_position(domain, label)
        return F.when(found > F.lit(0), found - F.lit(1)).otherwise(F.lit(spec.unmatched_code))
    msg = f"{type(spec).__name__} takes no privacy unit yet"
    raise SchemaError(msg)


def _with_positions(df: DataFrame, by: tuple[str, ...],
                    keys: tuple[tuple[object, ...], ...] | None) -> DataFrame:
    """``df`` with ``__pu_g``: each row's position in the public key order (-1 outside the
    keys), 0 for a global release; one broadcast join with the (small, public) keys. Under
    ``select_keys`` (``by`` without public keys): each row's group text
    (:func:`group_texts`)."""
    from hdp_spark.spark._common import _key_type_error

    if not by:
        return df.withColumn("__pu_g", F.lit(0).cast("long"))
    if keys is None:
        return df.withColumn("__pu_g", group_texts(df, by))
    fields = {f.name: f for f in df.schema.fields}
    by_fields = [fields[c] for c in by]
    schema = T.StructType([T.StructField(f.name, f.dataType, False) for f in by_fields]
                          + [T.StructField("__pu_g", T.LongType(), False)])
    try:
        table = df.sparkSession.createDataFrame([(*k, i) for i, k in enumerate(keys)],
                                                schema=schema)
    except (TypeError, ValueError, OverflowError):
        raise _key_type_error(by_fields) from None
    joined = df.join(F.broadcast(table), on=list(by), how="left")
    return joined.withColumn("__pu_g", F.coalesce(F.col("__pu_g"), F.lit(-1).cast("long")))


def _pre_bound(df: DataFrame) -> bool:
    """Whether the session has the operator's map-side pre-bound on (the setting
    ``hdp_spark.unitPreBound``, default off; read by the operator's node as well)."""
    value = df.sparkSession.conf.get("hdp_spark.unitPreBound", "false")
    return str(value).strip().lower() == "true"


def group_texts(df: DataFrame, by: tuple[str, ...]) -> Column:
    """Each row's group as its canonical text
    (:func:`~hdp_spark.core.privacy_unit.spec.group_key_text`: ``<length>:<text>`` per
    value, integers in decimal), null where a grouping value is null: the pandas engine's
    :func:`hdp_spark.pandas.privacy_unit.group_texts`, in native expressions.

    Raises:
        ParameterError: a ``by`` column holds neither integers nor strings (its type).
    """
    parts = []
    for col in by:
        dtype = df.schema[col].dataType
        if isinstance(dtype, T.StringType):
            text = F.col(col)
        elif isinstance(dtype, _INTEGRAL):
            text = F.col(col).cast("string")
        else:
            msg = (f"under `privacy_unit` with `keys=select_keys(...)` every `by` column must "
                   f"hold integers or strings (a group's text enters the ranks), got type "
                   f"{dtype.simpleString()} for {col!r}.")
            raise ParameterError(msg)
        parts.append(F.concat(F.length(text).cast("string"), F.lit(":"), text))
    return F.concat(*parts)  # null if any part is null


def bound_frame(df: DataFrame, unit: PrivacyUnit, *, eps: str, by: tuple[str, ...],
                keys: tuple[tuple[object, ...], ...] | None, specs: Sequence[object],
                key: ReleaseKey, jvm: bool = True) -> DataFrame:
    """:func:`bound_rows` for a release of ``specs`` grouped by ``by`` over public ``keys``
    (None: a global release), as :func:`hdp_spark.pandas.privacy_unit.bound_frame`.

    Privacy:
        As :func:`bound_rows`.
    """
    source = df
    if jvm and not _pre_bound(df) and (_operator(df) is not None or _connect_operator(df)):
        # the operator's shuffle by the id, placed before the positions and codes are
        # added: it carries the input's columns only (the join with the broadcast keys
        # and the projection keep its partitioning, so the operator adds no exchange,
        # only its sort); the rows without an id are dropped before it. With the
        # operator's map-side pre-bound (a session setting), the positions and codes come
        # first (no exchange: a broadcast join), the pre-bound reads them below the
        # exchange by the id the operator's required clustering adds
        source = df.where(F.col(unit.column).isNotNull()).repartition(unit.column)
    framed = _with_positions(source, by, keys)
    names = [f"__pu_c{i}" for i in range(len(specs))]
    framed = framed.withColumns({n: _codes(df, s) for n, s in zip(names, specs, strict=True)})
    out = bound_rows(framed, unit, eps=eps, group="__pu_g", codes=names, key=key, jvm=jvm)
    return out.drop("__pu_g", *names).select(*df.columns)


def _operator_on(df: DataFrame) -> bool:
    """Whether the session lets the extension's operators bound (the setting
    ``hdp_spark.unitOperator``, default on; false: the native windows, as the Columns' rule
    reads it too)."""
    value = df.sparkSession.conf.get("hdp_spark.unitOperator", "true")
    return str(value).strip().lower() != "false"


def _ldp_operator(framed: DataFrame, unit: PrivacyUnit, spec: Any, key: ReleaseKey
                  ) -> DataFrame | None:
    """:func:`keep_one_report` as the JVM extension's streaming operator (``LdpUnitBound``,
    printed ``HdpLdpUnitBound``) over ``framed`` (the rows with an id, ε made safe, the
    codes ``__pu_index`` and ``__pu_q``): the rows cross one shuffle by the id and one sort
    by the id alone, and the operator reads each person in turn, holds their reports at
    their smallest ε in (index, q) order, ranks them once and keeps the candidate at
    ``pmod(rank, m)``. On classic Spark through py4j; on Spark
    Connect the request ``hdp_ldp_keep(..., <secret>)``, which the extension's analyzer rule
    replaces by the same node. None where it does not apply: the session setting
    ``hdp_spark.unitOperator`` false, no extension jar on the classic session, a Connect
    server without the request's function or the secret channel.

    Privacy:
        The same rule, rank and position as the window plan (the Java class's comment
        argues it; tests/privacy_unit/test_ldp_unit_operator.py checks the same reports as
        the windows and pandas). The bounding key reaches the operator through py4j or the
        secret channel and is held in its non-printed parameters, never a plan literal.
    """
    if not _operator_on(framed):
        return None
    bkey = bounding_key(key)
    if _connect_operator(framed, _LDP_REQUEST):
        from hdp_spark.spark.ldp_unit import secret_column

        return framed.where(F.call_function(
            _LDP_REQUEST, F.col(unit.column), F.col(spec.eps), F.col("__pu_index"),
            F.col("__pu_q"), F.lit(spec.name), secret_column(bkey)))
    operator = _operator(framed, "LdpUnitBound")
    if operator is None:
        return None
    jdf = operator.keep(framed._jdf, unit.column, spec.eps, "__pu_index", "__pu_q", bkey,
                        spec.name)
    return DataFrame(jdf, framed.sparkSession)


def keep_one_report(df: DataFrame, unit: PrivacyUnit, spec: Any, key: ReleaseKey
                    ) -> DataFrame:
    """The one report per person a local-DP ``spec`` reads under ``unit``, as
    :func:`hdp_spark.pandas.privacy_unit.keep_one_report`. With the extension (classic
    Spark with its jar, a Spark Connect server started with it and its plugin): one
    streaming operator after one shuffle by the id and one sort by the id alone, the
    person's rank computed once (:func:`_ldp_operator`). Elsewhere, or where the session
    sets ``hdp_spark.unitOperator`` to false: native expressions and one window spec,
    partitioned by the id and ordered by (ε, index, q) — the person's ε its minimum, m the
    count of rows at that ε, the kept row the one whose ``row_number`` is ``pmod(rank, m) +
    1`` (rows at the smallest ε come first), the rank's SHA-256 per row. Both keep the same
    reports (rows tying on (ε, index, q) aside: interchangeable).

    Privacy:
        The rule of :mod:`hdp_spark.core.privacy_unit.ldp`. With the extension (classic
        Spark, or a Spark Connect server started with it and its plugin, as
        :func:`~hdp_spark.spark.configure` does) the bounding key is held in a field no
        printed plan shows (the operator's parameters; on the window plan
        ``hdp_ldp_position``); without it the key is a literal of the plan and must stay
        with the operator who runs the release (the position is safe only while it is
        unknown to whoever reads the output).
    """
    from hdp_spark.spark._common import dataframe_schema
    from hdp_spark.spark.expressions import level_sql
    from hdp_spark.spark.ldp import check_ldp_columns
    from hdp_spark.spark.ldp_inputs import row_inputs
    from hdp_spark.spark.sql_text import ident

    check_ldp_columns(dataframe_schema(df), [spec])
    person = person_text(df, unit)
    value = F.col(spec.eps).cast("double")
    safe = F.when(value.isNull() | F.isnan(value) | (value <= F.lit(0.0)), F.lit(0.0)
                  ).otherwise(value)
    framed = df.withColumn(spec.eps, safe).where(F.col(unit.column).isNotNull())
    index, q = row_inputs(spec, level_sql(ident(spec.eps)))
    framed = framed.withColumns({"__pu_index": index, "__pu_q": q})
    streamed = _ldp_operator(framed, unit, spec, key)
    if streamed is not None:
        return streamed.select(*df.columns)
    bkey = F.lit(bounding_key(key))
    # one window spec (one shuffle by person, one sort): the person's ε and m over its
    # whole frame, the position by its order; rows at the smallest ε sort first
    order = Window.partitionBy(unit.column).orderBy(spec.eps, "__pu_index", "__pu_q")
    whole = order.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    framed = framed.withColumn(_EPS, F.min(spec.eps).over(whole))
    framed = framed.withColumns({
        "__pu_m": F.sum(F.when(F.col(spec.eps) == F.col(_EPS), F.lit(1)).otherwise(F.lit(0))
                        ).over(whole),
        "__pu_pos": F.row_number().over(order),
    })
    kept = framed.where(F.col("__pu_pos") == F.pmod(
        _secret_rank(df, bounding_key(key), spec.name, _tagged(person), bkey),
        F.col("__pu_m").cast("long")) + F.lit(1))
    return kept.select(*df.columns)
