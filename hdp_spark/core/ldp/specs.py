"""Specifications of the local-DP aggregators (validated once, rendered by every engine).

Build them with :func:`hdp_spark.ldp.ldp_mean`, :func:`~hdp_spark.ldp.ldp_mean_vector` and
:func:`~hdp_spark.ldp.ldp_distribution`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hdp_spark.core.ldp.common import (
    LDP_WEIGHTS,
    LdpWeights,
    check_beta,
    check_choice,
    check_finite,
    check_positive_int,
)
from hdp_spark.core.ldp.oracle import FrequencyOracle
from hdp_spark.core.mean.spec import check_bounds, check_column_name
from hdp_spark.errors import ParameterError

__all__ = ["MAX_VECTOR_DIM", "LdpDistributionSpec", "LdpMeanSpec", "LdpSpec", "LdpVectorMeanSpec"]

MAX_VECTOR_DIM = 65_536
"""Largest dimension of a Duchi vector mean."""

ScalarMechanism = Literal["laplace", "rr"]


def _check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        msg = f"`{name}` must be True or False, got {value!r}."
        raise ParameterError(msg)


def _check_shared(beta: object, weights: object, fallback: object, alias: object) -> None:
    """The parameters every LDP spec has: β, the weighting rule, fallback and alias."""
    check_beta(beta)
    check_choice("weights", weights, LDP_WEIGHTS)
    _check_bool("fallback", fallback)
    if alias is not None:
        check_column_name("alias", alias)


@dataclass(frozen=True, slots=True)
class LdpMeanSpec:
    """Weighted mean of one column of scalar LDP reports (Aliakbarpour et al., Alg. 1 or 2).

    Attributes:
        report: column of reports (Laplace: real numbers in data units; RR: ±1).
        eps: column holding the ε_i each report was randomized with.
        mechanism: ``"laplace"`` or ``"rr"``: the randomizer that produced the reports.
        lower: public lower bound of the data the randomizer was given.
        upper: public upper bound.
        beta: failure probability of the reported interval.
        weights: ``"paper"``, ``"uniform"`` or ``"inverse_variance"``.
        fallback: output the midpoint when the interval's radius reaches the domain radius.
        alias: prefix of the output columns (default ``"<report>_mean"``).
    """

    report: str
    eps: str
    mechanism: ScalarMechanism
    lower: float = -1.0
    upper: float = 1.0
    beta: float = 0.05
    weights: LdpWeights = "paper"
    fallback: bool = True
    alias: str | None = None

    def __post_init__(self) -> None:
        check_column_name("report", self.report)
        check_column_name("eps", self.eps)
        check_choice("mechanism", self.mechanism, ("laplace", "rr"))
        check_bounds(self.lower, self.upper)
        _check_shared(self.beta, self.weights, self.fallback, self.alias)

    @property
    def name(self) -> str:
        """Output column prefix."""
        return self.alias or f"{self.report}_mean"


@dataclass(frozen=True, slots=True)
class LdpVectorMeanSpec:
    """Weighted mean of d-dimensional Duchi reports (Aliakbarpour et al., Alg. 3 with 4).

    Attributes:
        report: array column of reports (length d, norm B_i each).
        eps: column holding each row's ε_i.
        d: dimension.
        radius: public radius r of the ℓ2 ball the data lives in.
        beta: failure probability of the reported ℓ2 ball.
        weights: ``"paper"`` (ε²), ``"uniform"`` or ``"inverse_variance"`` (tanh²(ε/2)).
        fallback: output the zero vector when the radius of the confidence ball reaches r.
        alias: prefix of the output columns (default ``"<report>_mean"``).
    """

    report: str
    eps: str
    d: int
    radius: float = 1.0
    beta: float = 0.05
    weights: LdpWeights = "paper"
    fallback: bool = True
    alias: str | None = None

    def __post_init__(self) -> None:
        check_column_name("report", self.report)
        check_column_name("eps", self.eps)
        check_positive_int("d", self.d, MAX_VECTOR_DIM)
        r = check_finite("radius", self.radius)
        if not r > 0:
            msg = f"`radius` must be > 0, got {self.radius!r}."
            raise ParameterError(msg)
        _check_shared(self.beta, self.weights, self.fallback, self.alias)

    @property
    def name(self) -> str:
        """Output column prefix."""
        return self.alias or f"{self.report}_mean"


@dataclass(frozen=True, slots=True)
class LdpDistributionSpec:
    """Distribution over [d] from frequency-oracle reports (Aliakbarpour et al., Alg. 5).

    Attributes:
        index: integer column with each report's row index j in [0, m).
        sign: column with each report's sign b (±1).
        eps: column holding each row's ε_i.
        oracle: the public protocol parameters the devices used.
        beta: failure probability of the reported ℓ∞ radius.
        weights: ``"paper"`` / ``"inverse_variance"`` (both tanh²(ε/2)) or ``"uniform"``.
        fallback: output the uniform distribution when the radius reaches 1.
        alias: prefix of the output columns (default ``"<index>_pmf"``).
    """

    index: str
    sign: str
    eps: str
    oracle: FrequencyOracle
    beta: float = 0.05
    weights: LdpWeights = "paper"
    fallback: bool = True
    alias: str | None = None

    def __post_init__(self) -> None:
        check_column_name("index", self.index)
        check_column_name("sign", self.sign)
        check_column_name("eps", self.eps)
        if not isinstance(self.oracle, FrequencyOracle):
            msg = f"`oracle` must be a FrequencyOracle, got {type(self.oracle).__name__}."
            raise ParameterError(msg)
        _check_shared(self.beta, self.weights, self.fallback, self.alias)

    @property
    def name(self) -> str:
        """Output column prefix."""
        return self.alias or f"{self.index}_pmf"


LdpSpec = LdpMeanSpec | LdpVectorMeanSpec | LdpDistributionSpec
