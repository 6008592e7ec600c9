"""Exact discrete Laplace draws for many keyed streams at once, bit for bit the scalar ones.

Privacy-critical: the central releases' batch finalize draws its noise here.
:func:`discrete_laplace_batch` returns, for each (context, T, s), exactly the integer that
``_discrete_laplace_int(T, s, key.stream(context))`` (:mod:`.exact`, Canonne, Kamath &
Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020, Algorithms 1-2)
returns: the same stream bytes are read in the same order and compared with the same
integers, only many streams advance together as numpy array steps. The law of every draw is
therefore the scalar sampler's (exactly discrete Laplace of scale T), and nothing is shared
between draws: each lane reads its own stream.

How the lanes run. Each stream's first :data:`BLOCKS` BLAKE2b blocks are computed up front
(``KeyedStream``'s bytes: the HMAC-SHA256 block key, then keyed BLAKE2b in counter mode),
and every ``randrange(n)`` of the scalar sampler becomes a masked step over the lanes that
make that call: read ``ceil(bitlen(n)/8)`` big-endian bytes at the lane's position, shift,
reject if ``>= n`` and read again, exactly as :meth:`KeyedStream.randrange`. The fractions
of Algorithm 1 are reduced with ``gcd`` as the scalar code reduces them. A lane whose draw
would read past its buffer, or whose integers would leave the exact range of the array
steps (``T >= 2**46``, more than 127 Bernoulli steps), is marked and drawn again by the
scalar sampler from a fresh stream of the same context: the same bits either way.

Runs. :func:`discrete_laplace_runs` draws ``count`` values one after another from each
stream (a group whose bins share one stream): the lanes keep their read positions from one
round of draws to the next, exactly as the scalar sampler keeps reading its stream, and a
lane that overruns anywhere in its run is redrawn whole by the scalar sampler.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from hdp_spark.core.noise.exact import _discrete_laplace_int, floats_on_grid
from hdp_spark.core.noise.prf import ReleaseKey, stream_block
from hdp_spark.errors import InternalError

__all__ = ["BLOCKS", "CHUNK", "MAX_SCALE", "discrete_laplace_batch", "discrete_laplace_runs",
           "floats_on_grid_batch"]

BLOCKS = 2
"""BLAKE2b blocks (64 bytes each) per lane; a draw reads ~20-40 bytes, a longer one falls
back to the scalar sampler (about 0.4 % of draws at T ~ 2**30)."""

MAX_SCALE = 1 << 46
"""Lanes run for ``T < MAX_SCALE``: every ``randrange`` bound (at most ``T·k``, k < 128)
stays below 2**53, where the float64 exponent gives its bit length exactly."""

_MAX_K = 128

CHUNK = 1 << 16
"""Lanes drawn together: their buffers (128 bytes each) and index arrays stay ~10 MB."""

U64 = npt.NDArray[np.uint64]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]


def _buffers(key: ReleaseKey, contexts: Sequence[bytes], blocks: int
             ) -> npt.NDArray[np.uint8]:
    """The first ``blocks`` blocks of each context's stream, one row per lane."""
    counters = range(blocks)
    data = b"".join([stream_block(block_key, c) for block_key in key.stream_keys(contexts)
                     for c in counters])
    return np.frombuffer(data, dtype=np.uint8).reshape(len(contexts), 64 * blocks)


def _bit_length(n: U64) -> I64:
    """Exact bit length of 1 <= n < 2**53 (the float64 exponent of an exact value)."""
    return np.frexp(n.astype(np.float64))[1].astype(np.int64)


class _Lanes:
    """Per-lane byte buffers and read positions (:meth:`KeyedStream.randrange`, masked)."""

    def __init__(self, buffers: npt.NDArray[np.uint8]) -> None:
        rows, self.width = buffers.shape
        self.pos = np.zeros(rows, dtype=np.int64)
        self.over = np.zeros(rows, dtype=bool)
        # words[i, p]: the 8 bytes of lane i from position p as one big-endian integer (a
        # strided view over the buffers, each row padded with 8 zero bytes): a read of
        # nbytes <= 7 (or one bit) is the top bits of one gathered word, not nbytes gathers
        padded = np.zeros((rows, self.width + 8), dtype=np.uint8)
        padded[:, :self.width] = buffers
        self.words: npt.NDArray[Any] = np.ndarray(
            (rows, self.width), dtype=">u8", buffer=padded, strides=(self.width + 8, 1))

    def randrange(self, lanes: I64, n: U64) -> U64:
        """A uniform integer in [0, n[i]) for each lane ``lanes[i]``; over-read lanes are
        marked in :attr:`over` and get 0."""
        out = np.zeros(lanes.shape[0], dtype=np.uint64)
        bits = _bit_length(n)
        nbytes = (bits + 7) >> 3
        # the scalar reads nbytes big-endian bytes and drops their 8·nbytes - bits low bits:
        # the top ``bits`` bits of the word at the read position (bits <= 53 < 64; bytes
        # past the read, the padding included, are shifted out)
        drop = (64 - bits).astype(np.uint64)
        todo = np.arange(lanes.shape[0])
        last = self.width - 1
        while todo.size:
            lane, nb = lanes[todo], nbytes[todo]
            at = self.pos[lane]
            bad = at + nb > self.width
            self.over[lane[bad]] = True
            value = self.words[lane, np.minimum(at, last)].astype(np.uint64) >> drop[todo]
            self.pos[lane] = at + nb
            done = (value < n[todo]) | bad
            out[todo[done]] = np.where(bad[done], np.uint64(0), value[done])
            todo = todo[~done]
        return out

    def getrandbit(self, lanes: I64) -> B:
        """``getrandbits(1) == 1`` for each lane (one byte, its top bit)."""
        at = self.pos[lanes]
        bad = at + 1 > self.width
        self.over[lanes[bad]] = True
        self.pos[lanes] = at + 1
        top: B = (self.words[lanes, np.minimum(at, self.width - 1)] >> 63).astype(bool)
        return np.asarray(top & ~bad, dtype=bool)


def _bernoulli_exp_le1(src: _Lanes, lanes: I64, num: U64, den: U64) -> B:
    """Bernoulli(exp(-num/den)), 0 <= num <= den, num/den in lowest terms: CKS20
    Algorithm 1 as ``_bernoulli_exp_le1_int`` runs it (step k: ``randrange(d/g) >= num/g``
    with d = den·k, g = gcd(num, d)), for each lane."""
    result = np.zeros(lanes.shape[0], dtype=bool)
    todo = np.arange(lanes.shape[0])
    k = np.uint64(1)
    while todo.size:
        lane = lanes[todo]
        d = den[todo] * k
        g = np.gcd(num[todo], d)
        stop = (src.randrange(lane, d // g) >= num[todo] // g) | src.over[lane]
        if int(k) >= _MAX_K:  # beyond the exact range: the scalar sampler redraws
            src.over[lane] = True
            stop[:] = True
        result[todo[stop]] = int(k) % 2 == 1
        todo = todo[~stop]
        k += np.uint64(1)
    return result


def _draw_round(src: _Lanes, t: U64, div: U64) -> I64:
    """One draw of every lane, continuing where its stream was left (lanes marked in
    ``src.over`` get an arbitrary value and must be drawn again by the scalar sampler)."""
    size = t.shape[0]
    y = np.zeros(size, dtype=np.int64)
    todo = np.arange(size)
    one = np.ones(size, dtype=np.uint64)
    while todo.size:
        u = src.randrange(todo, t[todo])
        g = np.gcd(u, t[todo])  # u/t in lowest terms (u = 0: 0/1)
        accept = _bernoulli_exp_le1(src, todo, u // g, t[todo] // g) & ~src.over[todo]
        lanes, u = todo[accept], u[accept]
        v = np.zeros(lanes.shape[0], dtype=np.uint64)
        live = np.arange(lanes.shape[0])
        while live.size:  # v: Bernoulli(exp(-1)) successes before the first failure
            hit = _bernoulli_exp_le1(src, lanes[live], one[:live.size], one[:live.size])
            hit &= ~src.over[lanes[live]]
            v[live[hit]] += np.uint64(1)
            live = live[hit]
        magnitude = ((u + t[lanes] * v) // div[lanes]).astype(np.int64)
        negative = src.getrandbit(lanes)
        retry = negative & (magnitude == 0) & ~src.over[lanes]
        y[lanes] = np.where(negative, -magnitude, magnitude)
        todo = np.sort(np.concatenate([todo[~accept & ~src.over[todo]], lanes[retry]]))
    return y


def _draw_lanes(key: ReleaseKey, contexts: list[bytes], scales: list[int],
                divisors: list[int], blocks: int, count: int
                ) -> tuple[list[list[int]], list[bool]]:
    """``count`` rounds of draws, one after another on each stream, of lanes with
    ``1 <= T < MAX_SCALE`` and ``1 <= s < MAX_SCALE``, and which lanes read past their
    buffer (or left the exact range): those must be drawn again, whole, by the scalar
    sampler on a fresh stream of the same context, which gives the integers the lane
    would have."""
    src = _Lanes(_buffers(key, contexts, blocks))
    t = np.array(scales, dtype=np.uint64)
    div = np.array(divisors, dtype=np.uint64)
    rounds = [_draw_round(src, t, div).tolist() for _ in range(count)]
    return rounds, src.over.tolist()


def _chunks(key: ReleaseKey, contexts: Sequence[bytes], scales: Sequence[int],
            divisors: Sequence[int] | None, count: int, blocks: int
            ) -> Iterator[tuple[list[int], list[list[int]], list[bool]]]:
    """The lanes drawn in bounded chunks (~``CHUNK``·128 bytes of buffers each): per chunk,
    the indices of its contexts, its rounds of draws and its over-read marks; contexts
    outside the lanes' exact range come last as a chunk of their own, all marked."""
    size = len(contexts)
    divs = [1] * size if divisors is None else list(divisors)
    if (size != len(scales) or size != len(divs) or any(t < 1 for t in scales)
            or any(d < 1 for d in divs) or count < 1):
        msg = ("discrete_laplace_batch needs one integer scale T >= 1 (and divisor s >= 1) "
               "per context, and at least one draw per stream")
        raise InternalError(msg)
    ok: list[int] = []
    scalar: list[int] = []
    for i, (t, d) in enumerate(zip(scales, divs, strict=True)):
        (ok if t < MAX_SCALE and d < MAX_SCALE else scalar).append(i)
    chunk = max(1, CHUNK * BLOCKS // blocks)
    for at in range(0, len(ok), chunk):
        part = ok[at:at + chunk]
        rounds, over = _draw_lanes(key, [contexts[i] for i in part], [scales[i] for i in part],
                                   [divs[i] for i in part], blocks, count)
        yield part, rounds, over
    if scalar:
        yield scalar, [[0] * len(scalar) for _ in range(count)], [True] * len(scalar)


def _scalar_run(key: ReleaseKey, context: bytes, t: int, s: int, count: int) -> list[int]:
    stream = key.stream(context)
    return [_discrete_laplace_int(t, s, stream) for _ in range(count)]


def discrete_laplace_batch(key: ReleaseKey, contexts: Sequence[bytes],
                           scales: Sequence[int], *, divisors: Sequence[int] | None = None,
                           blocks: int = BLOCKS) -> list[int]:
    """``[_discrete_laplace_int(T, s, key.stream(c)) for c, T, s in zip(contexts, scales,
    divisors)]`` (``s = 1`` without ``divisors``): discrete Laplace of scale T/s.

    Args:
        key: the release key.
        contexts: each draw's context bytes (its stream: ``key.stream(context)``).
        scales: each draw's integer T >= 1 (the scale's numerator).
        divisors: each draw's integer s >= 1 (the scale's denominator, in lowest terms with
            T, as :func:`~hdp_spark.core.noise.exact.discrete_laplace` passes it); None: 1.
        blocks: stream blocks read ahead per lane (a longer draw redraws on the scalar
            path; any value gives the same draws).

    Returns:
        The draws, equal to the scalar sampler's (the tests compare every draw).

    Privacy:
        Exactly the scalar sampler on exactly the scalar streams (module docstring): each
        draw is discrete Laplace of scale T/s from its own context's stream.
    """
    out = [0] * len(contexts)
    for part, (draws,), over in _chunks(key, contexts, scales, divisors, 1, blocks):
        for i, draw, redo in zip(part, draws, over, strict=True):
            out[i] = (_discrete_laplace_int(scales[i], 1 if divisors is None else divisors[i],
                                            key.stream(contexts[i])) if redo else draw)
    return out


def discrete_laplace_runs(key: ReleaseKey, contexts: Sequence[bytes],
                          scales: Sequence[int], *, count: int,
                          divisors: Sequence[int] | None = None, blocks: int | None = None
                          ) -> list[list[int]]:
    """``count`` draws from each stream, one after another: for every context ``c``,
    ``[_discrete_laplace_int(T, s, stream) for _ in range(count)]`` with the one stream
    ``stream = key.stream(c)`` (what a group's bins read when they share one stream).

    Args:
        key: the release key.
        contexts: each stream's context bytes.
        scales: each stream's integer T >= 1.
        count: draws per stream (>= 1).
        divisors: each stream's integer s >= 1 (lowest terms with T); None: 1.
        blocks: stream blocks read ahead per lane; None: enough for ~40 bytes a draw
            (a longer run redraws its whole stream on the scalar path; any value gives the
            same draws).

    Returns:
        Per context, its ``count`` draws, equal to the scalar sampler's on that stream.

    Privacy:
        Exactly the scalar sampler on exactly the scalar streams (module docstring): each
        run is ``count`` successive discrete Laplace draws of scale T/s from its own
        context's stream, nothing shared between streams.
    """
    if blocks is None:
        blocks = max(BLOCKS, -(-count * 40 // 64) + 1)
    out: list[list[int]] = [[] for _ in contexts]
    for part, rounds, over in _chunks(key, contexts, scales, divisors, count, blocks):
        for j, (i, redo) in enumerate(zip(part, over, strict=True)):
            out[i] = (_scalar_run(key, contexts[i], scales[i],
                                  1 if divisors is None else divisors[i], count)
                      if redo else [draws[j] for draws in rounds])
    return out


_INDEX_LIMIT = 1 << 62  # |z|, T below it: exact in int64, one rounding to float64
_EXACT = float(1 << 53)  # integers below it are exact in float64


def floats_on_grid_batch(z: Sequence[int], e: Sequence[int], t: Sequence[int], beta: float
                         ) -> tuple[F64, F64, F64]:
    """:func:`~hdp_spark.core.noise.exact.floats_on_grid` of every lane, as three arrays,
    equal float for float (tested).

    Why equal: there each float is one correctly rounded division by a power of two,
    ``z·2**e``, ``T·2**e`` and ``(m + 1)·2**e`` with ``m = ceil(float(T)·ln(1/β)) + 2``.
    Here ``z`` and ``T`` go to float64 with one round-to-nearest-even conversion each (as
    Python's ``float(int)``), and ``ldexp`` scales exactly while the result stays a normal
    number (``-1022 <= e <= 900`` with ``|z|, T < 2**62``; ``m + 1 < 2**53`` is exact). A
    batch outside that range is computed lane by lane with the scalar function.

    Privacy:
        Post-processing of the mechanism's outputs (the same floats as the scalar path).
    """
    if not z:
        empty = np.zeros(0)
        return empty, empty.copy(), empty.copy()
    if (max(z) < _INDEX_LIMIT and min(z) > -_INDEX_LIMIT and max(t) < _INDEX_LIMIT
            and min(e) >= -1022 and max(e) <= 900):
        exps = np.array(e, dtype=np.int64)
        tf = np.array(t, dtype=np.int64).astype(np.float64)
        steps = np.ceil(tf * math.log(1.0 / beta)) + 3.0  # m + 1
        if bool((steps < _EXACT).all()):
            return (np.ldexp(np.array(z, dtype=np.int64).astype(np.float64), exps),
                    np.ldexp(tf, exps), np.ldexp(steps, exps))
    cols = np.array([floats_on_grid(zi, ei, ti, beta) for zi, ei, ti in zip(z, e, t, strict=True)],
                    dtype=np.float64).reshape(-1, 3)
    return cols[:, 0].copy(), cols[:, 1].copy(), cols[:, 2].copy()
