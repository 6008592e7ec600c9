"""The report's Markdown-to-HTML conversion of inline marks (issue 34: a code span inside
bold printed its asterisks on the page)."""

from __future__ import annotations

from pathlib import Path

from hdp_spark.report.html import markdown_to_html


def test_code_inside_bold_and_links_renders(tmp_path: Path) -> None:
    text = ("- **Accuracy (`income_mean`):** within ± 3 <b>.\n"
            "- values in `a_b/c*d*.parquet` and [the job](#job) _here_\n")
    page = markdown_to_html(text, base=tmp_path, title="t")
    assert "<strong>Accuracy (<code>income_mean</code>):</strong>" in page
    assert "**" not in page
    assert "<code>a_b/c*d*.parquet</code>" in page  # code spans keep their characters
    assert "&lt;b&gt;" in page  # escaped
    assert '<a href="#job">the job</a>' in page
    assert "<em>here</em>" in page
