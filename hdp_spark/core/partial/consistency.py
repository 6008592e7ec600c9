"""Projection onto consistent marginals: the post-processing step of ``hdp_marginals``.

Not privacy-critical: it reads only the noisy answers Y and public facts (the domains and
the workload), so anything it computes is post-processing of a DP output. It is the
``argmin_{y ∈ conv{𝒬(u) : u ∈ 𝒳}} ‖y - Y‖₂`` step of the projection mechanism (§4.1,
Theorem 11 of Ghazi, Kumar, Manurangsi & Steinke, *Algorithms with More Granular
Differential Privacy Guarantees*), for 𝒬 stacking one indicator vector per marginal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hdp_spark.core.partial.tree import key_space
from hdp_spark.errors import InternalError

__all__ = ["Projection", "TableGeometry", "project"]

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Projection:
    """The projected marginals and how well the projection converged.

    Attributes:
        tables: Ŷ per marginal (each sums to 1), cells in mixed-radix order.
        weights: the support of a distribution over 𝒳 whose marginals are Ŷ
            (flat record index -> weight).
        gap: the final Frank-Wolfe gap, max_u ⟨𝒬(u) - Ŷ, Y - Ŷ⟩ (>= the distance of the
            variational inequality from 0).
        iterations: projection steps taken.
        converged: whether gap <= tol.
    """

    tables: tuple[Floats, ...]
    weights: dict[int, float]
    gap: float
    iterations: int
    converged: bool


class TableGeometry:
    """Maps between records u ∈ 𝒳 (flat C-order index) and the stacked tables."""

    def __init__(self, sizes: Sequence[int], workload: Sequence[tuple[int, ...]]) -> None:
        self.sizes = tuple(sizes)
        self.workload = tuple(workload)
        self.cells = [key_space(s, sizes) for s in workload]
        self.offsets = np.cumsum([0, *self.cells])[:-1].astype(np.int64)
        self.m = int(sum(self.cells))
        d = len(sizes)
        self.shapes = [tuple(sizes[j] if j in s else 1 for j in range(d)) for s in workload]

    def scores(self, g: Floats) -> Floats:
        """⟨g, 𝒬(u)⟩ for every record u (flat)."""
        total = np.zeros(self.sizes)
        for off, n, shape in zip(self.offsets, self.cells, self.shapes, strict=True):
            total += g[off:off + n].reshape(shape)
        return total.ravel()

    def vertex(self, u: int) -> npt.NDArray[np.int64]:
        """The positions of the ones of 𝒬(u) in the stacked vector."""
        codes = np.unravel_index(u, self.sizes)
        out = np.empty(len(self.workload), dtype=np.int64)
        for t, s in enumerate(self.workload):
            cell = 0
            for j in s:
                cell = cell * self.sizes[j] + int(codes[j])
            out[t] = self.offsets[t] + cell
        return out


_PENALTY = 1e6
"""√M of the sum-to-one row in the corrective least squares (see :func:`project`)."""


def project(
    sizes: Sequence[int],
    workload: Sequence[tuple[int, ...]],
    target: Sequence[Floats],
    *,
    tol: float = 1e-8,
    max_iter: int = 10_000,
) -> Projection:
    """Euclidean projection of stacked tables onto conv{𝒬(u) : u ∈ 𝒳}.

    Fully corrective Frank-Wolfe. The iterate is y = Σ_u w_u 𝒬(u) with w on the simplex
    over an active set of records. Each step adds the record s minimising ⟨∇, 𝒬(s)⟩
    (∇ = y - Y; exact by enumerating 𝒳) and re-solves the problem over the active set,
    min_{w >= 0, Σw = 1} ‖Σ_u w_u 𝒬(u) - Y‖², as a non-negative least squares
    (``scipy.optimize.nnls``) with the constraint Σw = 1 as a heavily weighted extra row
    (weight √M = 1e6), then renormalises w; records with weight 0 leave. The Frank-Wolfe
    gap ⟨∇, y⟩ - min_u ⟨∇, 𝒬(u)⟩ = max_u ⟨𝒬(u) - y, Y - y⟩ bounds the suboptimality and
    is the variational inequality of the projection; the loop stops when it is <= tol.
    """
    from scipy import optimize  # lazy: scipy.optimize costs ~1 s to import

    geo = TableGeometry(sizes, workload)
    big_y = np.concatenate([np.asarray(t, dtype=np.float64) for t in target])
    if big_y.shape != (geo.m,):
        msg = "target tables do not match the workload"
        raise InternalError(msg)
    first = int(np.argmax(geo.scores(big_y)))
    active: list[int] = [first]
    w = np.ones(1)
    rhs = np.append(big_y, _PENALTY)
    gap = math.inf
    it = 0
    y = np.zeros(geo.m)
    cache: dict[int, npt.NDArray[np.int64]] = {}

    def vertex(u: int) -> npt.NDArray[np.int64]:
        pos = cache.get(u)
        if pos is None:
            pos = cache[u] = geo.vertex(u)
        return pos

    for it in range(1, max_iter + 1):  # noqa: B007 - the count is reported
        positions = np.stack([vertex(u) for u in active])  # |active| x |W|
        y = np.bincount(positions.ravel(), weights=np.repeat(w, positions.shape[1]),
                        minlength=geo.m).astype(np.float64)
        grad = y - big_y
        sc = geo.scores(grad)
        s = int(np.argmin(sc))
        gap = float(grad @ y - sc[s])
        if gap <= tol:
            break
        if s not in active:
            active.append(s)
        mat = np.zeros((geo.m + 1, len(active)))
        positions = np.stack([vertex(u) for u in active])
        mat[positions.T, np.arange(len(active))[None, :]] = 1.0
        mat[geo.m, :] = _PENALTY
        sol, _ = optimize.nnls(mat, rhs, maxiter=50 * len(active) + 100)
        keep = sol > 0
        if not keep.any():  # pragma: no cover - the sum row forces a positive weight
            keep[-1] = True
            sol[-1] = 1.0
        active = [u for u, k in zip(active, keep, strict=True) if k]
        w = sol[keep] / sol[keep].sum()
    tables = tuple(y[off:off + n].copy()
                   for off, n in zip(geo.offsets, geo.cells, strict=True))
    weights = {u: float(wu) for u, wu in zip(active, w, strict=True)}
    return Projection(tables, weights, gap, it, gap <= tol)
