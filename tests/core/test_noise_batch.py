"""The batch discrete Laplace sampler (core/noise/batch_laplace.py): every draw equals the
scalar sampler's on the same stream, whatever path the lane takes (array steps, a buffer
overrun, a scale beyond the array steps), and the draws follow the exact pmf."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats

from hdp_spark.core.noise import ReleaseKey, batch_laplace, encode_context
from hdp_spark.core.noise.batch_laplace import MAX_SCALE, discrete_laplace_batch
from hdp_spark.core.noise.exact import _discrete_laplace_int, discrete_laplace
from hdp_spark.core.noise.prf import stream_block
from hdp_spark.errors import InternalError

P_MIN = 1e-6


def _scalar(key: ReleaseKey, contexts: list[bytes], scales: list[int]) -> list[int]:
    return [_discrete_laplace_int(t, 1, key.stream(c)) for c, t in zip(contexts, scales,
                                                                          strict=True)]


def _scales(r: random.Random, size: int) -> list[int]:
    edges = [1, 2, 3, 7, 255, 256, 2**20, MAX_SCALE - 1, MAX_SCALE, 2**80 + 3]
    return [r.choice([*edges, r.randrange(1, 2**12), r.randrange(2**20, 2**34),
                      r.randrange(2**40, MAX_SCALE)]) for _ in range(size)]


@pytest.mark.parametrize("seed", range(4))
def test_batch_draws_equal_the_scalar_sampler(seed: int) -> None:
    r = random.Random(seed)
    key = ReleaseKey.from_unsafe_seed(f"batch-{seed}")
    contexts = [encode_context(("g", seed, i)) for i in range(3_000)]
    scales = _scales(r, len(contexts))
    assert discrete_laplace_batch(key, contexts, scales) == _scalar(key, contexts, scales)


@pytest.mark.parametrize("blocks", [1, 2])
def test_lanes_that_read_past_their_buffer_redraw_with_the_scalar_sampler(
        blocks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With one block per lane many draws overrun it; each is redrawn from its own stream
    by the scalar sampler and the result is the same."""
    fallbacks: list[int] = []
    scalar = batch_laplace._discrete_laplace_int

    def spy(t: int, s: int, rng: Any) -> int:
        fallbacks.append(t)
        return scalar(t, s, rng)

    monkeypatch.setattr(batch_laplace, "_discrete_laplace_int", spy)
    key = ReleaseKey.from_unsafe_seed("overrun")
    contexts = [encode_context(("o", i)) for i in range(4_000)]
    scales = [random.Random(i).randrange(2**40, MAX_SCALE) for i in range(len(contexts))]
    got = discrete_laplace_batch(key, contexts, scales, blocks=blocks)
    assert got == _scalar(key, contexts, scales)
    assert fallbacks  # the fallback path ran (2**40 <= T: ~6-byte reads overrun often)
    assert len(fallbacks) < len(contexts) / (2 if blocks == 1 else 20)


def test_an_empty_batch_draws_nothing() -> None:
    assert discrete_laplace_batch(ReleaseKey.from_unsafe_seed("e"), [], []) == []


@pytest.mark.parametrize("scale", [1, 3, 40])
def test_batch_draws_match_the_exact_pmf(scale: int) -> None:
    n = 8_000
    key = ReleaseKey.from_unsafe_seed(f"pmf-{scale}")
    y = np.array(discrete_laplace_batch(key, [encode_context((i,)) for i in range(n)],
                                        [scale] * n))
    q = math.exp(-1 / scale)
    top = int(scale * 8)
    support = np.arange(-top, top + 1)
    pmf = (1 - q) / (1 + q) * q ** np.abs(support)
    observed = np.array([np.sum(np.clip(y, -top, top) == k) for k in support], dtype=float)
    expected = pmf * n
    expected[0] += (1 - pmf.sum()) / 2 * n  # the clipped tails
    expected[-1] += (1 - pmf.sum()) / 2 * n
    keep = expected >= 5  # pool the sparse cells
    observed = np.append(observed[keep], observed[~keep].sum())
    expected = np.append(expected[keep], expected[~keep].sum())
    if expected[-1] == 0:
        observed, expected = observed[:-1], expected[:-1]
    _, p = stats.chisquare(observed, expected * observed.sum() / expected.sum())
    assert p > P_MIN


def test_a_batch_refuses_scales_below_one_or_a_missing_scale() -> None:
    key = ReleaseKey.from_unsafe_seed("bad")
    with pytest.raises(InternalError, match="T >= 1"):
        discrete_laplace_batch(key, [b"a"], [0])
    with pytest.raises(InternalError, match="T >= 1"):
        discrete_laplace_batch(key, [b"a", b"b"], [3])


def test_stream_keys_and_blocks_are_the_streams_bytes() -> None:
    key = ReleaseKey.from_unsafe_seed("blocks")
    contexts = [encode_context(("k", i)) for i in range(5)]
    for context, block_key in zip(contexts, key.stream_keys(contexts), strict=True):
        stream = key.stream(context)
        want = b"".join(stream_block(block_key, c) for c in range(3))
        assert bytes(stream.getrandbits(8) for _ in range(192)) == want


def test_chunks_of_lanes_give_the_same_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lanes are drawn CHUNK at a time (bounded memory); chunk boundaries, and scales
    beyond the array steps between them, change no draw."""
    monkeypatch.setattr(batch_laplace, "CHUNK", 7)
    r = random.Random(9)
    key = ReleaseKey.from_unsafe_seed("chunks")
    contexts = [encode_context(("c", i)) for i in range(100)]
    scales = _scales(r, len(contexts))
    assert discrete_laplace_batch(key, contexts, scales) == _scalar(key, contexts, scales)


@pytest.mark.parametrize("seed", range(3))
def test_batch_draws_of_rational_scales_equal_the_scalar_sampler(seed: int) -> None:
    """Scales T/s (the selection's t_S): the same draws as ``discrete_laplace`` of the
    Fraction, including divisors past the array steps' range (scalar lanes)."""
    r = random.Random(100 + seed)
    key = ReleaseKey.from_unsafe_seed(f"ratio-{seed}")
    contexts = [encode_context(("q", seed, i)) for i in range(2_000)]
    fractions = [Fraction(r.choice([1, 3, 7, 2**20 + 1, 2**45, 2**47]),
                          r.choice([1, 2, 3, 10, 999, 2**30 + 7, 2**50])) for _ in contexts]
    got = discrete_laplace_batch(key, contexts, [f.numerator for f in fractions],
                                 divisors=[f.denominator for f in fractions])
    assert got == [discrete_laplace(f, key.stream(c))
                   for c, f in zip(contexts, fractions, strict=True)]


def test_a_divisor_below_one_is_refused() -> None:
    with pytest.raises(InternalError, match="divisor"):
        discrete_laplace_batch(ReleaseKey.from_unsafe_seed("d"), [b"c"], [3], divisors=[0])
    with pytest.raises(InternalError, match="divisor"):
        discrete_laplace_batch(ReleaseKey.from_unsafe_seed("d"), [b"c"], [3], divisors=[])


def _runs(key: ReleaseKey, contexts: list[bytes], fractions: list[Fraction],
          count: int) -> list[list[int]]:
    """The scalar reference: ``count`` draws, one after another, from each one stream."""
    out = []
    for c, f in zip(contexts, fractions, strict=True):
        stream = key.stream(c)
        out.append([discrete_laplace(f, stream) for _ in range(count)])
    return out


@pytest.mark.parametrize("count", [1, 2, 5, 40])
@pytest.mark.parametrize("blocks", [None, 1, 3])
def test_runs_of_draws_from_one_stream_equal_the_scalar_sampler(
        count: int, blocks: int | None) -> None:
    """Several draws per stream (a selected histogram's bins): each run equals the scalar
    sampler drawing ``count`` times from that stream, whether the lane keeps to its buffer,
    overruns it somewhere in the run (redrawn whole on the scalar path) or has a scale
    beyond the array steps."""
    r = random.Random(count * 10 + (blocks or 0))
    key = ReleaseKey.from_unsafe_seed(f"runs-{count}-{blocks}")
    contexts = [encode_context(("r", i)) for i in range(400)]
    fractions = [Fraction(r.choice([1, 3, 7, 2**20 + 1, 2**33, 2**45, 2**47]),
                          r.choice([1, 2, 3, 999, 2**50])) for _ in contexts]
    got = batch_laplace.discrete_laplace_runs(
        key, contexts, [f.numerator for f in fractions], count=count,
        divisors=[f.denominator for f in fractions], blocks=blocks)
    assert got == _runs(key, contexts, fractions, count)
    if count == 1:
        assert [run[0] for run in got] == discrete_laplace_batch(
            key, contexts, [f.numerator for f in fractions],
            divisors=[f.denominator for f in fractions])


def test_runs_in_chunks_and_a_run_needs_a_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_laplace, "CHUNK", 3)
    key = ReleaseKey.from_unsafe_seed("run-chunks")
    contexts = [encode_context(("rc", i)) for i in range(50)]
    fractions = [Fraction(2**30 + i) for i in range(50)]
    got = batch_laplace.discrete_laplace_runs(
        key, contexts, [f.numerator for f in fractions], count=9)
    assert got == _runs(key, contexts, fractions, 9)
    assert batch_laplace.discrete_laplace_runs(key, [], [], count=3) == []
    with pytest.raises(InternalError, match="at least one draw per stream"):
        batch_laplace.discrete_laplace_runs(key, [b"a"], [3], count=0)


class _RowReader:
    """One lane's bytes read as ``KeyedStream.randrange`` reads its stream (nbytes big-endian,
    shift, reject), with an overrun marked instead of a next block."""

    def __init__(self, row: bytes) -> None:
        self.row, self.pos, self.over = row, 0, False

    def randrange(self, n: int) -> int:
        k = n.bit_length()
        nbytes = (k + 7) >> 3
        while True:
            if self.pos + nbytes > len(self.row):
                self.over = True
                self.pos += nbytes
                return 0
            r = int.from_bytes(self.row[self.pos:self.pos + nbytes], "big") >> (8 * nbytes - k)
            self.pos += nbytes
            if r < n:
                return r


@pytest.mark.parametrize("seed", range(3))
def test_lane_reads_equal_byte_by_byte_reads_up_to_the_buffer_end(seed: int) -> None:
    """The lanes' gathered words give each lane exactly the integers, read positions and
    overrun marks of a byte-by-byte reader of its row, for every bound width (1 to 53
    bits) and at the buffer's end (where the padding must never leak into a value)."""
    rng = np.random.default_rng(seed)
    for _ in range(40):
        rows, width = int(rng.integers(1, 200)), 64 * int(rng.integers(1, 3))
        buf = rng.integers(0, 256, size=(rows, width), dtype=np.uint8)
        lanes_src = batch_laplace._Lanes(buf)
        readers = [_RowReader(bytes(buf[i])) for i in range(rows)]
        for _ in range(40):
            lanes = np.sort(rng.choice(rows, size=int(rng.integers(1, rows + 1)),
                                       replace=False)).astype(np.int64)
            top = int(rng.choice([1, 2, 255, 256, 257, 2**16 + 1, 2**31, 2**46, 2**53 - 1]))
            n = rng.integers(1, top + 1, size=lanes.shape[0], dtype=np.uint64)
            got = lanes_src.randrange(lanes, n).tolist()
            want = [readers[i].randrange(int(b)) for i, b in zip(lanes.tolist(), n.tolist(),
                                                                 strict=True)]
            assert got == want
            assert lanes_src.pos.tolist() == [r.pos for r in readers]
            assert lanes_src.over.tolist() == [r.over for r in readers]
