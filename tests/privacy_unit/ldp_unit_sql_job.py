"""The local-DP SQL functions under a privacy unit (``..., 'unit', 'uid', 1, 1``), on any
session (classic in the test process, in a session of its own; Spark Connect through the
job server), and, run as a script, in a session whose event log and INFO logs the test
greps for the key (``python ldp_unit_sql_job.py <classic|connect> <event log dir>``: prints
the result as JSON on its last line)."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[2]))
from tests.privacy_unit.ldp_unit_column_job import _same, explained, fingerprint
from tests.privacy_unit.ldp_unit_data import table

sys.path.pop(0)

SEED = "sql-ldp-registration"
"""The registration's seed (its key, the SQL unit key derived from it and each query's key
are grepped for)."""

TAIL = "'unit', 'uid', 1, 1"


def calls(oracle: Any) -> list[tuple[str, Any]]:
    """(SQL call, the same aggregator as a release API spec), reports declared."""
    import hdp_spark.ldp as L

    declared = '"already_randomized": true'
    phi = {"d": oracle.d, "m": oracle.m, "phi_seed": oracle.phi_seed}
    return [
        (f"hdp_ldp_mean(lap, eps, '{{\"mechanism\": \"laplace\", {declared}}}', {TAIL})",
         L.ldp_mean("lap", eps="eps", mechanism="laplace")),
        (f"hdp_ldp_mean(rr, eps, '{{\"mechanism\": \"rr\", \"alias\": \"bits\", "
         f"{declared}}}', {TAIL})",
         L.ldp_mean("rr", eps="eps", mechanism="rr", alias="bits")),
        (f"hdp_ldp_mean_vector(vec, eps, '{{\"d\": 3, {declared}}}', {TAIL})",
         L.ldp_mean_vector("vec", eps="eps", d=3)),
        (f"hdp_ldp_distribution(j, b, eps, '{{\"oracle\": {json.dumps(phi)}, {declared}}}', "
         f"{TAIL})", L.ldp_distribution("j", "b", eps="eps", oracle=oracle)),
    ]


def run(spark: Any) -> dict[str, Any]:
    """Each SQL call beside ``ldp_agg`` under the query's key, re-evaluations, and (for the
    caller's grep) the secrets and the plans."""
    import hdp_spark.spark as hs
    from hdp_spark.core.ldp.release import output_fields
    from hdp_spark.core.noise import ReleaseKey
    from hdp_spark.core.privacy_unit.spec import bounding_key
    from hdp_spark.spark.sql_ldp import sql_unit_key

    warnings.simplefilter("ignore")
    if "connect" not in type(spark).__module__:  # its own registration, not the shared one
        spark = spark.newSession()
    pdf, oracle = table()
    df = spark.createDataFrame(pdf).repartition(3)
    df.createOrReplaceTempView("ldp_unit_reports")
    hs.register_sql(spark, unsafe_seed=SEED)
    key = sql_unit_key(ReleaseKey.resolve(SEED))
    out: dict[str, Any] = {"session": type(spark).__module__, "diff": [], "fields": 0,
                           "n": [], "again": [], "plans": "", "ranks": []}
    out["secrets"] = [ReleaseKey.resolve(SEED).material.hex(), key.material.hex(),
                      bounding_key(key)]
    for call, spec in calls(oracle):
        q = spark.sql(f"SELECT {call} AS r FROM ldp_unit_reports")
        got = q.collect()[0]["r"].asDict(recursive=True)
        plans = explained(q)
        fp = fingerprint(q)
        query = key.for_query(fp)
        out["plans"] += plans
        out["ranks"].append("HdpLdpUnitBound" in plans)
        out["secrets"] += [query.material.hex(), bounding_key(query)]
        want = hs.ldp_agg(df, spec, already_randomized=True, privacy_unit="uid",
                          unsafe_seed=query).collect()[0].asDict(recursive=True)
        for suffix, _ in output_fields(spec):
            out["fields"] += 1
            if not _same(got[suffix.lstrip("_") or "estimate"], want[spec.name + suffix]):
                out["diff"].append(spec.name + suffix)
        out["n"].append(got["n"] + got["skipped"])
        again = spark.sql(f"SELECT {call} AS r FROM ldp_unit_reports").collect()[0]["r"]
        out["again"].append(_same(again.asDict(recursive=True), got))
    out["persons"] = int(pdf["uid"].nunique())
    return out



def check(got: dict[str, Any]) -> None:
    """The assertions on :func:`run`'s result: each SQL call equals the release API and
    repeats, the rule's operator is in each plan, no secret is in the plans."""
    assert got["diff"] == []
    assert got["fields"] == 4 * 12 + 1  # every field compared (the pmf has _m, _projection)
    assert got["again"] == [True] * 4
    assert got["ranks"] == [True] * 4  # the rule's operator, HdpLdpUnitBound, in each plan
    assert all(0 < n <= got["persons"] for n in got["n"])  # one report per person at most
    for secret in got["secrets"]:
        assert secret not in got["plans"]


if __name__ == "__main__":
    from logged_session import logged_main  # the script's directory is sys.path[0]

    logged_main(run)
