"""Records built through their slots (`hdp_spark.core.records`) are the records that the
dataclass `__init__` builds: same class, fields, equality, hash, repr, still frozen."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction

import pytest

from hdp_spark.core.mean.finalize import LevelPrivacy, level_privacy
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.pipeline import GroupCells, NoiseContext
from hdp_spark.core.records import records, slot_setters
from hdp_spark.core.stats import GroupStats, LevelRow
from hdp_spark.errors import InternalError


def _same(built: object, reference: object) -> None:
    assert type(built) is type(reference)
    assert built == reference
    assert hash(built) == hash(reference)
    assert repr(built) == repr(reference)
    for f in dataclasses.fields(reference):  # type: ignore[arg-type]
        got, want = getattr(built, f.name), getattr(reference, f.name)
        assert type(got) is type(want)
        assert repr(got) == repr(want)  # floats bit for bit (repr round-trips)


def test_records_equal_the_init_built_ones() -> None:
    levels, counts = [0.0, 0.5, math.inf], [3, 1, 2]
    totals = [(0, 1), (2**40, 7), (5, 2**31)]
    built = records(LevelRow, levels, counts, totals)
    for b, row in zip(built, zip(levels, counts, totals, strict=True), strict=True):
        _same(b, LevelRow(*row))
    stats = records(GroupStats, [tuple(built[:2]), tuple(built[2:])])
    _same(stats[0], GroupStats(tuple(built[:2])))
    assert stats[1].n == 2
    assert stats[1].levels == [math.inf]
    key = ReleaseKey.resolve(None)
    [ctx] = records(NoiseContext, [key], [("a",)], ["x"])
    _same(ctx, NoiseContext(key, ("a",), "x"))
    [cells] = records(GroupCells, [stats[0]], [1])
    _same(cells, GroupCells(stats[0], 1))
    assert records(LevelRow, [], [], []) == []


def test_records_stay_frozen() -> None:
    [row] = records(LevelRow, [1.0], [2], [(3,)])
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.count = 5  # type: ignore[misc]
    assert row.count == 2


def test_level_privacy_records_equal_the_init_built_ones() -> None:
    v, m, nums, den = [0.0, 0.5, 2.0, math.inf], [4, 3, 2, 1], [0, 3, 5, 5], 24
    for eta in (Fraction(0), Fraction(5, 48)):
        got = level_privacy(v, m, nums, den, eta)
        if eta:
            eff = [float(Fraction(p, den) / eta) if p else 0.0 for p in nums]
        else:
            eff = [math.inf if p else 0.0 for p in nums]
        want = tuple(
            LevelPrivacy(vl, ml, p / den, e) for vl, ml, p, e in zip(v, m, nums, eff, strict=True)
        )
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w)


@dataclass(frozen=True)
class _NoSlots:
    a: int


@dataclass(slots=True)
class _NotFrozen:
    a: int


@dataclass(frozen=True, slots=True)
class _Validated:
    a: int

    def __post_init__(self) -> None:
        if self.a < 0:
            raise ValueError


@dataclass(frozen=True, slots=True)
class _Derived:
    a: int
    b: int = dataclasses.field(init=False, default=0)


class _Plain:
    __slots__ = ("a",)


@pytest.mark.parametrize("cls", [_NoSlots, _NotFrozen, _Validated, _Derived, _Plain, int])
def test_only_plain_frozen_slotted_dataclasses(cls: type) -> None:
    with pytest.raises(InternalError, match="frozen, slotted dataclass"):
        slot_setters(cls)
    with pytest.raises(InternalError, match="frozen, slotted dataclass"):
        records(cls, [1])


def test_records_need_one_column_per_field_of_one_length() -> None:
    with pytest.raises(InternalError, match="one column per field"):
        records(LevelRow, [1.0], [2])
    with pytest.raises(InternalError, match="one column per field"):
        records(LevelRow, [1.0, 2.0], [2], [(3,)])
    assert len(slot_setters(LevelRow)) == 3


def test_gc_paused_restores_the_collector_and_leaves_it_off_when_it_was() -> None:
    import gc

    from hdp_spark.core.records import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested: the outer block restores
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError, match="boom"), gc_paused():
        raise ValueError("boom")
    assert gc.isenabled()  # restored after an exception too
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the caller's choice is kept
    finally:
        gc.enable()


def test_records_leave_the_collector_as_they_found_it() -> None:
    import gc

    assert gc.isenabled()
    records(LevelPrivacy, [1.0, 2.0], [3, 4], [0.5, 0.5], [1.0, 2.0])
    assert gc.isenabled()
