"""The public budget of the marginals' projection mechanism: the noise variance σ² and every
guarantee it gives, from the workload, ε₀ and a person's rows R alone (no data read).

Privacy-critical: σ² sets the guarantees of ``hdp_marginals``. The sensitivities (count
space) are derived in :mod:`hdp_spark.core.partial.projection`'s docstring: changing
attribute j of one row moves the counts by L2² = 2·deg(j), a whole row by 2·|W|, and R rows
of one person by R times as much in L2 (R² in L2²). The discrete Gaussian of variance σ² is
½(Δ/σ)²-zCDP, so σ² = R²·2·max_j deg(j)/ε₀², rounded up to the 1/VARIANCE_GRID grid
(exact rational), gives ρ_j = R²·deg(j)/σ² <= ½ε₀² per attribute and R²·|W|/σ² per person.
Source: §4.1 (Theorem 11) of Ghazi, Kumar, Manurangsi & Steinke, *Algorithms with More
Granular Differential Privacy Guarantees*.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from hdp_spark.core.partial import accounting

__all__ = ["VARIANCE_GRID", "ProjectionBudget", "solve_projection_budget"]

VARIANCE_GRID = 1024
"""σ² is rounded up to a multiple of 1/VARIANCE_GRID (an exact rational)."""

@dataclass(frozen=True, slots=True)
class ProjectionBudget:
    """The public numbers of one marginals configuration (no data read).

    Attributes:
        degrees: deg(j), the number of marginals containing attribute j.
        sens_attr_sq: Δ₀² = 2·max_j deg(j) (count space).
        sens_person_sq: Δ² = 2·|W|.
        sigma2: σ², the discrete Gaussian variance parameter of every noisy count.
        rho_attributes: ρ_j = deg(j)/σ² per attribute.
        rho_attribute: max_j ρ_j (the ε₀-∇₀CDP level, ½ε²).
        eps_attribute: √(2 ρ_attribute) <= ε₀.
        rho_person: |W|/σ².
        eps_person: √(2 ρ_person) = ε_attribute·Δ/Δ₀.
        rho_person_prop8: ½d²ε_attribute², Proposition 8's per-person bound, for comparison.
        max_rows: R, a person's rows: the sensitivities are R times a row's, every ρ R²
            times (module docstring).
    """

    degrees: tuple[int, ...]
    sens_attr_sq: int
    sens_person_sq: int
    sigma2: Fraction
    rho_attributes: tuple[float, ...]
    rho_attribute: float
    eps_attribute: float
    rho_person: float
    eps_person: float
    rho_person_prop8: float
    max_rows: int = 1


def solve_projection_budget(d: int, workload: Sequence[tuple[int, ...]],
                            eps0: float, max_rows: int = 1) -> ProjectionBudget:
    """σ² = Δ₀²/ε₀² rounded up (exact rational), and every guarantee it gives; with
    ``max_rows`` = R, Δ₀² and Δ² are R² times a row's (module docstring)."""
    rows_sq = max_rows * max_rows
    degrees = tuple(sum(1 for s in workload if j in s) for j in range(d))
    a_sq = 2 * max(degrees) * rows_sq
    p_sq = 2 * len(workload) * rows_sq
    exact = Fraction(a_sq) / Fraction(eps0) ** 2
    sigma2 = Fraction(math.ceil(exact * VARIANCE_GRID), VARIANCE_GRID)
    s2 = float(sigma2)
    rho_j = tuple(rows_sq * g / s2 for g in degrees)
    rho_attr = max(rho_j)
    rho_person = rows_sq * len(workload) / s2
    eps_attr = math.sqrt(2.0 * rho_attr)
    return ProjectionBudget(
        degrees=degrees,
        sens_attr_sq=a_sq,
        sens_person_sq=p_sq,
        sigma2=sigma2,
        rho_attributes=rho_j,
        rho_attribute=rho_attr,
        eps_attribute=eps_attr,
        rho_person=rho_person,
        eps_person=math.sqrt(2.0 * rho_person),
        rho_person_prop8=accounting.per_person_rho(eps_attr, d),
        max_rows=max_rows,
    )
