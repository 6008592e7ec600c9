"""Marginals under per-attribute DP: the projection mechanism (engine-agnostic).

Privacy-critical: the per-attribute and per-person guarantees of ``hdp_marginals`` are set
by the noise variance solved here and the sensitivities below; the projection is
post-processing. Source: §4.1 (Theorem 11) of Ghazi, Kumar, Manurangsi & Steinke,
*Algorithms with More Granular Differential Privacy Guarantees*.

Mechanism
---------
Queries: a workload W of marginals (attribute subsets S, sorted), each the full contingency
table over the public domains ∏_{j∈S} 𝒳_j. Per record u, 𝒬(u) stacks one indicator vector
per table (a 1 at u's cell). The engines compute the exact counts c = Σ_i 𝒬(x_i) (one
aggregation pass, no per-row Python); then

1. noisy counts  c̃ = c + Z, Z_k independent exact discrete Gaussians of variance
   parameter σ² (:func:`~hdp_spark.core.noise.exact.discrete_gaussian`, keyed stream bound
   to every exact count), Y = c̃ / n (n public: replacement neighbours);
2. Ŷ = argmin_{y ∈ conv{𝒬(u) : u ∈ 𝒳}} ‖y − Y‖₂: the closest vector of *consistent*
   marginals (those of some distribution over 𝒳), found by pairwise Frank-Wolfe over 𝒳
   (:func:`project`). It reads only Y and public facts: post-processing.

Sensitivities (count space, integer vectors). Changing attribute j of one person moves
that person's cell in every table S ∋ j (one count -1, one +1) and in no other table:
L2² = 2·deg(j), deg(j) = #{S ∈ W : j ∈ S}. A whole-record change moves the cell of at most
every table: L2² = 2·|W|. This is the paper's partial diameter Δ₀ (here Δ₀² = 2·max_j deg(j);
for all k-way marginals deg(j) = C(d-1, k-1), the spec's "contingency tables" case, √2 times
the conjunction case) and diameter Δ (Δ² = 2|W|).

Guarantees (zCDP, ρ = ½ε²). The discrete Gaussian with L2 sensitivity Δ is ½(Δ/σ)²-zCDP
(Canonne, Kamath & Steinke 2020, Theorem 14). With σ² >= Δ₀²/ε₀² (rounded up):

* attribute j: ρ_j = deg(j)/σ² <= ½ε₀²; the release is ε₀-∇₀CDP (Theorem 11). Changing a
  set J of one person's attributes costs at most Σ_{j∈J} ρ_j (the tables hit are at most
  Σ deg), which is <= ½|J|²ε₀²;
* person: ρ_person = |W|/σ², i.e. ε = ε₀·Δ/Δ₀ (Theorem 11), against ½d²ε₀² by
  Proposition 8;
* (ε, δ)-DP from ρ by the conversions of :mod:`.accounting` (CKS20, BS16 shown).

A person with several rows (``privacy_unit``, ``max_rows`` = R): only persons with at most
R rows count, with all of them (whether a person counts depends on their number of rows
only). The neighbours are a person's rows replaced by any rows, any number of them, or a
person added or removed, so n is private. Changing attribute j in up to R of
a person's rows moves up to R of their cells in every table S ∋ j, each by the vector
above: by the triangle inequality the count vector moves by L2 <= R·√(2 deg(j)), attained
when all R rows leave one cell for the same other cell; a whole-person change moves it by
<= R·√(2|W|). So Δ₀ and Δ scale by R and ρ by R², which is also zCDP's group privacy
(ρ-zCDP per row gives R²ρ over R rows). σ² = R²·2·max deg/ε₀² (exact, rounded up), i.e.
the mechanism at ε₀/R, and ρ_j = R²deg(j)/σ² <= ½ε₀², ρ_person = R²|W|/σ². A person
counted nowhere changes nothing. When their number of rows changes too (r -> r' rows,
r, r' <= R, either possibly 0 or "counts nowhere"), each table's count vector moves by
a - b, a and b non-negative with |a|₁ <= R, |b|₁ <= R; after cancelling common cells
their supports are disjoint, so ‖a - b‖₂² <= ‖a‖₁² + ‖b‖₁² <= 2R²: the same bound per
table, hence the same ρ_person (and R²|W|/(2σ²) for adding or removing a person). n is
then never used: Y = c̃/ñ with ñ the inverse-variance mean of the marginals' noisy totals
Σ_k c̃_k (each n plus |cells| noises of variance σ²), clamped to >= 1: post-processing of
the noisy counts, so the release and the report (``n`` holds round(ñ)) depend on the
rows only through DP values, and an empty table is no error.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from hdp_spark.core.noise import ReleaseKey, discrete_gaussian, encode_context
from hdp_spark.core.partial import accounting
from hdp_spark.core.partial.consistency import Projection, project
from hdp_spark.core.partial.projection_budget import ProjectionBudget, solve_projection_budget
from hdp_spark.core.partial.spec import (
    AttributeDomain,
    _check_unit,
    build_domains,
    check_max_rows,
    unit_neighbours,
)
from hdp_spark.core.partial.tree import NodeRequest, key_space, key_weights
from hdp_spark.errors import InternalError, ParameterError

__all__ = [
    "MARGINAL_COLUMNS",
    "MarginalsReport",
    "MarginalsResult",
    "MarginalsSpec",
    "ProjectionBudget",
    "check_workload_spec",
    "finalize_marginals",
    "hdp_marginals",
    "marginal_requests",
    "noisy_total",
    "solve_projection_budget",
]

MARGINAL_COLUMNS: tuple[str, ...] = ("noisy_count", "projected_count", "projected_fraction")
"""Output columns after ``marginal`` and the attribute columns."""

Floats = npt.NDArray[np.float64]


# -- spec ----------------------------------------------------------------------------------------


def check_workload_spec(domains: object, workload: object, eps0: object,
                        privacy_unit: object, alias: object, builder: str,
                        max_rows: object = 1) -> None:
    """The checks the marginal-workload specs share (projection, MWEM): public domains, a
    workload of sorted attribute-index tuples, ε₀ > 0 finite, the privacy unit and its
    ``max_rows``, the alias.

    Raises:
        ParameterError: naming the parameter, the rule and the bad value.
    """
    if not isinstance(domains, tuple) or not domains or not all(
        isinstance(d, AttributeDomain) for d in domains
    ):
        msg = f"`domains` must be a non-empty tuple of AttributeDomain (use {builder})."
        raise ParameterError(msg)
    d = len(domains)
    if not isinstance(workload, tuple) or not workload or not all(
        isinstance(s, tuple) and s and list(s) == sorted(set(s))
        and all(isinstance(j, int) and 0 <= j < d for j in s) for s in workload
    ):
        msg = "`workload` must be a non-empty tuple of sorted attribute-index tuples."
        raise ParameterError(msg)
    if (isinstance(eps0, bool) or not isinstance(eps0, int | float)
            or not (math.isfinite(eps0) and eps0 > 0)):
        msg = f"`eps0` must be a positive finite number, got {eps0!r}."
        raise ParameterError(msg)
    _check_unit(privacy_unit, tuple(dom.column for dom in domains))
    check_max_rows(max_rows, privacy_unit)
    if alias is not None and (not isinstance(alias, str) or not alias):
        msg = f"`alias` must be a non-empty column name or None, got {alias!r}."
        raise ParameterError(msg)


def _workload(cols: tuple[str, ...], k: object, marginals: object) -> tuple[tuple[int, ...], ...]:
    d = len(cols)
    if (k is None) == (marginals is None):
        msg = ("give exactly one of `k` (all k-way marginals) or `marginals` (a list of column "
               "lists).")
        raise ParameterError(msg)
    if k is not None:
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= d:
            msg = f"`k` must be an int in [1, {d}] (the number of columns), got {k!r}."
            raise ParameterError(msg)
        return tuple(itertools.combinations(range(d), k))
    if isinstance(marginals, str) or not isinstance(marginals, Sequence) or not marginals:
        msg = f"`marginals` must be a non-empty list of column lists, got {marginals!r}."
        raise ParameterError(msg)
    index = {c: j for j, c in enumerate(cols)}
    out: list[tuple[int, ...]] = []
    for m in marginals:
        if isinstance(m, str) or not isinstance(m, Sequence) or not m:
            msg = f"each entry of `marginals` must be a non-empty list of columns, got {m!r}."
            raise ParameterError(msg)
        bad = [c for c in m if c not in index]
        if bad or len(set(m)) != len(m):
            msg = (f"each entry of `marginals` must name distinct columns of `cols`, got "
                   f"{list(m)!r}.")
            raise ParameterError(msg)
        s = tuple(sorted(index[c] for c in m))
        if s in out:
            msg = f"`marginals` must not repeat a marginal, got {list(m)!r} twice."
            raise ParameterError(msg)
        out.append(s)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class MarginalsSpec:
    """Marginals released by the projection mechanism (see :func:`hdp_marginals`).

    Attributes:
        domains: one public domain per attribute.
        workload: the marginals, as sorted attribute-index tuples.
        eps0: per-attribute budget ε₀ (ε₀-∇₀CDP, i.e. ρ_j <= ½ε₀²).
        delta: δ of the reported (ε, δ) conversions.
        max_domain: largest |𝒳| = ∏ domain sizes the projection enumerates.
        tol: stop the projection when its Frank-Wolfe gap max_u ⟨𝒬(u) - Ŷ, Y - Ŷ⟩ <= tol.
        max_iter: at most this many projection steps.
        privacy_unit: optional id column: only persons with at most ``max_rows`` rows
            are counted, with all their rows (rows of an id with more, and rows without
            an id, are left out; no error).
        alias: output name inside ``agg``.
        max_rows: R, the most rows a counted person has (with ``privacy_unit``): σ²
            grows R²-fold (module docstring).
        budget: the solved public budget (derived).
    """

    domains: tuple[AttributeDomain, ...]
    workload: tuple[tuple[int, ...], ...]
    eps0: float
    delta: float = 1e-6
    max_domain: int = 2**20
    tol: float = 1e-8
    max_iter: int = 10_000
    privacy_unit: str | None = None
    alias: str | None = None
    max_rows: int = 1
    budget: ProjectionBudget = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_workload_spec(self.domains, self.workload, self.eps0, self.privacy_unit,
                            self.alias, "hdp_marginals", self.max_rows)
        d = len(self.domains)
        if (isinstance(self.delta, bool) or not isinstance(self.delta, int | float)
                or not 0 < self.delta < 1):
            msg = f"`delta` must be in (0, 1), got {self.delta!r}."
            raise ParameterError(msg)
        if (isinstance(self.max_domain, bool) or not isinstance(self.max_domain, int)
                or not 1 <= self.max_domain <= 2**26):
            msg = f"`max_domain` must be an int in [1, 2**26], got {self.max_domain!r}."
            raise ParameterError(msg)
        space = math.prod(dom.size for dom in self.domains)
        if space > self.max_domain:
            msg = (
                f"the projection enumerates every record of the public domain: the product of "
                f"the domain sizes (extra null categories included) must be <= `max_domain` = "
                f"{self.max_domain}, got {space}; declare smaller domains, set `other`, or raise "
                "`max_domain` (time and memory grow linearly with it)."
            )
            raise ParameterError(msg)
        if (isinstance(self.tol, bool) or not isinstance(self.tol, int | float)
                or not (math.isfinite(self.tol) and self.tol > 0)):
            msg = f"`tol` must be a positive finite number, got {self.tol!r}."
            raise ParameterError(msg)
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, int) or (
                self.max_iter < 1):
            msg = f"`max_iter` must be a positive int, got {self.max_iter!r}."
            raise ParameterError(msg)
        object.__setattr__(self, "budget", solve_projection_budget(
            d, self.workload, float(self.eps0), self.max_rows))

    @property
    def cols(self) -> tuple[str, ...]:
        """Attribute columns."""
        return tuple(dom.column for dom in self.domains)

    @property
    def name(self) -> str:
        """Output name inside ``agg`` (default ``"marginals"``)."""
        return self.alias or "marginals"

    @property
    def sizes(self) -> tuple[int, ...]:
        """Domain sizes (extra null categories included)."""
        return tuple(dom.size for dom in self.domains)


def hdp_marginals(
    cols: Sequence[str],
    *,
    domains: Mapping[str, Sequence[object]],
    eps0: float,
    k: int | None = None,
    marginals: Sequence[Sequence[str]] | None = None,
    other: Mapping[str, object] | None = None,
    delta: float = 1e-6,
    max_domain: int = 2**20,
    tol: float = 1e-8,
    max_iter: int = 10_000,
    privacy_unit: str | None = None,
    alias: str | None = None,
    max_rows: int = 1,
) -> MarginalsSpec:
    """Marginals (contingency tables) under per-attribute DP: the projection mechanism.

    Pass the result to ``hdp_spark.pandas.marginals`` or ``hdp_spark.spark.marginals``.
    Every cell of every requested marginal gets exact discrete Gaussian noise, then the
    noisy tables are projected onto the closest set of *consistent* marginals (those of
    one distribution over the public domain): Ghazi, Kumar, Manurangsi & Steinke,
    *Algorithms with More Granular Differential Privacy Guarantees*, §4.1, Theorem 11.

    Args:
        cols: attribute columns (at least 1).
        domains: public values of every attribute, ``{col: [values...]}``.
        eps0: per-attribute budget ε₀ in zCDP form: changing one attribute of one person
            costs ρ <= ½ε₀².
        k: release all k-way marginals of ``cols``; or
        marginals: the marginals to release, as lists of columns.
        other: ``{col: value}``: the declared value absorbing null/out-of-domain values;
            other columns get an extra "other" category (reported as null).
        delta: δ of the reported (ε, δ)-DP conversions.
        max_domain: the projection enumerates the public domain 𝒳 (∏ domain sizes); it
            refuses a larger one.
        tol: projection accuracy (Frank-Wolfe gap).
        max_iter: at most this many projection steps (the report says whether tol was met).
        privacy_unit: optional id column: only persons with at most ``max_rows`` rows
            are counted, with all their rows (rows of an id with more, and rows without
            an id, are left out; no error).
        alias: the output name inside ``agg`` (default ``"marginals"``).
        max_rows: with ``privacy_unit``, the most rows a counted person has (R, default
            1): σ² grows R²-fold so that a person's R rows cost what one row did.

    Returns:
        A :class:`MarginalsSpec`; ``spec.budget`` holds σ² and every guarantee.

    Raises:
        ParameterError: a parameter breaks its rule (e.g. ∏ domain sizes > max_domain).

    Privacy:
        Protected unit: one attribute of one person, ρ_j = deg(j)/σ² <= ½ε₀² with deg(j)
        the number of marginals containing attribute j (L2 sensitivity √(2 deg(j)): two
        cells move per such table); and one person's whole record, ρ = |W|/σ², i.e.
        ε₀·√(|W|/max deg) instead of Proposition 8's d·ε₀. ε₀ enters only through σ² =
        2·max deg/ε₀² (rounded up). Replacement neighbours; n is public (answers are
        counts/n). Public: cols, domains, other, the marginals, every parameter. The
        projection reads only the noisy counts (post-processing). Null/out-of-domain values
        are recoded, never raised on. With ``max_rows`` = R: a person's R rows move the
        counts by R times a row's L2, so σ² = R²·2·max deg/ε₀² keeps ρ_j <= ½ε₀² per
        attribute of a person and |W|R²/σ² per person, for a person's rows replaced by
        any number of rows or a person added or removed: n is then private, and the
        answers are normalised by ñ, an estimate from the noisy counts (module
        docstring).
    """
    doms = build_domains(cols, domains, other)
    names = tuple(dom.column for dom in doms)
    return MarginalsSpec(
        domains=doms,
        workload=_workload(names, k, marginals),
        eps0=eps0,
        delta=delta,
        max_domain=max_domain,
        tol=tol,
        max_iter=max_iter,
        privacy_unit=privacy_unit,
        alias=alias,
        max_rows=max_rows,
    )


def marginal_requests(spec: MarginalsSpec) -> list[NodeRequest]:
    """One count request per marginal (node index = position in the workload)."""
    sizes = spec.sizes
    return [NodeRequest(i, s, key_weights(s, sizes), ()) for i, s in enumerate(spec.workload)]


# -- finalize ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MarginalsReport:
    """Public metadata of a marginals release (the projection fields are DP outputs).

    Field meanings are in ``docs/partial_dp.md``.
    """

    attributes: tuple[str, ...]
    marginals: tuple[tuple[str, ...], ...]
    d: int
    domain_size: int
    neighbours: str
    noise: str
    eps0: float
    sigma2: float
    noise_std_count: float
    sens_attribute: float
    sens_person: float
    degrees: tuple[int, ...]
    rho_attributes: tuple[float, ...]
    rho_attribute: float
    eps_attribute: float
    rho_person: float
    eps_person: float
    rho_person_prop8: float
    delta: float
    eps_delta_attribute_cks20: float
    eps_delta_person_cks20: float
    eps_delta_person_bs16: float
    conversion: str
    n: int
    projection_gap: float
    projection_iterations: int
    projection_converged: bool
    privacy_unit: str | None
    unit_checked: bool
    unsafe_seed: bool
    max_rows: int = 1

    def as_dict(self) -> dict[str, Any]:
        """The report as a plain dict (tuples as lists)."""
        return {
            name: [list(x) if isinstance(x, tuple) else x for x in v]
            if isinstance(v, tuple) else v
            for name in self.__dataclass_fields__
            for v in (getattr(self, name),)
        }


@dataclass(frozen=True, slots=True)
class MarginalsResult:
    """Released marginals.

    Attributes:
        rows: one dict per (marginal, cell), marginals in workload order, cells in domain
            order: ``marginal`` (column names joined by ``,``), one key per attribute
            (the cell's value; None outside the marginal or for the extra category),
            ``noisy_count`` (int), ``projected_count`` and ``projected_fraction``.
        report: the public metadata.
        noisy_tables: Y per marginal (noisy fractions; DP, for tests and callers).
        projection: the projection (DP, post-processing).
    """

    rows: tuple[dict[str, Any], ...]
    report: MarginalsReport
    noisy_tables: tuple[Floats, ...]
    projection: Projection


def finalize_marginals(
    spec: MarginalsSpec, counts: Sequence[Mapping[int, int]], release_key: ReleaseKey
) -> MarginalsResult:
    """Noise every cell of every marginal, project, and lay out the release.

    Args:
        spec: the release.
        counts: per marginal, exact ``{cell key: count}`` (absent cells count 0).
        release_key: the release's secret key.
    """
    if len(counts) != len(spec.workload):
        msg = "one count table per marginal is needed"
        raise InternalError(msg)
    sizes = spec.sizes
    exact: list[tuple[int, ...]] = []
    for s, table in zip(spec.workload, counts, strict=True):
        space = key_space(s, sizes)
        if any(not 0 <= c < space for c in table):
            msg = "a cell outside its marginal"
            raise InternalError(msg)
        exact.append(tuple(int(table.get(c, 0)) for c in range(space)))
    n_exact = sum(exact[0])
    if any(sum(e) != n_exact for e in exact):  # pragma: no cover - a row is in every table
        msg = "marginals disagree on n"
        raise InternalError(msg)
    unit = spec.privacy_unit is not None
    if n_exact == 0 and not unit:
        msg = "the table has no rows: marginals are normalised by the public n, which must be > 0."
        raise ParameterError(msg)
    b = spec.budget
    stream = release_key.stream(encode_context(
        ("marginals/projection", b.sigma2, spec.workload, sizes, tuple(exact))))
    noisy = [tuple(c + discrete_gaussian(b.sigma2, stream) for c in e) for e in exact]
    # under a unit n is private: the noisy totals' estimate (module docstring)
    n: float = noisy_total(noisy) if unit else float(n_exact)
    target = [np.asarray(t, dtype=np.float64) / n for t in noisy]
    proj = project(sizes, spec.workload, target, tol=spec.tol, max_iter=spec.max_iter)
    rows: list[dict[str, Any]] = []
    for s, noisy_table, fitted in zip(spec.workload, noisy, proj.tables, strict=True):
        label = ",".join(spec.domains[j].column for j in s)
        for cell, value in enumerate(noisy_table):
            codes: dict[int, int] = {}
            rest = cell
            for j in reversed(s):
                rest, codes[j] = divmod(rest, sizes[j])
            row: dict[str, Any] = {"marginal": label}
            for j, dom in enumerate(spec.domains):
                row[dom.column] = dom.value(codes[j]) if j in codes else None
            frac = float(fitted[cell])
            row["noisy_count"] = int(value)
            row["projected_count"] = frac * n
            row["projected_fraction"] = frac
            rows.append(row)
    report = _report(spec, round(n), proj, release_key.unsafe)
    return MarginalsResult(tuple(rows), report, tuple(target), proj)


def noisy_total(noisy: Sequence[Sequence[int]]) -> float:
    """ñ: the inverse-variance mean of the tables' noisy totals (table k's total has
    variance |cells_k|·σ², so the weights are 1/|cells_k|), at least 1. Post-processing
    of DP counts: what a release under a privacy unit normalises by instead of n."""
    weights = [1.0 / len(t) for t in noisy]
    total = sum(w * float(sum(t)) for w, t in zip(weights, noisy, strict=True)) / sum(weights)
    return max(total, 1.0)


def _report(spec: MarginalsSpec, n: int, proj: Projection, unsafe: bool) -> MarginalsReport:
    b = spec.budget
    d = len(spec.domains)
    return MarginalsReport(
        attributes=spec.cols,
        marginals=tuple(tuple(spec.domains[j].column for j in s) for s in spec.workload),
        d=d,
        domain_size=math.prod(spec.sizes),
        neighbours=unit_neighbours(spec.privacy_unit, spec.max_rows),
        noise="exact discrete Gaussian on every cell (Canonne-Kamath-Steinke 2020)",
        eps0=float(spec.eps0),
        sigma2=float(b.sigma2),
        noise_std_count=math.sqrt(float(b.sigma2)),
        sens_attribute=math.sqrt(b.sens_attr_sq),
        sens_person=math.sqrt(b.sens_person_sq),
        degrees=b.degrees,
        rho_attributes=b.rho_attributes,
        rho_attribute=b.rho_attribute,
        eps_attribute=b.eps_attribute,
        rho_person=b.rho_person,
        eps_person=b.eps_person,
        rho_person_prop8=b.rho_person_prop8,
        delta=float(spec.delta),
        eps_delta_attribute_cks20=accounting.eps_cks20(b.rho_attribute, spec.delta),
        eps_delta_person_cks20=accounting.eps_cks20(b.rho_person, spec.delta),
        eps_delta_person_bs16=accounting.eps_bs16(b.rho_person, spec.delta),
        conversion=(
            "zCDP: attribute j rho_j = deg(j)/sigma2, person rho = |W|/sigma2 "
            f"(|W| = {len(spec.workload)}, max deg = {max(b.degrees)})"
            + (f", each times {spec.max_rows}^2 (a person's {spec.max_rows} rows)"
               if spec.max_rows > 1 else "")
            + "; (eps, delta) by "
            "Canonne-Kamath-Steinke 2020 (eps_delta_*_cks20) and Bun-Steinke 2016 (bs16)"
        ),
        n=n,
        projection_gap=proj.gap,
        projection_iterations=proj.iterations,
        projection_converged=proj.converged,
        privacy_unit=spec.privacy_unit,
        unit_checked=spec.privacy_unit is not None,
        unsafe_seed=unsafe,
        max_rows=spec.max_rows,
    )
