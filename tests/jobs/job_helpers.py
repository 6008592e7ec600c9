"""Helpers of the job/ledger tests: job files written into tmp dirs, ledger inspection."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data" / "employees.csv"
SCHEMA = REPO / "schemas" / "employees.yaml"

GROUPED_RELEASE = """
[[releases]]
id = "salary_by_dept"
by = ["dept"]
keys = ["engineering", "finance", "operations", "research", "sales"]

  [[releases.aggregators]]
  kind = "mean"
  column = "salary"
  lower = 20000
  upper = 250000
"""

GLOBAL_RELEASE = """
[[releases]]
id = "tenure_overall"

  [[releases.aggregators]]
  kind = "mean"
  column = "tenure_years"
  lower = 0
  upper = 40
"""

RELEASES = GROUPED_RELEASE + GLOBAL_RELEASE


def job_text(
    tmp: Path,
    *,
    name: str = "t_job",
    engine: str = "pandas",
    data: Path = DATA,
    backend: str = "sqlite",
    ledger: Path | None = None,
    out: Path | None = None,
    budget: str = "default = 4.0",
    policy: str = "cap",
    charge: str = "effective",
    releases: str = RELEASES,
    report: bool = False,
    seed: str | None = None,
    schema: bool = False,
    expectations: bool = False,
    witness: Path | bool | None = True,
) -> str:
    """A job file's text with absolute paths under ``tmp``; ``witness``: True (default) for
    a rollback witness at ``<tmp>/witness/<ledger name>.json``, a path, or False/None for
    none."""
    ledger = ledger or (tmp / ("ledger.sqlite" if backend == "sqlite" else "ledger"))
    out = out or (tmp / "out")
    if witness is True:
        witness = tmp / "witness" / f"{ledger.name}.json"
    lines = [
        "[job]",
        f'name = "{name}"',
        f'engine = "{engine}"',
        *([f'unsafe_seed = "{seed}"'] if seed else []),
        "",
        "[input]",
        f'path = "{data}"',
        *([f'schema = "{SCHEMA}"'] if schema else []),
        *(["expectations = true"] if expectations else []),
        'user_id = "user_id"',
        'eps = "eps"',
        'types = { eps = "double" }',
        "",
        "[budget]",
        budget,
        f'policy = "{policy}"',
        f'charge = "{charge}"',
        "",
        "[ledger]",
        f'backend = "{backend}"',
        f'path = "{ledger}"',
        "lock_timeout = 60",
        *([f'witness = "{witness}"'] if witness else []),
        "",
        "[output]",
        f'path = "{out}"',
        f"report = {'true' if report else 'false'}",
        "",
        releases,
    ]
    return "\n".join(lines)


def write_job(tmp: Path, filename: str = "job.toml", **kwargs: Any) -> Path:
    """Write a job file (see :func:`job_text`) and return its path."""
    path = tmp / filename
    path.write_text(job_text(tmp, **kwargs))
    return path


def spent_by_user(job_path: Path) -> dict[str, int]:
    """Units spent per user, read through the ledger API (either backend)."""
    from hdp_spark.jobs import load_job
    from hdp_spark.ledger import open_ledger
    from hdp_spark.ledger.io import PandasIO

    job = load_job(job_path)
    ledger = open_ledger(job.ledger_backend, job.ledger.path)
    frame = ledger.spent(PandasIO())
    return {str(u): int(n) for u, n in zip(frame["user_id"], frame["units"], strict=True)}


def records(job_path: Path) -> list[Any]:
    """All commit records of the job's ledger."""
    from hdp_spark.jobs import load_job
    from hdp_spark.ledger import open_ledger

    job = load_job(job_path)
    return list(open_ledger(job.ledger_backend, job.ledger.path).records())


def sqlite_rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    """Rows of a query on a SQLite ledger (read-only)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def published(out: Path) -> dict[str, dict[str, Any]]:
    """``{commit id: values.json}`` of every published release directory under ``out``."""
    found = {}
    for values in out.glob("*/*/values.json"):
        if values.parent.parent.name.startswith("."):
            continue
        found[values.parent.name] = json.loads(values.read_text())
    return found


def unseal_to_v3(path: Path) -> None:
    """Turn a sealed (format 4) SQLite ledger into what format 3 wrote: no MAC columns, no
    sealed state (as an older version of hdp_spark left it)."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            for table, columns in (("commits", ("key_mac", "mac")), ("users", ("mac",)),
                                   ("charges", ("mac",)), ("totals", ("mac",))):
                for column in columns:
                    conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
            conn.execute("DELETE FROM meta WHERE name = 'state'")
            conn.execute("UPDATE meta SET value = 'hdp_spark.ledger.sqlite/3' "
                         "WHERE name = 'format'")
    finally:
        conn.close()


def unseal_parquet_to_v1(root: Path) -> None:
    """Turn a sealed (format 2) parquet ledger into what format 1 wrote: manifests without
    file hashes and MAC."""
    for manifest in (root / "_manifests").iterdir():
        doc = json.loads(manifest.read_text())
        doc.pop("files", None)
        doc.pop("mac", None)
        doc["format"] = "hdp_spark.ledger.parquet/1"
        manifest.write_text(json.dumps(doc))


def spend_parts(root: Path) -> list[Path]:
    """The part files of a parquet ledger's current spend (its snapshot and the deltas
    after it: what runs read; deltas folded into a snapshot are archived, read by
    ``verify`` only)."""
    manifest = json.loads(max((root / "_manifests").glob("*.json")).read_text())
    dirs = ([manifest["snapshot"]] if manifest["snapshot"] else []) + manifest["deltas"]
    return sorted(p for d in dirs for p in (root / d).glob("*.parquet"))
