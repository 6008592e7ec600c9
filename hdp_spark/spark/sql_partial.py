"""The SQL form of the partial-DP family: ``hdp_heavy_hitters``, ``hdp_marginals``,
``hdp_mwem`` and ``hdp_attribute_histograms``, each
``f(struct(col, ...), '<JSON options>'[, 'public'])``.

The JVM extension (``HdpSqlPartial``) reads the call's domains only to build the native
``hdp_records`` aggregate of the Column (and checks the public bound ``max_records`` at
analysis); the finalize registered here, ``hdp_partial_<family>_finalize``, builds the spec
from the same JSON with the release API's constructor (every other check, with its words),
refuses the call unless the JVM's recoding is the spec's, and runs the finalize of the
Column (:func:`~hdp_spark.spark.records_finalize.finalize_records`) per group.

The output type of each function is fixed (a SQL function has one result type): the
released table's attribute values are one ``values: array<string>`` field (in the struct's
field order; null outside a marginal or for the extra "other" category), beside the
table's other fields and the report's scalar fields of the Column.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial.api import attribute_histogram_spec, hdp_heavy_hitters
from hdp_spark.core.partial.mwem import hdp_mwem
from hdp_spark.core.partial.projection import hdp_marginals
from hdp_spark.errors import ParameterError
from hdp_spark.spark.columns_partial import domain_values
from hdp_spark.spark.output import spark_type
from hdp_spark.spark.records_families import RecordSpec, family_of
from hdp_spark.spark.records_finalize import finalize_records

__all__ = ["SQL_FAMILIES", "register_partial", "sql_type"]

SQL_FAMILIES: dict[str, tuple[str, Callable[..., Any]]] = {
    "heavy_hitters": ("hdp_heavy_hitters", hdp_heavy_hitters),
    "marginals": ("hdp_marginals", hdp_marginals),
    "mwem": ("hdp_mwem", hdp_mwem),
    "attribute_histograms": ("hdp_attribute_histograms", attribute_histogram_spec),
}
"""family -> (SQL function, the release API's spec constructor)."""

_VALUES = "values"
_LONG, _DOUBLE, _TEXT = T.LongType(), T.DoubleType(), T.StringType()
_ITEMS: dict[str, list[tuple[str, T.DataType]]] = {
    "heavy_hitters": [(_VALUES, T.ArrayType(_TEXT)), ("noisy_count", _LONG),
                      ("count_ci_low", _LONG), ("count_ci_high", _LONG)],
    "marginals": [("marginal", _TEXT), (_VALUES, T.ArrayType(_TEXT)), ("noisy_count", _LONG),
                  ("projected_count", _DOUBLE), ("projected_fraction", _DOUBLE)],
    "mwem": [("marginal", _TEXT), (_VALUES, T.ArrayType(_TEXT)),
             ("mwem_fraction", _DOUBLE)],
}


def _probe(family: str) -> RecordSpec:
    constructor = SQL_FAMILIES[family][1]
    extra: dict[str, Any] = {"k": 1} if family in ("marginals", "mwem") else {}
    out: RecordSpec = constructor(["a", "b"], domains={"a": ["x"], "b": ["y"]}, eps0=1.0,
                                  **extra)
    return out


def sql_type(family: str) -> T.StructType:
    """The fixed result type of a family's SQL function.

    Privacy:
        None: the output layout is public.
    """
    fields = family_of(_probe(family)).fields(_probe(family))
    main, table = fields[0]
    if family in _ITEMS:
        items = T.StructType([T.StructField(n, t, True) for n, t in _ITEMS[family]])
        first = T.StructField(main, T.ArrayType(items), True)
    else:  # attribute histograms: the table's columns are fixed already
        first = T.StructField(main, spark_type(table), table.nullable)
    return T.StructType([first, *(T.StructField(n, spark_type(f), f.nullable)
                                  for n, f in fields[1:])])


def _text(v: object) -> str | None:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(float(v)) if isinstance(v, float) else str(v)


def _fixed(family: str, spec: RecordSpec, row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A Column row in the SQL function's fixed layout (attribute values as text)."""
    if family not in _ITEMS:
        return row
    cols = [d.column for d in spec.domains]
    table = [{**{k: v for k, v in r.items() if k not in cols},
              _VALUES: [_text(r[c]) for c in cols]} for r in row[0]]
    return (table, *row[1:])


def _spec(family: str, names: Sequence[str], text: str) -> tuple[RecordSpec, dict[str, Any]]:
    function, constructor = SQL_FAMILIES[family]
    try:
        options = json.loads(text)
    except ValueError:
        options = None
    if not isinstance(options, dict):  # the JVM checked it already
        msg = f"`options` of {function} must be a JSON object, got {text!r}."
        raise ParameterError(msg)
    allowed = set(inspect.signature(constructor).parameters) - {"cols"}
    unknown = sorted(set(options) - allowed - {"max_records"})
    if unknown:
        msg = (f"`options` of {function} has an unknown option `{unknown[0]}` (taken: "
               f"{', '.join(sorted(allowed | {'max_records'}))}).")
        raise ParameterError(msg)
    kwargs = {k: v for k, v in options.items() if k != "max_records"}
    spec: RecordSpec = constructor(list(names), **kwargs)
    return spec, kwargs


def _canonical(values: Sequence[str]) -> list[object]:
    return [float(v[2:]) if v.startswith("d:") else v for v in values]


def _check_recoding(function: str, spec: RecordSpec, used: list[Any]) -> None:
    """Refuse a call whose native recoding (what the JVM built) is not the spec's."""
    want = [[d.column, d.kind, _canonical(domain_values(d)), d.size, d.other_code]
            for d in spec.domains]
    got = [[u[0], u[1], _canonical(u[2]), u[3], u[4]] for u in used]
    if got != want:
        names = [w[0] for w, g in zip(want, got, strict=False) if w != g] or ["(fields)"]
        msg = (f"the domain of `{names[0]}` in the options of {function} cannot be read the "
               "same way by the SQL function and the release API (write integers without a "
               "decimal point and within 64 bits, or use the Column: hs.as_column(spec)).")
        raise ParameterError(msg)


def _finalizer(family: str, key: ReleaseKey, arrow_type: pa.StructType
               ) -> Callable[[pa.Array, pa.Array, pa.Array], pa.Array]:
    function = SQL_FAMILIES[family][0]

    def finalize(cells: pa.Array, options: pa.Array, used: pa.Array) -> pa.Array:
        if len(cells) == 0:
            return pa.array([], type=arrow_type)
        recoding = json.loads(str(used[0].as_py()))
        spec, kwargs = _spec(family, [u[0] for u in recoding], str(options[0].as_py()))
        _check_recoding(function, spec, recoding)
        text = json.dumps(kwargs, sort_keys=True, allow_nan=False, default=str)
        call_key = key.for_query(f"sql-partial:{family}:{text}")
        columns = {f.name: cells.field(f.name).to_pylist() for f in cells.type}
        rows = [_fixed(family, spec, r) for r in finalize_records(spec, call_key, columns)]
        values = list(zip(*rows, strict=True))
        return pa.StructArray.from_arrays(
            [pa.array(list(v), type=f.type) for v, f in zip(values, arrow_type, strict=True)],
            fields=list(arrow_type))

    finalize.__name__ = f"hdp_partial_{family}_finalize"
    return finalize


def register_partial(session: Any, key: ReleaseKey) -> None:
    """Register ``hdp_partial_<family>_finalize`` for the four partial-DP SQL functions.

    Privacy:
        As the family's Column: the registration's ``key`` derived per (family, options),
        then per query fingerprint and group (two calls that differ only in their options
        never share noise).
    """
    for family in SQL_FAMILIES:
        rtype = sql_type(family)
        udf = F.arrow_udf(_finalizer(family, key, to_arrow_type(rtype)), rtype)  # type: ignore[attr-defined]  # design-ok: per group batch
        session.udf.register(f"hdp_partial_{family}_finalize", udf)
