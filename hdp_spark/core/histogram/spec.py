"""Histogram (HPF) specification and per-level weights.

HPF is Algorithm 1 (§3) of Chaudhuri & Courtade, *Private Estimation When Data and Privacy
Demands Are Correlated* (FORC 2025), with the weights of its Table 1.

Privacy-critical: row i's ε_i-DP guarantee for the released frequencies depends on the
weights computed here (:func:`histogram_weights`, a function of the public ε histogram
only); the privacy argument is in :mod:`hdp_spark.core.histogram.finalize`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from hdp_spark.core.levels import EpsGrid
from hdp_spark.core.mean.spec import check_column_name, check_eps_grid
from hdp_spark.core.mean.weights import (
    Weights,
    agnostic_phi,
    best_of_solvers,
    normalize,
    proportional_phi,
    solve_l1,
    turbo_weights,
    uniform_weights,
)
from hdp_spark.errors import InternalError, ParameterError

HistogramMethod = Literal[
    "hpf-a", "hpf-cp", "hpf-ce", "hpf-wp", "hpf-we", "hpf-ct", "hpf-wt", "uniform",
    "proportional", "k-rappor-c", "k-rappor-w", "auto",
]
HISTOGRAM_METHODS: tuple[str, ...] = get_args(HistogramMethod)
RAPPOR_METHODS: tuple[str, ...] = ("k-rappor-c", "k-rappor-w")
"""The local-DP k-RAPPOR baseline (correlated / weakly-correlated combination weights)."""
LAPLACE_METHODS: tuple[str, ...] = tuple(
    x for x in HISTOGRAM_METHODS if x not in (*RAPPOR_METHODS, "auto"))
"""The methods released by HPF's Laplace mechanism (all but the k-RAPPOR baseline)."""

MAX_CATEGORIES = 100_000
"""Largest public domain accepted (every bin is released, so k drives the cost)."""

MAX_INT_LABEL = 2**53
"""Integer labels must satisfy |label| <= 2**53, so a float column compares exactly."""

TRIVIAL_FREQUENCY = 0.5
"""Per-bin output when no row may carry weight: the paper's trivial estimator 1/2 (§2.2)."""


def _label_kind(value: object) -> str | None:
    if isinstance(value, str):
        return "str"
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return "int"
    return None


def _canonical(value: object) -> str | int:
    return str(value) if isinstance(value, str) else int(value)  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class HistogramSpec:
    """A heterogeneous-DP histogram over a public domain (see :func:`hdp_spark.hdp_histogram`).

    Attributes:
        column: the category column.
        eps: column holding each row's privacy demand ε_i.
        categories: the public domain, all strings or all integers, no duplicates.
        method: weighting rule; ``"auto"`` chooses one per group from public facts
            (:mod:`hdp_spark.core.histogram.auto`).
        beta: failure probability of the per-bin intervals, and β of the PAC methods.
        other: label of the bin receiving null and out-of-domain values (appended to the
            domain unless it is one of ``categories``), or None to release no such bin.
        eps_grid: optional geometric grid that ε is rounded down onto.
        alias: name of the histogram (noise domain separation); default
            ``"<column>_histogram"``.
    """

    column: str
    eps: str
    categories: tuple[str | int, ...]
    method: HistogramMethod = "hpf-a"
    beta: float = 0.05
    other: str | int | None = "other"
    eps_grid: EpsGrid | None = None
    alias: str | None = None

    def __post_init__(self) -> None:
        check_column_name("column", self.column)
        check_column_name("eps", self.eps)
        raw = self.categories
        if isinstance(raw, str | bytes) or not isinstance(raw, Iterable):
            msg = (
                "`categories` must be a list or tuple of labels, got "
                f"{type(raw).__name__}."
            )
            raise ParameterError(msg)
        cats = list(raw)
        if not cats:
            msg = "`categories` must contain at least one label, got an empty list."
            raise ParameterError(msg)
        if len(cats) > MAX_CATEGORIES:
            msg = f"`categories` may hold at most {MAX_CATEGORIES} labels, got {len(cats)}."
            raise ParameterError(msg)
        kinds = {_label_kind(c) for c in cats}
        if None in kinds or len(kinds) != 1:
            first = _label_kind(cats[0])
            pos = next(
                i for i, c in enumerate(cats) if first is None or _label_kind(c) != first
            )
            msg = (
                "`categories` must be all strings or all integers (no bool, float or null); "
                f"got {cats[pos]!r} at position {pos}."
            )
            raise ParameterError(msg)
        canon = tuple(_canonical(c) for c in cats)
        kind = "str" if isinstance(canon[0], str) else "int"
        if kind == "int":
            for c in canon:
                if abs(int(c)) > MAX_INT_LABEL:
                    msg = f"integer `categories` must satisfy |label| <= 2**53, got {c!r}."
                    raise ParameterError(msg)
        seen: set[str | int] = set()
        for c in canon:
            if c in seen:
                msg = f"`categories` must not repeat a label; {c!r} appears twice."
                raise ParameterError(msg)
            seen.add(c)
        object.__setattr__(self, "categories", canon)
        if self.other is not None:
            if _label_kind(self.other) != kind:
                hint = "e.g. other=-1, " if kind == "int" else ""
                msg = (
                    f"`other` must be a label of the same type as `categories` ({kind}; "
                    f"{hint}or None to release no other bin), got {self.other!r}."
                )
                raise ParameterError(msg)
            other = _canonical(self.other)
            if kind == "int" and abs(int(other)) > MAX_INT_LABEL:
                msg = f"integer `other` must satisfy |label| <= 2**53, got {other!r}."
                raise ParameterError(msg)
            object.__setattr__(self, "other", other)
        if self.method not in HISTOGRAM_METHODS:
            msg = (
                f"`method` must be one of {', '.join(HISTOGRAM_METHODS)}; got {self.method!r}."
            )
            raise ParameterError(msg)
        if isinstance(self.beta, bool) or not isinstance(self.beta, int | float):
            msg = f"`beta` must be a number, got {self.beta!r}."
            raise ParameterError(msg)
        if not 0 < self.beta < 1:
            msg = f"`beta` must be in (0, 1), got {self.beta!r}."
            raise ParameterError(msg)
        if self.method in ("hpf-ce", "hpf-we") and self.k < 2:
            msg = (
                f"`method` {self.method!r} needs at least 2 released bins (its log factor is "
                f"ln k), got {self.k}; add a category or an `other` bin."
            )
            raise ParameterError(msg)
        check_eps_grid(self.eps_grid)
        if self.alias is not None:
            check_column_name("alias", self.alias)

    @property
    def name(self) -> str:
        """Name of the histogram (default ``"<column>_histogram"``)."""
        return self.alias or f"{self.column}_histogram"

    @property
    def kind(self) -> str:
        """``"str"`` or ``"int"``: the type of the labels."""
        return "str" if isinstance(self.categories[0], str) else "int"

    @property
    def unmatched_code(self) -> int:
        """Code of rows that are null or match no category (= number of categories)."""
        return len(self.categories)

    @property
    def appends_other(self) -> bool:
        """True when ``other`` is an extra bin after the categories."""
        return self.other is not None and self.other not in self.categories

    @property
    def labels(self) -> tuple[str | int, ...]:
        """Labels of the released bins, in output order."""
        if self.appends_other:
            assert self.other is not None
            return (*self.categories, self.other)
        return self.categories

    @property
    def k(self) -> int:
        """Number of released (noised) bins."""
        return len(self.categories) + (1 if self.appends_other else 0)

    @property
    def other_bin(self) -> int | None:
        """Released bin that receives the unmatched rows (None: no bin)."""
        if self.other is None:
            return None
        return self.categories.index(self.other) if not self.appends_other else self.k - 1

    @property
    def log_factor(self) -> float:
        """L of the optimized methods: ln(k/β) for PAC (cp, wp, ct, wt), ln k for MSE (ce, we).

        The Turbo methods exist only in the PAC form (Algorithm 3, FORC paper App. M, uses
        log(k/β)); the paper's App. M section heading calls them "HPF-CF/WF", a typo for CT/WT.
        """
        if self.method in ("hpf-ce", "hpf-we"):
            return math.log(self.k)
        return math.log(self.k / self.beta)

    def code_of(self) -> dict[str | int, int]:
        """Label -> code (the driver-side half of the category matching)."""
        return {c: i for i, c in enumerate(self.categories)}


def rappor_phi(v: Sequence[float], m: Sequence[int], log_factor: float) -> list[float]:
    """phi(ε) = 1/(n + L·coth(ε/4)/ε): k-RAPPOR's combination weights (correlated form).

    The FORC paper bounds the k-RAPPOR error by 2k·exp(-α²/(8 Σ w_i² v_i)) with the
    sub-Gaussian proxy v_i = coth(ε_i/4)/ε_i (eq. 126) and minimises ||w - 1/n||₁² +
    L·Σ w_i² v_i (eq. 127, constants dropped); with ||·||₁² replaced by n||·||₂² (as for
    Turbo) the stationarity condition n(w_i - 1/n) + L·v_i·w_i = const on the simplex gives
    w_i ∝ 1/(n + L·v_i). ε = +inf: v = 0; ε = 0 (and any ε whose v overflows): weight 0.
    """
    n = sum(m)
    return [1.0 / (n + log_factor * p) for p in map(_rappor_proxy, v)]


def _rappor_proxy(x: float) -> float:
    """v = coth(ε/4)/ε (0 for ε = +inf, +inf for ε = 0 or when it overflows)."""
    if math.isinf(x):
        return 0.0
    t = math.tanh(x / 4) if x > 0 else 0.0
    return math.inf if t == 0 else 1.0 / (t * x)


def rappor_weights(v: Sequence[float], m: Sequence[int], log_factor: float,
                   weak: bool) -> Weights:
    """k-RAPPOR combination weights: correlated form (:func:`rappor_phi`), or for the
    weakly-correlated setting the better, under (n||w - 1/n||₂² ∧ L||w||₂²) + L·Σ w_i² v_i
    (eq. 128 with the same relaxation), of that and argmin L||w||₂² + L·Σ w_i² v_i, whose
    stationarity condition w_i (1 + v_i) = const gives w_i ∝ 1/(1 + v_i). A function of
    the ε histogram only."""
    wa = normalize(v, m, rappor_phi(v, m, log_factor), math.nan)
    if not weak:
        return wa
    proxy = [_rappor_proxy(x) for x in v]
    phi_b = [0.0 if math.isinf(p) else 1.0 / (1.0 + p) for p in proxy]
    wb = normalize(v, m, phi_b, math.nan)
    n = sum(m)

    def objective(w: Weights) -> float:
        ws = [float(x) for x in w.w]
        l2 = sum(c * x * x for x, c in zip(ws, m, strict=True))
        dev = n * sum(c * (x - 1 / n) ** 2 for x, c in zip(ws, m, strict=True))
        var = sum(c * x * x * p for x, c, p in zip(ws, m, proxy, strict=True) if x)
        return min(dev, log_factor * l2) + log_factor * var

    if wa.trivial or wb.trivial:
        return wb if wa.trivial else wa
    return wa if objective(wa) <= objective(wb) else wb


def histogram_weights(spec: HistogramSpec, v: Sequence[float], m: Sequence[int]) -> Weights:
    """Per-level weights of ``spec.method`` for the ε histogram (levels v ascending, counts m).

    * ``hpf-a``: w ∝ 1 - exp(-ε) (HPF-A, Table 1 of the paper);
    * ``hpf-cp`` / ``hpf-ce``: solver S1 with L = ln(k/β) / ln k (objective eq. 6);
    * ``hpf-wp`` / ``hpf-we``: both branches, S1(L) and S2(c = L), keeping the smaller
      r_WC (objective eq. 7, whose min of two terms splits into two branches);
    * ``hpf-ct`` / ``hpf-wt``: the "Turbo" relaxations of cp / wp (Algorithm 3, App. M):
      ||w - 1/n||₁² replaced by n||w - 1/n||₂², solved by S2 alone, c = L²/n (CT), and
      for WT also c = L (the second branch), keeping the smaller WT objective;
    * ``k-rappor-c`` / ``k-rappor-w``: the paper's local-DP baseline (App. B.1, eqs.
      126-128): each row's one-hot report has every bit flipped with probability
      1/(1 + e^(ε/2)); the unbiased reports are combined with w ∝ 1/(n + L·v),
      v = coth(ε/4)/ε (the correlated objective (127) with ||w - 1/n||₁² relaxed to
      n||w - 1/n||₂², which has this closed form), or for ``-w`` the better of that and
      w ∝ 1/(1 + v) under the weakly-correlated objective (128); L = ln(k/β); v = 0 for
      ε = +inf, weight 0 for ε = 0;
    * ``uniform``: everyone at ε_min (trivial when some row has ε = 0);
    * ``proportional``: w ∝ ε (all weight on the public rows when there are some);
    * ``auto``: the weights of the group's choice (:mod:`hdp_spark.core.histogram.auto`).

    Weights depend on (v, m, k, β) only, never on the data.

    Privacy:
        A function of the public ε histogram; see the module docstring for the mechanism.
    """
    v, m = list(v), list(m)
    if spec.method == "auto":  # the group's choice (a function of (v, m, k, β))
        from hdp_spark.core.histogram.auto import resolve_histogram  # here: import cycle

        spec = resolve_histogram(spec, v, m)
    method = spec.method
    if method == "hpf-a":
        return normalize(v, m, agnostic_phi(v), math.nan)
    if method in ("hpf-cp", "hpf-ce"):
        phi, tau = solve_l1(v, m, spec.log_factor)
        return normalize(v, m, phi, tau)
    if method in ("hpf-wp", "hpf-we"):
        return best_of_solvers(v, m, spec.log_factor)
    if method in ("hpf-ct", "hpf-wt"):
        return turbo_weights(v, m, spec.log_factor, weak=method == "hpf-wt")
    if method in RAPPOR_METHODS:
        return rappor_weights(v, m, spec.log_factor, weak=method == "k-rappor-w")
    if method == "uniform":
        return uniform_weights(v, m)
    if method == "proportional":
        phi = proportional_phi(v, m)
        public = any(math.isinf(x) for x, c in zip(v, m, strict=True) if c)
        return normalize(v, m, phi, math.nan if public else math.inf)
    msg = f"unknown histogram method {method!r}"
    raise InternalError(msg)

