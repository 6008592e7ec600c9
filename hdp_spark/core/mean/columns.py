"""The released means of a batch of groups, column by column (:class:`MeanColumns`).

The batch finalize (:mod:`.batch`) computes every released figure of a group once; this
module holds them as one list per output field, and the per-level figures as flat lists with
group offsets (the layout of an Arrow ``list<struct>`` column). The Column aggregators build
their Arrow output straight from these lists; the release API turns them into
:class:`~hdp_spark.core.mean.finalize.MeanResult` records. No figure is computed here: the
module only moves released values between layouts.

Privacy: none of its own. Every value it holds is a released output of
:func:`~hdp_spark.core.mean.finalize.finalize_mean` (or of the batch path, equal to it bit for
bit) or a public fact of the release (method, ε levels and their row counts, as the release
API publishes them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hdp_spark.core.mean.finalize import LevelPrivacy, MeanResult
from hdp_spark.core.output_columns import Column, ListColumn
from hdp_spark.core.records import gc_paused, records
from hdp_spark.errors import InternalError

__all__ = ["GROUP_COLUMNS", "LEVEL_COLUMNS", "MeanColumns"]

GROUP_COLUMNS = ("estimate", "noise_scale", "ci_low", "ci_high", "bias_bound", "n", "tau",
                 "method", "fallback")
"""The per-group fields, in the order of :class:`MeanResult` (its last field is the levels)."""

LEVEL_COLUMNS = ("eps", "level_n", "weight", "eps_effective")
"""The per-level fields, in the order of :class:`LevelPrivacy` (``level_n`` is its ``n``)."""


@dataclass(frozen=True, slots=True)
class MeanColumns:
    """The released means of G groups, one list per field.

    Attributes:
        estimate, noise_scale, ci_low, ci_high, bias_bound, n, tau, method, fallback: one
            entry per group, as the fields of :class:`MeanResult` of the same name.
        level_offsets: G + 1 entries; group g's levels are
            ``[level_offsets[g], level_offsets[g + 1])`` of the level lists.
        eps, level_n, weight, eps_effective: one entry per level of every group, as the
            fields of :class:`LevelPrivacy` (``level_n`` is its ``n``).

    The lists are filled by the batch finalize (:meth:`append_result`, or directly by its
    loop) and read afterwards; :meth:`check` verifies their lengths agree.
    """

    estimate: list[float] = field(default_factory=list)
    noise_scale: list[float] = field(default_factory=list)
    ci_low: list[float] = field(default_factory=list)
    ci_high: list[float] = field(default_factory=list)
    bias_bound: list[float] = field(default_factory=list)
    n: list[int] = field(default_factory=list)
    tau: list[float] = field(default_factory=list)
    method: list[str] = field(default_factory=list)
    fallback: list[bool] = field(default_factory=list)
    level_offsets: list[int] = field(default_factory=lambda: [0])
    eps: list[float] = field(default_factory=list)
    level_n: list[int] = field(default_factory=list)
    weight: list[float] = field(default_factory=list)
    eps_effective: list[float] = field(default_factory=list)

    @property
    def size(self) -> int:
        """Number of groups."""
        return len(self.level_offsets) - 1

    def check(self) -> MeanColumns:
        """Self, after checking that every group column has one entry per group and every
        level column one per level.

        Raises:
            InternalError: the lists disagree in length.
        """
        groups, levels = self.size, self.level_offsets[-1]
        if (any(len(getattr(self, c)) != groups for c in GROUP_COLUMNS)
                or any(len(getattr(self, c)) != levels for c in LEVEL_COLUMNS)):
            msg = "MeanColumns needs one entry per group and one per level in every column"
            raise InternalError(msg)
        return self

    def append_result(self, r: MeanResult) -> None:
        """Append one group's released record (the scalar path's output)."""
        for name in GROUP_COLUMNS:
            getattr(self, name).append(getattr(r, name))
        for lv in r.levels:
            self.eps.append(lv.eps)
            self.level_n.append(lv.n)
            self.weight.append(lv.weight)
            self.eps_effective.append(lv.eps_effective)
        self.level_offsets.append(len(self.eps))

    @classmethod
    def from_results(cls, results: Sequence[MeanResult]) -> MeanColumns:
        """The columns of a list of records (:meth:`results` inverted)."""
        out = cls()
        for r in results:
            out.append_result(r)
        return out

    @classmethod
    def gather(cls, parts: Sequence[MeanColumns], where: Sequence[tuple[int, int]]
               ) -> MeanColumns:
        """Groups taken from several batches: group g of the output is group
        ``where[g][1]`` of ``parts[where[g][0]]``."""
        out = cls()
        for p, row in where:
            part = parts[p]
            for name in GROUP_COLUMNS:
                getattr(out, name).append(getattr(part, name)[row])
            lo, hi = part.level_offsets[row], part.level_offsets[row + 1]
            for name in LEVEL_COLUMNS:
                getattr(out, name).extend(getattr(part, name)[lo:hi])
            out.level_offsets.append(len(out.eps))
        return out.check()

    def value_columns(self) -> list[Column]:
        """The output columns of the release API's mean (``MeanKernel.values`` of every
        group, as columns): the group fields, then the ε levels as a ``ListColumn``.

        Privacy:
            None: released values in another layout.
        """
        self.check()
        out: list[Column] = [getattr(self, c) for c in GROUP_COLUMNS]
        out.append(ListColumn(self.level_offsets, {
            "eps": self.eps, "n": self.level_n, "weight": self.weight,
            "eps_effective": self.eps_effective}))
        return out

    def results(self) -> list[MeanResult]:
        """One :class:`MeanResult` per group (the release API's records)."""
        self.check()
        with gc_paused():  # a million records and tuples, no cycle (see records.gc_paused)
            built = records(LevelPrivacy, self.eps, self.level_n, self.weight,
                            self.eps_effective)
            offsets = self.level_offsets
            levels = [tuple(built[offsets[g]:offsets[g + 1]]) for g in range(self.size)]
            columns: list[Any] = [getattr(self, c) for c in GROUP_COLUMNS]
            return records(MeanResult, *columns, levels)

