"""Constants, weight rules and the fixed-point report encoding of the local-DP aggregators.

Engine-agnostic (numpy only). The Spark backend mirrors :func:`encode_reports_numpy` with
native expressions built from the same IEEE-754 operations, so both engines produce the
same integers and therefore the same level tables.

Privacy-critical: the ε_i-LDP of the client randomizers depends on :data:`LDP_EPS_MIN` and
the input checks here (the randomizers import them); the Duchi radius B only scales the
reports (privacy holds for any B > 0: both hemispheres have the same radius), but a wrong
B biases every estimate. The weights and the report encoding are server-side
post-processing of already private reports.

Notation follows Aliakbarpour, Fallah, Roy & Stevens, *High-Probability Bounds For
Heterogeneous Local Differential Privacy* (Algorithms 2, 4 and 5): c(ε) = coth(ε/2),
τ(ε) = tanh²(ε/2) = 1/c², the Duchi sphere constant A_d = √π Γ((d+1)/2)/Γ(d/2) (computed
with lgamma), B = c r A_d. Correction: Algorithm 4, line 4 of the paper prints
B = c r d √π Γ((d-1)/2 + 1)/Γ(d/2 + 1); since Γ(d/2 + 1) = (d/2) Γ(d/2) this is 2 c r A_d,
and with it E[Y] = 2x. The unbiased radius (E[Y] = x, Duchi et al.'s constant) is c r A_d:
we use it.
"""

from __future__ import annotations

import math
import warnings
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from hdp_spark.core.noise.vector import EPS_MIN
from hdp_spark.errors import ParameterError

__all__ = [
    "DUCHI_BOUND_SLACK",
    "FRACTION_BITS",
    "LAPLACE_CLIP_SCALES",
    "LDP_EPS_MIN",
    "LDP_MECHANISMS",
    "LDP_WEIGHTS",
    "LIMB_BITS",
    "LdpEpsilonWarning",
    "LdpMechanism",
    "LdpWeights",
    "duchi_report_bound",
    "duchi_scale",
    "encode_reports_numpy",
    "laplace_report_bound",
    "rr_factor",
    "sphere_constant",
    "split_limbs",
    "warn_large_eps",
    "weight_phi",
]

LdpMechanism = Literal["laplace", "rr", "duchi", "jl"]
LDP_MECHANISMS: tuple[str, ...] = get_args(LdpMechanism)

LdpWeights = Literal["paper", "uniform", "inverse_variance"]
LDP_WEIGHTS: tuple[str, ...] = get_args(LdpWeights)

LDP_EPS_MIN = EPS_MIN
"""Smallest positive ε a local randomizer or aggregator accepts (2**-20)."""

FRACTION_BITS = 30
"""Reports are encoded as integers in units of 2**-30 (of the unit scale, or of r)."""

LIMB_BITS = 31
"""Each encoded report q is summed as two limbs, q = hi 2**31 + lo, so that no 64-bit sum
of up to 2**32 rows can overflow on either engine."""

LAPLACE_CLIP_SCALES = 64.0
"""Laplace reports are clipped to ±(1 + 64 · 2/ε) in the unit scale before summing: a
report of our randomizer exceeds it with probability below e**-63.99, and an untrusted
(malicious) report cannot move the estimate by more than its weight times this bound."""

DUCHI_BOUND_SLACK = 1.0 + 2.0**-20
"""Duchi coordinates are clipped to ±A_d (1 + 2/ε) r (1 + 2**-20) >= B, which a genuine
report never exceeds since c(ε) = coth(ε/2) <= 1 + 2/ε."""


class LdpEpsilonWarning(UserWarning):
    """Some rows have ε > 1: the paper's rates (Theorems 2.1-4.1) assume ε <= 1 only.

    The reported intervals stay valid for any ε > 0; only the optimality of the paper's
    weights is at stake (Duchi's ε² weights over-weight such rows, spec P6).
    """


def sphere_constant(d: int) -> float:
    """A_d = √π Γ((d+1)/2) / Γ(d/2) = 1 / E|U_1| for U uniform on the unit sphere of R^d."""
    return math.sqrt(math.pi) * math.exp(math.lgamma((d + 1) / 2) - math.lgamma(d / 2))


def rr_factor(eps: float) -> float:
    """c(ε) = coth(ε/2) = (e^ε + 1)/(e^ε - 1), computed as 1 + 2/expm1(ε)."""
    return 1.0 + 2.0 / math.expm1(eps)


def duchi_scale(eps: float, radius: float, d: int) -> float:
    """Corrected radius B = c(ε) r A_d of Duchi's output sphere (the paper prints 2 c r A_d)."""
    return rr_factor(eps) * radius * sphere_constant(d)


def weight_phi(mechanism: LdpMechanism, rule: LdpWeights, eps: float) -> float:
    """Unnormalized per-row weight f(ε) (the weights of the paper's Algorithms 1-3 and 5).

    ``paper``: Laplace ε²/(1+ε²); RR and the frequency oracle tanh²(ε/2); Duchi ε².
    ``inverse_variance``: Laplace ε²/(ε²+8) (= 1/(1 + 8/ε²), worst case Var ≤ 1 + 8/ε²);
    RR, Duchi and the frequency oracle tanh²(ε/2) (= 1/c², worst-case variance ∝ c²).
    ``uniform``: 1. Weights depend on ε only, never on reports.
    """
    if rule == "uniform":
        return 1.0
    e2 = eps * eps
    if mechanism == "laplace":
        return e2 / (1.0 + e2) if rule == "paper" else e2 / (e2 + 8.0)
    if mechanism == "duchi" and rule == "paper":
        return e2
    return math.tanh(eps / 2.0) ** 2


def laplace_report_bound(eps: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Clip bound of a Laplace report in the unit scale: 1 + 128/ε (same ops on Spark)."""
    out: npt.NDArray[np.float64] = (128.0 / eps) + 1.0
    return out


def duchi_report_bound(eps: npt.NDArray[np.float64], a_d: float) -> npt.NDArray[np.float64]:
    """Clip bound of a Duchi coordinate in units of r: A_d (1 + 2/ε)(1 + 2**-20)."""
    out: npt.NDArray[np.float64] = (((2.0 / eps) + 1.0) * a_d) * DUCHI_BOUND_SLACK
    return out


def encode_reports_numpy(
    values: npt.NDArray[np.float64], bound: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """Fixed-point encoding q = floor(clip(v, ±bound) 2**30 + 0.5) of unit-scale reports."""
    v = np.minimum(np.maximum(values, -bound), bound)
    return np.floor(v * float(2**FRACTION_BITS) + 0.5).astype(np.int64)


def split_limbs(q: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(hi, lo) with q = hi 2**31 + lo and 0 <= lo < 2**31 (arithmetic shift, bit mask)."""
    return q >> LIMB_BITS, q & ((1 << LIMB_BITS) - 1)


def warn_large_eps(levels: list[float], counts: list[int]) -> None:
    """Emit :class:`LdpEpsilonWarning` when rows with ε > 1 take part (counts only)."""
    above = sum(c for lv, c in zip(levels, counts, strict=True) if lv > 1.0)
    if above:
        warnings.warn(
            f"{above} row(s) have ε > 1: the rates of Aliakbarpour et al. (High-Probability "
            "Bounds For Heterogeneous Local Differential Privacy) are proven for ε <= 1; the "
            "reported intervals remain valid.",
            LdpEpsilonWarning,
            stacklevel=3,
        )


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    """Raise :class:`ParameterError` unless ``value`` is one of ``choices``."""
    if value not in choices:
        msg = f"`{name}` must be one of {', '.join(repr(c) for c in choices)}; got {value!r}."
        raise ParameterError(msg)


def check_beta(beta: object) -> float:
    """β must be a number in (0, 1)."""
    if isinstance(beta, bool) or not isinstance(beta, int | float):
        msg = f"`beta` must be a number in (0, 1), got {beta!r}."
        raise ParameterError(msg)
    if not 0.0 < float(beta) < 1.0:
        msg = f"`beta` must be in (0, 1), got {beta!r}."
        raise ParameterError(msg)
    return float(beta)


def check_positive_int(name: str, value: object, upper: int) -> int:
    """An int in [1, upper]."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        msg = f"`{name}` must be an integer, got {value!r}."
        raise ParameterError(msg)
    if not 1 <= int(value) <= upper:
        msg = f"`{name}` must be in [1, {upper}], got {value!r}."
        raise ParameterError(msg)
    return int(value)


def check_finite(name: str, value: object) -> float:
    """A finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
        msg = f"`{name}` must be a number, got {value!r}."
        raise ParameterError(msg)
    out = float(value)
    if not math.isfinite(out):
        msg = f"`{name}` must be finite, got {value!r}."
        raise ParameterError(msg)
    return out
