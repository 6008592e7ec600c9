"""ε levels: how each row's privacy demand becomes the level its weight is computed at.

Privacy-critical: the ε at which a row's weight and noise are computed is its level, so
every heterogeneous-DP guarantee rests on the level being <= the row's ε_i. Every rule below
only lowers ε (cap, floor to 0, grid rounding down) or rejects it, so each row receives at
least the privacy it asked for (Definition 1 of Chaudhuri & Courtade, *Private Estimation
When Data and Privacy Demands Are Correlated*, is monotone in ε_i).

Rules (identical on every engine; the backends implement them with native expressions and
the tests check that both give the same level table):

* ε must be a number: null, NaN, negative values and -inf are rejected with a count of
  offending rows (ε is public in this model, so rejecting it leaks nothing about data).
* ε = 0 is a legal demand ("do not use my value"): the row counts in n and gets weight 0.
* ε = +inf marks a public row.
* Finite ε above :data:`EPS_CAP` is lowered to the cap. Lowering ε only strengthens the
  guarantee; it keeps ε² sums finite in the solvers (above ~1.3e154, ε² overflows to inf
  and the solvers would silently return proportional weights).
* Positive ε below :data:`EPS_FLOOR` is lowered to 0: the row counts in n and gets weight
  0. Also privacy-safe (rounding down), it keeps 1/ε, the noise parameter and its square
  inside the float range (ε = 1e-300 or a subnormal ε made the solvers and the finalize step
  overflow); such a row's weight would be below 1e-100 of the others' anyway.
* The cap and the floor apply first; a grid then rounds what is left.
* Without a grid, every distinct ε value is its own level (exact).
* With an :class:`EpsGrid`, ε is rounded DOWN to the largest grid point <= ε. Rounding down
  is privacy-safe (each row receives at least the privacy it asked for) and costs at most the
  grid ratio in noise. ε below the grid's lowest point is rejected (rounding it to the lowest
  point would round up).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hdp_spark.errors import ParameterError

__all__ = ["EPS_CAP", "EPS_FLOOR", "INVALID_LEVEL", "EpsGrid", "levels_numpy"]

EPS_CAP = 1e100
"""Finite ε above this value is treated as this value (a public, data-independent cap)."""

EPS_FLOOR = 1e-100
"""Positive ε below this value is treated as 0 (a public, data-independent floor)."""

INVALID_LEVEL = -1.0
"""Level code of rows whose ε is null, NaN, negative or -inf."""

MIN_GRID_RATIO = 1 + 1e-9
"""Smallest accepted grid ratio."""

MAX_GRID_POINTS = 100_000
"""Largest accepted number of grid points."""

BELOW_GRID_LEVEL = -2.0
"""Level code of rows whose ε is positive but below the grid's lowest point."""


@dataclass(frozen=True, slots=True)
class EpsGrid:
    """A public geometric grid that continuous ε values are rounded down onto.

    Attributes:
        ratio: ratio between consecutive grid points, > 1. The noise cost of rounding is at
            most this factor.
        lowest: lowest grid point, > 0. Rows with 0 < ε < lowest are rejected.
        highest: highest grid point; ε above it is rounded down to it.
    """

    ratio: float = 1.1
    lowest: float = 1e-6
    highest: float = 1e6

    def __post_init__(self) -> None:
        for name in ("ratio", "lowest", "highest"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                msg = f"`{name}` must be a number, got {value!r}."
                raise ParameterError(msg)
            if not math.isfinite(value):
                msg = f"`{name}` must be finite, got {value!r}."
                raise ParameterError(msg)
        if not self.ratio > 1:
            msg = f"`ratio` must be > 1, got {self.ratio!r}."
            raise ParameterError(msg)
        if not self.ratio >= MIN_GRID_RATIO:
            # Closer ratios collapse neighbouring points in float64, and the Spark backend
            # locates a row's grid point from a logarithm accurate to about ±1 point only.
            msg = f"`ratio` must be >= 1 + 1e-9, got {self.ratio!r}."
            raise ParameterError(msg)
        if not self.lowest >= EPS_FLOOR:
            # Positive ε below EPS_FLOOR is 0 before any grid: lower points would never be
            # used (and subnormal points would lose precision and collapse).
            msg = f"`lowest` must be >= {EPS_FLOOR!r}, got {self.lowest!r}."
            raise ParameterError(msg)
        if not self.highest >= self.lowest:
            msg = f"`highest` must be >= `lowest`, got {self.highest!r}."
            raise ParameterError(msg)
        # Count the points BEFORE building them: a ratio very close to 1 would otherwise
        # materialize billions of floats before the size check could reject it.
        if self._last_index() >= MAX_GRID_POINTS:
            msg = "`ratio` is too close to 1 for the range: the grid would exceed 100,000 points."
            raise ParameterError(msg)

    def _last_index(self) -> int:
        # log(highest) - log(lowest), not log(highest / lowest): the quotient overflows for
        # wide ranges (e.g. 1e-100 .. 1e300), which raised OverflowError.
        span = math.log(self.highest) - math.log(self.lowest)
        return math.floor(span / math.log(self.ratio) + 1e-9)

    def points(self) -> tuple[float, ...]:
        """The grid points, strictly increasing, as exact floats shared by all engines."""
        pts = [_grid_point(self.lowest, self.ratio, i) for i in range(self._last_index() + 1)]
        pts = [p for p in pts if p <= self.highest]
        # strictly increasing after rounding
        out: list[float] = []
        for p in pts:
            if not out or p > out[-1]:
                out.append(float(p))
        return tuple(out)


def _grid_point(lowest: float, ratio: float, i: int) -> float:
    """``lowest * ratio**i`` (the same float on every engine), even when ``ratio**i`` alone
    exceeds the float range while the product does not (wide grids such as 1e-100..1e300)."""
    try:
        return lowest * ratio**i
    except OverflowError:
        half = i // 2
        try:
            return lowest * ratio**half * ratio ** (i - half)
        except OverflowError:
            return math.inf  # beyond any finite `highest`: dropped by points()


def levels_numpy(
    eps: npt.NDArray[np.float64], grid: EpsGrid | None
) -> npt.NDArray[np.float64]:
    """Reference implementation of the level rules on a float64 array (NaN = null).

    ε = -0.0 is ε = 0 and gets the level +0.0, as on Spark, whose grouping normalizes
    -0.0 to 0.0: the level's bits enter the noise context, so both engines must agree.
    """
    raw = np.asarray(eps, dtype=np.float64)
    invalid = np.isnan(raw) | (raw < 0)
    eps = np.where(((raw > 0) & (raw < EPS_FLOOR)) | (raw == 0), 0.0, raw)
    eps = np.where(np.isfinite(eps) & (eps > EPS_CAP), EPS_CAP, eps)
    out = eps
    if grid is not None:
        pts = np.asarray(grid.points(), dtype=np.float64)
        finite_pos = np.isfinite(eps) & (eps > 0)
        idx = np.searchsorted(pts, np.where(finite_pos, eps, pts[0]), side="right") - 1
        snapped = pts[np.clip(idx, 0, len(pts) - 1)]
        out = np.where(finite_pos, snapped, out)
        out = np.where(finite_pos & (idx < 0), BELOW_GRID_LEVEL, out)
    return np.where(invalid, INVALID_LEVEL, out)
