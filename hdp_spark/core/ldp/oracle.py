"""The public projection Φ of the frequency oracle and its sizing.

Algorithm 5 (§4) of Aliakbarpour, Fallah, Roy & Stevens, *High-Probability Bounds For
Heterogeneous Local Differential Privacy*. Privacy-critical only through the protocol
parameters the device randomizer uses: Φ, m and the seed are public and data-independent,
so a device's report (one row index j and one randomized-response sign b with ε_i) is
ε_i-LDP whatever they are; sizing changes accuracy, not privacy. The Φ seed must not
depend on the data (the JL error bound is over Φ's randomness).

Φ[j, v] = s(j, v)/√m with signs s(j, v) ∈ {±1}. Φ is never materialized: s is a function of
(public seed, j, v) evaluated on demand, identically on devices, executors and the driver.

* ``projection="jl"`` (the paper's Alg. 5): s(j, v) is the top bit of a 64-bit mix
  (SplitMix64 finalizer, twice) of (seed, j, v): a public pseudo-random ±1 matrix. The seed
  is drawn from OS entropy (:func:`hdp_spark.core.noise.public_seed`) when the oracle is
  planned; it must not depend on the data, because the JL error bound is over the randomness
  of Φ.
* ``projection="hadamard"`` (our extension, not in the paper):
  s(j, v) = (-1)^popcount(j & v) with m = 2^⌈log2 d⌉. Columns are exactly orthogonal, so
  the JL bias is zero, and the driver evaluates all d frequencies with one fast
  Walsh-Hadamard transform.

Sizing (corrected): S_τ = Σ_i tanh²(ε_i/2), γ = sqrt(ln(2d/β)/S_τ),
m = ceil(ln(d+1) ln(2/β) / γ²) = ceil(S_τ ln(d+1) ln(2/β) / ln(2d/β)), at least 1. The
paper's Algorithm 5, line 2 prints γ = sqrt(ln(2d/β))/S_τ: the square root in the wrong
place. Its proof needs γ of order sqrt(ln(d/β)/S_τ) (Bassily & Smith's homogeneous
protocol with ε²n replaced by S_τ), and the printed form makes m grow like S_τ²
(8.5·10^6 instead of 3811 rows in one of our checks); we use the proof's γ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from hdp_spark.core.ldp.common import check_beta, check_choice, check_positive_int
from hdp_spark.core.noise.prf import public_seed
from hdp_spark.errors import EpsilonColumnError, ParameterError

__all__ = ["MAX_CATEGORIES", "PROJECTIONS", "FrequencyOracle", "fwht", "jl_dimension"]

Projection = Literal["jl", "hadamard"]
PROJECTIONS: tuple[str, ...] = get_args(Projection)

MAX_CATEGORIES = 2**24
"""Largest domain size d."""

_MAX_M = 2**40
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MASK64 = (1 << 64) - 1


def _mix(z: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    z = z ^ (z >> np.uint64(30))
    z = z * _M1
    z = z ^ (z >> np.uint64(27))
    z = z * _M2
    out: npt.NDArray[np.uint64] = z ^ (z >> np.uint64(31))
    return out


def _parity(z: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """popcount(z) mod 2 for non-negative int64 (bit folding; numpy < 2 has no bitwise_count)."""
    for shift in (32, 16, 8, 4, 2, 1):
        z = z ^ (z >> shift)
    out: npt.NDArray[np.int64] = z & 1
    return out


def jl_dimension(s_tau: float, d: int, beta: float) -> int:
    """m = ceil(S_τ ln(d+1) ln(2/β) / ln(2d/β)), at least 1 (corrected γ, module doc)."""
    if s_tau <= 0:
        return 1
    m = math.ceil(s_tau * math.log(d + 1) * math.log(2.0 / beta) / math.log(2.0 * d / beta))
    return max(1, min(m, _MAX_M))


def fwht(h: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Unnormalized Walsh-Hadamard transform: out[v] = Σ_j h[j] (-1)^popcount(j & v)."""
    a = np.array(h, dtype=np.float64, copy=True)
    n = a.shape[0]
    step = 1
    while step < n:
        view = a.reshape(-1, 2, step)
        x = view[:, 0, :].copy()
        y = view[:, 1, :]
        view[:, 0, :] = x + y
        view[:, 1, :] = x - y
        step *= 2
    return a


@dataclass(frozen=True, slots=True)
class FrequencyOracle:
    """Public parameters of one frequency-oracle protocol (the paper's Algorithm 5).

    Every device and the server must use the same oracle. Build it with :meth:`plan`
    (from the public ε vector) rather than by hand.

    Attributes:
        d: domain size; categories are the integers 0..d-1.
        m: number of projection rows; reports carry j in [0, m).
        phi_seed: public seed of Φ (an integer in [0, 2**128)); drawn from OS entropy by
            :meth:`plan`. It is not secret, but it must not be chosen after seeing data.
        projection: ``"jl"`` (random ±1 signs, the paper) or ``"hadamard"`` (our extension).
        beta: the failure probability m was sized for (informational).
    """

    d: int
    m: int
    phi_seed: int
    projection: Projection = "jl"
    beta: float = 0.05

    def __post_init__(self) -> None:
        check_positive_int("d", self.d, MAX_CATEGORIES)
        check_positive_int("m", self.m, _MAX_M)
        check_choice("projection", self.projection, PROJECTIONS)
        check_beta(self.beta)
        if (
            isinstance(self.phi_seed, bool)
            or not isinstance(self.phi_seed, int)
            or not 0 <= self.phi_seed < 2**128
        ):
            msg = f"`phi_seed` must be an integer in [0, 2**128), got {self.phi_seed!r}."
            raise ParameterError(msg)
        if self.projection == "hadamard" and (self.m & (self.m - 1) or self.m < self.d):
            msg = (
                "`m` must be a power of two >= `d` with projection='hadamard', got "
                f"m={self.m!r}, d={self.d!r}."
            )
            raise ParameterError(msg)

    @classmethod
    def plan(
        cls,
        eps: npt.ArrayLike,
        d: int,
        *,
        beta: float = 0.05,
        projection: Projection = "jl",
        m: int | None = None,
        phi_seed: int | None = None,
    ) -> FrequencyOracle:
        """Size the oracle from the public ε vector of all participants (pass A).

        Args:
            eps: every participant's ε (rows with ε = 0 take no part).
            d: domain size.
            beta: failure probability the JL part is sized for.
            projection: ``"jl"`` or ``"hadamard"``.
            m: override the number of rows (any m >= 1 is valid: the reported radius
                accounts for it; a smaller m than the formula widens the JL term).
            phi_seed: public seed of Φ; default fresh from OS entropy.

        Privacy:
            Touches ε only (public in this model); no data value enters.
        """
        e = np.asarray(eps, dtype=np.float64).ravel()
        bad = int(np.count_nonzero(~np.isfinite(e) | (e < 0)))
        if bad:
            msg = f"`eps` must be finite and >= 0; {bad} value(s) break this rule."
            raise EpsilonColumnError(msg)
        levels, counts = np.unique(e[e > 0], return_counts=True)
        return cls.from_levels(
            levels.tolist(), counts.tolist(), d, beta=beta, projection=projection, m=m,
            phi_seed=phi_seed,
        )

    @classmethod
    def from_levels(
        cls,
        levels: Sequence[float],
        counts: Sequence[int],
        d: int,
        *,
        beta: float = 0.05,
        projection: Projection = "jl",
        m: int | None = None,
        phi_seed: int | None = None,
    ) -> FrequencyOracle:
        """Same as :meth:`plan`, from the ε histogram (distinct values and their counts)."""
        d = check_positive_int("d", d, MAX_CATEGORIES)
        beta = check_beta(beta)
        check_choice("projection", projection, PROJECTIONS)
        if projection == "hadamard":
            size = 1 << max(0, (d - 1).bit_length())
            if m is not None and m != size:
                msg = f"`m` is fixed to 2^ceil(log2 d) = {size} with projection='hadamard'."
                raise ParameterError(msg)
            m_final = size
        elif m is None:
            s_tau = math.fsum(
                c * math.tanh(lv / 2.0) ** 2 for lv, c in zip(levels, counts, strict=True)
                if lv > 0
            )
            m_final = jl_dimension(s_tau, d, beta)
        else:
            m_final = check_positive_int("m", m, _MAX_M)
        seed = public_seed(128) if phi_seed is None else phi_seed
        return cls(d=d, m=m_final, phi_seed=seed, projection=projection, beta=beta)

    def signs(self, j: npt.ArrayLike, v: npt.ArrayLike) -> npt.NDArray[np.int8]:
        """s(j, v) ∈ {±1} (broadcasting j against v)."""
        jj = np.asarray(j, dtype=np.int64)
        vv = np.asarray(v, dtype=np.int64)
        if self.projection == "hadamard":
            out_h: npt.NDArray[np.int8] = (1 - 2 * _parity(np.bitwise_and(jj, vv))).astype(
                np.int8
            )
            return out_h
        lo = np.uint64(self.phi_seed & _MASK64)
        hi = np.uint64(self.phi_seed >> 64)
        first = _mix(lo ^ (jj.astype(np.uint64) * _GOLDEN))
        h = _mix(first ^ (vv.astype(np.uint64) * _GOLDEN + hi))
        out: npt.NDArray[np.int8] = (1 - 2 * (h >> np.uint64(63)).astype(np.int8)).astype(
            np.int8
        )
        return out

    def frequencies(self, h: npt.NDArray[np.float64], rows: npt.NDArray[np.int64]) -> (
        npt.NDArray[np.float64]
    ):
        """Σ_j h_j s(j, v) for every v in [0, d), given the non-zero entries (rows, h)."""
        if self.projection == "hadamard":
            full = np.zeros(self.m, dtype=np.float64)
            np.add.at(full, rows, h)
            out_h: npt.NDArray[np.float64] = fwht(full)[: self.d]
            return out_h
        out = np.zeros(self.d, dtype=np.float64)
        v = np.arange(self.d, dtype=np.int64)
        block = max(1, 2**22 // max(self.d, 1))
        for start in range(0, rows.shape[0], block):
            r = rows[start : start + block]
            s = self.signs(r[:, None], v[None, :]).astype(np.float64)
            out += h[start : start + block] @ s
        return out
