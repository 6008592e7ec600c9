"""Fixtures of the job/ledger tests (helpers live in ``job_helpers``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from job_helpers import write_job


@pytest.fixture
def sample_job(tmp_path: Path) -> Path:
    """A two-release pandas job on the sample table with a SQLite ledger."""
    return write_job(tmp_path)
