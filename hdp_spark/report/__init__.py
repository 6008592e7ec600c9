"""Reports for people: Markdown with PNG plots (see :func:`write_report`)."""

from __future__ import annotations

from hdp_spark.report.markdown import render_report, write_report

__all__ = ["render_report", "write_report"]
