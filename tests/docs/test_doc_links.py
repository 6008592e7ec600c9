"""Every relative link in README.md and docs/*.md points to a file of the repository, and
every anchor (`page.md#heading`) to a heading of that page (GitHub's heading ids). Links
inside code blocks and inline code are not links; web addresses are not checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", flags=re.DOTALL | re.MULTILINE)


def _prose(text: str) -> str:
    """The page without fenced blocks, indented code blocks and inline code."""
    text = _FENCE.sub("", text)
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("    "))
    return re.sub(r"`[^`\n]*`", "", text)


def _anchor(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _FENCE.sub("", page.read_text()).splitlines():
        m = re.match(r"^#{1,6} (.+?)\s*#*$", line)
        if not m:
            continue
        base = _anchor(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def _links(page: Path) -> list[str]:
    return [t for t in _LINK.findall(_prose(page.read_text()))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]  # http:, https:, mailto: ...


def test_anchor_rule_matches_github() -> None:
    assert _anchor("Spark Column aggregators (`hdp_spark/spark/columns.py`)") == (
        "spark-column-aggregators-hdp_sparksparkcolumnspy")
    assert _anchor("pandas: a release") == "pandas-a-release"
    assert _anchor("The mean (`hdp_mean`): methods and output") == (
        "the-mean-hdp_mean-methods-and-output")


def test_the_pages_have_links() -> None:
    assert len(PAGES) > 10
    assert len(_links(ROOT / "README.md")) > 10
    index = _links(ROOT / "docs" / "index.md")
    for page in PAGES[1:]:  # the index lists every page of docs/
        if page.name != "index.md":
            assert page.name in index, page.name


def _broken(page: Path, root: Path = ROOT) -> list[str]:
    """The relative links of one page that lead nowhere, each with the reason."""
    out = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.is_relative_to(root.resolve()):
            out.append(f"{target}: leaves the repository")
        elif not dest.exists():
            out.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            out.append(f"{target}: no such heading")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    assert _broken(page) == [], page.name


def test_the_check_finds_broken_links(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "b.md").write_text("# B\n\n## A heading: here\n")
    page = tmp_path / "docs" / "a.md"
    page.write_text("# A\n\n[ok](b.md#a-heading-here) [self](#a) [web](https://x.org/y.md)\n"
                    "`[code](nothing.md)`\n\n```\n[fenced](nothing.md)\n```\n\n"
                    "[gone](c.md) [anchor](b.md#nothere) [out](../../elsewhere.md)\n")
    assert _broken(page, tmp_path) == [
        "c.md: no such file", "b.md#nothere: no such heading",
        "../../elsewhere.md: leaves the repository"]


RESULTS = [ROOT / "benchmarks" / "RESULTS.md", *sorted((ROOT / "benchmarks" / "log").glob(
    "*-results-page.md"))]


@pytest.mark.parametrize("page", RESULTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_results_pages_links_resolve(page: Path) -> None:
    """The results page and the full page it summarises (moved to benchmarks/log/) link
    only to files and headings that exist (their plots, logs and each other)."""
    assert _links(page)
    assert _broken(page) == [], page.name


def test_the_results_page_reads_in_two_minutes() -> None:
    """Issue 53: a summary of at most ~300 lines that opens with the status of the targets
    and links the full page of every figure it shortened."""
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    assert len(text.splitlines()) <= 300
    headings = [ln for ln in text.splitlines() if ln.startswith("## ")]
    assert headings[0] == "## Status of the targets"
    assert "log/2026-11-29-results-page.md" in _links(ROOT / "benchmarks" / "RESULTS.md")
