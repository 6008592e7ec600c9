"""Partial-DP MWEM over marginal queries (engine-agnostic driver step).

Privacy-critical: the per-attribute and per-person guarantees of ``hdp_mwem`` rest on the
score sensitivity of the selection step, the exact exponential mechanism and the exact
discrete Gaussian measurements below. Source: §4.2, Algorithm 1 and Theorem 12 of Ghazi,
Kumar, Manurangsi & Steinke, *Algorithms with More Granular Differential Privacy
Guarantees*.

Queries: every cell of every requested marginal, q(u) = 1[u_S = cell], attr(q) = S. The
engines compute the exact cell counts once (the projection mechanism's pass); the rest
runs here over the public domain 𝒳 = ∏ 𝒳_j, holding one weight per record.

Algorithm (T rounds, ℓ queries per round, ε_T <= ε₀/√(2T) as an exact rational):

1. select an ordered ℓ-tuple of pairwise attribute-disjoint queries with probability
   ∝ exp(ε_T · Σ_i |n·q_i(A_t) - c_i|) (c_i the exact count; the exponential mechanism of
   :func:`~hdp_spark.core.noise.exponential_mechanism`, exact rejection sampling, over
   every such tuple). n·q_i(A_t) is rounded to a 1/1024 grid first: a function of public
   and earlier DP values, the same under both neighbours, so the sensitivity is unchanged;
2. measure a_i = clip((c_i + Z_i)/n, 0, 1), Z_i exact discrete Gaussians of variance
   parameter 1/ε_T²;
3. A_{t+1}(u) ∝ A_t(u)·exp(½ Σ_i q_i(u)(a_i - q_i(A_t))) (floats: post-processing).

Output: the answers of Ā = (1/T) Σ_{t=1}^{T} A_t to every query.

Sensitivity. One attribute of one person changes the count of at most one query of an
attribute-disjoint tuple, by at most 1: the score Σ_i |n q_i(A) - c_i| moves by <= 1, and
the measured counts by L2 <= 1. A whole record moves each of the ℓ counts by <= 1: score
<= ℓ, L2² <= ℓ. Per round, the exponential mechanism exp(η·score) with sensitivity Δ is
2ηΔ-bounded-range, hence ½η²Δ²-zCDP (bounded-range analysis, Cesar & Rogers 2021), and
the Gaussian ½Δ₂²/σ² (Canonne, Kamath & Steinke 2020, Theorem 14). Over T rounds:

* attribute: T(½ε_T² + ½ε_T²) = Tε_T² <= ½ε₀², i.e. ε₀-∇₀CDP (Theorem 12);
* person: T(½ℓ²ε_T² + ½ℓε_T²) = (ℓ² + ℓ)Tε_T²/2 <= (ℓ² + ℓ)ε₀²/4, which is at most
  Theorem 12's ½ℓ²ε₀² (both are reported).

A person with several rows (``privacy_unit``, ``max_rows`` = R): only persons with at most
R rows count, with all of them. The neighbours are a person's rows replaced by any rows
(any number), or a person added or removed, so n is private. It is measured first: ñ = n
+ Z₀, Z₀ an exact discrete Gaussian of variance σ₀² = 4R²/ε₀² (a person moves n by at
most R: ρ₀ = R²/(2σ₀²) = ε₀²/8, exactly), clamped to >= 1, and ñ replaces n everywhere
(T's default, the score's ñ·q_i(A), the measurements' 1/ñ): post-processing of a DP
value, the same under both neighbours once released. Changing one attribute leaves n,
hence ñ's law, unchanged (ρ₀ costs nothing per attribute); a person's change costs ρ₀
once more. With ñ fixed, a change of r -> r' rows (r, r' <= R) moves each query's count
c_i by at most max(r, r') <= R, so the score and measurement sensitivities below hold
as they are. Changing attribute j in up to R of a person's rows moves the count of the (at most one)
query of an attribute-disjoint tuple that holds j by <= R: score sensitivity R and
measurement L2 <= R; a whole-person change moves each of the ℓ counts by <= R: score <= ℓR,
L2² <= ℓR². Each round therefore costs R² times a row's, ½(ηR)² + ½R²/σ² (which is also
zCDP's group privacy over R rows), and the mechanism runs at ε₀/R: ε_T <= ε₀/(R√(2T))
(the same exact rounding down), and T's default uses ε₀/R. Per attribute of a person
R²Tε_T² <= ½ε₀²; per person R²(ℓ² + ℓ)Tε_T²/2 <= (ℓ² + ℓ)ε₀²/4 (the reported ρ are these),
plus ρ₀ = ε₀²/8 for ñ.

Practical size: every round touches every record of 𝒳 and the selection enumerates every
ordered attribute-disjoint ℓ-tuple. ``max_domain`` (default 2^20: 20 binary attributes,
or e.g. 8 attributes of 5-6 values) and ``max_tuples`` (default 10^5) bound both; the
spec refuses larger configurations.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from hdp_spark.core.noise import (
    ReleaseKey,
    discrete_gaussian,
    encode_context,
    exponential_mechanism,
)
from hdp_spark.core.partial import accounting
from hdp_spark.core.partial.projection import _workload, check_workload_spec
from hdp_spark.core.partial.spec import AttributeDomain, build_domains, unit_neighbours
from hdp_spark.core.partial.tree import NodeRequest, key_space, key_weights
from hdp_spark.errors import InternalError, ParameterError

__all__ = [
    "MWEM_COLUMNS",
    "MwemResult",
    "MwemSpec",
    "hdp_mwem",
    "mwem_requests",
    "run_mwem",
    "table_tuples",
    "tuple_count",
]

MWEM_COLUMNS: tuple[str, ...] = ("mwem_fraction",)
"""Output column after ``marginal`` and the attribute columns."""

SCORE_GRID = 1024
"""n·q(A) is rounded to multiples of 1/SCORE_GRID before scoring (exact integer scores)."""
EPS_GRID = 2**20
"""ε_T is rounded down to a multiple of 1/EPS_GRID."""
MAX_DOMAIN = 2**20
MAX_TUPLES = 10**5

Floats = npt.NDArray[np.float64]


def table_tuples(workload: Sequence[tuple[int, ...]], per_round: int) -> list[tuple[int, ...]]:
    """Ordered ``per_round``-tuples of marginals with pairwise disjoint attribute sets."""
    return [t for t in itertools.permutations(range(len(workload)), per_round)
            if len({j for i in t for j in workload[i]}) == sum(len(workload[i]) for i in t)]


def tuple_count(workload: Sequence[tuple[int, ...]], sizes: Sequence[int], per_round: int) -> int:
    """Number of ordered attribute-disjoint query tuples (cells of the chosen marginals)."""
    cells = [key_space(s, sizes) for s in workload]
    return sum(math.prod(cells[i] for i in t) for t in table_tuples(workload, per_round))


def eps_round(eps0: float, rounds: int) -> Fraction:
    """ε_T <= ε₀/√(2T), rounded down to the 1/EPS_GRID grid (exact)."""
    return Fraction(math.floor(eps0 / math.sqrt(2 * rounds) * EPS_GRID * (1 - 1e-12)), EPS_GRID)


@dataclass(frozen=True, slots=True)
class MwemSpec:
    """Partial-DP MWEM over marginals (see :func:`hdp_mwem`).

    Attributes:
        domains: one public domain per attribute.
        workload: the marginals (sorted attribute-index tuples); every cell is a query.
        eps0: per-attribute budget ε₀ (ε₀-∇₀CDP: ρ <= ½ε₀² per attribute).
        rounds: T; None: the corrected Theorem 12 choice √(ln|𝒳|)·ε₀n/(√ℓ·ln m), >= 1.
        per_round: ℓ, attribute-disjoint queries selected per round.
        max_domain: largest |𝒳| accepted.
        max_tuples: largest number of ordered attribute-disjoint ℓ-tuples accepted.
        privacy_unit: optional id column: only persons with at most ``max_rows`` rows
            are counted, with all their rows (rows of an id with more, and rows without
            an id, are left out; no error).
        alias: output name inside ``agg``.
        delta: δ of the reported (ε, δ)-DP conversions (CKS20) of the zCDP guarantees.
        max_rows: R, the most rows a counted person has (with ``privacy_unit``); the
            rounds run at ε₀/R (module docstring).
        rho_attribute: ½ε₀² (derived).
        rho_person: (ℓ² + ℓ)ε₀²/4, plus ε₀²/8 for the measured n under a privacy unit
            (derived).
    """

    domains: tuple[AttributeDomain, ...]
    workload: tuple[tuple[int, ...], ...]
    eps0: float
    rounds: int | None = None
    per_round: int = 1
    max_domain: int = MAX_DOMAIN
    max_tuples: int = MAX_TUPLES
    privacy_unit: str | None = None
    alias: str | None = None
    delta: float = 1e-6
    max_rows: int = 1
    rho_attribute: float = field(init=False)
    rho_person: float = field(init=False)

    def __post_init__(self) -> None:
        check_workload_spec(self.domains, self.workload, self.eps0, self.privacy_unit,
                            self.alias, "hdp_mwem", self.max_rows)
        if self.rounds is not None and (isinstance(self.rounds, bool) or not isinstance(
                self.rounds, int) or not 1 <= self.rounds <= 10_000):
            msg = f"`rounds` must be an int in [1, 10000] or None, got {self.rounds!r}."
            raise ParameterError(msg)
        for name, value, top in (("per_round", self.per_round, len(self.domains)),
                                 ("max_domain", self.max_domain, 2**24),
                                 ("max_tuples", self.max_tuples, 10**7)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                msg = f"`{name}` must be an int in [1, {top}], got {value!r}."
                raise ParameterError(msg)
        if (isinstance(self.delta, bool) or not isinstance(self.delta, int | float)
                or not 0 < self.delta < 1):
            msg = f"`delta` must be in (0, 1), got {self.delta!r}."
            raise ParameterError(msg)
        space = math.prod(d.size for d in self.domains)
        if space > self.max_domain:
            msg = (
                "partial-DP MWEM keeps one weight per record of the public domain: the product "
                "of the domain sizes (extra null categories included) must be <= `max_domain` "
                f"= {self.max_domain}, got {space} (practical up to about 2**20, e.g. 20 binary "
                "attributes); use hdp_marginals for larger domains."
            )
            raise ParameterError(msg)
        sizes = [d.size for d in self.domains]
        count = tuple_count(self.workload, sizes, self.per_round)
        if count == 0:
            msg = (f"`per_round` = {self.per_round}: the marginals hold no {self.per_round} "
                   "pairwise attribute-disjoint marginals; lower `per_round`.")
            raise ParameterError(msg)
        if count > self.max_tuples:
            msg = (
                "the selection step enumerates every ordered attribute-disjoint tuple of "
                f"queries: there are {count} for `per_round` = {self.per_round}, more than "
                f"`max_tuples` = {self.max_tuples}; lower `per_round` or request fewer marginals."
            )
            raise ParameterError(msg)
        object.__setattr__(self, "rho_attribute", 0.5 * float(self.eps0) ** 2)
        ell = self.per_round
        object.__setattr__(self, "rho_person",
                           (ell * ell + ell) * float(self.eps0) ** 2 / 4 + self.rho_count)

    @property
    def name(self) -> str:
        """Output name inside ``agg`` (default ``"mwem"``)."""
        return self.alias or "mwem"

    @property
    def sizes(self) -> tuple[int, ...]:
        """Domain sizes (extra null categories included)."""
        return tuple(d.size for d in self.domains)

    @property
    def eps_row(self) -> float:
        """ε₀/R: the per-row budget the rounds run at (ε₀ without a privacy unit)."""
        return float(self.eps0) / self.max_rows

    @property
    def rho_count(self) -> float:
        """ρ₀ of the measured ñ: ε₀²/8 under a privacy unit (module docstring), else 0
        (n public)."""
        return 0.0 if self.privacy_unit is None else float(self.eps0) ** 2 / 8

    def count_sigma2(self) -> Fraction:
        """σ₀² = 4R²/ε₀² (exact) of ñ's discrete Gaussian under a privacy unit."""
        return Fraction(4 * self.max_rows * self.max_rows) / Fraction(float(self.eps0)) ** 2

    def rounds_for(self, n: float) -> int:
        """T: the caller's, or √(ln|𝒳|)·ε₀n/(√ℓ·ln m) (corrected Theorem 12; ε₀/R with
        ``max_rows`` = R), clipped to [1, 10000] (n public, or ñ under a privacy unit)."""
        if self.rounds is not None:
            return self.rounds
        m = sum(key_space(s, self.sizes) for s in self.workload)
        space = math.prod(self.sizes)
        t = math.sqrt(math.log(max(space, 2))) * self.eps_row * n / (
            math.sqrt(self.per_round) * math.log(max(m, 2)))
        return int(min(max(round(t), 1), 10_000))

    def eps_round_for(self, rounds: int) -> Fraction:
        """ε_T <= ε₀/(R√(2T)), exact (:func:`eps_round` at the per-row budget)."""
        return eps_round(self.eps_row, rounds)

    def rho_for(self, n: float) -> tuple[float, float]:
        """(ρ per attribute, ρ per person) of a run normalised by ``n`` (n public, or ñ
        under a privacy unit): R²·T·ε_T² and R²·(ℓ² + ℓ)·T·ε_T²/2 (+ ρ₀ under a unit)
        with T = :meth:`rounds_for`, ε_T = :meth:`eps_round_for` and R = ``max_rows``
        (the release reports these; ``hdp-release plan`` predicts its charge from them)."""
        rounds = self.rounds_for(n)
        eps_t = float(self.eps_round_for(rounds))
        rows_sq = self.max_rows * self.max_rows
        return (rows_sq * rounds * eps_t**2,
                rows_sq * (self.per_round**2 + self.per_round) * rounds * eps_t**2 / 2
                + self.rho_count)


def hdp_mwem(
    cols: Sequence[str],
    *,
    domains: Mapping[str, Sequence[object]],
    eps0: float,
    k: int | None = None,
    marginals: Sequence[Sequence[str]] | None = None,
    rounds: int | None = None,
    per_round: int = 1,
    other: Mapping[str, object] | None = None,
    max_domain: int = MAX_DOMAIN,
    max_tuples: int = MAX_TUPLES,
    privacy_unit: str | None = None,
    alias: str | None = None,
    delta: float = 1e-6,
    max_rows: int = 1,
) -> MwemSpec:
    """Partial-DP MWEM: a synthetic distribution answering marginal queries (§4.2).

    Pass the result to ``hdp_spark.pandas.mwem`` or ``hdp_spark.spark.mwem``. Algorithm 1
    of Ghazi, Kumar, Manurangsi & Steinke, *Algorithms with More Granular Differential
    Privacy Guarantees*: each round selects ``per_round`` attribute-disjoint queries at
    once by the exponential mechanism, measures them with discrete Gaussian noise, and
    applies the multiplicative-weights update over the public domain.

    Practical only for small public domains: one weight per record of 𝒳 = ∏ domains
    (refused above ``max_domain``, default 2^20 ≈ 20 binary attributes) and an enumeration
    of every ordered attribute-disjoint query tuple (refused above ``max_tuples``).

    Args:
        cols: attribute columns.
        domains: public values of every attribute.
        eps0: per-attribute budget ε₀ (zCDP form: ρ <= ½ε₀² per attribute).
        k: queries are every cell of all k-way marginals; or
        marginals: the marginals (lists of columns) whose cells are the queries.
        rounds: T (default: the corrected Theorem 12 choice from the public n).
        per_round: ℓ (1 is standard MWEM; up to d/k attribute-disjoint queries).
        other: ``{col: value}`` absorbing null/out-of-domain values.
        max_domain: largest accepted |𝒳|.
        max_tuples: largest accepted number of ordered attribute-disjoint ℓ-tuples.
        privacy_unit: optional id column: only persons with at most ``max_rows`` rows
            are counted, with all their rows (rows of an id with more, and rows without
            an id, are left out; no error).
        alias: output name inside ``agg`` (default ``"mwem"``).
        delta: δ of the (ε, δ)-DP conversions the report gives (``eps_delta_*_cks20``);
            it changes no noise.
        max_rows: with ``privacy_unit``, the most rows a counted person has (R, default
            1): the rounds run at ε₀/R, so a person's R rows cost what one row did.

    Raises:
        ParameterError: a parameter breaks its rule, or the domain or tuple count is too
            large to be practical.

    Privacy:
        Protected unit: one attribute of one person, ρ = ½ε₀² (ε₀-∇₀CDP); one person's
        whole record, ρ = (ℓ² + ℓ)ε₀²/4 (replacement neighbours, n public). ε₀ enters
        through ε_T <= ε₀/√(2T) (exponential mechanism exp(ε_T·score), score sensitivity 1
        per attribute and ℓ per person; Gaussian variance 1/ε_T² on counts). Public: cols,
        domains, other, the marginals, T, ℓ. Null/out-of-domain values are recoded.
        With ``max_rows`` = R: score sensitivity R per attribute (ℓR per person), so
        ε_T <= ε₀/(R√(2T)) gives the same ρ per attribute and per person of a person's
        R rows; the neighbours are then a person's rows replaced by any number of rows,
        or a person added or removed (n private: a noisy ñ, ρ₀ = ε₀²/8 more per person,
        replaces it; T is then a DP output too: module docstring).
    """
    doms = build_domains(cols, domains, other)
    names = tuple(d.column for d in doms)
    return MwemSpec(doms, _workload(names, k, marginals), eps0, rounds, per_round,
                    max_domain, max_tuples, privacy_unit, alias, delta, max_rows)


def mwem_requests(spec: MwemSpec) -> list[NodeRequest]:
    """One count request per marginal (node index = position in the workload)."""
    return [NodeRequest(i, s, key_weights(s, spec.sizes), ())
            for i, s in enumerate(spec.workload)]


@dataclass(frozen=True, slots=True)
class MwemResult:
    """Answers of the averaged synthetic distribution.

    Attributes:
        rows: per (marginal, cell): ``marginal``, one key per attribute, ``mwem_fraction``.
        report: public metadata (budget, T, ε_T) and the chosen tuples (DP outputs).
        distribution: Ā over 𝒳 (flat, C order).
    """

    rows: tuple[dict[str, Any], ...]
    report: dict[str, Any]
    distribution: Floats


def _marginal(a: Floats, sizes: tuple[int, ...], s: tuple[int, ...]) -> Floats:
    other = tuple(j for j in range(len(sizes)) if j not in s)
    out: Floats = a.reshape(sizes).sum(axis=other).ravel()
    return out


def run_mwem(spec: MwemSpec, counts: Sequence[Mapping[int, int]],
             release_key: ReleaseKey) -> MwemResult:
    """Run T rounds over the exact cell counts (one table per marginal)."""
    sizes = spec.sizes
    exact = [np.array([int(t.get(c, 0)) for c in range(key_space(s, sizes))], dtype=np.int64)
             for s, t in zip(spec.workload, counts, strict=True)]
    n_exact = int(exact[0].sum())
    unit = spec.privacy_unit is not None
    if n_exact == 0 and not unit:
        msg = ("the table has no rows: MWEM answers are normalised by the public n, which must "
               "be > 0.")
        raise ParameterError(msg)
    n: float = float(n_exact)
    if unit:  # n private: ñ = n + Z₀ first, from the release's stream (module docstring)
        count_stream = release_key.stream(encode_context(
            ("mwem/n", spec.count_sigma2(), spec.workload, sizes,
             tuple(tuple(e.tolist()) for e in exact))))
        n = float(max(n_exact + discrete_gaussian(spec.count_sigma2(), count_stream), 1))
    rounds = spec.rounds_for(n)
    eps_t = spec.eps_round_for(rounds)
    if eps_t <= 0:  # pragma: no cover - rounds <= 10000 and eps0 > 0 keep it positive
        msg = "`eps0` is too small for the number of rounds."
        raise ParameterError(msg)
    sigma2 = 1 / eps_t**2
    table_sets = table_tuples(spec.workload, spec.per_round)
    cells = [len(e) for e in exact]
    tuples = [(ts, cs) for ts in table_sets
              for cs in itertools.product(*(range(cells[i]) for i in ts))]
    stream = release_key.stream(encode_context(
        ("mwem", eps_t, rounds, spec.per_round, spec.workload, sizes,
         tuple(tuple(e.tolist()) for e in exact))))
    space = math.prod(sizes)
    log_a = np.zeros(space)
    total = np.zeros(space)
    chosen: list[list[tuple[int, int]]] = []
    grid_eps = eps_t / SCORE_GRID
    for _ in range(rounds):
        a = np.exp(log_a - log_a.max())
        a /= a.sum()
        total += a
        answers = [_marginal(a, sizes, s) for s in spec.workload]
        # |round(n q(A) G) - c G|: integer scores; the rounded term is public.
        err = [np.abs(np.rint(ans * n * SCORE_GRID).astype(np.int64) - e * SCORE_GRID)
               for ans, e in zip(answers, exact, strict=True)]
        scores = [sum(int(err[i][c]) for i, c in zip(ts, cs, strict=True)) for ts, cs in tuples]
        ts, cs = tuples[exponential_mechanism(scores, grid_eps, stream)]
        picked = list(zip(ts, cs, strict=True))
        chosen.append(picked)
        update = np.zeros(sizes)
        for i, c in picked:
            measured = (int(exact[i][c]) + discrete_gaussian(sigma2, stream)) / n
            measured = min(max(measured, 0.0), 1.0)
            s = spec.workload[i]
            indicator = np.zeros(cells[i])
            indicator[c] = 0.5 * (measured - float(answers[i][c]))
            update += indicator.reshape(tuple(sizes[j] if j in s else 1
                                              for j in range(len(sizes))))
        log_a += update.ravel()
    avg = total / rounds
    if not np.isclose(avg.sum(), 1.0):  # pragma: no cover
        msg = "MWEM distribution does not sum to 1"
        raise InternalError(msg)
    rows: list[dict[str, Any]] = []
    for s in spec.workload:
        label = ",".join(spec.domains[j].column for j in s)
        fitted = _marginal(avg, sizes, s)
        for cell in range(len(fitted)):
            codes: dict[int, int] = {}
            rest = cell
            for j in reversed(s):
                rest, codes[j] = divmod(rest, sizes[j])
            row: dict[str, Any] = {"marginal": label}
            for j, dom in enumerate(spec.domains):
                row[dom.column] = dom.value(codes[j]) if j in codes else None
            row["mwem_fraction"] = float(fitted[cell])
            rows.append(row)
    rho_attr, rho_person = spec.rho_for(n)
    report = {
        "attributes": [d.column for d in spec.domains],
        "neighbours": unit_neighbours(spec.privacy_unit, spec.max_rows),
        "eps0": float(spec.eps0),
        "rounds": rounds,
        "per_round": spec.per_round,
        "eps_round": float(eps_t),
        "rho_attribute": rho_attr,
        "rho_person": rho_person,
        "rho_person_theorem12": 0.5 * spec.per_round**2 * float(spec.eps0) ** 2,
        "delta": float(spec.delta),
        "eps_delta_attribute_cks20": accounting.eps_cks20(rho_attr, spec.delta),
        "eps_delta_person_cks20": accounting.eps_cks20(rho_person, spec.delta),
        "n": round(n),
        "selected": [[(int(i), int(c)) for i, c in p] for p in chosen],
        "unsafe_seed": release_key.unsafe,
        "max_rows": spec.max_rows,
    }
    return MwemResult(tuple(rows), report, avg)
