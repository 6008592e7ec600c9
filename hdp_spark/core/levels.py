"""ε levels: how each row's privacy demand becomes the level its weight is computed at.

Rules (identical on every engine; the backends implement them with native expressions and
the tests check that both give the same level table):

* ε must be a number: null, NaN, negative values and -inf are rejected with a count of
  offending rows (ε is public in this model, so rejecting it leaks nothing about data).
* ε = 0 is a legal demand ("do not use my value"): the row counts in n and gets weight 0.
* ε = +inf marks a public row.
* Finite ε above :data:`EPS_CAP` is lowered to the cap. Lowering ε only strengthens the
  guarantee; it keeps ε² sums finite in the solvers (seed-000-001 review, P6).
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

__all__ = ["EPS_CAP", "INVALID_LEVEL", "EpsGrid", "levels_numpy"]

EPS_CAP = 1e100
"""Finite ε above this value is treated as this value (a public, data-independent cap)."""

INVALID_LEVEL = -1.0
"""Level code of rows whose ε is null, NaN, negative or -inf."""

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
        if not self.lowest > 0:
            msg = f"`lowest` must be > 0, got {self.lowest!r}."
            raise ParameterError(msg)
        if not self.highest >= self.lowest:
            msg = f"`highest` must be >= `lowest`, got {self.highest!r}."
            raise ParameterError(msg)
        if len(self.points()) > 100_000:
            msg = "`ratio` is too close to 1 for the range: the grid would exceed 100,000 points."
            raise ParameterError(msg)

    def points(self) -> tuple[float, ...]:
        """The grid points, strictly increasing, as exact floats shared by all engines."""
        k = math.floor(math.log(self.highest / self.lowest) / math.log(self.ratio) + 1e-9)
        pts = [self.lowest * self.ratio**i for i in range(k + 1)]
        pts = [p for p in pts if p <= self.highest]
        # strictly increasing after rounding
        out: list[float] = []
        for p in pts:
            if not out or p > out[-1]:
                out.append(float(p))
        return tuple(out)


def levels_numpy(
    eps: npt.NDArray[np.float64], grid: EpsGrid | None
) -> npt.NDArray[np.float64]:
    """Reference implementation of the level rules on a float64 array (NaN = null)."""
    eps = np.asarray(eps, dtype=np.float64)
    out = np.where(np.isposinf(eps), np.inf, np.minimum(eps, EPS_CAP))
    invalid = np.isnan(eps) | (eps < 0)
    if grid is not None:
        pts = np.asarray(grid.points(), dtype=np.float64)
        finite_pos = np.isfinite(eps) & (eps > 0)
        idx = np.searchsorted(pts, np.where(finite_pos, eps, pts[0]), side="right") - 1
        snapped = pts[np.clip(idx, 0, len(pts) - 1)]
        out = np.where(finite_pos, snapped, out)
        out = np.where(finite_pos & (idx < 0), BELOW_GRID_LEVEL, out)
    return np.where(invalid, INVALID_LEVEL, out)
