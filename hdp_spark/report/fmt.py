"""Number and table formatting of the report (Markdown)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["fmt_count", "fmt_num", "fmt_pct", "fmt_span", "md_table", "text_table"]


def fmt_num(v: Any) -> str:
    """A number as a person reads it (thousands separators, 4 significant digits)."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, str):
        return v
    x = float(v)
    if math.isnan(x):
        return "–"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def fmt_count(n: float) -> str:
    """A count with thousands separators."""
    return f"{int(n):,}"


def fmt_pct(x: float) -> str:
    """A share as a percentage."""
    if not math.isfinite(x):
        return "–"
    if x > 1:
        return "over 100%"
    return f"{x:.1%}" if x < 0.1 else f"{x:.0%}"


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A Markdown table; numbers formatted by :func:`fmt_num`."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(fmt_num(c) if not isinstance(c, str) else c for c in r) + " |"
            for r in rows]
    return out


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A plain-text table for a terminal: the first column left-aligned, the others
    right-aligned, a dashed rule under the header (cells already formatted)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def fmt_span(lo: float, hi: float, fmt: Any = fmt_num) -> str:
    """"a" if both print the same, else "a to b"."""
    a, b = fmt(lo), fmt(hi)
    return a if a == b else f"{a} to {b}"


