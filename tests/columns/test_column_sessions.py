"""The Column snippet (and its SQL form) on Spark Connect and on a cluster with separate
executor JVMs and Python workers: the same numbers as the release API, and as classic local mode."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

JOB = Path(__file__).with_name("column_job.py")


SHUFFLE = {"spark.sql.shuffle.partitions": "3"}  # the job's own, run alone


@pytest.fixture(scope="module")
def classic(spark: Any) -> dict[str, Any]:
    sys.path.insert(0, str(JOB.parent))
    try:
        from column_job import run
    finally:
        sys.path.pop(0)
    return run(spark)


def _check(got: dict[str, Any]) -> None:
    assert got["total"] == got["ref_total"]
    assert got["mean"] == got["ref_mean"]
    assert got["sql"] == got["ref_sql"]
    # the SQL over a view of the DataFrame is the same query as the Column's (the view's
    # nodes canonicalize away) under the same seed: the same release, the same numbers
    assert got["mean"] == got["sql"]
    assert got["bins"] == got["ref_bins"]
    assert got["key_list"] == got["ref_key_list"]
    assert [d for d, _ in got["key_list"]] == ["hr", "it"]  # "sales": no rows, no row
    assert got["expression_n"] == 4000
    assert got["selected"] == got["ref_selected"]
    assert [g for g, _, _ in got["selected"]] == ["hr", "it", "ops"]  # no one-person group
    assert got["selected_plan_clean"]
    errors = got["errors"]
    (glob, glob_lines, glob_msg), (grp, grp_lines, grp_msg), (typ, typ_lines, typ_msg) = errors
    assert (glob, grp, typ) == ("SparkRuntimeException",) * 2 + ("IllegalArgumentException",)
    assert (glob_lines, grp_lines, typ_lines) == (1, 1, 1)
    assert "EpsilonColumnError: Column `eps` must hold ε >= 0" in glob_msg
    assert "; 2 row(s) break this rule." in glob_msg  # a global aggregate: the total
    assert "row(s) of one group break this rule" in grp_msg
    assert typ_msg.startswith("SchemaError: value column `dept` must be numeric, got string")
    assert "hdp_cells" not in typ_msg
    attacks = got["attacks"]
    assert attacks == {
        "sql_missing_id_repeats": False, "sql_present_id_differs": True,
        "sql_same_query_repeats": True, "column_filter_repeats": False,
        "column_same_query_repeats": True, "case_when_right_guess_repeats": False,
    }


def test_classic_column_equals_release_api(classic: dict[str, Any]) -> None:
    _check(classic)


def test_connect_column_equals_release_api_and_classic(classic: dict[str, Any],
                                                      connect_server: Any) -> None:
    pytest.importorskip("pyspark.sql.connect")
    got = connect_server.run(JOB, conf=SHUFFLE)
    assert "connect" in got["session"]
    _check(got)
    _same_release_shape(got, classic)


def _same_release_shape(got: dict[str, Any], classic: dict[str, Any]) -> None:
    """Two processes release the same groups and keys. Their noise differs: the query
    fingerprint keys a file source's listing with a secret of its JVM (a file's size is a
    function of the data, and the fingerprint is printed by ``explain()``), so each
    process is compared bit for bit with its own release API (``_check``) and here only
    by what does not depend on the fingerprint."""
    assert [k for k, _ in got["key_list"]] == [k for k, _ in classic["key_list"]]
    assert [g for g, _, _ in got["selected"]] == [g for g, _, _ in classic["selected"]]
    for name in ("mean", "sql", "bins"):
        assert len(got[name]) == len(classic[name])
    assert got["total"] == pytest.approx(classic["total"], rel=0.05)


@pytest.mark.slow
def test_local_cluster_column_equals_classic(classic: dict[str, Any],
                                             cluster_server: Any) -> None:
    """local-cluster[2,1,1024]: two executor JVMs, each with its own Python workers; they
    load the extension from spark.jars and the finalize from the installed package only."""
    got = cluster_server.run(JOB, conf=SHUFFLE)
    _check(got)
    _same_release_shape(got, classic)


def test_connect_without_the_extension_names_configure(bare_connect_server: Any) -> None:
    """A Column on a Connect server without the extension fails with an error naming
    ``configure``; the release API keeps working on the same session."""
    pytest.importorskip("pyspark.sql.connect")
    got = bare_connect_server.run(JOB, func="run_bare")
    assert got["error"].startswith("ExtensionMissingError")
    assert "hdp_spark.spark.configure" in got["error"]
    assert got["release_n"] == 4000


class _Builder:
    """The part of ``SparkSession.Builder`` that ``configure`` uses."""

    def __init__(self, **opts: str) -> None:
        self._options = dict(opts)

    def config(self, key: str, value: str) -> _Builder:
        self._options[key] = value
        return self


@pytest.mark.parametrize(
    ("opts", "env", "want"),
    [
        ({"spark.master": "local[2]"}, None, sys.executable),
        ({"spark.remote": "local[2]"}, None, sys.executable),
        ({"spark.master": "local[2]"}, "/usr/bin/python3", None),  # the user's choice stays
        ({"spark.master": "local[2]", "spark.pyspark.python": "/x/python"}, None, "/x/python"),
        ({"spark.master": "yarn"}, None, None),  # a cluster's workers are the cluster's
        ({"spark.remote": "sc://host:15002"}, None, None),
    ],
)
def test_configure_names_the_worker_interpreter_for_local_sessions(
    monkeypatch: pytest.MonkeyPatch, opts: dict[str, str], env: str | None, want: str | None
) -> None:
    import hdp_spark.spark as hs

    if env is None:
        monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    else:
        monkeypatch.setenv("PYSPARK_PYTHON", env)
    out = hs.configure(_Builder(**opts))._options
    assert out.get("spark.pyspark.python") == want
    assert "org.hdpspark.HdpExtensions" in out["spark.sql.extensions"]
    if want == sys.executable:
        assert os.environ["PYSPARK_PYTHON"] == sys.executable


@pytest.mark.parametrize(
    ("opts", "want"),
    [
        ({"spark.master": "local[2]"}, "true"),
        ({"spark.remote": "local[2]"}, "true"),  # the local Connect server's workers
        ({"spark.master": "yarn"}, "true"),  # a classic cluster's executors
        ({"spark.remote": "sc://host:15002"}, None),  # a running server's are its own
        ({"spark.master": "local[2]",
          "spark.python.unix.domain.socket.enabled": "false"}, "false"),  # the user's
    ],
)
def test_configure_puts_the_python_workers_on_a_unix_socket(
    monkeypatch: pytest.MonkeyPatch, opts: dict[str, str], want: str | None
) -> None:
    import hdp_spark.spark as hs
    from hdp_spark.spark.extension import PYTHON_SOCKET

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    out = hs.configure(_Builder(**opts))._options
    assert out.get(PYTHON_SOCKET[0]) == want


def test_configure_keeps_tcp_where_the_platform_has_no_unix_sockets(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    import hdp_spark.spark as hs
    from hdp_spark.spark.extension import PYTHON_SOCKET

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.delattr(socket, "AF_UNIX")
    out = hs.configure(_Builder(**{"spark.master": "local[2]"}))._options
    assert PYTHON_SOCKET[0] not in out


@pytest.mark.spark
def test_the_suite_session_runs_its_python_workers_on_a_unix_socket(spark: Any) -> None:
    """The suite's session is built by ``configure``, as a user's: every Column test runs
    its finalize over the Unix socket (Spark's own check of the setting, not ours)."""
    from hdp_spark.spark.extension import PYTHON_SOCKET

    conf = spark.sparkContext.getConf()
    assert conf.get(PYTHON_SOCKET[0]) == "true"
