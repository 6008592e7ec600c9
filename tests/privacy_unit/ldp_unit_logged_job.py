"""The local-DP Columns' job and SQL's job under a privacy unit, then a central release
under one, one after the other in one session (``python ldp_unit_logged_job.py
<classic|connect> <event log dir>``: the event log on and every logger at INFO, the result
as JSON on the last line of stdout), so that the key-leak test starts one Spark process per
mode for all, not one per job (issue 53)."""

from __future__ import annotations

from typing import Any

from ldp_unit_column_job import run as run_columns  # the script's directory is sys.path[0]
from ldp_unit_sql_job import run as run_sql


def run(spark: Any) -> dict[str, Any]:
    """Both jobs' results, their secrets listed once (for the caller's grep, which finds
    the list itself in the output): the Columns' first ``split``, then the SQL job's, then
    the central release's under a unit (:func:`central`) last."""
    columns = run_columns(spark)
    sql = run_sql(spark)
    released = central(spark)
    split = len(columns["secrets"])
    secrets = columns.pop("secrets") + sql.pop("secrets") + released.pop("secrets")
    return {"columns": columns, "sql": sql, "central": released, "secrets": secrets,
            "split": split}


def central(spark: Any) -> dict[str, Any]:
    """A central release under a unit (``hs.agg(..., privacy_unit=...)``: on classic Spark
    the operator through py4j, on Connect the request whose key travels in the secret
    channel): its rows, and its release key and bounding key as secrets."""
    from unit_release_connect_job import (
        CENTRAL,
        case_table,
        explained,
        plain,
        release_args,
    )

    import hdp_spark.pandas as hpd
    import hdp_spark.spark as hs
    from hdp_spark.core.noise import ReleaseKey
    from hdp_spark.core.privacy_unit.spec import PrivacyUnit, bounding_key
    from hdp_spark.spark.privacy_unit import bound_frame

    specs, kwargs = release_args(CENTRAL, hs)
    frame = spark.createDataFrame(case_table(CENTRAL)).repartition(3)
    rows = plain([r.asDict() for r in hs.agg(frame, *specs, **kwargs).collect()])
    key = ReleaseKey.resolve(kwargs["unsafe_seed"])
    bounded = bound_frame(frame, PrivacyUnit("user_id", 2, 3), eps="eps", by=("country",),
                          keys=(("DE",), ("FR",), ("IT",), ("ES",)),
                          specs=release_args(CENTRAL, hpd)[0], key=key)
    return {"rows": rows, "operator": "HdpUnitBound" in explained(bounded, "simple"),
            "secrets": [bounding_key(key), key.material.hex()]}


if __name__ == "__main__":
    from logged_session import logged_main

    logged_main(run)
