"""A reader's environment for the tests that run the README's and the docs' code as printed:
the test process's environment without anything the test suite sets for itself (its Spark
interpreter and JVM options, its Connect address, pytest's and xdist's own variables), so a
snippet runs as it would for a newcomer."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

SUITE_ONLY = frozenset({
    "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS", "PYARROW_IGNORE_TIMEZONE",
    "VIRTUAL_ENV", "SPARK_REMOTE", "PYTHONPATH", "SPARK_TESTING", "PYTEST_CURRENT_TEST",
    "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID",
})
"""Variables only the test suite sets (``tests/conftest.py``, pytest, pytest-xdist)."""

SUITE_PREFIXES = ("HDP_TEST_",)
"""Prefixes of the suite's own switches (``HDP_TEST_WORKERS``, ``HDP_TEST_PROFILE``, ...)."""


def reader_env() -> dict[str, str]:
    """``os.environ`` without :data:`SUITE_ONLY` and the :data:`SUITE_PREFIXES` switches."""
    return {k: v for k, v in os.environ.items()
            if k not in SUITE_ONLY and not k.startswith(SUITE_PREFIXES)}


def newcomer_env() -> dict[str, str]:
    """:func:`reader_env` with the PATH a newcomer has: the venv's ``bin`` not on it
    (nothing activated; the snippet is started with ``.venv/bin/python`` by its path)."""
    env = reader_env()
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p != venv_bin)
    return env


# PySpark's worker daemon prints this when the JVM closes the socket of a Python worker it
# had just asked for (a Python UDF's worker started while its task ends or fails early): a
# race inside PySpark (the README's Connect quickstart hit it once in a full run under
# load, 2026-11-30) that carries no copy of any error of ours. The tests that require "no
# traceback" remove exactly this block first.
DAEMON_BROKEN_PIPE = re.compile(
    r"Traceback \(most recent call last\):\n"
    r"(?:  File \"[^\n]*pyspark[/\\]daemon\.py\", line \d+, in \w+\n)+"
    r"BrokenPipeError: \[Errno 32\] Broken pipe\n?")


# The same traceback cut short: the daemon is a child of the JVM and shares the process's
# stderr; when the JVM stops it at shutdown while it writes, the output ends right after
# the header or a daemon.py frame (a docs block's run in a full run on three workers,
# 2026-11-30). Only at the very end of the output and only with nothing but
# daemon.py frames after the header: a traceback of ours names our frames and its error.
DAEMON_CUT_SHORT = re.compile(
    r"Traceback \(most recent call last\):\n"
    r"(?:  File \"[^\n]*pyspark[/\\]daemon\.py\", line \d+, in \w+\n)*\Z")


def without_daemon_race(stderr: str) -> str:
    """``stderr`` without PySpark's daemon broken-pipe tracebacks
    (:data:`DAEMON_BROKEN_PIPE`, and one cut short at the end of the output:
    :data:`DAEMON_CUT_SHORT`), nothing else."""
    return DAEMON_CUT_SHORT.sub("", DAEMON_BROKEN_PIPE.sub("", stderr))
