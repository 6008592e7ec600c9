"""The local-DP SQL functions under a privacy unit: ``hdp_ldp_mean(report, eps, '<JSON
options>', 'unit', 'uid', 1, 1)`` (``hdp_ldp_mean_vector``, ``hdp_ldp_distribution`` alike)
keeps one report per person, as the Column and ``hs.ldp_agg(..., privacy_unit=...)`` do.

* each of the four calls releases, field for field, what ``hs.ldp_agg`` releases under the
  query's key (``sql_unit_key(registration key).for_query(fingerprint)``: the Column's
  rule for the same key), and re-running the query repeats it; on classic Spark and on
  Spark Connect;
* the key is a secret: neither the registration's key, nor the SQL unit key, its bounding
  key, nor a query's key or bounding key appears in any explain mode, in the event log of
  the run (plans and Connect statements) or in its INFO logs, nor in the session conf;
* every refusal names its parameter.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import hdp_spark.spark as hs
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit.spec import bounding_key
from hdp_spark.spark.sql_ldp import sql_unit_key

sys.path.insert(0, str(Path(__file__).parent))
from ldp_unit_sql_job import run
from logged_session import assert_secrets_unwritten

sys.path.pop(0)

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore::hdp_spark.ldp.LdpEpsilonWarning")]

JOB = Path(__file__).with_name("ldp_unit_sql_job.py")


def _check(got: dict[str, Any]) -> None:
    assert got["diff"] == []
    assert got["fields"] == 4 * 12 + 1  # every field compared (the pmf has _m, _projection)
    assert got["again"] == [True] * 4
    assert got["ranks"] == [True] * 4  # the rule's rank, hdp_ldp_position, is in each plan
    assert all(0 < n <= got["persons"] for n in got["n"])  # one report per person at most
    for secret in got["secrets"]:
        assert secret not in got["plans"]


def test_classic_sql_equals_the_release_api(spark: Any) -> None:
    _check(run(spark))


def test_connect_sql_equals_the_release_api(connect_server: Any) -> None:
    pytest.importorskip("pyspark.sql.connect")
    got = connect_server.run(JOB, conf={"spark.sql.shuffle.partitions": "3"})
    assert "connect" in got["session"]
    _check(got)


@pytest.mark.parametrize("mode", ["classic", "connect"])
def test_the_key_is_in_no_plan_event_log_or_info_log(mode: str, tmp_path: Path) -> None:
    """A session of its own with the event log on and INFO logs: no key appears."""
    if mode == "connect":
        pytest.importorskip("pyspark.sql.connect")
    _check(assert_secrets_unwritten(JOB, mode, tmp_path))


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
