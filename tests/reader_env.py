"""A reader's environment for the tests that run the README's and the docs' code as printed:
the test process's environment without anything the test suite sets for itself (its Spark
interpreter and JVM options, its Connect address, pytest's and xdist's own variables), so a
snippet runs as it would for a newcomer."""

from __future__ import annotations

import os

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
