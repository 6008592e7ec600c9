"""A query fingerprint that cannot be fooled, on classic Spark and Spark Connect.

A Column's noise is keyed by the fingerprint of what its query aggregates and by the exact
statistics. If the rows could change under one fingerprint, the outputs would tie exactly
when a guessed value is right (an equality oracle) or differ on every action (noise to
average away). So every construct of the catalogue (``guard_cases.py``) is refused at
analysis with a message naming it and the fix, or pinned: a changed input is another
fingerprint, an unchanged one repeats its numbers (classic and Connect alike).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

CASES = Path(__file__).with_name("guard_cases.py")
sys.path.insert(0, str(CASES.parent))
from guard_cases import ALLOWED, REFUSED  # noqa: E402

sys.path.pop(0)


@pytest.fixture(scope="module")
def classic(spark: Any) -> dict[str, Any]:
    sys.path.insert(0, str(CASES.parent))
    try:
        from guard_cases import run
    finally:
        sys.path.pop(0)
    return run(spark)


@pytest.fixture(scope="module")
def connect(connect_server: Any) -> dict[str, Any]:
    pytest.importorskip("pyspark.sql.connect")
    # the cases' own shuffle partitions, as when guard_cases.py runs alone
    out: dict[str, Any] = connect_server.run(CASES, conf={"spark.sql.shuffle.partitions": "2"})
    assert "connect" in out["session"]
    return out


def _check(got: dict[str, Any]) -> None:
    for name, words in REFUSED.items():
        outcome = got[name]
        assert "refused" in outcome, (name, outcome)
        message = outcome["refused"]
        assert "hdp_spark: " in message, (name, message)
        assert words in message, (name, message)
        # the fix is named: materialize, or a literal for a time function
        assert "localCheckpoint()" in message, (name, message)
    for name in ALLOWED:
        outcome = got[name]
        assert "values" in outcome, (name, outcome)
        first, second = outcome["values"]
        assert first == second, name  # re-evaluation repeats the numbers
    # the equality oracle from SQL alone: every one of the twelve runs is refused
    assert all(isinstance(o, str) and "`current_timestamp()`" in o for o in got["oracle"])
    # the Connect re-run loop: refused with the time function; without it, repeated
    assert "`current_timestamp()`" in got["timed_rerun"]["refused"]
    first, second = got["grouped_rerun"]
    assert len(first) == 3
    assert first == second
    # pinned: a file written again (same rows) is another query; re-reading it is not
    a, b, c = got["rewritten_file"]
    assert a == b != c
    old_view, new_view = got["replaced_view"]
    assert old_view != new_view
    old_join, new_join = got["rewritten_join"]
    assert old_join != new_join


def test_classic_refuses_or_pins_every_construct(classic: dict[str, Any]) -> None:
    _check(classic)


def test_connect_refuses_or_pins_every_construct(connect: dict[str, Any]) -> None:
    _check(connect)


def test_the_catalogue_is_whole(classic: dict[str, Any]) -> None:
    """Every case is either expected refused or expected allowed (none left unjudged)."""
    judged = set(REFUSED) | set(ALLOWED)
    ran = {k for k, v in classic.items() if isinstance(v, dict) and k not in (
        "timed_rerun",)}
    assert ran == judged
