"""Per-row keyed random streams: one ChaCha20 stream per row, drawn vectorized.

Privacy-critical: each row's local report is only as private as the secrecy and the
independence of its stream (a PRF of the secret release key); a predictable or shared
stream would reveal the coins of the randomizers.

The simulation transforms (:func:`hdp_spark.pandas.ldp_simulate`,
:func:`hdp_spark.spark.ldp_simulate`) must give every row the same report whatever batch,
partition or engine it lands in. So each row gets its own stream, keyed by a 256-bit row
key (a PRF of the release key, the randomizer, the row's identity and its exact input; see
:func:`hdp_spark.ldp.randomizers.run_randomizer`), and the samplers of
:mod:`hdp_spark.core.noise.vector` draw each row's bits from that row's stream only.

The stream of a row is the ChaCha20 keystream (Bernstein's ChaCha, 20 rounds, the block
function of RFC 8439 §2.3 with a 64-bit block counter in words 12-13 and a zero nonce)
under the row key, read as little-endian 64-bit words. The block function is computed
with numpy on all the rows that need a new block at once, so a batch costs a few dozen
array operations per 8 words per row, not a Python loop per row. The tests check it
against an independent ChaCha20 implementation.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from hdp_spark.errors import InternalError

__all__ = ["RowStreams", "chacha20_blocks"]

IntArray = npt.NDArray[np.int64]
U64Array = npt.NDArray[np.uint64]
U32Array = npt.NDArray[np.uint32]
FloatArray = npt.NDArray[np.float64]

_SIGMA = np.frombuffer(b"expand 32-byte k", dtype="<u4").astype(np.uint32)
_WORDS = 8  # 64-bit words per ChaCha block
_TWO53_INV = 2.0**-53


def _qr(x: list[U32Array], a: int, b: int, c: int, d: int, tmp: U32Array) -> None:
    """One ChaCha quarter round on the word arrays a, b, c, d (in place)."""
    xa, xb, xc, xd = x[a], x[b], x[c], x[d]
    for p, q, r, rot in ((xa, xb, xd, 16), (xc, xd, xb, 12), (xa, xb, xd, 8), (xc, xd, xb, 7)):
        np.add(p, q, out=p)
        np.bitwise_xor(r, p, out=r)
        np.right_shift(r, np.uint32(32 - rot), out=tmp)
        np.left_shift(r, np.uint32(rot), out=r)
        np.bitwise_or(r, tmp, out=r)


def chacha20_blocks(keys: U32Array, counters: U64Array) -> U32Array:
    """ChaCha20 block function per row: (n, 8) key words and (n,) counters -> (n, 16) words.

    Words 12-13 hold the 64-bit block counter (little endian), words 14-15 a zero nonce.
    """
    n = keys.shape[0]
    init = np.empty((16, n), dtype=np.uint32)
    init[0:4] = _SIGMA[:, None]
    init[4:12] = keys.T
    init[12] = (counters & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    init[13] = (counters >> np.uint64(32)).astype(np.uint32)
    init[14:16] = 0
    s = init.copy()
    x = [s[i] for i in range(16)]
    tmp = np.empty(n, dtype=np.uint32)
    for _ in range(10):
        _qr(x, 0, 4, 8, 12, tmp)
        _qr(x, 1, 5, 9, 13, tmp)
        _qr(x, 2, 6, 10, 14, tmp)
        _qr(x, 3, 7, 11, 15, tmp)
        _qr(x, 0, 5, 10, 15, tmp)
        _qr(x, 1, 6, 11, 12, tmp)
        _qr(x, 2, 7, 8, 13, tmp)
        _qr(x, 3, 4, 9, 14, tmp)
    s += init
    out: U32Array = np.ascontiguousarray(s.T)
    return out


class RowStreams:
    """One keyed ChaCha20 stream per row, read 64 bits at a time.

    Every draw names the rows it is for (``rows``, distinct indices into the batch); each
    listed row consumes the next words of its own stream. A row's draws therefore depend on
    its key and on the sequence of draws made for it only, never on the other rows of the
    batch: the same row gets the same bits in any batch.
    """

    __slots__ = ("_buf", "_counter", "_keys", "_pos")

    def __init__(self, row_keys: npt.NDArray[np.uint8]) -> None:
        keys = np.ascontiguousarray(row_keys, dtype=np.uint8)
        if keys.ndim != 2 or keys.shape[1] != 32:
            msg = "RowStreams needs an (n, 32) array of row keys"
            raise InternalError(msg)
        n = keys.shape[0]
        self._keys: U32Array = keys.view("<u4").astype(np.uint32).reshape(n, 8)
        self._counter: U64Array = np.zeros(n, dtype=np.uint64)
        self._buf: U64Array = np.zeros((n, _WORDS), dtype=np.uint64)
        self._pos: IntArray = np.full(n, _WORDS, dtype=np.int64)

    @property
    def n(self) -> int:
        """Number of rows."""
        return int(self._keys.shape[0])

    def u64(self, rows: IntArray) -> U64Array:
        """The next uniform 64-bit word of each listed row's stream."""
        need = rows[self._pos[rows] >= _WORDS]
        if need.size:
            block = chacha20_blocks(self._keys[need], self._counter[need])
            self._buf[need] = block.view("<u8").astype(np.uint64)
            self._counter[need] += np.uint64(1)
            self._pos[need] = 0
        pos = self._pos[rows]
        out: U64Array = self._buf[rows, pos]
        self._pos[rows] = pos + 1
        return out

    def integers(self, rows: IntArray, bound: IntArray | int) -> IntArray:
        """Exactly uniform integers in [0, bound) per listed row (bound >= 1, < 2**63).

        Rejection with a power-of-two mask: a candidate is the top ``bits`` bits of a word,
        kept when below the bound (acceptance >= 1/4), so no value is favoured.
        """
        b = np.broadcast_to(np.asarray(bound, dtype=np.int64), rows.shape).copy()
        if b.size and int(b.min()) < 1:
            msg = "integers needs bound >= 1"
            raise InternalError(msg)
        # bit length of bound - 1 from the float exponent; rounding can only add a bit
        bits = np.frexp((b - 1).astype(np.float64))[1].astype(np.int64)
        out = np.zeros(rows.shape[0], dtype=np.int64)
        pending = np.flatnonzero(bits > 0)
        while pending.size:
            word = self.u64(rows[pending])
            cand = (word >> (64 - bits[pending]).astype(np.uint64)).astype(np.int64)
            ok = cand < b[pending]
            out[pending[ok]] = cand[ok]
            pending = pending[~ok]
        return out

    def normal(self, rows: IntArray, d: int) -> FloatArray:
        """Float standard normals, shape (len(rows), d), by Box-Muller, then a fair sign.

        The per-row fair sign (an exact bit) makes the law of each row exactly symmetric
        (g and -g equally likely), which is what the privacy argument of
        :func:`hdp_spark.core.noise.vector.duchi_sphere` needs; Box-Muller's float
        rounding only affects uniformity (accuracy).
        """
        pairs = (d + 1) // 2
        out = np.empty((rows.shape[0], 2 * pairs), dtype=np.float64)
        for p in range(pairs):
            u1 = ((self.u64(rows) >> np.uint64(11)).astype(np.float64) + 1.0) * _TWO53_INV
            u2 = (self.u64(rows) >> np.uint64(11)).astype(np.float64) * _TWO53_INV
            r = np.sqrt(-2.0 * np.log(u1))
            out[:, 2 * p] = r * np.cos(2.0 * np.pi * u2)
            out[:, 2 * p + 1] = r * np.sin(2.0 * np.pi * u2)
        sign = np.where((self.u64(rows) >> np.uint64(63)) == 1, -1.0, 1.0)
        g: FloatArray = out[:, :d] * sign[:, None]
        return g
