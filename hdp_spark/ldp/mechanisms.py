"""The local randomizers' mechanisms: what one device does to its value under its ε_i.

Privacy-critical: each row's ε_i-LDP guarantee is these classes (the argument is in
:mod:`hdp_spark.ldp.randomizers`, which keys and runs them). Each mechanism validates its
public parameters, clamps or projects the input onto the public domain (:meth:`prepare`)
and samples the reports from a generator it is handed (:meth:`sample`): every draw comes
from the exact, integer-only samplers of :mod:`hdp_spark.core.noise.vector`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from hdp_spark.core.ldp.common import (
    check_finite,
    check_positive_int,
    duchi_scale,
    sphere_constant,
)
from hdp_spark.core.ldp.oracle import FrequencyOracle
from hdp_spark.core.ldp.specs import MAX_VECTOR_DIM
from hdp_spark.core.mean.spec import check_bounds
from hdp_spark.core.noise import vector as vx
from hdp_spark.errors import ParameterError

__all__ = [
    "DuchiRandomizer",
    "JLRandomizer",
    "LaplaceRandomizer",
    "RRRandomizer",
    "Randomizer",
]

_UNIT = 2.0**-vx.LAPLACE_GRID_BITS


def _check_bounds(lower: object, upper: object) -> tuple[float, float]:
    return check_bounds(lower, upper)  # range and midpoint finite too (one rule in core)


def _unit_scale(
    x: npt.NDArray[np.float64], lower: float, upper: float, fill: float | None
) -> npt.NDArray[np.float64]:
    """Impute NaN with the public fill, clamp to [lower, upper], map to [-1, 1]."""
    mid, half = (lower + upper) / 2.0, (upper - lower) / 2.0
    f = mid if fill is None else fill
    x = np.where(np.isnan(x), f, x)
    x = np.minimum(np.maximum(x, lower), upper)
    out: npt.NDArray[np.float64] = np.clip((x - mid) / half, -1.0, 1.0)
    return out


def _as_float_vector(x: npt.ArrayLike, name: str) -> npt.NDArray[np.float64]:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        msg = f"`{name}` must be an array of numbers."
        raise ParameterError(msg) from None
    if a.ndim != 1:
        msg = f"`{name}` must be one-dimensional, got {a.ndim} dimension(s)."
        raise ParameterError(msg)
    return a


class _ScalarRandomizer:
    """What the scalar randomizers share: public bounds and fill, and their parameters."""

    __slots__ = ()
    lower: float
    upper: float
    fill: float | None
    mechanism: ClassVar[str]

    def __post_init__(self) -> None:
        _check_bounds(self.lower, self.upper)
        if self.fill is not None:
            check_finite("fill", self.fill)

    def params(self) -> tuple[object, ...]:
        """Canonical parameters (part of the randomness context)."""
        return (self.mechanism, float(self.lower), float(self.upper), self.fill)


@dataclass(frozen=True, slots=True)
class LaplaceRandomizer(_ScalarRandomizer):
    """Alg. 1's randomizer: x in [lower, upper] -> x + Laplace noise of scale (upper-lower)/ε.

    In the unit scale u = (x - mid)/half ∈ [-1, 1] this is u + Lap(2/ε) (scale, not rate),
    realized exactly on the grid 2**-30 (see
    :func:`hdp_spark.core.noise.vector.laplace_unit` for the privacy argument of the
    rounding). Reports are returned in data units: mid + half (u + Z).

    Attributes:
        lower: public lower bound; smaller values are clamped.
        upper: public upper bound; larger values are clamped.
        fill: public value for NaN (default: the midpoint).
    """

    lower: float = -1.0
    upper: float = 1.0
    fill: float | None = None
    mechanism: ClassVar[str] = "laplace"


    def prepare(self, values: Any) -> npt.NDArray[np.float64]:
        """Values -> unit scale (deterministic pre-processing)."""
        x = _as_float_vector(values, "x")
        return _unit_scale(x, float(self.lower), float(self.upper), self.fill)

    def sample(
        self, rng: vx.Rng, prepared: npt.NDArray[Any], eps: npt.NDArray[np.float64]
    ) -> dict[str, npt.NDArray[Any]]:
        """Reports in data units."""
        mid = (float(self.lower) + float(self.upper)) / 2.0
        half = (float(self.upper) - float(self.lower)) / 2.0
        k = vx.laplace_unit(rng, prepared, eps)
        return {"": mid + half * (k.astype(np.float64) * _UNIT)}


@dataclass(frozen=True, slots=True)
class RRRandomizer(_ScalarRandomizer):
    """Alg. 2's randomizer: a ±1 report; +1 stands for ``upper``, -1 for ``lower``.

    Binary data (x = lower or upper; booleans: True = upper) is reported truthfully with
    probability e^ε/(1+e^ε) (realized as an exact dyadic rounded down, see
    :func:`hdp_spark.core.noise.vector.keep_numerator`). Other values in [lower, upper] are
    first rounded to an endpoint with the unbiased probability (our extension,
    not in the paper).

    Attributes:
        lower: public value reported as -1 (smaller values are clamped).
        upper: public value reported as +1 (larger values are clamped).
        fill: public value for NaN (default: the midpoint, i.e. a fair coin).
    """

    lower: float = -1.0
    upper: float = 1.0
    fill: float | None = None
    mechanism: ClassVar[str] = "rr"


    def prepare(self, values: Any) -> npt.NDArray[np.float64]:
        """Values (or booleans) -> unit scale."""
        a = np.asarray(values)
        if a.dtype == np.bool_:
            if a.ndim != 1:
                msg = f"`x` must be one-dimensional, got {a.ndim} dimension(s)."
                raise ParameterError(msg)
            return np.where(a, 1.0, -1.0)
        x = _as_float_vector(a, "x")
        return _unit_scale(x, float(self.lower), float(self.upper), self.fill)

    def sample(
        self, rng: vx.Rng, prepared: npt.NDArray[Any], eps: npt.NDArray[np.float64]
    ) -> dict[str, npt.NDArray[Any]]:
        """±1 reports (int8)."""
        return {"": vx.rr_pm1(rng, prepared, eps)}


@dataclass(frozen=True, slots=True)
class DuchiRandomizer:
    """Alg. 4's randomizer (Duchi et al.) for vectors in the ℓ2 ball of radius r.

    Each row is projected onto the ball (NaN and infinite coordinates are imputed as 0
    first), then reported as a point of the sphere of radius B = c(ε) r A_d — the
    CORRECTED radius (the paper's Algorithm 4, line 4 prints 2 c r A_d, which doubles the
    mean; see :mod:`hdp_spark.core.ldp.common`).
    The implementation uses the realized keep probability, B = r A_d / T', so that
    E[Y | x] = x exactly. See :func:`hdp_spark.core.noise.vector.duchi_sphere`.

    Attributes:
        d: dimension.
        radius: public radius r of the ball.
    """

    d: int
    radius: float = 1.0
    mechanism: ClassVar[str] = "duchi"

    def __post_init__(self) -> None:
        check_positive_int("d", self.d, MAX_VECTOR_DIM)
        r = check_finite("radius", self.radius)
        if not r > 0:
            msg = f"`radius` must be > 0, got {self.radius!r}."
            raise ParameterError(msg)

    def params(self) -> tuple[object, ...]:
        """Canonical parameters (part of the randomness context)."""
        return (self.mechanism, int(self.d), float(self.radius))

    def prepare(self, values: Any) -> npt.NDArray[np.float64]:
        """Rows -> rows projected onto the ball."""
        try:
            x = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            msg = "`vectors` must be an array of numbers of shape (n, d)."
            raise ParameterError(msg) from None
        if x.ndim != 2 or x.shape[1] != self.d:
            msg = f"`vectors` must have shape (n, {self.d}), got {x.shape}."
            raise ParameterError(msg)
        finite = np.isfinite(x)
        if not finite.all():
            x = np.where(finite, x, 0.0)
        norms = np.sqrt(np.einsum("ij,ij->i", x, x))
        overflow = ~np.isfinite(norms)
        if overflow.any():  # huge coordinates: rescale those rows before the norm
            big = np.max(np.abs(x[overflow]), axis=1)
            sub = x[overflow] / big[:, None]
            norms[overflow] = np.sqrt(np.einsum("ij,ij->i", sub, sub)) * big
        outside = norms > self.radius
        if outside.any():
            x = x.copy() if x is values else x
            x[outside] *= (self.radius / norms[outside])[:, None]
        out: npt.NDArray[np.float64] = x
        return out

    def sample(
        self, rng: vx.Rng, prepared: npt.NDArray[Any], eps: npt.NDArray[np.float64]
    ) -> dict[str, npt.NDArray[Any]]:
        """Reports of shape (n, d)."""
        r = float(self.radius)
        scale = r * sphere_constant(self.d) / vx.realized_tanh(eps)
        return {"": vx.duchi_sphere(rng, prepared, eps, r, scale)}

    def nominal_scale(self, eps: float) -> float:
        """B = c(ε) r A_d (what the realized scale equals up to a relative 2**-38)."""
        return duchi_scale(eps, float(self.radius), self.d)


@dataclass(frozen=True, slots=True)
class JLRandomizer:
    """Alg. 5's local randomizer (Bassily-Smith frequency oracle): x in [0, d) -> (j, b).

    j is uniform on [0, m) and b = s(j, x) with probability e^ε/(1+e^ε), else -s(j, x).
    Values that are not an integer in [0, d) (NaN, negative, too large, fractional) map to
    ⊥ ("no item"), which reports a fair sign: data-independent handling, never an error.

    Attributes:
        oracle: the public protocol parameters (d, m, Φ seed, projection).
    """

    oracle: FrequencyOracle
    mechanism: ClassVar[str] = "jl"

    def __post_init__(self) -> None:
        if not isinstance(self.oracle, FrequencyOracle):
            msg = f"`oracle` must be a FrequencyOracle, got {type(self.oracle).__name__}."
            raise ParameterError(msg)

    def params(self) -> tuple[object, ...]:
        """Canonical parameters (part of the randomness context)."""
        o = self.oracle
        return (self.mechanism, o.d, o.m, o.phi_seed, o.projection)

    def prepare(self, values: Any) -> npt.NDArray[np.int64]:
        """Values -> categories in [0, d), or -1 for ⊥."""
        x = _as_float_vector(values, "values")
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(x) & (x >= 0) & (x < self.oracle.d) & (np.floor(x) == x)
        out: npt.NDArray[np.int64] = np.where(ok, x, -1.0).astype(np.int64)
        return out

    def sample(
        self, rng: vx.Rng, prepared: npt.NDArray[Any], eps: npt.NDArray[np.float64]
    ) -> dict[str, npt.NDArray[Any]]:
        """Report indices (``_j``, int64) and signs (``_b``, int8)."""
        j, b = vx.fo_report(rng, prepared, eps, self.oracle.m, self.oracle.signs)
        return {"_j": j, "_b": b}


Randomizer = LaplaceRandomizer | RRRandomizer | DuchiRandomizer | JLRandomizer
