"""What a release is, in words: its title, units, formats and accuracy sentence."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from hdp_spark.report.fmt import fmt_num, fmt_pct, fmt_span
from hdp_spark.report.summary import CELL_KINDS, PERSON_KINDS, ValueRow

__all__ = [
    "accuracy_words",
    "bias_of",
    "fmt_half",
    "fmt_value",
    "half_of",
    "half_unit",
    "share_of",
    "title_of",
    "units_of",
    "what_all",
]


def _per(by: Sequence[str], n_groups: int, selected: bool = False) -> str:
    kind = "group" if selected else "public group"
    groups = f"1 {kind}" if n_groups == 1 else f"{n_groups} {kind}s"
    if selected:
        groups += " chosen privately by partition selection"
    return f" per {', '.join(by)} ({groups})" if by else ""


def what_all(aggs: Sequence[dict[str, Any]], by: Sequence[str], n_groups: int,
              selected: bool = False) -> str:
    """What a release publishes, in words (its groups said once)."""
    if len(aggs) == 1:
        return _what(aggs[0], by, n_groups, selected=selected)
    head = (f"{len(aggs)} results{_per(by, n_groups, selected)}: " if by
            else f"{len(aggs)} results: ")
    return head + "; and ".join(_what(a, by, n_groups, per=False) for a in aggs)


def _what(agg: dict[str, Any], by: Sequence[str], n_groups: int, *, per: bool = True,
          selected: bool = False) -> str:
    d, kind = agg["definition"], agg["kind"]
    per_text = _per(by, n_groups, selected) if per else ""
    if kind == "mean":
        return (f"the average of `{d['column']}`{per_text}; values below "
                f"{fmt_num(d['lower'])} or above {fmt_num(d['upper'])} count as that bound")
    if kind == "histogram":
        unit = "number" if d.get("counts") else "share"
        cats = ", ".join(map(str, d["categories"]))
        return (f"the {unit} of rows in each category of `{d['column']}`{per_text} ({cats}; "
                "anything else counts as \"other\")")
    if kind == "user_mean":
        return (f"the average of `{d['column']}`{per_text}, protecting each user with all "
                f"their rows; values below {fmt_num(d['lower'])} or above {fmt_num(d['upper'])} "
                "count as that bound")
    if kind == "heavy_hitters":
        return (f"the most frequent combinations of {', '.join(d['cols'])} with their counts "
                "(only combinations frequent enough to be released safely)")
    if kind == "attribute_histograms":
        return f"a count of people per value of each of {', '.join(d['cols'])}"
    if kind in CELL_KINDS:
        how = ("noisy counts made consistent by projection" if kind == "marginals" else
               "answers of a synthetic table built by MWEM")
        return f"the cross-tabulations (marginals) of {', '.join(d['cols'])}: {how}"
    if kind == "ldp_mean":
        return (f"the average of `{d['report']}`{per_text}, from reports each person's device "
                f"randomized before sending (values within {fmt_num(d['lower'])} to "
                f"{fmt_num(d['upper'])})")
    return f"`{agg['name']}` ({kind}){per_text}"


def title_of(agg: dict[str, Any], by: Sequence[str]) -> str:
    """A plot title in words."""
    d, kind = agg["definition"], agg["kind"]
    per = f" per {', '.join(by)}" if by else ""
    if kind in ("mean", "user_mean"):
        who = " (each user with all their rows protected)" if kind == "user_mean" else ""
        return f"Average {d['column']}{per}{who}"
    if kind == "histogram":
        return f"{'Number' if d.get('counts') else 'Share'} of rows per {d['column']}{per}"
    if kind == "heavy_hitters":
        return f"Most frequent {' / '.join(d['cols'])} combinations"
    if kind == "attribute_histograms":
        return "People per value of each attribute"
    if kind in CELL_KINDS:
        return f"People per cell of the marginals of {' / '.join(d['cols'])}"
    if kind == "ldp_mean":
        return f"Average {d['report']}{per} (reports randomized on the devices)"
    return str(agg["name"])


def units_of(agg: dict[str, Any]) -> str:
    """The unit of an aggregator's values: ``"share"`` or ``"people"`` for counts and
    histograms, else the unit the job declares (``unit = ...``), else ``""`` (none
    claimed)."""
    kind, d = agg["kind"], agg["definition"]
    if kind == "histogram":
        return "people" if d.get("counts") else "share"
    if kind in PERSON_KINDS:
        return "people"
    return str(agg.get("unit") or "")


def fmt_value(agg: dict[str, Any]) -> Any:
    """The formatter of an aggregator's values (percentages for shares)."""
    if units_of(agg) == "share":
        return lambda x: "–" if not math.isfinite(x) else f"{x:.1%}"
    return fmt_num


def fmt_half(agg: dict[str, Any]) -> Any:
    """The formatter of a ± (percentage points for shares)."""
    if units_of(agg) == "share":
        return lambda x: "–" if not math.isfinite(x) else f"{100 * x:.2g}"
    return fmt_num


def half_unit(agg: dict[str, Any]) -> str:
    """The unit after a ± in words (with its leading space; empty when none is claimed)."""
    unit = units_of(agg)
    return " percentage points" if unit == "share" else f" {unit}" if unit else ""


def half_of(v: ValueRow) -> float:
    """Half the width of the released interval (noise and reweighting together)."""
    return (v.high - v.low) / 2


def bias_of(v: ValueRow) -> float:
    """The part of :func:`half_of` that is the worst-case effect of weighting rows by their
    ε (the released ``bias_bound``; no more than the half-width itself when the interval
    was cut at the range)."""
    return min(v.bias, half_of(v)) if v.bias > 0 else 0.0


def share_of(v: ValueRow) -> float:
    """The ± as a share of the value."""
    return half_of(v) / abs(v.estimate) if v.estimate and math.isfinite(v.estimate) \
        else math.nan


def accuracy_words(agg: dict[str, Any], values: list[ValueRow], level: str) -> str:
    """The accuracy line of a first screen: the released interval's ± (what it holds in
    plain words), and the part of it due to weighting rows by their ε when there is one."""
    real = [v for v in values if not v.fallback and math.isfinite(half_of(v))]
    if not real:
        return "no value could be estimated (every group fell back to the middle of its range)"
    fh = fmt_half(agg)
    halves = [half_of(v) for v in real]
    shares = [s for s in map(share_of, real) if math.isfinite(s)]
    unit = half_unit(agg)
    biased = [bias_of(v) for v in real if v.bias > 0]
    share = f" ({fmt_span(min(shares), max(shares), fmt_pct)} of the value)" if shares else ""
    if biased:
        text = (f"with {level} probability each value is within "
                f"± {fmt_span(min(halves), max(halves), fh)}{unit}{share} of the table's own "
                f"value, on any data: of which ± {fmt_span(min(biased), max(biased), fh)}"
                f"{unit} is the worst-case effect of weighting rows by their ε, the rest "
                f"holds the noise added for privacy")
    else:
        text = (f"with {level} probability the noise moves each value by at most "
                f"± {fmt_span(min(halves), max(halves), fh)}{unit}{share}")
    skipped = len(values) - len(real)
    if skipped:
        text += (f"; {skipped} value(s) fell back to the middle of the range (too little "
                 "data for this much privacy)")
    return text
