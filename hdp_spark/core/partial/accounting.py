"""Conversions between per-attribute, per-person, pure and zCDP guarantees.

Privacy-critical: the per-person and zCDP guarantees that releases report are computed
here; an error overstates privacy without changing any noise. The conversions are those of
§2 of Ghazi, Kumar, Manurangsi & Steinke, *Algorithms with More Granular Differential
Privacy Guarantees* (Proposition 8, Definition 3) and of the cited zCDP papers.

* Proposition 8: ε₀-∇₀DP ⇒ (d·ε₀)-DP; ε₀-∇₀CDP ⇒ ½d²ε₀²-zCDP.
* pure ε-DP ⇒ ½ε²-zCDP (the "∇DP ⇒ ∇CDP" lift).
* zCDP ρ ⇒ (ε, δ)-DP by BS16, ε = ρ + 2√(ρ ln(1/δ)), or by the tighter CKS20 bound
  ε = inf_{α>1} αρ + (ln(1/δ) + (α-1) ln(1 - 1/α) - ln α)/(α - 1).
* Independent per-attribute mechanisms (ε_j-DP on column j): per person Σ_j ε_j (pure) or
  Σ_j ρ_j (zCDP): linear in d, tighter than Proposition 8's ½d²ε₀² (zCDP
  composition; our generalisation, not a result of the paper).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from hdp_spark.errors import ParameterError

__all__ = [
    "delta_bs16",
    "eps_bs16",
    "eps_cks20",
    "per_column_person",
    "per_person_pure",
    "per_person_rho",
    "rho_from_pure",
]


def _check(name: str, value: float, *, upper: float | None = None) -> None:
    if not (value > 0 and math.isfinite(value)) or (upper is not None and value >= upper):
        rule = "positive" if upper is None else f"positive and < {upper}"
        msg = f"`{name}` must be {rule}, got {value!r}."
        raise ParameterError(msg)


def per_person_pure(eps0: float, d: int) -> float:
    """Proposition 8: an ε₀ per-attribute guarantee is (d·ε₀)-DP per person."""
    return d * eps0


def per_person_rho(eps0: float, d: int) -> float:
    """Proposition 8: ε₀-∇₀CDP is ½d²ε₀²-zCDP per person."""
    return 0.5 * d * d * eps0 * eps0


def rho_from_pure(eps: float) -> float:
    """Pure ε-DP implies ½ε²-zCDP."""
    return 0.5 * eps * eps


def per_column_person(eps: Sequence[float]) -> tuple[float, float]:
    """(pure ε, zCDP ρ) per person of independent per-column ε_j-DP mechanisms."""
    return float(sum(eps)), float(sum(0.5 * e * e for e in eps))


def eps_bs16(rho: float, delta: float) -> float:
    """BS16: ρ-zCDP ⇒ (ρ + 2√(ρ ln(1/δ)), δ)-DP."""
    _check("rho", rho)
    _check("delta", delta, upper=1.0)
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def delta_bs16(rho: float, eps: float) -> float:
    """BS16 inverted: the δ at a given ε >= ρ, exp(-(ε - ρ)²/(4ρ))."""
    _check("rho", rho)
    if eps < rho:
        msg = f"`eps` must be >= rho for the BS16 bound, got {eps!r}."
        raise ParameterError(msg)
    return math.exp(-((eps - rho) ** 2) / (4.0 * rho))


def eps_cks20(rho: float, delta: float) -> float:
    """CKS20 (Canonne, Kamath, Steinke 2020, Prop. 12): the tighter zCDP to (ε, δ) bound.

    Privacy: a conversion of public budget figures (no data); the same (ρ, δ) always gives
    the same ε, so the one-dimensional search runs once per pair (a release's report
    states it for every key it is run with)."""
    _check("rho", rho)
    _check("delta", delta, upper=1.0)
    return _eps_cks20(float(rho), float(delta))


@functools.lru_cache(maxsize=256)
def _eps_cks20(rho: float, delta: float) -> float:
    log_inv = math.log(1.0 / delta)

    def f(log_a1: float) -> float:
        a = 1.0 + math.exp(log_a1)
        return a * rho + (log_inv + (a - 1.0) * math.log1p(-1.0 / a) - math.log(a)) / (a - 1.0)

    from scipy import optimize  # lazy: scipy.optimize costs ~1 s to import

    res = optimize.minimize_scalar(f, bounds=(-20.0, 20.0), method="bounded",
                                   options={"xatol": 1e-12})
    return float(min(res.fun, eps_bs16(rho, delta)))
