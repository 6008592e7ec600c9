"""The local-DP SQL functions under a privacy unit: ``hdp_ldp_mean(report, eps, '<JSON
options>', 'unit', 'uid', 1, 1)`` (``hdp_ldp_mean_vector``, ``hdp_ldp_distribution`` alike)
keeps one report per person, as the Column and ``hs.ldp_agg(..., privacy_unit=...)`` do.

Here: the SQL unit key is not in the session conf, and every refusal names its parameter.
That each call releases, field for field, what ``hs.ldp_agg`` releases under the query's
key (``sql_unit_key(registration key).for_query(fingerprint)``), repeats when re-run, and
that no key reaches a plan, the event log (plans and Connect statements) or the INFO logs,
on classic Spark and on Spark Connect, is ``test_ldp_unit_logged.py`` (one logged session
per mode, with the Columns' job).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import hdp_spark.spark as hs
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit.spec import bounding_key
from hdp_spark.spark.sql_ldp import sql_unit_key

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore::hdp_spark.ldp.LdpEpsilonWarning")]


@pytest.fixture(scope="module")
def session(spark: Any) -> Any:
    """A session of its own, registered under a seed, with a small table."""
    own = spark.newSession()
    hs.register_sql(own, unsafe_seed="sql-unit-errors")
    own.createDataFrame([(1, 0.5, 0.1, 1.5, "a"), (1, 1.0, 0.2, 2.5, "b"),
                         (2, 1.0, -0.3, 3.5, "a")],
                        "uid long, eps double, lap double, amount double, g string"
                        ).createOrReplaceTempView("unit_rows")
    return own


LAP = "hdp_ldp_mean(lap, eps, '{\"mechanism\": \"laplace\", \"already_randomized\": true}'"


def test_the_key_is_not_in_the_conf(session: Any) -> None:
    """The SQL unit key lives in the JVM, not in the session conf (the central unit's
    bounding key there is another, public one)."""
    key = sql_unit_key(ReleaseKey.resolve("sql-unit-errors"))
    conf = json.dumps(session.sql("SET -v").toPandas().astype(str).values.tolist())
    conf += json.dumps(session.sql("SET").toPandas().astype(str).values.tolist())
    assert bounding_key(ReleaseKey.resolve("sql-unit-errors")) in conf  # the central one
    assert bounding_key(key) not in conf
    assert key.material.hex() not in conf
    row = session.sql(f"SELECT {LAP}, 'unit', 'uid', 1, 1) AS r FROM unit_rows").collect()
    assert row[0]["r"]["n"] + row[0]["r"]["skipped"] == 2  # two persons


@pytest.mark.parametrize(("query", "message"), [
    (f"SELECT {LAP}, 'public', 'unit', 'uid', 1, 1) FROM unit_rows",
     r"`keys`: local-DP aggregators under `privacy_unit` release the whole table only"),
    (f"SELECT g, {LAP}, 'unit', 'uid', 1, 1) FROM unit_rows GROUP BY g",
     "release the whole table only"),
    (f"SELECT {LAP}, 'unit', 'uid', 2, 1) FROM unit_rows",
     r"`max_groups` must be 1 for local-DP aggregators under `privacy_unit` .* got 2"),
    (f"SELECT {LAP}, 'unit', 'uid', 1, 3) FROM unit_rows",
     r"`max_rows` must be 1 for local-DP aggregators under `privacy_unit` .* got 3"),
    (f"SELECT {LAP}, 'unit', 'uid', 1, 1.0) FROM unit_rows", r"`max_rows` must be 1"),
    (f"SELECT {LAP}, 'unit', 'uid', 1, uid) FROM unit_rows", r"`max_rows` must be 1"),
    (f"SELECT {LAP}, 'unit', uid, 1, 1) FROM unit_rows",
     r"`privacy_unit` \(after 'unit' in hdp_ldp_mean\) must be a constant string"),
    (f"SELECT {LAP}, 'unit', '', 1, 1) FROM unit_rows", r"`privacy_unit`"),
    (f"SELECT {LAP}, 'unit', 'eps', 1, 1) FROM unit_rows",
     "`privacy_unit` column 'eps' identifies people"),
    ("SELECT hdp_ldp_mean(uid, eps, '{\"mechanism\": \"laplace\", \"already_randomized\": "
     "true}', 'unit', 'uid', 1, 1) FROM unit_rows",
     "`privacy_unit` column 'uid' identifies people: no aggregator may read it as a report"),
    (f"SELECT {LAP}, 'unit', 'amount', 1, 1) FROM unit_rows", "must hold integers or strings"),
    (f"SELECT {LAP}, 'unit', 'user', 1, 1) FROM unit_rows",
     "`privacy_unit` names column 'user'"),
    (f"SELECT {LAP}, 'unit', 'uid', 1, 1), {LAP}, 'unit', 'uid', 1, 1) FROM unit_rows",
     "the only hdp_spark aggregator"),
    (f"SELECT {LAP}, 'unit', 'uid', 1) FROM unit_rows", "hdp_ldp_mean takes"),
])
def test_refusals_name_the_parameter(session: Any, query: str, message: str) -> None:
    with pytest.raises(Exception, match=message):
        session.sql(query).collect()


def test_a_non_text_alias_is_refused(session: Any) -> None:
    """The rank reads the aggregator's name: an alias the JVM cannot read as the spec's
    name is refused (the finalize's check, or the constructor's own)."""
    from hdp_spark.errors import ParameterError
    from hdp_spark.spark.sql_ldp import _check_used, spec_of

    spec = spec_of("mean", '{"mechanism": "rr", "alias": "bits"}', ["rr", "eps"])
    _check_used("hdp_ldp_mean", spec, {"lower": -1.0, "upper": 1.0, "name": "bits"})
    with pytest.raises(ParameterError, match="aggregator name of hdp_ldp_mean"):
        _check_used("hdp_ldp_mean", spec, {"lower": -1.0, "upper": 1.0, "name": "rr_mean"})
    with pytest.raises(Exception, match="alias"):
        session.sql("SELECT hdp_ldp_mean(lap, eps, '{\"mechanism\": \"laplace\", \"alias\": "
                    "3, \"already_randomized\": true}', 'unit', 'uid', 1, 1) FROM unit_rows"
                    ).collect()


def test_a_session_without_its_key_says_so(spark: Any, session: Any) -> None:
    """A session with the templates but no registration of its own has no key: refused."""
    from hdp_spark.spark.sql_ldp import ROWS_CONF

    other = spark.newSession()
    other.conf.set(ROWS_CONF, session.conf.get(ROWS_CONF))
    other.createDataFrame([(1, 0.5, 0.1)], "uid long, eps double, lap double"
                          ).createOrReplaceTempView("unit_rows")
    with pytest.raises(Exception, match="needs its secret key: call hdp_spark.spark."
                                        r"register_sql\(spark\)"):
        other.sql(f"SELECT {LAP}, 'unit', 'uid', 1, 1) FROM unit_rows").collect()
