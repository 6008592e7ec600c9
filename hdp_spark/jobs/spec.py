"""Declarative release jobs: the TOML format, read into a validated, frozen specification.

A job file names the input table, its schema, the engine, the budget rule, the ledger, the
output location and the releases (see ``docs/jobs.md`` and ``jobs/sample_employees.toml``).
Relative paths are resolved against the directory of the job file, so a job runs the same
from any working directory. The specification's records live in
:mod:`hdp_spark.jobs.settings` (the sections) and :mod:`hdp_spark.jobs.job_spec` (the
releases, the job); this module reads the file and re-exports them.

Every rule is checked when the job is loaded; errors name the setting as ``[section] key``,
the rule and the value written in the file.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hdp_spark.core.keys import normalize_keys
from hdp_spark.errors import HdpError, JobError
from hdp_spark.jobs.job_spec import AggregatorEntry, JobSpec, ReleaseSpec, entry_name
from hdp_spark.jobs.registry import get_kind
from hdp_spark.jobs.selection import parse_select_keys
from hdp_spark.jobs.settings import (
    ALLOCATIONS,
    COLUMN_TYPES,
    ENGINES,
    SQLITE_SUFFIXES,
    AllocationMethod,
    BudgetSpec,
    ColumnType,
    EngineName,
    InputSpec,
    LedgerBackend,
    LedgerSpec,
    OutputSpec,
    check_name,
    reject,
    reject_unknown,
)
from hdp_spark.jobs.unit import parse_privacy_unit

__all__ = [
    "ALLOCATIONS",
    "COLUMN_TYPES",
    "ENGINES",
    "SQLITE_SUFFIXES",
    "AggregatorEntry",
    "AllocationMethod",
    "BudgetSpec",
    "ColumnType",
    "EngineName",
    "InputSpec",
    "JobSpec",
    "LedgerBackend",
    "LedgerSpec",
    "OutputSpec",
    "ReleaseSpec",
    "entry_name",
    "load_job",
    "parse_job",
]

_SECTIONS = {"job", "input", "budget", "ledger", "output", "releases", "spark"}


def _table(data: Mapping[str, Any], name: str, allowed: set[str]) -> dict[str, Any]:
    section = data.get(name, {})
    if not isinstance(section, Mapping):
        reject(f"[{name}]", "must be a table", type(section).__name__)
    reject_unknown(f"[{name}]", section, allowed)
    return dict(section)


def _path(base: Path, setting: str, value: object) -> Path:
    if not isinstance(value, str) or not value:
        reject(setting, "must be a non-empty path", value)
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def _release(
    raw: object, index: int, default_eps: str | None, user_id: str = "user_id"
) -> ReleaseSpec:
    where = f"[[releases]] #{index + 1}"
    if not isinstance(raw, Mapping):
        reject(where, "must be a table", type(raw).__name__)
    rid = raw.get("id")
    named = f"[[releases]] id = {rid!r}" if isinstance(rid, str) else where
    reject_unknown(named, raw, {"id", "by", "keys", "aggregators", "weight", "select_keys",
                                "privacy_unit"})
    check_name(f"{where}: id", rid)
    where = f"[[releases]] id = {rid!r}"
    by_raw = raw.get("by", [])
    by = (by_raw,) if isinstance(by_raw, str) else by_raw
    if not isinstance(by, list | tuple) or not all(isinstance(c, str) and c for c in by):
        reject(f"{where}: by", "must be a column name or a list of column names", by_raw)
    keys = None
    if "keys" in raw:
        raw_keys = raw["keys"]
        if not isinstance(raw_keys, list):
            reject(f"{where}: keys", "must be a list", type(raw_keys).__name__)
        try:
            keys = normalize_keys(raw_keys, len(by) or 1)
        except HdpError as exc:
            msg = f"{where}: {exc}"
            raise JobError(msg) from exc
    aggs_raw = raw.get("aggregators", [])
    if not isinstance(aggs_raw, list):
        reject(f"{where}: aggregators", "must be an array of tables", aggs_raw)
    entries = []
    for j, agg in enumerate(aggs_raw):
        at = f"{where}: aggregator #{j + 1}"
        if not isinstance(agg, Mapping) or not isinstance(agg.get("kind"), str):
            reject(f"{at}: kind", "must name an aggregator kind", agg)
        kind = get_kind(str(agg["kind"]), setting=f"{at}: kind")
        if kind.parameters is not None:
            reject_unknown(f"{at} (kind = {kind.name!r})", agg,
                           {"kind", "unit", *kind.parameters()})
        params = {k: v for k, v in agg.items() if k not in ("kind", "unit")}
        unit = agg.get("unit")
        if unit is not None and (not isinstance(unit, str) or not unit.strip()):
            reject(f"{at}: unit", "must be a non-empty text (e.g. \"years\")", unit)
        if "eps" not in params and default_eps is not None:
            params["eps"] = default_eps
        if kind.unit == "user" and "user" not in params:
            params["user"] = user_id
        try:
            spec = kind.build(params)
        except HdpError as exc:
            msg = f"{at} ({kind.name}): {exc}"
            raise JobError(msg) from exc
        except TypeError as exc:
            msg = f"{at} ({kind.name}): unknown or missing parameter ({exc})."
            raise JobError(msg) from exc
        entries.append(AggregatorEntry(kind.name, spec, unit))
    _check_kinds(where, entries, tuple(by))
    _check_ldp_unit(where, entries, tuple(by), user_id)
    selection = None
    if "select_keys" in raw:
        selection = parse_select_keys(where, raw["select_keys"])
    unit = None
    if "privacy_unit" in raw:
        unit = parse_privacy_unit(where, raw["privacy_unit"], user_id)
    return ReleaseSpec(id=str(rid), aggregators=tuple(entries), by=tuple(by), keys=keys,
                       weight=raw.get("weight", 1.0), selection=selection, unit=unit)


def _check_kinds(where: str, entries: list[AggregatorEntry], by: tuple[str, ...]) -> None:
    """Rules between a release's kinds (see ``docs/jobs.md``, "Charging rules per kind").

    A kind with one global ε per person (``unit = "person"``: heavy hitters, attribute
    histograms) has no per-row ε to cap: its release may hold only such kinds, and no
    ``by`` (its output is not per group).
    """
    kinds = [get_kind(e.kind) for e in entries]
    for kind in kinds:
        if by and not kind.grouped:
            reject(f"{where}: by", f"is not allowed with kind {kind.name!r} (it releases "
                    "one global table, not one row per public key)", list(by))
    person = [k.name for k in kinds if k.unit == "person"]
    if person and len(person) != len(kinds):
        reject(f"{where}: aggregators", "must not mix kinds with one global ε per person "
                f"({', '.join(sorted(set(person)))}) with kinds that read a per-row ε column "
                "(the budget rule caps per-row ε; a global ε cannot be capped per row): put "
                "them in separate releases", sorted({k.name for k in kinds}))


def _check_ldp_unit(where: str, entries: list[AggregatorEntry], by: tuple[str, ...],
                    user_id: str) -> None:
    """Rules of ``ldp_mean`` with ``privacy_unit`` (one report per person,
    :mod:`hdp_spark.core.privacy_unit.ldp`): the unit is the job's user id, the release is
    global, and all its aggregators are local-DP means under that same unit (a call has
    one unit, and the one-report rule is the local-DP aggregators' own)."""
    units = [getattr(e.spec, "privacy_unit", None) if e.kind == "ldp_mean" else None
             for e in entries]
    named = [u for u in units if u is not None]
    if not named:
        return
    if named[0] != user_id:
        reject(f"{where}: privacy_unit", f"must be the job's `[input] user_id` "
               f"({user_id!r}): the person is the ledger's account", named[0])
    if by:
        reject(f"{where}: by", "is not allowed with `ldp_mean` under `privacy_unit` (one "
               "report per person: a report cannot be split over groups)", list(by))
    if len(named) != len(units) or len(set(named)) != 1:
        reject(f"{where}: aggregators", "must all be `ldp_mean` with the same "
               "`privacy_unit` when one of them has it (one report per person is the "
               "local-DP aggregators' rule)", sorted({e.kind for e in entries}))


def parse_job(data: Mapping[str, Any], base_dir: Path, source: Path | None = None) -> JobSpec:
    """Build a :class:`JobSpec` from a parsed TOML document.

    Args:
        data: the document (``tomllib.load`` output).
        base_dir: directory that relative paths are resolved against.
        source: the job file, for messages and the report.

    Raises:
        JobError: a setting breaks its rule.
    """
    reject_unknown("the job file's top level (its sections)", data, _SECTIONS)
    job = _table(data, "job", {"name", "engine", "description", "unsafe_seed"})
    inp = _table(data, "input", {"path", "table", "format", "schema", "user_id", "eps",
                                 "types", "fingerprint", "expectations"})
    bud = _table(data, "budget", {"default", "column", "policy", "charge", "allocation"})
    led = _table(data, "ledger", {"path", "backend", "lock_timeout", "compact_every",
                                  "witness"})
    out = _table(data, "output", {"path", "report"})
    spark = data.get("spark", {})
    if not isinstance(spark, Mapping):
        reject("[spark]", "must be a table of Spark settings", spark)

    types_raw = inp.pop("types", {})
    if not isinstance(types_raw, Mapping):
        reject("[input] types", "must be a table of column = type", types_raw)
    input_spec = InputSpec(
        path=_path(base_dir, "[input] path", inp["path"]) if "path" in inp else None,
        table=inp.get("table"),
        format=inp.get("format"),
        schema=_path(base_dir, "[input] schema", inp["schema"]) if "schema" in inp else None,
        user_id=inp.get("user_id", "user_id"),
        eps=inp.get("eps"),
        types=tuple(sorted((str(k), v) for k, v in types_raw.items())),
        fingerprint=inp.get("fingerprint", "content"),
        expectations=inp.get("expectations", False),
    )
    if "path" not in led:
        reject("[ledger] path", "is required", None)
    if "path" not in out:
        reject("[output] path", "is required", None)
    releases_raw = data.get("releases", [])
    if not isinstance(releases_raw, list):
        reject("[[releases]]", "must be an array of tables", releases_raw)
    releases = tuple(
        _release(r, i, input_spec.eps, input_spec.user_id) for i, r in enumerate(releases_raw)
    )
    if "name" not in job:
        reject("[job] name", "is required", None)
    return JobSpec(
        name=job["name"],
        engine=job.get("engine", "pandas"),
        description=str(job.get("description", "")),
        unsafe_seed=job.get("unsafe_seed"),
        input=input_spec,
        budget=BudgetSpec(
            default=bud.get("default"), column=bud.get("column"),
            policy=bud.get("policy", "cap"), charge=bud.get("charge", "effective"),
            allocation=bud.get("allocation", "sequential"),
        ),
        ledger=LedgerSpec(
            path=_path(base_dir, "[ledger] path", led["path"]),
            backend=led.get("backend"),
            lock_timeout=led.get("lock_timeout", 600.0),
            compact_every=led.get("compact_every", 20),
            witness=(_path(base_dir, "[ledger] witness", led["witness"])
                     if "witness" in led else None),
        ),
        output=OutputSpec(
            path=_path(base_dir, "[output] path", out["path"]), report=out.get("report", True)
        ),
        releases=releases,
        spark_conf=tuple(sorted((str(k), str(v)) for k, v in spark.items())),
        source=source,
    )


def load_job(path: str | Path, *, engine: EngineName | None = None) -> JobSpec:
    """Load and validate a TOML job file.

    Args:
        path: the job file. Relative paths inside it are resolved against its directory.
        engine: run on this engine instead of the file's (``"pandas"`` or ``"spark"``).

    Raises:
        JobError: the file is missing, is not valid TOML, or a setting breaks its rule.
    """
    p = Path(path)
    try:
        with p.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        reject("job file", "must exist", str(p))
    except tomllib.TOMLDecodeError as exc:
        msg = f"`job file` {p} is not valid TOML: {exc}."
        raise JobError(msg) from exc
    job = parse_job(data, p.resolve().parent, source=p.resolve())
    if engine is not None:
        if engine not in ENGINES:
            reject("--engine", f"must be one of {', '.join(ENGINES)}", engine)
        job = job.with_engine(engine)
    return job
