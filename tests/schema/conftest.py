"""Fixtures of the schema tests.

``engine.frame`` lets Spark infer types from the rows, which fails on empty tables and
turns NaN into null; ``native`` builds the Spark frame with an explicit schema from the
pandas dtypes instead, keeping NaN (float) and null (None/NA) apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest
from schema_testing import build_native


@pytest.fixture
def native(engine: Any) -> Callable[[pd.DataFrame], Any]:
    """``native(pdf)``: the engine's table for ``pdf``."""
    return lambda pdf: build_native(engine, pdf)
