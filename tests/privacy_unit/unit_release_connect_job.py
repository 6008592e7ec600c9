"""The release API under a privacy unit on Spark Connect (``run``, on the run's shared
Connect servers: test_unit_release_connect.py; ``main`` starts a local server of its own):
the releases' rows for fixed keys, integer and string ids, grouped and global, and the
bounding step's printed plans (every explain mode)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: local_connect
from local_connect import local_remote

CASES = ("int-grouped", "int-global", "int-select", "str-grouped", "str-global")
"""The releases: the id's type and the release's keys (public keys, none, select_keys)."""

CENTRAL = "str-grouped"
"""The case the logged session releases (ldp_unit_logged_job.py: no key in its logs)."""

MODES = ("simple", "extended", "codegen", "cost", "formatted")


def table(ids: str, seed: int = 21, n: int = 3000, persons: int = 250) -> Any:
    """The shared table: skewed persons (many rows for a few), five countries (one outside
    the public keys), ε varying per row; ``ids="str"``: the ids as text."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    users = np.floor(persons * rng.random(n) ** 2).astype(np.int64)
    return pd.DataFrame({
        "user_id": [f"u{u}" for u in users] if ids == "str" else users,
        "country": rng.choice(["DE", "FR", "IT", "ES", "XX"], n),
        "amount": rng.uniform(0, 500, n),
        "category": rng.choice(["a", "b", "c", "d"], n),
        "eps": rng.choice([0.25, 0.5, 1.0, 2.0], n),
    })


def case_table(case: str) -> Any:
    """The table of ``case``: under select_keys more persons (so that groups pass)."""
    ids = case.split("-")[0]
    return table(ids, n=4000, persons=1500) if case.endswith("select") else table(ids)


def release_args(case: str, mod: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The specs and keywords of ``case`` for ``mod`` (hdp_spark.pandas or .spark)."""
    specs = (mod.hdp_mean("amount", eps="eps", lower=0, upper=500),
             mod.hdp_histogram("category", eps="eps", categories=["a", "b", "c"]))
    kwargs: dict[str, Any] = {"privacy_unit": "user_id", "max_groups": 2, "max_rows": 3,
                              "unsafe_seed": f"connect-{case}"}
    if case.endswith("grouped"):
        kwargs.update(by="country", keys=["DE", "FR", "IT", "ES"])
    elif case.endswith("select"):
        kwargs.update(by="country", keys=mod.select_keys(delta=1e-3, c=1.0, share=0.5))
    return specs, kwargs


def plain(rows: list[dict[str, Any]]) -> list[str]:
    """A release's rows as sorted texts (histograms' bins as dicts, numpy scalars as
    Python's), the same for Spark's and pandas' rows."""
    def value(v: Any) -> Any:
        if hasattr(v, "asDict"):
            return {k: value(x) for k, x in v.asDict().items()}
        if isinstance(v, dict):
            return {k: value(x) for k, x in v.items()}
        if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
            v = v.tolist()
        if isinstance(v, (list, tuple)):
            return [value(x) for x in v]
        return v

    return sorted(repr({k: value(v) for k, v in r.items()}) for r in rows)


def run(spark: Any) -> dict[str, Any]:
    """Per case the release's rows (:func:`plain`); the bounding step's plans for the
    grouped releases: whether they hold the operator, their physical shuffles, sorts and
    windows, and whether the bounding key (or the release key) is in any of them."""
    import hdp_spark.pandas as hpd
    import hdp_spark.spark as hs
    from hdp_spark.core.noise import ReleaseKey
    from hdp_spark.core.privacy_unit.spec import PrivacyUnit, bounding_key
    from hdp_spark.spark.privacy_unit import bound_frame

    out: dict[str, Any] = {"session": type(spark).__module__, "rows": {}, "plans": {}}
    for case in CASES:
        frame = spark.createDataFrame(case_table(case)).repartition(3)
        specs, kwargs = release_args(case, hs)
        released = hs.agg(frame, *specs, **kwargs)
        out["rows"][case] = plain([r.asDict() for r in released.collect()])
        if case == "int-global":
            continue
        key = ReleaseKey.resolve(kwargs["unsafe_seed"])
        keys = (("DE",), ("FR",), ("IT",), ("ES",)) if case.endswith("grouped") else None
        by = () if case.endswith("global") else ("country",)
        bounded = bound_frame(frame, PrivacyUnit("user_id", 2, 3), eps="eps", by=by,
                              keys=keys, specs=release_args(case, hpd)[0], key=key)
        shown = {mode: explained(bounded, mode) for mode in MODES}
        plans = "".join(shown.values()) + explained(released, "extended")
        physical = shown["simple"]
        analyzed = shown["extended"].split("== Analyzed Logical Plan ==")[1]
        out["plans"][case] = {
            "operator": "HdpUnitBound" in physical,
            "prebound": "HdpUnitPreBound" in physical,
            "request_left": "hdp_unit_bound(" in analyzed,
            "exchanges": physical.count("Exchange hashpartitioning(user_id"),
            "sorts": physical.count("Sort [user_id"),
            "windows": physical.count("Window ["),
            "key_in_plans": bounding_key(key) in plans or key.material.hex() in plans,
            "kept": bounded.count(),
            "cached": _cached(spark, bounded),
        }
    return out


def _cached(spark: Any, bounded: Any) -> bool:
    """Whether a query over the persisted bounded rows reads the cache (as the release's
    cell queries do) when the server analyzes each query's plan anew (its plan cache off,
    as when it evicts an entry): the operator's node must be equal across analyses of one
    request (measured: with nodes equal by identity it was not found)."""
    spark.conf.set("spark.connect.session.planCache.enabled", "false")
    bounded.persist()
    try:
        bounded.count()
        return "InMemoryTableScan" in explained(bounded.groupBy("user_id").count(), "simple")
    finally:
        bounded.unpersist()
        spark.conf.unset("spark.connect.session.planCache.enabled")


def explained(df: Any, mode: str) -> str:
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        df.explain(mode)
    return text.getvalue()


def main() -> None:
    import hdp_spark.spark as hs

    builder = local_remote().config("spark.sql.shuffle.partitions", "3")
    spark = hs.configure(builder).getOrCreate()
    try:
        print(json.dumps(run(spark), indent=1))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
