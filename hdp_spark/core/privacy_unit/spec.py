"""The privacy unit: a person is every row with the same id, with public contribution bounds.

Privacy-critical (the bounding rule every engine implements; the aggregators' guarantees
at the person level rest on it).

A release over a table with many rows per person bounds, before any statistic is computed,
what one person can contribute:

1. **Person.** Every row whose ``column`` holds the same non-null id. Rows with a null id
   belong to nobody that can be bounded and are dropped (a public rule, applied the same
   way on every table: no error, nothing published about them).
2. **The person's ε.** ε_person = the smallest ε of the person's rows, over all their rows
   (whatever groups they are in), each row's ε first made safe the way a release reads an
   ε column: null, NaN and negative become 0 ("do not use my data"), +∞ stays +∞. A person
   with one unusable row therefore spends nothing. This is data-independent handling: no
   error depends on the data.
3. **At most ``max_groups`` groups per person**: among the groups the person's rows fall
   in (the public keys; under ``select_keys`` every group whose key holds no null), the
   ``max_groups`` with the smallest group rank (below) are kept. A group enters its rank
   text as its position in the public key order, or under ``select_keys`` as its canonical
   text (:func:`group_key_text`) — never as its place among the groups found, which would
   make one person's kept rows depend on which groups other persons' rows create.
4. **At most ``max_rows`` rows per person and group**: within a kept (person, group), the
   ``max_rows`` rows with the smallest row rank are kept.

The ranks are the release's keyed PRF, not table order and not values:
``rank`` = the first 60 bits of ``SHA-256(text)`` over texts that start with the release's
*bounding key*
(``HMAC-SHA256(release key, "privacy-unit/bounding")``, as hex) — see
:func:`group_rank_text` and :func:`row_rank_text`. So the choice is reproducible when one
release is re-evaluated (Spark may recompute a partition), the same on every engine, and
independent across releases (another key, another choice). A row's rank reads the row's
*codes* (the integers the release's aggregators read from it: fixed-point values, category
codes); two rows of one person and group with equal codes are interchangeable for every
statistic, so how ties between them break never changes a release.

Why any such rule is safe (the sensitivity argument the aggregators build on): the rule
is applied to each person separately — which of person p's rows are kept, and ε_p, are
functions of p's own rows and the key only. Adding, removing or replacing all of p's rows
therefore changes only p's kept rows, and p keeps at most ``max_groups × max_rows`` of
them, in at most ``max_groups`` groups, all at ε_p. For these rules the bounding key is
not a privacy secret (knowing it reveals which rows a rule would keep, not any noise); it
is derived from the release key only so that two releases choose independently. The
local-DP rule (one report per person, :mod:`hdp_spark.core.privacy_unit.ldp`) is
different: its guarantee needs the kept position unknown to whoever reads the output, so
there the bounding key must stay with the operator (if it leaks, a person's loss falls
back to the one-row guarantee, the sum of their reports' ε, never more).

Each kept (person, group) pair is then given ε_person / ``max_groups`` — always the public
bound, never the person's actual number of groups (dividing by the actual number would make
the per-group ε histogram depend on private membership).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from hdp_spark.core.noise import ReleaseKey, encode_context
from hdp_spark.errors import ParameterError

__all__ = [
    "MAX_GROUPS_LIMIT",
    "MAX_ROWS_LIMIT",
    "SEPARATOR",
    "PrivacyUnit",
    "bounding_key",
    "group_key_text",
    "group_rank_text",
    "query_bounding_key",
    "rank",
    "report_rank_text",
    "row_rank_text",
]

MAX_GROUPS_LIMIT = 10_000
"""The largest ``max_groups`` taken."""

MAX_ROWS_LIMIT = 1_000_000
"""The largest ``max_rows`` taken."""

SEPARATOR = "\x1f"
"""The separator of the rank texts' parts (a control character no id is expected to hold;
the person's id is length-prefixed anyway)."""
_SEP = SEPARATOR
_BOUNDING_CONTEXT = ("privacy-unit", "bounding", 1)


def _bound(name: str, value: object, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        msg = f"`{name}` must be an int in [1, {limit}], got {value!r}."
        raise ParameterError(msg)
    return value


@dataclass(frozen=True, slots=True)
class PrivacyUnit:
    """Who is protected, and how much of them a release may read.

    Attributes:
        column: the id column: all rows with the same non-null id are one person (an
            integer or string column; the engines refuse other types before reading data).
        max_groups: the most groups one person contributes to (public, >= 1).
        max_rows: the most rows one person contributes to one group (public, >= 1).

    Privacy:
        The bounds are public parameters and must not be chosen from the data (a bound set
        to the largest contribution in the table reveals it). See the module docstring for
        the bounding rule and why it holds for any table.
    """

    column: str
    max_groups: int = 1
    max_rows: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            msg = f"`privacy_unit` must be a non-empty column name, got {self.column!r}."
            raise ParameterError(msg)
        _bound("max_groups", self.max_groups, MAX_GROUPS_LIMIT)
        _bound("max_rows", self.max_rows, MAX_ROWS_LIMIT)

    @property
    def max_contributions(self) -> int:
        """The most rows one person contributes to a release: ``max_groups × max_rows``."""
        return self.max_groups * self.max_rows


def bounding_key(key: ReleaseKey) -> str:
    """The bounding key of a release (64 hex digits): ``HMAC-SHA256(release key, domain ||
    context("privacy-unit", "bounding", 1))``, the block key of a stream no draw uses; for
    the key of one query of a Column or SQL aggregator (:meth:`ReleaseKey.for_query`),
    :func:`query_bounding_key` of its parent's bounding key and the query's fingerprint.

    Privacy:
        Not a noise key: it orders rows for the bounding rule only, and the rule is safe
        whatever the order (module docstring). Engines may place it in a query plan.
    """
    if key.origin is not None:
        parent, fingerprint = key.origin
        return query_bounding_key(bounding_key(parent), fingerprint)
    return key.stream_keys([encode_context(_BOUNDING_CONTEXT)])[0].hex()


def query_bounding_key(bkey: str, fingerprint: str) -> str:
    """The bounding key of one query of a Column or SQL aggregator whose own bounding key
    is ``bkey``: SHA-256 (hex) of ``bkey``, ``"query"`` and the query's fingerprint, joined
    by the separator. The JVM extension computes it when it analyzes the query (it holds
    ``bkey`` and the fingerprint, never the release key), so a Column keeps the rows the
    release API keeps under the query's key; two queries choose independently.

    Privacy:
        Not a secret (see :func:`bounding_key`): a public function of two values already in
        the query's plan.
    """
    text = _SEP.join((bkey, "query", fingerprint))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _person(person: str) -> str:
    # length-prefixed: an id that contains the separator cannot imitate another text
    return f"{len(person)}:{person}"


def _group(group: int | str) -> str:
    # a position in decimal, or (under select_keys) the group's canonical key text
    return group if isinstance(group, str) else str(int(group))


def group_key_text(texts: Sequence[str]) -> str:
    """The canonical text of a group under ``select_keys`` (no public key order): each
    grouping value's text (an integer in decimal, a string as it is) length-prefixed, so
    that no value can imitate two. A function of the group's own values only — never of
    which other groups exist — so a person's ranks do not depend on other persons' rows.

    Privacy:
        None: a public function of one group's values.
    """
    return "".join(f"{len(t)}:{t}" for t in texts)


def group_rank_text(bkey: str, person: str, group: int | str) -> str:
    """The text whose SHA-256 ranks group ``group`` (its position in the public key order,
    0 for a global release, or under ``select_keys`` its :func:`group_key_text`) among
    person ``person``'s groups (``person``: the id as text, an integer id in decimal).

    Privacy:
        None: a public function; the key makes it the release's own.
    """
    return _SEP.join((bkey, "g", _person(person), _group(group)))


def row_rank_text(bkey: str, person: str, group: int | str, codes: str) -> str:
    """The text whose SHA-256 ranks a row of (``person``, ``group``) with codes ``codes``
    (the row's integer codes in decimal, joined by ``,``).

    Privacy:
        None: a public function; the key makes it the release's own.
    """
    return _SEP.join((bkey, "r", _person(person), _group(group), codes))


def report_rank_text(bkey: str, name: str, person: str) -> str:
    """The text whose SHA-256 places the one report a local-DP aggregator named ``name``
    keeps of person ``person`` (:mod:`hdp_spark.core.privacy_unit.ldp`): the kept position
    is its :func:`rank` modulo the number of the person's candidate reports. It reads no
    value: the position must not depend on the reports.

    Privacy:
        None: a public function; the key makes it the release's own (the LDP rule needs
        that key unknown to whoever reads the output: see the LDP module).
    """
    return _SEP.join((bkey, "ldp", name, _person(person)))


def rank(text: str) -> int:
    """The first 60 bits of the SHA-256 of ``text`` (UTF-8), as an integer: what Spark's
    ``conv(substring(sha2(text, 256), 1, 15), 16, 10)`` computes, so both engines order by
    the same numbers (ties, about 2**-60 per pair, are broken by the group, then by the
    codes, on both engines).

    Privacy:
        None.
    """
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:15], 16)
