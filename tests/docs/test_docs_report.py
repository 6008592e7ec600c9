"""The excerpt of the release report in docs/report.md (moved there from the README) is what
the sample job writes (issue 21).

The excerpt (the page "The release report") is compared with the first release of a fresh
run of jobs/sample_employees.toml, digits masked (noisy values change from run to run; the
words, the bullets and the table's columns must not drift). The images it shows exist.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "jobs"))

from report_helpers import decodable_png, sample_job  # noqa: E402

from hdp_spark.jobs import run_job  # noqa: E402


def _mask(line: str) -> str:
    return re.sub(r"[\d.,]*\d", "#", line)


PAGE = ROOT / "docs" / "report.md"


def _section() -> str:
    return PAGE.read_text().split("# The release report", 1)[1].split("\n## ", 1)[0]


def _excerpt() -> list[str]:
    return [ln[2:] for ln in _section().splitlines() if ln.startswith("> ")]


def test_report_excerpt_matches_the_sample_report(tmp_path: Path) -> None:
    excerpt = _excerpt()
    bullets = [ln for ln in excerpt if ln.startswith("- **")]
    rows = [ln for ln in excerpt if ln.startswith("|")]
    assert len(bullets) == 5
    assert len(rows) == 7
    run = run_job(sample_job(tmp_path, "sample_employees"))
    assert run.report is not None
    report = run.report.read_text()
    first = report.split("## Release `salary_by_dept`", 1)[1].split("\n## ", 1)[0]
    lines = {_mask(ln) for ln in first.splitlines()}
    for line in bullets + rows:
        assert _mask(line) in lines, line
    images = re.findall(r"\]\((images/[^)]+)\)", _section())
    assert len(images) == 2
    for image in images:
        decodable_png((PAGE.parent / image).read_bytes())
