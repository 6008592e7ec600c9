"""The local-DP one-report step under a privacy unit on any Spark session (classic in the
test process, Spark Connect through the job server): the rows the release API keeps
(``keep_one_report``) on :func:`~ldp_unit_data.unit_table`'s tables, with the extension's
operator and with the native windows (``hdp_spark.unitOperator`` false), for every local-DP
aggregator, and what their printed plans show."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[2]))
from tests.privacy_unit.ldp_unit_column_job import explained
from tests.privacy_unit.ldp_unit_data import ldp_specs, spark_frame, unit_table

sys.path.pop(0)

SEED = "ldp-operator-7"
"""The release key's seed."""

TABLES = ((False, 3), (True, 4))
"""(string ids, seed) of the tables."""

MODES = {"operator": "true", "windows": "false"}
"""The setting ``hdp_spark.unitOperator`` of each path."""


def run(spark: Any) -> dict[str, Any]:
    """``kept[<strings>/<seed>/<aggregator>/<path>]``: the kept rows' ``row`` values;
    ``operator[...]``: whether the plans show the operator, ``windows[...]``: the window
    plan's rank; ``key_in_plans``: whether any plan (every explain mode) shows the key."""
    from hdp_spark.core.noise import ReleaseKey
    from hdp_spark.core.privacy_unit.spec import PrivacyUnit, bounding_key
    from hdp_spark.spark.privacy_unit import keep_one_report

    warnings.simplefilter("ignore")
    key = ReleaseKey.resolve(SEED)
    secrets = (bounding_key(key), key.material.hex())
    out: dict[str, Any] = {"session": type(spark).__module__, "kept": {}, "operator": {},
                           "windows": {}, "key_in_plans": False}
    try:
        for strings, seed in TABLES:
            pdf, oracle = unit_table(seed, strings)
            frame = spark_frame(spark, pdf, strings)
            for spec in ldp_specs(oracle):
                for path, setting in MODES.items():
                    spark.conf.set("hdp_spark.unitOperator", setting)
                    kept = keep_one_report(frame, PrivacyUnit("uid", 1, 1), spec, key)
                    name = f"{strings}/{seed}/{spec.name}/{path}"
                    out["kept"][name] = sorted(r["row"] for r in kept.select("row").collect())
                    plans = explained(kept)
                    out["operator"][name] = "HdpLdpUnitBound" in plans
                    out["windows"][name] = "row_number()" in plans
                    out["key_in_plans"] |= any(s in plans for s in secrets)
    finally:
        spark.conf.unset("hdp_spark.unitOperator")
    return out
