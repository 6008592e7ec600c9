"""Equality of released results bit for bit (shared by the batch-versus-scalar tests)."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any


def same_bits(a: Any, b: Any) -> bool:
    """Equal values of the same types; floats equal by their bits (a NaN matches the same
    NaN, 0.0 does not match -0.0), tuples item by item, dataclass records field by field."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack(">d", a) == struct.pack(">d", b)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same_bits(x, y) for x, y in zip(a, b, strict=True))
    if dataclasses.is_dataclass(a):
        return all(same_bits(getattr(a, f.name), getattr(b, f.name))
                   for f in dataclasses.fields(a))
    return bool(a == b)
