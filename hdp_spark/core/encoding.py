"""Per-row encoding of bounded values into exact fixed-point integers.

Privacy-critical: every central mechanism's sensitivity assumes a row contributes a value
in [0, 2**31] units (one full range); the clamp and the null imputation here make that true
for any input, so a change here can change every noise calibration (see "Privacy" below).

Every engine turns a value x into ``q = floor(u * 2**31 + 0.5)`` with
``u = (clamp(x, lower, upper) - lower) / (upper - lower)``, after replacing null/NaN by the
public ``fill`` value. The operations are IEEE-754 double +, -, /, * and floor, which Spark
(Java) and numpy evaluate identically, so both engines produce the same integers, and
integer sums are exact and order-independent: the pre-noise statistics of the two engines
agree bit for bit whatever the partitioning.

Privacy: the encoding is per-row pre-processing with values in [0, 2**31]; a row's
contribution to a sum moves by at most 2**31 units = one full range, which is the
sensitivity every mechanism uses. Quantisation changes the estimate by at most 2**-32 of
the range per row (deterministically), far below any noise.

Limit: a 64-bit sum holds at most 2**32 rows per (group, level) cell.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

__all__ = ["FIXED_ONE", "encode_numpy", "unit_to_value"]

FIXED_BITS = 31
FIXED_ONE = 2**FIXED_BITS
"""Fixed-point representation of a full range (u = 1)."""


def encode_numpy(
    values: npt.NDArray[np.float64], lower: float, upper: float, fill: float
) -> npt.NDArray[np.int64]:
    """Reference implementation of the per-row encoding (NaN stands for null)."""
    x = np.asarray(values, dtype=np.float64)
    x = np.where(np.isnan(x), fill, x)
    x = np.minimum(np.maximum(x, lower), upper)
    span = float(upper) - float(lower)
    u = (x - float(lower)) / span
    return np.floor(u * float(FIXED_ONE) + 0.5).astype(np.int64)


def unit_to_value(unit: Fraction | float, lower: float, upper: float) -> float:
    """Map a unit-scale number back to the original units (post-processing)."""
    return float(lower + (upper - lower) * float(unit))
