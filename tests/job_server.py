"""One Spark server process shared by the whole test run for the jobs that cannot run in
the test process (Spark Connect, a local-cluster with separate executor JVMs): started once
(by ``tests/spark_servers.py``, lazily), it runs each job in a new session of its one Spark.

Usage: ``python tests/job_server.py MODE`` with MODE ``connect`` (a local Spark Connect
server built with ``hdp_spark.spark.configure``), ``connect-bare`` (a Connect server without
the extension) or a master such as ``local-cluster[2,1,1024]`` (classic, configured).

Reads one request per line on stdin, ``{"job": path, "func": name, "args": [...], "conf":
{...}}``, and answers each with one line on stdout, ``MARK`` then ``{"ok": result}`` or
``{"error": traceback}``. Each job runs in ``newSession()`` of the server's session: its own
SQL conf (``conf`` is set there), temporary views and functions; nothing it sets or
registers is seen by the next job. The job's own prints go to stderr."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from local_connect import local_remote

MARK = "@@hdp-job@@ "


def build(mode: str) -> Any:
    """The server's session, as the job scripts build theirs when run alone."""
    from pyspark.sql import SparkSession

    import hdp_spark.spark as hs

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if mode.startswith("connect"):
        # a free port, not Connect's default 15002, which another Connect process on the
        # machine may hold
        remote = local_remote()
        if mode == "connect-bare":
            return remote.getOrCreate()
        builder = remote
    else:
        builder = SparkSession.builder.master(mode)
    builder = builder.config("spark.ui.enabled", "false").config(
        "spark.sql.shuffle.partitions", "3")
    return hs.configure(builder).getOrCreate()


def fresh(spark: Any) -> Any:
    """A new session of the server's Spark, made the active one (the Column aggregators
    register their function in, and read, the active session)."""
    session = spark.newSession()
    if hasattr(session, "_jsparkSession"):  # classic
        from pyspark.sql import SparkSession

        jvm = spark.sparkContext._jvm
        SparkSession._get_j_spark_session_class(jvm).setActiveSession(session._jsparkSession)
        SparkSession._activeSession = session
    else:  # Connect: the thread's active session (the jobs run on the main thread)
        type(session)._active_session.session = session
    return session


_MODULES: dict[str, ModuleType] = {}


def load(path: str) -> ModuleType:
    """The job module at ``path``, imported once under its file name (its folder on
    sys.path, for its own imports)."""
    if path not in _MODULES:
        folder = str(Path(path).parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        name = Path(path).stem
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None, path
        assert spec.loader is not None, path
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _MODULES[path] = module
    return _MODULES[path]


def serve(mode: str) -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # the jobs' and Spark's prints never mix with the answers
    spark = build(mode)
    out.write(MARK + json.dumps({"ok": "ready"}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            session = fresh(spark)
            for key, value in request.get("conf", {}).items():
                session.conf.set(key, value)
            func = getattr(load(request["job"]), request.get("func", "run"))
            answer: dict[str, Any] = {"ok": func(session, *request.get("args", []))}
        except BaseException:  # reported to the test, which fails with it
            answer = {"error": traceback.format_exc()}
        out.write(MARK + json.dumps(answer, default=str) + "\n")
        out.flush()
    spark.stop()


if __name__ == "__main__":
    serve(sys.argv[1])
