"""Spark types of the released outputs: one schema builder from the kernels' one output
description (:class:`~hdp_spark.core.pipeline.OutputField`), for the release API's local
frames and the Column aggregators' result structs."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from hdp_spark.core.pipeline import OutputField

__all__ = ["spark_schema", "spark_type"]

_SCALAR: dict[str, T.DataType] = {
    "float": T.DoubleType(), "int": T.LongType(), "str": T.StringType(),
    "bool": T.BooleanType(), "floats": T.ArrayType(T.DoubleType()),
}


def spark_type(f: OutputField) -> T.DataType:
    """The Spark type of one output field."""
    if f.kind == "list":
        return T.ArrayType(T.StructType([
            T.StructField(i.suffix, spark_type(i), i.nullable) for i in f.items
        ]))
    return _SCALAR[f.kind.rstrip("?")]


def spark_schema(df: DataFrame, by: Sequence[str], columns: Sequence[tuple[str, OutputField]]
                 ) -> T.StructType:
    """Group columns typed as in ``df``, then the output fields."""
    fields = [
        T.StructField(f.name, f.dataType, True) for c in by for f in df.schema.fields
        if f.name == c
    ]
    fields += [T.StructField(name, spark_type(f), f.nullable) for name, f in columns]
    return T.StructType(fields)
