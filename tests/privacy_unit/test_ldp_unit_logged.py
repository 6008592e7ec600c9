"""The local-DP Columns and SQL functions under a privacy unit, on classic Spark and on
Spark Connect, each mode in one Spark session of its own with the event log on and every
logger at INFO (``ldp_unit_logged_job.py``: the Columns' job, then the SQL job):

* each of the four Columns and each of the four SQL calls releases, field for field, what
  ``hs.ldp_agg(..., privacy_unit=...)`` releases under the query's key, and repeats it when
  the query runs again (``ldp_unit_column_job.check``, ``ldp_unit_sql_job.check``);
* no key appears in the event log (plans, and on Connect the statements), the INFO logs or
  the output: the Columns' keys, their bounding keys and the queries' bounding keys, the
  release API's key and bounding key, the SQL registration's key, the SQL unit key and
  each query's key and bounding key, and a central release's under a unit (``hs.agg``:
  on Connect the bounding operator's request, its key in the secret channel), whose rows
  equal pandas'.

One process per mode runs both jobs (they ran in four processes, and again in the shared
sessions, before: issue 53); the refusals stay in ``test_ldp_unit_columns.py`` and
``test_ldp_unit_sql.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import hdp_spark.pandas as hpd

sys.path.insert(0, str(Path(__file__).parent))
from ldp_unit_column_job import check as check_columns
from ldp_unit_sql_job import check as check_sql
from logged_session import assert_secrets_unwritten
from unit_release_connect_job import CENTRAL, case_table, plain, release_args

sys.path.pop(0)

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore::hdp_spark.ldp.LdpEpsilonWarning")]

JOB = Path(__file__).with_name("ldp_unit_logged_job.py")


@pytest.mark.parametrize("mode", ["classic", "connect"])
def test_columns_and_sql_equal_the_release_api_and_write_no_key(mode: str,
                                                                tmp_path: Path) -> None:
    if mode == "connect":
        pytest.importorskip("pyspark.sql.connect")
    got = assert_secrets_unwritten(JOB, mode, tmp_path)
    for part in ("columns", "sql"):
        assert ("connect" in got[part]["session"]) == (mode == "connect")
    # the jobs' secrets were grepped for (not vacuous): the Columns' 5, then the SQL
    # registration's key, its unit key and bounding key, and 2 per query, then the central
    # release's key and bounding key
    split = got["split"]
    assert (split, len(got["secrets"]) - split) == (5, 3 + 2 * 4 + 2)
    check_columns({**got["columns"], "secrets": got["secrets"][:split]})
    check_sql({**got["sql"], "secrets": got["secrets"][split:-2]})
    assert got["central"]["operator"] is True  # Connect: the request the rule answered
    specs, kwargs = release_args(CENTRAL, hpd)
    assert got["central"]["rows"] == plain(
        hpd.agg(case_table(CENTRAL), *specs, **kwargs).to_dict("records"))
