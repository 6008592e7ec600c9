"""Release keys and keyed pseudo-random bit streams.

Privacy-critical: a predictable key or a context that omits the data would let noise be
averaged away (re-evaluation) or cancelled (the same noise on changed data gives
f̂(D) - f̂(D') = f(D) - f(D')). The guarantee rests on a secret 32-byte key from OS entropy
and on contexts that bind the group and the exact statistics (argument below).

A :class:`ReleaseKey` is 32 bytes from the operating system's CSPRNG, made when a release is
created. Each noise draw gets its own :class:`KeyedStream`, derived as
``HMAC-SHA256(release key, domain tag || context)`` and expanded with keyed BLAKE2b in
counter mode. Both are standard PRFs, so for a secret key the stream is indistinguishable
from uniform bits, and two different contexts give independent-looking streams.

Why keyed and not fresh randomness per draw: Spark re-evaluates plans (``show()`` then
``collect()``, cache eviction, task retries). Fresh noise per evaluation would let anyone
average it away; replaying noise for a *different* dataset would let the difference of two
outputs cancel the noise exactly. Binding the stream to the exact pre-noise statistics gives
"same data, same numbers; changed data, unrelated noise".

Generators are built on demand inside the process that draws, from the key; nothing is
created at import time, so a fork (Spark's Python workers) cannot duplicate a stream.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import secrets
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from hdp_spark.errors import InternalError, ParameterError

__all__ = [
    "KeyedStream",
    "ReleaseKey",
    "encode_bytes",
    "encode_context",
    "encode_context_head",
    "encode_context_parts",
    "encode_context_tail",
    "encode_rational",
    "public_seed",
    "stream_block",
]

_DOMAIN = b"hdp_spark/noise/v1\x00"
_QUERY_DOMAIN = b"hdp_spark/query-key/v1\x00"
_log = logging.getLogger("hdp_spark")
_KEY_BYTES = 32


def public_seed(bits: int) -> int:
    """A fresh ``bits``-bit seed from the operating system's CSPRNG for a *public* parameter.

    Used for parameters that are published but must not depend on the data, such as the
    seed of the frequency oracle's projection Φ (:mod:`hdp_spark.core.ldp.oracle`).

    Privacy:
        No private input: the seed is independent of the data by construction and is
        published with the parameter it seeds; it is not a release key and never keys noise.
    """
    return secrets.randbits(bits)


@dataclass(frozen=True, slots=True)
class ReleaseKey:
    """Secret key of one release.

    Attributes:
        material: 32 secret bytes. Never logged, never written to outputs.
        unsafe: True when the key was derived from a caller's seed (tests only).
        origin: (the parent key, the query's fingerprint) of a query's key
            (:meth:`for_query`), None otherwise.
    """

    material: bytes = field(repr=False)
    unsafe: bool = False
    origin: tuple[ReleaseKey, str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.material, bytes) or len(self.material) != _KEY_BYTES:
            msg = f"`material` must be {_KEY_BYTES} bytes."
            raise ParameterError(msg)

    @classmethod
    def fresh(cls) -> ReleaseKey:
        """A new key from the OS entropy pool (the production default)."""
        return cls(secrets.token_bytes(_KEY_BYTES))

    @classmethod
    def from_unsafe_seed(cls, seed: int | str | bytes) -> ReleaseKey:
        """Derive a key from a public seed.

        UNSAFE for production: anyone who knows the seed can subtract the noise. Exists so
        that tests and documentation examples are reproducible. Every release (or
        simulation) that runs with a seeded key goes through here, so this is where the
        WARNING of logger ``hdp_spark`` is emitted, once per release (the seed itself is
        never logged).
        """
        if isinstance(seed, bool) or not isinstance(seed, int | str | bytes):
            msg = f"`unsafe_seed` must be an int, str or bytes, got {type(seed).__name__}."
            raise ParameterError(msg)
        raw = seed if isinstance(seed, bytes) else str(seed).encode()
        _log.warning(
            "a release runs with `unsafe_seed`: its noise is reproducible by anyone who knows "
            "the seed and is NOT private; its outputs are marked `hdp_unsafe_seed`"
        )
        return cls(hashlib.sha256(b"hdp_spark/unsafe-seed\x00" + raw).digest(), unsafe=True)

    @classmethod
    def resolve(cls, unsafe_seed: int | str | bytes | ReleaseKey | None) -> ReleaseKey:
        """A fresh key, or a seeded one when the caller opted into ``unsafe_seed``.

        A seeded key itself (``unsafe=True``, e.g. a Column's query key in a test that
        compares the Column with the release API) is taken as it is; a production key is
        refused: keys are never passed around as seeds.
        """
        if isinstance(unsafe_seed, ReleaseKey):
            if not unsafe_seed.unsafe:
                msg = "`unsafe_seed` takes a seed, or a seeded key; got a secret release key."
                raise ParameterError(msg)
            return unsafe_seed
        return cls.fresh() if unsafe_seed is None else cls.from_unsafe_seed(unsafe_seed)

    def for_query(self, fingerprint: str) -> ReleaseKey:
        """The key of one query under this key: ``HMAC-SHA256(key, tag || fingerprint)``.

        A Column or SQL registration holds one key and may run many queries; each query's
        noise comes from its own key, derived from the fingerprint of what it aggregates
        (computed by the engine from the analyzed plan, never published).

        Privacy:
            Two different queries get keys that are independent-looking (HMAC is a PRF), so
            equal statistics under two queries never give equal outputs; one query
            re-evaluated derives the same key, so its numbers repeat. The derived key is as
            secret as this one and keeps its ``unsafe`` mark.
        """
        if not isinstance(fingerprint, str) or not fingerprint:
            msg = "`fingerprint` must be a non-empty string."
            raise ParameterError(msg)
        material = hmac.new(self.material, _QUERY_DOMAIN + fingerprint.encode(),
                            hashlib.sha256).digest()
        # the parent and the fingerprint: the query's privacy-unit bounding key derives
        # from them publicly (hdp_spark.core.privacy_unit.spec.bounding_key)
        return ReleaseKey(material, unsafe=self.unsafe, origin=(self, fingerprint))

    def stream(self, context: bytes) -> KeyedStream:
        """The bit stream of one draw, bound to ``context`` (see :func:`encode_context`)."""
        return KeyedStream(self, context)

    def stream_keys(self, contexts: Sequence[bytes]) -> list[bytes]:
        """The block key of ``self.stream(c)`` for each context (its bytes are
        :func:`stream_block` of that key): ``HMAC-SHA256(key, domain || c)``, with the HMAC
        state over the key and the domain tag computed once for all contexts.

        Privacy:
            The same PRF outputs as :class:`KeyedStream` (the tests compare them); as
            secret as the key.
        """
        base = hmac.new(self.material, _DOMAIN, "sha256")
        out = []
        for context in contexts:
            mac = base.copy()
            mac.update(context)
            out.append(mac.digest())
        return out


class KeyedStream:
    """Deterministic uniform bits for one (key, context) pair.

    Implements the two methods the exact samplers need: :meth:`getrandbits` and
    :meth:`randrange` (rejection sampling, so exactly uniform).
    """

    __slots__ = ("_block_key", "_buffer", "_counter", "_pos")

    def __init__(self, key: ReleaseKey, context: bytes) -> None:
        # hmac.digest: the same HMAC-SHA256 bytes as hmac.new(...).digest(), in one call
        self._block_key = hmac.digest(key.material, _DOMAIN + context, "sha256")
        self._counter = 0
        self._buffer = b""  # unread stream bytes start at self._pos
        self._pos = 0

    def _take(self, nbytes: int) -> bytes:
        end = self._pos + nbytes
        if end > len(self._buffer):
            blocks = [self._buffer[self._pos :]]
            have = len(blocks[0])
            while have < nbytes:
                blocks.append(stream_block(self._block_key, self._counter))
                self._counter += 1
                have += 64
            self._buffer, self._pos, end = b"".join(blocks), 0, nbytes
        out = self._buffer[self._pos : end]
        self._pos = end
        return out

    def getrandbits(self, k: int) -> int:
        """A uniform integer in [0, 2**k)."""
        if k <= 0:
            if k == 0:
                return 0
            msg = "getrandbits needs k >= 0"
            raise InternalError(msg)
        nbytes = (k + 7) >> 3
        return int.from_bytes(self._take(nbytes), "big") >> (8 * nbytes - k)

    def randrange(self, n: int) -> int:
        """A uniform integer in [0, n), n >= 1, by rejection (no modulo bias).

        Draws exactly what ``getrandbits(n.bit_length())`` would, with its buffer read inline
        (the exact samplers call this a dozen times per draw).
        """
        if n < 1:
            msg = "randrange needs n >= 1"
            raise InternalError(msg)
        k = n.bit_length()
        nbytes = (k + 7) >> 3
        shift = 8 * nbytes - k
        while True:
            pos = self._pos
            end = pos + nbytes
            if end <= len(self._buffer):
                self._pos = end
                chunk = self._buffer[pos:end]
            else:
                chunk = self._take(nbytes)
            r = int.from_bytes(chunk, "big") >> shift
            if r < n:
                return r

    def derive_seed(self, nbits: int = 256) -> int:
        """An integer seed for a bulk generator (e.g. a ChaCha bit generator)."""
        return self.getrandbits(nbits)


def stream_block(block_key: bytes, counter: int) -> bytes:
    """Block ``counter`` (64 bytes) of the stream with ``block_key``: keyed BLAKE2b of the
    counter (16 bytes, big-endian), counter mode. A stream's bytes are its blocks 0, 1, ...
    one after another.

    Privacy:
        The PRF expansion of :class:`KeyedStream` (its bytes; as secret as the block key).
    """
    return hashlib.blake2b(counter.to_bytes(16, "big"), key=block_key, digest_size=64).digest()


_LENGTH = struct.Struct(">I").pack
_ONE = b"(" + _LENGTH(1)  # a tuple of one item


def _encode(part: Any, out: list[bytes]) -> None:
    # exact built-in types first (the bytes are those of the general branches below);
    # subclasses (bool, numpy scalars, ...) take the general branches
    kind = type(part)
    if kind is int:
        raw = b"%d" % part
        out.append(b"i" + _LENGTH(len(raw)) + raw)
    elif kind is bytes:
        out.append(b"b" + _LENGTH(len(part)) + part)
    elif kind is Fraction:
        raw = b"%d/%d" % (part.numerator, part.denominator)
        out.append(b"q" + _LENGTH(len(raw)) + raw)
    elif kind is tuple:
        out.append(b"(" + _LENGTH(len(part)))
        for item in part:
            _encode(item, out)
        out.append(b")")
    else:
        _encode_general(part, out)


def _encode_general(part: object, out: list[bytes]) -> None:
    if part is None:
        out.append(b"N")
    elif isinstance(part, bool):
        out.append(b"T" if part else b"F")
    elif isinstance(part, int):
        raw = str(part).encode()
        out.append(b"i" + struct.pack(">I", len(raw)) + raw)
    elif isinstance(part, float):
        if math.isnan(part):
            msg = "NaN in a noise context"
            raise InternalError(msg)
        raw = part.hex().encode()
        out.append(b"f" + struct.pack(">I", len(raw)) + raw)
    elif isinstance(part, Fraction):
        raw = f"{part.numerator}/{part.denominator}".encode()
        out.append(b"q" + struct.pack(">I", len(raw)) + raw)
    elif isinstance(part, str):
        raw = part.encode()
        out.append(b"s" + struct.pack(">I", len(raw)) + raw)
    elif isinstance(part, bytes):
        out.append(b"b" + struct.pack(">I", len(part)) + part)
    elif isinstance(part, tuple | list):
        out.append(b"(" + struct.pack(">I", len(part)))
        for item in part:
            _encode(item, out)
        out.append(b")")
    else:
        msg = f"cannot encode a {type(part).__name__} into a noise context"
        raise InternalError(msg)


def encode_context(parts: Sequence[object]) -> bytes:
    """Canonical, injective byte encoding of a tuple of primitive values.

    Accepts None, bool, int, float (by its exact hex form), Fraction, str, bytes and nested
    tuples or lists of those. Two contexts are equal as bytes iff they are equal as values
    (with floats compared bit for bit).
    """
    out: list[bytes] = []
    _encode(tuple(parts), out)
    return b"".join(out)


def encode_context_head(parts: Sequence[object], length: int) -> bytes:
    """The first items of a context of ``length`` items, encoded once.

    ``encode_context_tail(encode_context_head(a, len(a) + len(b)), b)`` equals
    ``encode_context((*a, *b))`` byte for byte: a release encodes the parts shared by all
    its groups once instead of once per group.
    """
    out = [b"(" + struct.pack(">I", length)]
    for item in parts:
        _encode(item, out)
    return b"".join(out)


def encode_context_tail(head: bytes, parts: Sequence[object]) -> bytes:
    """Complete a context started by :func:`encode_context_head` with its last items."""
    out = [head]
    for item in parts:
        _encode(item, out)
    out.append(b")")
    return b"".join(out)


def encode_context_parts(parts: Iterable[object]) -> list[bytes]:
    """Each item's bytes in a context: ``encode_context_tail(head, items)`` equals
    ``head + b"".join(encode_context_parts(items)) + b")"`` (a batch encodes the items
    that differ per group once per group, and joins them with the shared ones)."""
    out: list[bytes] = []
    parts_out: list[bytes] = []
    for item in parts:
        if type(item) is tuple and len(item) == 1:  # a one-column group key: its bytes
            kind = type(item[0])  # as _encode writes them, without the recursion
            if kind is int:
                raw = b"%d" % item[0]
                parts_out.append(_ONE + b"i" + _LENGTH(len(raw)) + raw + b")")
                continue
            if kind is str:
                raw = item[0].encode()
                parts_out.append(_ONE + b"s" + _LENGTH(len(raw)) + raw + b")")
                continue
        _encode(item, out)
        parts_out.append(b"".join(out))
        out.clear()
    return parts_out


def encode_rational(num: int, den: int) -> bytes:
    """The context bytes of ``Fraction(num, den)`` for ``den > 0`` (reduced by one gcd, as
    the Fraction would be, without building it)."""
    g = math.gcd(num, den)
    raw = b"%d/%d" % (num // g, den // g)
    return b"q" + _LENGTH(len(raw)) + raw


def encode_bytes(data: bytes) -> bytes:
    """The context bytes of the item ``data`` (bytes)."""
    return b"b" + _LENGTH(len(data)) + data
