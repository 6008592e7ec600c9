"""The local-DP Columns under a privacy unit, on any session (classic in the test process,
Spark Connect through the job server), and, run as a script, in a session of its own whose
event log and INFO logs the test greps for the key (``python ldp_unit_column_job.py
<classic|connect> <event log dir>``: prints the result as JSON on its last line)."""

from __future__ import annotations

import contextlib
import io
import re
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[2]))
from tests.privacy_unit.ldp_unit_data import table

sys.path.pop(0)

RELEASE_SEED = "release-api-unit"
"""The seed of the release API's run (its key is grepped for)."""

MODES = ("simple", "extended", "codegen", "cost", "formatted")


def columns(oracle: Any, **kwargs: Any) -> list[Any]:
    """The four local-DP Columns under the unit ``uid`` (declared reports)."""
    import hdp_spark.spark as hs

    unit = {"already_randomized": True, "privacy_unit": "uid", **kwargs}
    return [hs.ldp_mean("lap", eps="eps", mechanism="laplace", **unit),
            hs.ldp_mean("rr", eps="eps", mechanism="rr", **unit),
            hs.ldp_mean_vector("vec", eps="eps", d=3, **unit),
            hs.ldp_distribution("j", "b", eps="eps", oracle=oracle, **unit)]


def explained(q: Any) -> str:
    """``q.explain`` in every mode, as one text."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for mode in MODES:
            q.explain(mode)
    return out.getvalue()


def fingerprint(q: Any) -> str:
    """The query's fingerprint: the one 64-hex literal of its plans."""
    found = set(re.findall(r"\b[0-9a-f]{64}\b", explained(q)))
    assert len(found) == 1, found
    return found.pop()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def run(spark: Any) -> dict[str, Any]:
    """Each Column beside ``ldp_agg`` under the query's key, re-evaluations, another key,
    and (for the caller's grep) the secrets of an unseeded Column and its plans."""
    import hdp_spark.spark as hs
    from hdp_spark.core.ldp.release import output_fields
    from hdp_spark.core.privacy_unit.spec import bounding_key, query_bounding_key

    warnings.simplefilter("ignore")
    pdf, oracle = table()
    df = spark.createDataFrame(pdf).repartition(3)
    out: dict[str, Any] = {"session": type(spark).__module__, "diff": [], "fields": 0,
                           "n": [], "again": [], "other": []}
    for i, col in enumerate(columns(oracle)):
        seeded = col.unsafe_seed(f"c{i}")
        name = seeded.spec.name
        q = df.agg(seeded)
        got = q.collect()[0][name].asDict(recursive=True)
        want = hs.ldp_agg(df, seeded, already_randomized=True, privacy_unit="uid",
                          unsafe_seed=seeded.key.for_query(fingerprint(q))
                          ).collect()[0].asDict(recursive=True)
        for suffix, _ in output_fields(seeded.spec):
            out["fields"] += 1
            if not _same(got[suffix.lstrip("_") or "estimate"], want[name + suffix]):
                out["diff"].append(name + suffix)
        out["n"].append(got["n"] + got["skipped"])
        again = [q.collect()[0][name].asDict(recursive=True),
                 df.agg(seeded).collect()[0][name].asDict(recursive=True)]
        out["again"].append(all(_same(a, got) for a in again))
        # another key keeps other reports: for binary reports (randomized response, the
        # oracle's signs) two selections can tie on the released sums, so up to six keys
        # are tried and one must differ (the first that does ends the search: a Spark query
        # per key, issue 53)
        out["other"].append(any(
            not _same(df.agg(col.unsafe_seed(f"other{i}.{j}")).collect()[0][name]["raw"],
                      got["raw"])
            for j in range(6)))
    secret = columns(oracle)[0]
    q = df.agg(secret)
    rows = [q.collect()[0][0].asDict(recursive=True) for _ in range(2)]
    plans = explained(q)
    fp = fingerprint(q)
    bkey = bounding_key(secret.key)
    out["repeat"] = _same(rows[0], rows[1])
    out["secrets"] = [secret.key.material.hex(), bkey, query_bounding_key(bkey, fp)]
    # the release API under the unit: its key (a seeded one, to know what to grep for)
    # reaches no plan either (its one-report step, explained, and the jobs it runs)
    from hdp_spark.core.noise import ReleaseKey
    from hdp_spark.core.privacy_unit.spec import PrivacyUnit
    from hdp_spark.spark.privacy_unit import keep_one_report

    release = ReleaseKey.resolve(RELEASE_SEED)
    rr = columns(oracle)[1]
    out["release_n"] = int(hs.ldp_agg(df, rr, already_randomized=True, privacy_unit="uid",
                                      unsafe_seed=RELEASE_SEED).collect()[0]["rr_mean_n"])
    kept = explained(keep_one_report(df, PrivacyUnit("uid", 1, 1), rr.spec, release))
    out["release_rank"] = "HdpLdpUnitBound" in kept  # the one-report operator
    out["secrets"] += [release.material.hex(), bounding_key(release)]
    out["plans"] = plans + kept
    out["persons"] = int(pdf["uid"].nunique())
    return out



def check(got: dict[str, Any]) -> None:
    """The assertions on :func:`run`'s result: each Column equals the release API and
    repeats, another key keeps other reports, no secret is in the plans."""
    assert got["diff"] == []
    assert got["fields"] == 4 * 12 + 1  # every field compared (the pmf has _m, _projection)
    assert got["again"] == [True] * 4  # the same query again, and analysed again
    assert got["other"] == [True] * 4  # another key keeps other reports
    assert got["repeat"] is True
    assert got["release_rank"] is True  # the release API's operator holds its key unprinted
    assert 0 < got["release_n"] <= got["persons"]
    assert all(n <= got["persons"] for n in got["n"])  # one report per person at most
    for secret in got["secrets"]:
        assert secret not in got["plans"]


if __name__ == "__main__":
    from logged_session import logged_main  # the script's directory is sys.path[0]

    logged_main(run)
