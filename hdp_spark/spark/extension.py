"""hdp_spark's Spark extension on a session: install it, configure a builder with it.

The extension (:mod:`hdp_spark.spark.jvm`) adds the native ``hdp_cells`` aggregate, its
group rule and the SQL function ``hdp_mean``. A classic session gets it at run time
(:func:`install`); Spark Connect servers and clusters get it at start (:func:`configure`).
"""

from __future__ import annotations

import os
import re
import socket
import sys
import warnings
from typing import Any

from pyspark.sql.utils import is_remote

from hdp_spark.errors import HdpError
from hdp_spark.spark.jvm import EXTENSIONS_CLASS, FUNCTION, jar_path
from hdp_spark.spark.jvm.cds import driver_options

__all__ = [
    "DRIVER_OPTIONS",
    "FALLBACK_THRESHOLD",
    "MISSING_MESSAGE",
    "NATIVE_CONF",
    "PYTHON_CONF",
    "PYTHON_SOCKET",
    "QUERY_RULE",
    "ExtensionMissingError",
    "analyzer_ready",
    "configure",
    "install",
    "native_ready",
    "start_archive",
]


class ExtensionMissingError(HdpError):
    """The session lacks the JVM extension a Column aggregator needs."""


MISSING_MESSAGE = (
    "the Column aggregators need hdp_spark's Spark extension on the server: build the "
    "session with hdp_spark.spark.configure(SparkSession.builder...). The release "
    "API (hs.agg(df, ...)) works without it."
)


FALLBACK_THRESHOLD = ("spark.sql.objectHashAggregate.sortBased.fallbackThreshold", "65536")
"""Groups an object aggregate keeps in a hash map per task before it sorts (Spark's default
128 makes ``groupBy`` over 1,000 keys sort: 1.43 s against 0.74 s on 2M rows, 2 cores).
:func:`install` and :func:`configure` raise it to this value unless it was set."""


PYTHON_SOCKET = ("spark.python.unix.domain.socket.enabled", "true")
"""Spark (4.1+) talks to its Python workers over a Unix domain socket instead of loopback
TCP. Over TCP every Python UDF task of this VM waited ~40 ms for its first Arrow batch (the
JVM's small writes held back until the worker's delayed acknowledgement): an identity UDF
on a one-row aggregate added 55 ms to the query, 15 ms over the Unix socket (2M rows,
2 cores, medians of 21; benchmarks/log/columns.md). Every Column finalizes in a Python
UDF, so :func:`configure` sets this unless it was set, where the driver's platform has Unix
sockets and the session is not a remote Connect server's (whose workers are its own).
Spark then checks a worker's peer by the socket file's permissions instead of its
loopback secret (see Spark's ``spark.python.unix.domain.socket.dir``)."""


def _tune(session: Any) -> None:
    key, value = FALLBACK_THRESHOLD
    if session.conf.get(key, None) in (None, "128"):
        session.conf.set(key, value)


def install(session: Any) -> None:
    """Make ``hdp_cells`` and its rule available on ``session`` (idempotent).

    A classic session gets them at run time (the jar is added to the driver's session class
    loader and shipped to executors). A Spark Connect session must have been built with
    :func:`hdp_spark.spark.configure`.

    Raises:
        ExtensionMissingError: a Connect session without the extension.

    Privacy:
        Configuration only; no data is read.
    """
    if session.catalog.functionExists(FUNCTION):
        return
    if not is_remote() and hasattr(session, "_jsparkSession"):
        _tune(session)
    if is_remote() or not hasattr(session, "_jsparkSession"):
        raise ExtensionMissingError(MISSING_MESSAGE)
    jar = str(jar_path())
    jvm = session._jvm
    jsession = session._jsparkSession
    loader = jsession.sharedState().jarClassLoader()
    loader.addURL(jvm.java.io.File(jar).toURI().toURL())
    session.sparkContext._jsc.addJar(jar)  # the executors load it from the driver
    cls = jvm.java.lang.Class.forName(EXTENSIONS_CLASS, True, loader)
    gateway = session.sparkContext._gateway
    types = gateway.new_array(jvm.java.lang.Class, 1)
    types[0] = jsession.getClass()
    args = gateway.new_array(jvm.java.lang.Object, 1)
    args[0] = jsession
    cls.getMethod("register", types).invoke(None, args)


QUERY_RULE = "org.hdpspark.HdpQueryRule"


def analyzer_ready(session: Any) -> bool:
    """Whether ``session``'s analyzer has the extension's query rule, which the Column and
    SQL aggregators need (a session built with :func:`configure`; a rule cannot be added to
    a running session's analyzer). A Connect session answers for its server: the extension
    brings the rule with the function.

    Privacy:
        Configuration only; no data is read.
    """
    if is_remote() or not hasattr(session, "_jsparkSession"):
        return bool(session.catalog.functionExists(FUNCTION))
    rules = session._jsparkSession.sessionState().analyzer().postHocResolutionRules()
    it = rules.iterator()
    while it.hasNext():
        if it.next().getClass().getName() == QUERY_RULE:
            return True
    return False


NATIVE_CONF = "hdp_spark.native"
"""Session conf: ``true`` makes the release API compute its mean and histogram cells with
``hdp_cells`` instead of Spark's own ``groupBy([key,] ε)`` pass. Off by default: on 10M
cached rows, 2 cores, the ``groupBy`` pass measured as fast or faster (global, 8 levels:
0.68 s against 0.66 s; 64 levels: 0.61 s against 1.00 s; 1,000 keys: 0.92 s against
2.00 s; benchmarks/log/columns.md). Both give the same cells."""


def native_ready(session: Any) -> bool:
    """Whether the release API can use ``hdp_cells`` on ``session`` (installing it on a
    classic session): only when :data:`NATIVE_CONF` is ``true`` and the extension is
    there (False without a JDK or on a Connect server without the extension).

    Privacy:
        Configuration only; both paths compute the same exact cells.
    """
    try:
        if str(session.conf.get(NATIVE_CONF, "false")).lower() != "true":
            return False
        install(session)
    except Exception:  # no javac, no jars, no extension: the groupBy path
        return False
    return True


def configure(builder: Any) -> Any:
    """Add hdp_spark's Spark extension to a ``SparkSession.builder`` (returned).

    Sets ``spark.jars`` (the extension's jar, built by the install step) and
    ``spark.sql.extensions`` (``org.hdpspark.HdpExtensions``), keeping values already set,
    :data:`FALLBACK_THRESHOLD` unless set, :data:`PYTHON_SOCKET` unless set (not for a
    remote Connect server, nor where the driver's platform lacks Unix sockets), and for a
    local session (``local[...]`` or a local Connect server) ``spark.pyspark.python`` =
    this interpreter unless the user set it or ``PYSPARK_PYTHON`` (it then sets
    ``PYSPARK_PYTHON`` in this process's environment too, which PySpark reads when it
    starts the JVM). Needed by the Column and SQL
    aggregators on every session (``configure(SparkSession.builder.remote("local[2]"))``
    starts a local Connect server with it; give a remote server the same two settings);
    the release API works without it. A local session also starts with the
    class-data-sharing archive of Spark's classes (:func:`start_archive`). The extension
    also drops Spark's log copies of its
    own one-line errors (an ε column that breaks its rule: the executor's ERROR with a
    stack trace, the scheduler's "Lost task" and "aborting job"), leaving every other
    error Spark logs as it is.

    Privacy:
        Configuration only; no data is read.
    """
    opts = getattr(builder, "_options", {})
    _local_python(builder, opts)
    start_archive(builder)
    jar = str(jar_path())
    jars = [j for j in str(opts.get("spark.jars", "")).split(",") if j]
    exts = [e for e in str(opts.get("spark.sql.extensions", "")).split(",") if e]
    if jar not in jars:
        jars.append(jar)
    if EXTENSIONS_CLASS not in exts:
        exts.append(EXTENSIONS_CLASS)
    builder = builder.config("spark.jars", ",".join(jars)).config(
        "spark.sql.extensions", ",".join(exts))
    if FALLBACK_THRESHOLD[0] not in opts:
        builder = builder.config(*FALLBACK_THRESHOLD)
    remote = str(opts.get("spark.remote", ""))
    if (PYTHON_SOCKET[0] not in opts and hasattr(socket, "AF_UNIX")
            and (not remote or remote.startswith("local"))):
        builder = builder.config(*PYTHON_SOCKET)
    if remote.startswith("local"):
        _quiet_static_conf_warnings()
        # the Connect channel of the local-DP Columns' secret (hdp_spark.spark.ldp_unit)
        from hdp_spark.spark.ldp_unit import CONNECT_PLUGIN, CONNECT_PLUGIN_CONF

        plugins = [p for p in str(opts.get(CONNECT_PLUGIN_CONF, "")).split(",") if p]
        if CONNECT_PLUGIN not in plugins:
            builder = builder.config(CONNECT_PLUGIN_CONF, ",".join([*plugins, CONNECT_PLUGIN]))
    return builder


PYTHON_CONF = "spark.pyspark.python"
DRIVER_OPTIONS = "spark.driver.extraJavaOptions"


def start_archive(builder: Any) -> Any:
    """Start a local session's driver JVM (``local[...]``, ``local-cluster[...]``, a local
    Connect server, or no master at all: PySpark's ``local[*]``) with the class-data-sharing
    archive of Spark's classes that the install step trained
    (:mod:`hdp_spark.spark.jvm.cds`): its options are appended to
    ``spark.driver.extraJavaOptions`` (kept otherwise; left alone when it already chooses
    the JVM's sharing, or when there is no archive for this JDK, pyspark and extension).
    An archive the JVM cannot use is skipped without a warning. Returns ``builder``.

    Privacy:
        Configuration only; no data is read.
    """
    opts = getattr(builder, "_options", {})
    master = str(opts.get("spark.remote", opts.get("spark.master", "")))
    if master and not master.startswith("local"):
        return builder
    if not master and os.environ.get("SPARK_REMOTE"):
        return builder
    current = str(opts.get(DRIVER_OPTIONS, ""))
    merged = driver_options(current)
    if merged != current:
        builder = builder.config(DRIVER_OPTIONS, merged)
    return builder


def _local_python(builder: Any, opts: dict[str, Any]) -> None:
    """Local sessions (``local[...]``, ``local-cluster[...]``, a local Connect server) run
    their Python workers with this interpreter unless the user chose one: otherwise Spark
    starts the first ``python3`` on the PATH, which may lack pyarrow or hdp_spark (the
    README's snippets run with ``.venv/bin/python``, nothing activated). A cluster's
    workers are the cluster's business (``PYSPARK_PYTHON`` there)."""
    master = str(opts.get("spark.remote", opts.get("spark.master", "")))
    if not master.startswith("local") or PYTHON_CONF in opts:
        return
    if os.environ.get("PYSPARK_PYTHON"):
        return
    # PySpark's driver names the worker interpreter from the environment when it starts
    # the JVM (SparkContext.pythonExec), the JVM side from the conf: set both, before the
    # session exists
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder.config(PYTHON_CONF, sys.executable)


def _quiet_static_conf_warnings() -> None:
    """A local Spark Connect server starts with the builder's static settings, then the
    client sets every setting again on the running session, which warns ``Failed to set
    spark.jars ... [CANNOT_MODIFY_CONFIG]`` and ``... spark.sql.extensions ...`` although
    both are in force (pyspark 4.3). Hide exactly those warnings (about hdp_spark's own
    values, and the Python worker settings it makes) so that a correct set-up prints none;
    a server without the extension is still an error naming :func:`configure` when a
    Column is used."""
    for conf in ("spark.jars", "spark.sql.extensions", PYTHON_CONF,
                 "spark.connect.extensions.expression.classes"):
        warnings.filterwarnings(
            "ignore", category=UserWarning,
            message=rf"Failed to set {re.escape(conf)} to Some\(.*(hdp_spark|HdpExtensions|"
                    rf"HdpConnectSecret|"
                    rf"{re.escape(sys.executable)}).*\) due to \[CANNOT_MODIFY_")
    warnings.filterwarnings(
        "ignore", category=UserWarning,
        message=rf"Failed to set {re.escape(DRIVER_OPTIONS)} to Some\(.*hdp_spark-cds-.*\) "
                rf"due to \[CANNOT_MODIFY_")
    warnings.filterwarnings(
        "ignore", category=UserWarning,
        message=rf"Failed to set {re.escape(PYTHON_SOCKET[0])} to "
                rf"Some\({PYTHON_SOCKET[1]}\) due to \[CANNOT_MODIFY_")
