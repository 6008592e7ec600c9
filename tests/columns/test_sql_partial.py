"""The SQL form of the partial-DP family (``hdp_heavy_hitters``, ``hdp_marginals``,
``hdp_mwem``, ``hdp_attribute_histograms`` over ``struct(cols...)`` and JSON options): the
release API's numbers for the same key, the fixed result types, and the refusals."""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import hdp_spark.spark as hs
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.spark.columns_partial import native_records
from hdp_spark.spark.records_families import family_of
from hdp_spark.spark.records_finalize import group_key
from hdp_spark.spark.sql_partial import sql_type

sys.path.insert(0, str(Path(__file__).parent))
from hh_column_job import COLS, DOMAINS, table

sys.path.pop(0)

pytestmark = pytest.mark.spark

SEED = 11
SMALL = {c: DOMAINS[c] for c in ("age_band", "sex", "region")}
CASES: list[tuple[str, str, list[str], dict[str, Any]]] = [
    ("heavy_hitters", "hdp_heavy_hitters", COLS,
     {"domains": DOMAINS, "eps0": 4.0, "delta": 1e-3}),
    ("marginals", "hdp_marginals", list(SMALL), {"domains": SMALL, "eps0": 1.0, "k": 2}),
    ("mwem", "hdp_mwem", list(SMALL),
     {"domains": SMALL, "eps0": 2.0, "k": 2, "rounds": 3}),
    ("attribute_histograms", "hdp_attribute_histograms", list(SMALL),
     {"domains": SMALL, "eps0": 0.5, "other": {"sex": "f"}}),
]


@pytest.fixture(scope="module")
def people(spark: Any) -> Any:
    hs.register_sql(spark, unsafe_seed=SEED)
    df = spark.createDataFrame(table(8000)).repartition(3)
    df.createOrReplaceTempView("people")
    return df


def _text(v: object) -> str | None:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(float(v)) if isinstance(v, float) else str(v)


def _release(df: Any, spec: Any, key: ReleaseKey) -> list[dict[str, Any]]:
    """The release API's table under ``key``, attribute values as the SQL form's text."""
    cols = [d.column for d in spec.domains]
    out = []
    for r in hs.agg(df, spec, unsafe_seed=key).collect()[0][spec.name]:
        d = r.asDict()
        if "attribute" not in d:  # the SQL form's values: array<string>
            values = [_text(d.pop(c)) for c in cols]
            d = {**({"marginal": d.pop("marginal")} if "marginal" in d else {}),
                 "values": values, **d}
        out.append(d)
    return out


def _fingerprint(df: Any) -> str:
    """The query fingerprint in the analyzed plan (the one 64-digit hex constant)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(True)
    found = set(re.findall(r"\b[0-9a-f]{64}\b", out.getvalue()))
    assert len(found) == 1, found
    return found.pop()


def _spec(family: str, cols: list[str], options: dict[str, Any]) -> Any:
    from hdp_spark.spark.sql_partial import SQL_FAMILIES

    return SQL_FAMILIES[family][1](cols, **options)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_sql_equals_the_release_api_per_group(spark: Any, people: Any, case: int) -> None:
    family, function, cols, options = CASES[case]
    text = json.dumps(options)
    query = spark.sql(f"SELECT country, {function}(struct({', '.join(cols)}), '{text}', "
                      "'public') AS r FROM people GROUP BY country")
    got = query.collect()
    assert got[0]["r"] is not None
    spec = _spec(family, cols, options)
    main = family_of(spec).main
    # the key: the registration's, per (family, options), per query fingerprint and group
    call = ReleaseKey.resolve(SEED).for_query(
        f"sql-partial:{family}:{json.dumps(options, sort_keys=True)}")
    fingerprint = _fingerprint(query)
    cells = people.groupBy("country").agg(native_records(spec, "public").alias("c"))
    groups = {r["country"]: r["group"] for r in cells.select("country", "c.group").collect()}
    released = 0
    for row in got:
        key = group_key(call.for_query(fingerprint), spec.name, groups[row["country"]])
        mine = [r.asDict(recursive=True) for r in row["r"][main]]
        ref = _release(people.filter(people.country == row["country"]), spec, key)
        assert mine == ref, (family, row["country"])
        released += len(mine)
        assert row["r"]["unsafe_seed"] is True
    assert released >= 3 * (1 if family == "heavy_hitters" else 10)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_sql_under_a_privacy_unit_equals_the_release_api(spark: Any, people: Any,
                                                         case: int) -> None:
    """``privacy_unit`` and ``max_rows`` in the options of a global query: the extension
    bounds the persons' rows below the aggregate (as the Column), and the SQL form releases
    what the release API releases for the same spec and key."""
    import numpy as np

    family, function, cols, options = CASES[case]
    options = {**options, "privacy_unit": "pid", "max_rows": 2}
    if family == "heavy_hitters":
        options["eps0"] = 8.0
    base = table(6000, seed=11)
    base["pid"] = np.repeat(np.arange(len(base)),
                            np.random.default_rng(11).integers(1, 5, len(base)))[:len(base)]
    events = spark.createDataFrame(base).repartition(3)
    events.createOrReplaceTempView("unit_events")
    text = json.dumps(options)
    query = spark.sql(f"SELECT {function}(struct({', '.join(cols)}), '{text}') AS r "
                      "FROM unit_events")
    got = query.collect()[0]["r"]
    spec = _spec(family, cols, options)
    call = ReleaseKey.resolve(SEED).for_query(
        f"sql-partial:{family}:{json.dumps(options, sort_keys=True)}")
    key = group_key(call.for_query(_fingerprint(query)), spec.name, "[]")
    mine = [r.asDict(recursive=True) for r in got[family_of(spec).main]]
    assert mine == _release(events, spec, key)
    assert len(mine) >= 3


def test_result_types_are_fixed_per_function(spark: Any, people: Any) -> None:
    for family, function, cols, options in CASES:
        text = json.dumps({**options, "domains": {c: options["domains"][c] for c in cols[:2]}})
        if "other" in options and "sex" not in cols[:2]:
            text = json.dumps({k: v for k, v in json.loads(text).items() if k != "other"})
        two = spark.sql(f"SELECT {function}(struct({', '.join(cols[:2])}), '{text}') AS r "
                        "FROM people")
        assert two.schema["r"].dataType == sql_type(family), family


@pytest.mark.parametrize(("call", "message"), [
    ("hdp_marginals(struct(sex, region), '{\"eps0\": 1.0}')", r"`domains` \(in the options"),
    ("hdp_marginals(struct(sex, region), 'nope')", "`options` of hdp_marginals must be a JSON"),
    ("hdp_mwem(struct(sex), '{\"domains\": {\"sex\": [\"f\"], \"region\": [\"x\"]}}')",
     "names `region`, which is not a field of the struct"),
    ("hdp_heavy_hitters(struct(sex, region), '{\"domains\": {\"sex\": [\"f\"], \"region\": "
     "[\"x\"]}, \"privacy_unit\": \"id\"}')", "`privacy_unit` names column 'id'"),
    ("hdp_heavy_hitters(struct(sex, region), '{\"domains\": {\"sex\": [\"f\"], \"region\": "
     "[\"x\"]}, \"privacy_unit\": \"sex\"}', 'public')", "for a global query"),
    ("hdp_marginals(struct(sex, region), '{\"domains\": {\"sex\": [\"f\"], \"region\": "
     "[\"x\"]}, \"privacy_unit\": \"country\", \"max_rows\": 0}')",
     r"`max_rows` \(in the options of hdp_marginals\) must be a positive int, got 0"),
    ("hdp_marginals(struct(sex, region), '{\"domains\": {\"sex\": [\"f\"], \"region\": "
     "[\"x\"]}, \"privacy_unit\": 3}')", "must name the id column, got 3"),
    ("hdp_heavy_hitters(struct(sex, region), '{\"domains\": {\"sex\": [\"f\"], \"region\": "
     "[\"x\"]}, \"max_records\": 3}')", "exceeds `max_records` = 3"),
    ("hdp_heavy_hitters(struct(sex, region), '{\"domains\": {\"sex\": [\"f\"], \"region\": "
     "[\"x\"]}, \"max_records\": 0}')", r"`max_records` \(in the options"),
    ("hdp_heavy_hitters(struct(sex, region), '{\"domains\": {\"sex\": [\"f\"], \"region\": "
     "[\"x\", 1]}}')", "must hold values of one kind"),
    ("hdp_heavy_hitters(struct(sex, region), '{\"domains\": {\"sex\": [\"f\"], \"region\": "
     "[\"x\"]}, \"other\": {\"sex\": \"m\"}}')", r"`other\[sex\]` \(in the options"),
    ("hdp_attribute_histograms(sex, '{}')", "must be struct"),
    ("hdp_attribute_histograms(struct(sex), '{}', 'private')", "must be 'public' or omitted"),
])
def test_bad_calls_are_refused_at_analysis(spark: Any, people: Any, call: str, message: str
                                            ) -> None:
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("sql-partial-refused", "refusals")
    with pytest.raises(Exception, match=message):
        spark.sql(f"SELECT {call} AS r FROM people")
    assert list(tracker.getJobIdsForGroup("sql-partial-refused")) == []
    spark.sparkContext.setJobGroup("", "")


def test_bad_options_the_constructor_checks_are_refused(spark: Any, people: Any) -> None:
    base = {"domains": {"sex": ["f", "m"], "region": ["north"]}, "eps0": 1.0}
    for options, message in [
        ({**base, "keys": "public"}, "`options` of hdp_heavy_hitters has an unknown option "
                                     "`keys`"),
        ({**base, "eps0": -1.0}, "eps0"),
    ]:
        sql = (f"SELECT hdp_heavy_hitters(struct(sex, region), '{json.dumps(options)}') AS r "
               "FROM people")
        with pytest.raises(Exception, match=message):
            spark.sql(sql).collect()


def test_a_grouped_call_needs_a_group_decision(spark: Any, people: Any) -> None:
    text = json.dumps({"domains": SMALL, "eps0": 0.5})
    with pytest.raises(Exception, match="which groups appear is a privacy decision"):
        spark.sql("SELECT country, hdp_attribute_histograms(struct(age_band, sex, region), "
                  f"'{text}') FROM people GROUP BY country").collect()
