"""Geometry of the attribute tree and the per-level requests the engines answer.

Privacy-critical: which nodes are noisy and which candidates each node processes define
the tree stage whose per-attribute loss Lemma 28 of Ghazi, Kumar, Manurangsi & Steinke,
*Algorithms with More Granular Differential Privacy Guarantees* bounds; only padded-only
blocks (a constant string, count n, public under replacement) may skip noise.

Leaves are the attributes in the caller's order, padded with constant leaves to d_pad =
2^D. The node ``(ℓ, i)`` covers leaves ``[i·2^ℓ, (i+1)·2^ℓ)``; its children are
``(ℓ-1, 2i)`` and ``(ℓ-1, 2i+1)``. A node is *noisy* iff it covers a real attribute; a
block of padded leaves only holds one constant string (count n, public under replacement
neighbours), so it is a public pass-through list ``(0,)`` with no noise and no privacy
cost.

Keys. A node's key of a record is the mixed-radix number of the codes of its real
attributes, most significant first: ``key = Σ_j code_j · w_j`` with w_j the product of the
sizes of the node's later attributes. Hence ``key(I) = key(I_left) · M(I_right) +
key(I_right)``, where M(·) is the size of a key space: the node's candidate product
``L_left ∘ L_right`` is a set of node keys, and a whole-record key fits in int64 because
``HeavyHittersSpec`` bounds the product of all domain sizes by 2^62.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hdp_spark.errors import InternalError

__all__ = ["ChildFilter", "NodeRequest", "decode_key", "key_weights", "node_attrs"]


def node_attrs(level: int, index: int, d_real: int) -> tuple[int, ...]:
    """The real attributes covered by node (level, index)."""
    start = index << level
    return tuple(range(start, min(start + (1 << level), d_real)))


def key_weights(attrs: Sequence[int], sizes: Sequence[int]) -> tuple[int, ...]:
    """Mixed-radix weights of a node's attributes (most significant first)."""
    out = []
    w = 1
    for j in reversed(attrs):
        out.append(w)
        w *= sizes[j]
    return tuple(reversed(out))


def key_space(attrs: Sequence[int], sizes: Sequence[int]) -> int:
    """Number of distinct keys of a node (1 for a padded-only block)."""
    return math.prod(sizes[j] for j in attrs)


def decode_key(key: int, attrs: Sequence[int], sizes: Sequence[int]) -> tuple[int, ...]:
    """The attribute codes of a node key."""
    codes = []
    for j in reversed(attrs):
        key, c = divmod(key, sizes[j])
        codes.append(c)
    if key:
        msg = "a key outside its key space"
        raise InternalError(msg)
    return tuple(reversed(codes))


@dataclass(frozen=True, slots=True)
class ChildFilter:
    """Membership test of one child: the row's child key must be in ``members``.

    Attributes:
        attrs: the child's real attributes.
        weights: their mixed-radix weights in the child's key.
        members: the child's surviving keys, sorted (public: a DP output).
    """

    attrs: tuple[int, ...]
    weights: tuple[int, ...]
    members: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class NodeRequest:
    """What an engine counts for one noisy node in a level pass.

    For every row whose restrictions to the children pass ``filters`` (a child whose
    filter would be its whole key space needs no test), count the row under the node key
    ``Σ code_j · weights_j`` over ``attrs``. The engine returns only keys whose count
    exceeds the level's floor. A filter holds the child's surviving keys, below the root
    narrowed to those whose own count exceeds the floor (see
    ``heavy_hitters._engine_filter``): the counts of all high candidates are unchanged.

    Attributes:
        node: index of the node within its level.
        attrs: the node's real attributes.
        weights: mixed-radix weights of the node key.
        filters: membership tests of the children (0 to 2).
    """

    node: int
    attrs: tuple[int, ...]
    weights: tuple[int, ...]
    filters: tuple[ChildFilter, ...]
