"""The README's excerpt of the release report is what the sample job writes (issue 21).

The excerpt (section "The release report") is compared with the first release of a fresh
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


def _excerpt() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## The release report", 1)[1].split("\n## ", 1)[0]
    return [ln[2:] for ln in section.splitlines() if ln.startswith("> ")]


def test_readme_report_excerpt_matches_the_sample_report(tmp_path: Path) -> None:
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
    for image in re.findall(r"\]\((docs/images/[^)]+)\)", "\n".join(
            (ROOT / "README.md").read_text().split("## The release report", 1)[1]
            .split("\n## ", 1)[0].splitlines())):
        decodable_png((ROOT / image).read_bytes())
