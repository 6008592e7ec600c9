"""A :class:`~hdp_spark.core.partial.heavy_hitters.TreeCounter` that answers from the exact
count of each distinct whole record (the heavy hitters' sufficient statistics).

Every question the tree asks -- per noisy node, the counts of its candidate keys among the
rows whose children's keys survived -- is a function of the multiset of whole records, so a
table of (whole-record key, count) answers it exactly: a node key is a function of the
record key (its attributes' codes, decoded by mixed radix), and a row passes a child filter
iff its record does. The Spark Column aggregator's native aggregate computes that table per
group; its finalize runs :func:`~hdp_spark.core.partial.heavy_hitters.run_heavy_hitters`
with this counter, so its answers (hence the release, for the same key) are the engines'.

Engine-agnostic: numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from hdp_spark.core.partial.tree import NodeRequest, key_weights
from hdp_spark.errors import InternalError

__all__ = ["RecordCounter"]

Codes = npt.NDArray[np.int64]


class RecordCounter:
    """Exact counts from (whole-record key, count) pairs.

    Args:
        keys: distinct whole-record keys (``Σ code_j · w_j`` over all attributes, the
            weights of :func:`~hdp_spark.core.partial.tree.key_weights`).
        counts: the number of rows of each key (positive).
        sizes: the number of codes of each attribute.
    """

    def __init__(self, keys: Sequence[int] | Codes, counts: Sequence[int] | Codes,
                 sizes: Sequence[int]) -> None:
        self._keys = np.asarray(keys, dtype=np.int64)
        self._counts = np.asarray(counts, dtype=np.int64)
        if self._keys.shape != self._counts.shape or self._keys.ndim != 1:
            msg = "record keys and counts must be two arrays of one length"
            raise InternalError(msg)
        self._sizes = tuple(int(s) for s in sizes)
        self._weights = key_weights(range(len(self._sizes)), self._sizes)
        codes = np.empty((self._keys.size, len(self._sizes)), dtype=np.int64, order="F")
        for j, (w, size) in enumerate(zip(self._weights, self._sizes, strict=True)):
            codes[:, j] = (self._keys // np.int64(w)) % np.int64(size)
        self._codes = codes

    def __enter__(self) -> RecordCounter:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def _key(self, attrs: Sequence[int], weights: Sequence[int]) -> Codes:
        key = np.zeros(self._keys.size, dtype=np.int64)
        for j, w in zip(attrs, weights, strict=True):
            key += self._codes[:, j] * np.int64(w)
        return key

    def _sum(self, key: Codes, weight: Codes) -> tuple[Codes, Codes]:
        """Distinct keys and the total weight of each (exact int64 sums)."""
        if key.size == 0:
            return key, weight
        order = np.argsort(key, kind="stable")
        key, weight = key[order], weight[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        return key[starts], np.add.reduceat(weight, starts)

    def count_level(
        self, requests: Sequence[NodeRequest], floor: int
    ) -> dict[int, dict[int, int]]:
        """Per requested node, ``{node key: count}`` of the keys with count > ``floor``."""
        out: dict[int, dict[int, int]] = {}
        for r in requests:
            key = self._key(r.attrs, r.weights)
            mask: npt.NDArray[np.bool_] | None = None
            for f in r.filters:
                inside = np.isin(self._key(f.attrs, f.weights),
                                 np.asarray(f.members, dtype=np.int64))
                mask = inside if mask is None else mask & inside
            weight = self._counts
            if mask is not None:
                key, weight = key[mask], weight[mask]
            uniq, cnt = self._sum(key, weight)
            keep = cnt > floor
            out[r.node] = dict(zip(uniq[keep].tolist(), cnt[keep].tolist(), strict=True))
        return out

    def count_keys(self, weights: Sequence[int], keys: Sequence[int]) -> dict[int, int]:
        """Exact counts of the given whole-record keys."""
        key = (self._keys if tuple(weights) == self._weights
               else self._key(range(len(self._sizes)), weights))
        uniq, cnt = self._sum(key, self._counts)
        keep = np.isin(uniq, np.asarray(keys, dtype=np.int64))
        return dict(zip(uniq[keep].tolist(), cnt[keep].tolist(), strict=True))
