"""A local-DP release under a privacy unit on a session of a Spark server (Spark Connect in
``test_ldp_unit.py``, with and without the extension): the rows of
``hs.ldp_release(..., privacy_unit="uid")`` for the shared table and key, as text, to compare
with pandas', and the one-report step's kept rows and printed plans (every explain mode)."""

from __future__ import annotations

import contextlib
import io
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from ldp_unit_data import ldp_specs, table

sys.path.pop(0)

KEPT_SEED = "kept-12"
"""The seed of the one-report step run alone (its kept rows and plans)."""


def run(spark: Any) -> dict[str, Any]:
    """The release's rows (``repr``), the session's class, and the kept rows and plans of
    the randomized-response mean's one-report step under :data:`KEPT_SEED`."""
    import hdp_spark.spark as hs
    from hdp_spark.core.noise import ReleaseKey
    from hdp_spark.core.privacy_unit.spec import PrivacyUnit, bounding_key
    from hdp_spark.spark.privacy_unit import keep_one_report

    warnings.simplefilter("ignore")
    pdf, oracle = table()
    frame = spark.createDataFrame(pdf).repartition(3)
    specs = ldp_specs(oracle)
    result = hs.ldp_release(frame, *specs, already_randomized=True,
                            privacy_unit="uid", unsafe_seed="k")
    key = ReleaseKey.resolve(KEPT_SEED)
    kept = keep_one_report(frame, PrivacyUnit("uid", 1, 1), specs[1], key)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for mode in ("simple", "extended", "codegen", "cost", "formatted"):
            kept.explain(mode)
    plans = out.getvalue()
    return {"session": type(spark).__module__, "rows": repr(result.rows()),
            # (person, report): rows that tie on (ε, index, q) are interchangeable
            "kept": sorted((int(r["uid"]), float(r["rr"]))
                           for r in kept.select("uid", "rr").collect()),
            "operator": "HdpLdpUnitBound" in plans,
            "secret_rank": "hdp_ldp_position" in plans,
            "key_in_plans": bounding_key(key) in plans or key.material.hex() in plans}
