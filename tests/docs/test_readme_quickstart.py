"""The README's quickstarts run exactly as printed: pandas, Spark classic and Spark Connect.

The snippets are read from README.md (the ```python blocks of the "Quickstart" section), so
the README cannot drift from what works. Each block also runs alone
(tests/docs/test_doc_blocks.py); here the pandas blocks run in order as one script, and so
do the Spark blocks (the release, then the Column aggregators). The Spark snippets print
both session lines, the classic one active and the Connect one commented out; the Connect
run (``test_readme_as_printed.py``, in a fresh process as a newcomer starts it) swaps the
comments and changes nothing else.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLASSIC = 'spark = hs.configure(SparkSession.builder.master("local[2]")).getOrCreate()'
CONNECT = 'spark = hs.configure(SparkSession.builder.remote("local[2]")).getOrCreate()'


def _quickstart_blocks() -> dict[str, str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    out: dict[str, str] = {}
    for block in blocks:  # the blocks of each engine run in order, as one script
        name = "spark" if "hdp_spark.spark" in block else "pandas"
        out[name] = out.get(name, "") + block
    assert set(out) == {"pandas", "spark"}, "README quickstart must show pandas and Spark"
    return out


def _run(code: str) -> dict[str, Any]:
    scope: dict[str, Any] = {}
    cwd = Path.cwd()
    os.chdir(ROOT)
    try:
        exec(compile(code, "README.md", "exec"), scope)
    finally:
        os.chdir(cwd)
    return scope


def test_pandas_quickstart_runs_as_printed(capsys: pytest.CaptureFixture[str]) -> None:
    scope = _run(_quickstart_blocks()["pandas"])
    table = scope["table"]
    assert len(table) == 5000
    assert table["eps"].dtype.kind == "f"
    # run as a script, the snippets print their results (three releases, one per call)
    printed = capsys.readouterr().out
    assert printed.count("salary_mean") >= 3
    assert "engineering" in printed
    assert "region_histogram" in printed


def test_spark_quickstart_prints_both_sessions() -> None:
    code = _quickstart_blocks()["spark"]
    assert CLASSIC in code
    assert "# " + CONNECT in code
    # every result it computes is shown
    for name in ("out", "total", "per_dept"):
        assert re.search(rf"^{name}(\.select\(.*\))?\.show\(", code, flags=re.MULTILINE), name


@pytest.mark.spark
def test_spark_quickstart_runs_as_printed(spark: Any) -> None:
    """Classic: the snippet as printed (getOrCreate returns the test session)."""
    scope = _run(_quickstart_blocks()["spark"])
    rows = scope["out"].collect()
    assert sorted(r["dept"] for r in rows) == [
        "engineering", "finance", "operations", "research", "sales"
    ]
    assert dict(scope["df"].dtypes)["eps"] == "double"
    assert all(r["salary_mean"] is not None for r in rows)
    depts = scope["per_dept"].collect()
    assert sorted(r["dept"] for r in depts) == [
        "engineering", "finance", "operations", "research", "sales"
    ]
    assert all(len(r["region_histogram"]["bins"]) == 5 for r in depts)  # 4 + "other"
    assert scope["total"].collect()[0]["salary"]["n"] == 5000
