"""The partition-selection snippet of docs/overview.md runs as printed (on the bundled
employees table, as a reader runs it) and releases what it says: groups of the table only,
sorted, with the mode and the charge."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]


def test_docs_selection_snippet_runs() -> None:
    text = (ROOT / "docs" / "overview.md").read_text()
    section = text.split("## Private group keys (partition selection)", 1)[1].split("\n## ")[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    scope: dict[str, Any] = {}
    cwd = os.getcwd()
    os.chdir(ROOT)  # the snippet reads data/employees.csv from the repository root
    try:
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            exec(compile(code, "docs/overview.md", "exec"), scope)
    finally:
        os.chdir(cwd)
    out = scope["out"]
    families = set(pd.read_csv(ROOT / "data" / "employees.csv")["job_family"])
    assert len(out) > 0
    assert set(out["job_family"]) <= families
    assert list(out["job_family"]) == sorted(out["job_family"])
    assert set(out["salary_mean_privacy"]) == {"partition_selection"}
    assert set(out["salary_mean_delta"]) == {1e-7}
    assert set(out["salary_mean_eps_cap"]) == {1.0}
    assert "salary_mean" in printed.getvalue()
    assert "(partition_selection.md)" in section
    assert (ROOT / "docs" / "partition_selection.md").exists()
