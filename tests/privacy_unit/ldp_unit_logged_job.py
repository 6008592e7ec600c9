"""The local-DP Columns' job and SQL's job under a privacy unit, one after the other in one
session (``python ldp_unit_logged_job.py <classic|connect> <event log dir>``: the event log
on and every logger at INFO, the result as JSON on the last line of stdout), so that the
key-leak test starts one Spark process per mode for both, not one per job (issue 53)."""

from __future__ import annotations

from typing import Any

from ldp_unit_column_job import run as run_columns  # the script's directory is sys.path[0]
from ldp_unit_sql_job import run as run_sql


def run(spark: Any) -> dict[str, Any]:
    """Both jobs' results, their secrets listed once (for the caller's grep, which finds
    the list itself in the output): the Columns' first ``split``, then the SQL job's."""
    columns = run_columns(spark)
    sql = run_sql(spark)
    split = len(columns["secrets"])
    secrets = columns.pop("secrets") + sql.pop("secrets")
    return {"columns": columns, "sql": sql, "secrets": secrets, "split": split}


if __name__ == "__main__":
    from logged_session import logged_main

    logged_main(run)
