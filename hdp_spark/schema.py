"""Schemas of ε-carrying tables: the public entry point.

Usage::

    from hdp_spark.schema import load_schema
    import hdp_spark.pandas as hpd

    schema = load_schema("schemas/employees.yaml")
    report = hpd.validate(pdf, schema)          # counts per rule, for the operator
    hpd.agg(pdf, hpd.hdp_mean("salary", eps="eps", lower=0, upper=300_000), schema=schema)

The format is documented in ``docs/schemas.md``; what each kind of bad input gets is in
``docs/bad_input.md``. Importing this module needs neither pandas nor pyspark; YAML files
need ``pyyaml``.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

from hdp_spark.core.schema import (
    COLUMN_TYPES,
    ColumnSchema,
    ColumnType,
    EpsilonColumn,
    TableSchema,
    UserIdColumn,
)
from hdp_spark.core.validation import Rule, RuleKind, ValidationReport
from hdp_spark.errors import ParameterError

__all__ = [
    "COLUMN_TYPES",
    "ColumnSchema",
    "ColumnType",
    "EpsilonColumn",
    "Rule",
    "RuleKind",
    "TableSchema",
    "UserIdColumn",
    "ValidationReport",
    "load_schema",
]


def load_schema(path: str | os.PathLike[str]) -> TableSchema:
    """Read a schema file (``.yaml``/``.yml``, ``.toml`` or ``.json``) into a TableSchema.

    Args:
        path: the schema file. The format follows the extension.

    Returns:
        The validated, frozen :class:`TableSchema`.

    Raises:
        ParameterError: the file cannot be read or parsed, has an unknown extension, or a
            field breaks its rule (the message names the field path, e.g.
            ``columns.salary.lower``). Unknown keys are rejected, never ignored.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        msg = f"`path` must be a readable schema file, got {str(path)!r} ({err.strerror})."
        raise ParameterError(msg) from err
    data: Any
    if suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as err:  # pragma: no cover - pyyaml is a declared dependency
            msg = "YAML schemas need pyyaml: pip install pyyaml."
            raise ParameterError(msg) from err
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            msg = f"`path` {str(path)!r} is not valid YAML: {_first_line(err)}"
            raise ParameterError(msg) from err
    elif suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            msg = f"`path` {str(path)!r} is not valid TOML: {_first_line(err)}"
            raise ParameterError(msg) from err
    elif suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            msg = f"`path` {str(path)!r} is not valid JSON: {_first_line(err)}"
            raise ParameterError(msg) from err
    else:
        msg = f"`path` must end in .yaml, .yml, .toml or .json, got {str(path)!r}."
        raise ParameterError(msg)
    return TableSchema.from_dict(data)


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
