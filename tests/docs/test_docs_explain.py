"""The snippet of docs/explain.md ("Know the accuracy before spending", moved there from the
README) runs as printed, and its plan matches the release it precedes."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


PAGE = ROOT / "docs" / "explain.md"


def _section() -> str:
    text = PAGE.read_text()
    return text.split("# Know the accuracy before spending", 1)[1].split("\n## ", 1)[0]


def test_readme_quickstart_points_to_the_page() -> None:
    text = (ROOT / "README.md").read_text()
    quickstart = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert "(docs/explain.md)" in quickstart


def test_explain_snippet_runs_as_printed() -> None:
    blocks = re.findall(r"```python\n(.*?)```", _section(), flags=re.DOTALL)
    assert len(blocks) == 1
    scope: dict[str, Any] = {}
    cwd = Path.cwd()
    os.chdir(ROOT)
    try:
        exec(compile(blocks[0], "docs/explain.md", "exec"), scope)
    finally:
        os.chdir(cwd)
    plan, out = scope["plan"], scope["out"]
    assert len(plan) == 10
    for i, dept in enumerate(scope["depts"]):
        mean_row = plan.iloc[2 * i]
        assert mean_row["dept"] == dept
        assert out["salary_mean_noise_scale"].iloc[i] == mean_row["noise_scale"]
        assert out["salary_mean_n"].iloc[i] == mean_row["n"]
        assert mean_row["noise_half_width"] < mean_row["baseline_half_width"]
        # the printed half-width is the released interval's (issue 48): noise + bias_bound
        assert out["salary_mean_bias_bound"].iloc[i] == mean_row["bias_bound"]
        est, half = out["salary_mean"].iloc[i], mean_row["half_width"]
        assert out["salary_mean_ci_low"].iloc[i] == max(est - half, 0.0)
        assert out["salary_mean_ci_high"].iloc[i] == min(est + half, 250_000.0)
    printed = _section().split("```\n", 3)[2]  # the printed output block
    first = plan.iloc[0]
    assert f"{first['half_width']:.4f}" in printed
    assert f"{first['bias_bound']:.4f}" in printed
    assert f"{first['baseline_half_width']:.4f}" in printed
