"""A local-DP release under a privacy unit on a session of a Spark server (Spark Connect in
``test_ldp_unit.py``): the rows of ``hs.ldp_release(..., privacy_unit="uid")`` for the
shared table and key, as text, to compare with pandas'."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from ldp_unit_data import ldp_specs, table

sys.path.pop(0)


def run(spark: Any) -> dict[str, Any]:
    """The release's rows (``repr``) and the session's class."""
    import hdp_spark.spark as hs

    warnings.simplefilter("ignore")
    pdf, oracle = table()
    frame = spark.createDataFrame(pdf).repartition(3)
    result = hs.ldp_release(frame, *ldp_specs(oracle), already_randomized=True,
                            privacy_unit="uid", unsafe_seed="k")
    return {"session": type(spark).__module__, "rows": repr(result.rows())}
