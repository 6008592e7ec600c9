"""Per-attribute histograms under per-attribute DP (parallel composition over attributes).

Privacy-critical: the per-attribute ε₀ of ``attribute_histograms`` is the noise scale set
here; the argument (sensitivity 2 per attribute change, parallel composition) follows.

Each attribute j's histogram over its public domain (the "other" category included) gets
independent discrete Laplace noise of scale b >= 2/ε₀ on every cell, absent values
included. Sensitivity: changing attribute j of one person moves one count of histogram j
down by one and another up by one (L1 change 2, not 1), and no other
histogram changes, so the release is ε₀-DP per attribute with ε₀ = 2/b (Lemma 10 of Ghazi
et al., parallel composition over attributes). Changing a person's whole record changes every
histogram: per person, basic composition gives d·ε₀ (pure) and, through the
pure-to-zCDP lift ρ_j = ε₀²/2, ρ_person = Σ_j ρ_j = d·ε₀²/2 (linear in d; zCDP
composition of independent mechanisms).

With a privacy unit (``privacy_unit``, ``max_rows`` = R): the engines count only persons
with at most R rows, every row of theirs (a person with more rows, or a row without an id,
counts nowhere; whether a person counts depends on their number of rows, never on a value).
Replacing ANY of a counted person's rows, attribute j only or whole rows, or their number
(down to none), changes histogram j by at most R rows out and R rows in: L1 change <= 2R
(and <= R when one side counts nowhere: a person added or removed). Nothing released or
reported depends on n, so a person's number of rows stays private. The scale is
therefore b >= 2R/ε₀, computed exactly as 2R/ε₀ rounded up, and ε₀ = 2R/b per attribute
of a person; the per-person figures follow as above. R = 1 is the row model (one row per person).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hdp_spark.core.noise import ReleaseKey, discrete_laplace, encode_context
from hdp_spark.core.partial.budget import count_scale_for, round_scale_up
from hdp_spark.core.partial.heavy_hitters import count_half_width
from hdp_spark.core.partial.spec import AttributeHistogramSpec, unit_neighbours
from hdp_spark.errors import InternalError

__all__ = [
    "HISTOGRAM_COLUMNS",
    "HistogramReport",
    "HistogramResult",
    "finalize_histograms",
    "histogram_scale",
]

HISTOGRAM_COLUMNS: tuple[str, ...] = (
    "attribute", "value", "code", "noisy_count", "count_ci_low", "count_ci_high"
)
"""Output columns of ``attribute_histograms`` (long format, one row per (attribute, value))."""


@dataclass(frozen=True, slots=True)
class HistogramReport:
    """Public metadata of a per-attribute histogram release (identical for every dataset).

    Attributes:
        attributes: the attribute columns.
        neighbours: the neighbour relation.
        noise: the noise law.
        eps0: the per-attribute budget asked for.
        eps_attribute: delivered ε per attribute of a person, 2·max_rows/noise_scale <=
            eps0.
        noise_scale: discrete Laplace scale of every cell.
        eps_person: per-person ε = d · eps_attribute (basic composition).
        rho_person: per-person zCDP ρ = d · eps_attribute² / 2.
        eps_person_conversion: how eps_person was obtained.
        count_ci_level: 1 - β of the count intervals.
        privacy_unit: the privacy-unit id column, if any.
        unit_checked: whether the rows were bounded per person (``privacy_unit``).
        max_rows: the most rows a counted person has (1 without ``privacy_unit``).
        unsafe_seed: True if the noise came from a caller's seed (not private).
    """

    attributes: tuple[str, ...]
    neighbours: str
    noise: str
    eps0: float
    eps_attribute: float
    noise_scale: float
    eps_person: float
    rho_person: float
    eps_person_conversion: str
    count_ci_level: float
    privacy_unit: str | None
    unit_checked: bool
    unsafe_seed: bool
    max_rows: int = 1

    def as_dict(self) -> dict[str, Any]:
        """The report as a plain dict (tuples as lists)."""
        return {
            name: list(v) if isinstance(v, tuple) else v
            for name in self.__dataclass_fields__
            for v in (getattr(self, name),)
        }


def histogram_scale(eps0: float, max_rows: int = 1) -> Fraction:
    """b >= 2R/ε₀ on the 1/SCALE_GRID grid, exact (the module docstring's L1 sensitivity 2R
    of a person's R rows); a person's ε per attribute is 2R/b <= ε₀."""
    if max_rows == 1:
        return count_scale_for(float(eps0))
    return round_scale_up(Fraction(2 * max_rows) / Fraction(float(eps0)))


@dataclass(frozen=True, slots=True)
class HistogramResult:
    """Released histograms: rows in (attribute order, code order), and the report."""

    rows: tuple[dict[str, Any], ...]
    report: HistogramReport


def finalize_histograms(
    spec: AttributeHistogramSpec,
    counts: Sequence[Mapping[int, int]],
    release_key: ReleaseKey,
) -> HistogramResult:
    """Noise every cell of every attribute's histogram.

    Args:
        spec: the release.
        counts: per attribute, exact ``{code: count}`` (absent codes count 0).
        release_key: the release's secret key.
    """
    if len(counts) != len(spec.domains):
        msg = "one count table per attribute is needed"
        raise InternalError(msg)
    per_person = spec.max_rows  # a person's rows: L1 sensitivity 2R (module docstring)
    scale = histogram_scale(float(spec.eps0), per_person)
    eps = 2.0 * per_person / float(scale)
    width = count_half_width(scale, spec.beta)
    rows: list[dict[str, Any]] = []
    for j, (dom, table) in enumerate(zip(spec.domains, counts, strict=True)):
        if any(not 0 <= c < dom.size for c in table):
            msg = "a code outside the domain"
            raise InternalError(msg)
        exact = tuple(int(table.get(c, 0)) for c in range(dom.size))
        stream = release_key.stream(encode_context(("hist", j, dom.column, scale, exact)))
        for code, f in enumerate(exact):
            noisy = f + discrete_laplace(scale, stream)
            value = dom.value(code)
            rows.append({
                "attribute": dom.column,
                "value": None if value is None else str(value),
                "code": code,
                "noisy_count": noisy,
                "count_ci_low": noisy - width,
                "count_ci_high": noisy + width,
            })
    d = len(spec.domains)
    report = HistogramReport(
        attributes=spec.cols,
        neighbours=unit_neighbours(spec.privacy_unit, per_person),
        noise="exact discrete Laplace",
        eps0=float(spec.eps0),
        eps_attribute=eps,
        noise_scale=float(scale),
        eps_person=d * eps,
        rho_person=d * eps * eps / 2.0,
        eps_person_conversion=(
            f"basic composition of {d} column histograms, each {eps:.6g}-DP "
            f"(L1 sensitivity {2 * per_person} per column)"
        ),
        count_ci_level=1.0 - spec.beta,
        privacy_unit=spec.privacy_unit,
        unit_checked=spec.privacy_unit is not None,
        max_rows=per_person,
        unsafe_seed=release_key.unsafe,
    )
    return HistogramResult(tuple(rows), report)
