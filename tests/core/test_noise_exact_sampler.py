"""Statistical and structural tests of the keyed exact noise (core/noise).

* discrete_laplace against its exact pmf (chi-square);
* laplace_mechanism against the continuous Laplace CDF at the claimed scale (KS), with the
  same samples REJECTED at ±10 % scale, so a wrong scale cannot pass;
* every output on the mechanism's power-of-two grid;
* fork safety and the determinism of KeyedStream.

Draws use seeded keys (``from_unsafe_seed``), one context per draw: the tests are
deterministic, and the thresholds (p < 1e-6) keep the probability that a correct sampler
would fail them, over the choice of seed, below 1e-5.
"""

from __future__ import annotations

import math
import os
import pickle
import random
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from hdp_spark.core.noise import (
    KeyedStream,
    ReleaseKey,
    discrete_laplace,
    encode_context,
    laplace_mechanism,
)
from hdp_spark.core.noise.exact import GRID_SLACK, grid_for, laplace_grid, laplace_noise
from hdp_spark.errors import InternalError

P_MIN = 1e-6


def _discrete_draws(scale: Fraction, n: int, tag: str) -> np.ndarray:
    key = ReleaseKey.from_unsafe_seed(f"dlap-{tag}")
    return np.array([discrete_laplace(scale, key.stream(encode_context((i,)))) for i in range(n)])


@pytest.mark.parametrize("scale", [Fraction(1, 3), Fraction(5, 2), Fraction(40, 7)])
def test_discrete_laplace_matches_its_exact_pmf(scale: Fraction) -> None:
    n = 8_000
    y = _discrete_draws(scale, n, str(scale))
    q = math.exp(-1 / float(scale))
    def pmf(k: int) -> float:
        return (1 - q) / (1 + q) * q ** abs(k)

    # cells |y| <= K with expected count >= 20, the two tails pooled into one cell
    k_max = 0
    while n * pmf(k_max + 1) >= 20:
        k_max += 1
    cells = list(range(-k_max, k_max + 1))
    observed = [int(np.sum(y == k)) for k in cells] + [int(np.sum(np.abs(y) > k_max))]
    expected = [n * pmf(k) for k in cells]
    expected.append(n - sum(expected))
    _, p = stats.chisquare(observed, expected)
    assert p > P_MIN
    # and the moments: symmetric, Var = 2q/(1-q)^2
    assert abs(float(np.mean(y))) < 6 * math.sqrt(2 * q / (1 - q) ** 2 / n) + 1e-12


def _mechanism_noise(n: int) -> tuple[np.ndarray, float]:
    value, scale, min_sens = Fraction(1, 3), Fraction(1, 7), Fraction(1, 30)
    key = ReleaseKey.from_unsafe_seed("mechanism-ks")
    out = []
    used = None
    for i in range(n):
        draw = laplace_mechanism(value, scale, min_sens, key.stream(encode_context((i,))))
        assert draw.value % draw.granularity == 0  # grid test on every output
        out.append(float(draw.value - value))
        used = draw.scale
    assert scale * (1 + GRID_SLACK) <= used < scale * (1 + GRID_SLACK) + grid_for(min_sens)
    assert used % grid_for(min_sens) == 0  # a whole number of grid steps
    return np.array(out), float(used)


@pytest.mark.slow
def test_laplace_mechanism_ks_at_claimed_scale_and_rejects_ten_percent_off() -> None:
    """KS with the DKW-Massart critical value c: P(D > c) <= 2 exp(-2 N c²) = 1e-5 under
    the claimed law. The KS distance between |Lap(b)| and |Lap(0.9 b)| (0.0387) or
    |Lap(1.1 b)| (0.0350) exceeds 2c, so whenever the claimed scale is accepted, the same
    samples reject both wrong scales (triangle inequality): a 10 % scale error cannot pass."""
    n = 24_000
    z, b = _mechanism_noise(n)
    crit = math.sqrt(math.log(2 / 1e-5) / (2 * n))
    assert stats.kstest(z, stats.laplace(scale=b).cdf).statistic <= crit
    assert stats.kstest(np.abs(z), stats.expon(scale=b).cdf).statistic <= crit
    u = np.linspace(0, 20, 400_001)
    for ratio in (0.9, 1.1):
        gap = float(np.max(np.abs(np.exp(-u / ratio) - np.exp(-u))))
        assert gap > 2 * crit
        assert stats.kstest(np.abs(z), stats.expon(scale=ratio * b).cdf).statistic > crit


def test_mechanism_grid_is_a_power_of_two_below_the_sensitivity() -> None:
    rng = np.random.default_rng(0)
    key = ReleaseKey.from_unsafe_seed("grid")
    for i in range(300):
        d = Fraction(int(rng.integers(1, 10**9)), int(rng.integers(1, 10**12)))
        g = grid_for(d)
        assert g.numerator == 1 or g.denominator == 1
        assert g.denominator & (g.denominator - 1) == 0  # a power of two
        assert g.numerator & (g.numerator - 1) == 0
        assert g <= d * GRID_SLACK < 2 * g
        value = Fraction(int(rng.integers(-(10**15), 10**15)), int(rng.integers(1, 10**15)))
        draw = laplace_mechanism(value, d * 3, d, key.stream(encode_context((i,))))
        assert draw.granularity == g
        assert draw.value % g == 0
        assert Fraction(float(draw.value)) == draw.value or abs(draw.value) > 2**53 * g


def test_mechanism_without_noise_returns_the_value_exactly() -> None:
    draw = laplace_mechanism(Fraction(2, 3), Fraction(0), Fraction(1), KeyedStream(
        ReleaseKey.fresh(), b""))
    assert (draw.value, draw.scale, draw.granularity) == (Fraction(2, 3), 0, 0)
    assert draw.half_width(0.05) == 0.0


@pytest.mark.statistical
def test_half_width_covers_the_noise() -> None:
    """P(|noise| > half_width(β)) <= β; check β = 0.05 on 4,000 seeded draws (binomial)."""
    key = ReleaseKey.from_unsafe_seed("ci")
    value, scale, d = Fraction(0), Fraction(1, 5), Fraction(1, 100)
    misses = 0
    n = 4000
    for i in range(n):
        draw = laplace_mechanism(value, scale, d, key.stream(encode_context((i,))))
        misses += abs(draw.value - value) > Fraction(draw.half_width(0.05))
    # the bound is conservative; even at exactly 5 %, P(misses > 290) < 1e-6
    assert misses <= 290


# ---------------------------------------------------------------- fork and determinism


def _draw(key: ReleaseKey, ctx: bytes) -> int:
    return discrete_laplace(Fraction(10**6, 7), key.stream(ctx))


def _in_child(fn: object) -> object:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: compute, send, exit without running pytest's atexit hooks
        try:
            os.write(write, pickle.dumps(fn()))  # type: ignore[operator]
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)


@pytest.mark.statistical
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_gives_fresh_keys_and_replays_shared_ones() -> None:
    """Fresh keys are the point. False failure: two 32-byte keys collide w.p. 2^-256, and
    three draws of scale 10^6/7 all agree w.p. < (1/(2·1.4e5))^3 < 1e-16."""
    parent_key = ReleaseKey.fresh()
    ctx = encode_context(("fork", 1))
    before = [_draw(parent_key, ctx + bytes([i])) for i in range(3)]

    def child() -> tuple[bytes, list[int], list[int]]:
        fresh = ReleaseKey.fresh()
        return (fresh.material,
                [_draw(fresh, ctx + bytes([i])) for i in range(3)],
                [_draw(parent_key, ctx + bytes([i])) for i in range(3)])

    child_material, child_fresh, child_shared = _in_child(child)  # type: ignore[misc]
    parent_fresh = ReleaseKey.fresh()
    assert child_material not in (parent_key.material, parent_fresh.material)
    assert child_fresh != [_draw(parent_fresh, ctx + bytes([i])) for i in range(3)]
    assert child_fresh != before
    assert child_shared == before  # same key and context: identical, in any process


@pytest.mark.statistical
def test_keyed_stream_is_deterministic_per_key_and_context() -> None:
    k1, k2 = ReleaseKey.from_unsafe_seed(1), ReleaseKey.from_unsafe_seed(2)

    def bits(key: ReleaseKey, ctx: bytes) -> list[int]:
        s = key.stream(ctx)
        return [s.getrandbits(61) for _ in range(40)] + [s.randrange(10**30) for _ in range(5)]

    a = bits(k1, b"ctx")
    assert bits(k1, b"ctx") == a
    assert bits(ReleaseKey(k1.material), b"ctx") == a  # the key material is all that matters
    assert bits(k1, b"ctx2") != a
    assert bits(k2, b"ctx") != a
    # fresh keys are the point: 40 x 61 bits agree by chance w.p. 2^-2440
    assert bits(ReleaseKey.fresh(), b"ctx") != bits(ReleaseKey.fresh(), b"ctx")
    s = k1.stream(b"x")
    assert s.getrandbits(0) == 0
    assert all(0 <= s.randrange(7) < 7 for _ in range(200))
    assert ReleaseKey.from_unsafe_seed("a").unsafe
    assert not ReleaseKey.fresh().unsafe
    assert "material" not in repr(ReleaseKey.fresh())  # never printed


def test_keyed_stream_bits_are_uniform() -> None:
    s = ReleaseKey.from_unsafe_seed("uniform").stream(b"")
    draws = np.array([s.randrange(6) for _ in range(12_000)])
    _, p = stats.chisquare(np.bincount(draws, minlength=6))
    assert p > P_MIN
    bits = np.array([s.getrandbits(1) for _ in range(12_000)])
    assert abs(bits.mean() - 0.5) < 5.5 * 0.5 / math.sqrt(12_000)


def test_encode_context_is_injective_on_examples() -> None:
    samples = [
        ("ab",), ("a", "b"), (("a", "b"),), (1,), (1.0,), (True,), (Fraction(1),),
        (Fraction(1, 2),), (0.5,), (b"ab",), (None,), (), ((),), (-0.0,), (0.0,), ("1",),
        ([1, 2],), ((1, 2),), (1, 2),
    ]
    encoded = [encode_context(s) for s in samples]
    distinct = {e for e in encoded}
    # lists and tuples encode alike (both sequences); everything else is distinct
    assert len(distinct) == len(samples) - 1
    assert encode_context(([1, 2],)) == encode_context(((1, 2),))


def test_context_head_and_tail_equal_the_whole_encoding() -> None:
    """A context encoded in two parts (the spec's shared head once, each group's tail) is
    the same bytes as encoding it whole, including int/float bounds that compare equal."""
    from hdp_spark.core.noise import encode_context, encode_context_head, encode_context_tail

    for head_parts, tail_parts in [
        (("mean", "m", "adpm", "x", 0, 100), ((1, "a"), b"\x00\x01", Fraction(3, 7), 0)),
        (("mean", "m", "adpm", "x", 0.0, 100.0), ((), b"", Fraction(0), 2)),
        ((), (None, True, 1.5)),
    ]:
        head = encode_context_head(head_parts, len(head_parts) + len(tail_parts))
        assert encode_context_tail(head, tail_parts) == encode_context(
            (*head_parts, *tail_parts)
        )
    assert encode_context(("mean", 0)) != encode_context(("mean", 0.0))


def test_keyed_stream_is_the_documented_blake2b_counter_stream() -> None:
    """Reads of mixed sizes consume the stream HMAC-key -> BLAKE2b(counter) blocks in
    order, each read taking whole bytes and keeping its top k bits (a reference
    transcription: buffering changes must not change a single bit)."""
    import hashlib
    import hmac

    from hdp_spark.core.noise.prf import _DOMAIN

    key = ReleaseKey.from_unsafe_seed("stream-reference")
    context = b"ctx"
    block_key = hmac.new(key.material, _DOMAIN + context, hashlib.sha256).digest()
    ref = b"".join(
        hashlib.blake2b(i.to_bytes(16, "big"), key=block_key, digest_size=64).digest()
        for i in range(40)
    )
    stream = KeyedStream(key, context)
    pos = 0
    for k in [1, 7, 8, 9, 64, 0, 130, 3, 511, 512, 513, 17, 1000, 5]:
        nbytes = (k + 7) // 8
        want = int.from_bytes(ref[pos : pos + nbytes], "big") >> (8 * nbytes - k) if k else 0
        pos += nbytes
        assert stream.getrandbits(k) == want


def test_randrange_is_rejection_on_getrandbits_of_the_bit_length() -> None:
    """randrange(n) reads the buffer inline; it must draw exactly what rejection sampling
    on getrandbits(n.bit_length()) draws, across block boundaries and rejections."""
    key = ReleaseKey.from_unsafe_seed("randrange-reference")
    fast, ref = KeyedStream(key, b"ctx"), KeyedStream(key, b"ctx")
    r = random.Random(5)
    sizes = [1, 2, 3, 255, 256, 257, 2**64 + 1, 10**40, 2**511 + 1]
    sizes += [r.randrange(1, 2 ** r.randrange(1, 700)) for _ in range(400)]
    for n in sizes:
        k = n.bit_length()
        want = ref.getrandbits(k)
        while want >= n:
            want = ref.getrandbits(k)
        assert fast.randrange(n) == want
    assert fast.getrandbits(64) == ref.getrandbits(64)  # both streams at the same place
    with pytest.raises(InternalError, match="n >= 1"):
        fast.randrange(0)


def test_the_integer_scale_keeps_every_users_loss_within_d_over_b() -> None:
    """Mechanism version 2: T = ceil(b(1 + 2**-20)/g), scale used T·g. Exact check of the
    module docstring's argument, (d + g)/(T·g) <= d/b for every sensitivity d >= d_min,
    over scales far above and far below the grid (T = 1 when b is below one grid step)."""
    r = random.Random(3)
    seen_one = False
    for _ in range(3_000):
        d_min = Fraction(r.randrange(1, 10**6), r.randrange(1, 10 ** r.randrange(1, 12)))
        b = d_min * Fraction(r.randrange(1, 10**6), r.randrange(1, 10 ** r.randrange(1, 14)))
        e, t = laplace_grid(b, d_min)
        g = grid_for(d_min)
        assert g == Fraction(2) ** e
        used = t * g
        assert used >= b * (1 + GRID_SLACK)
        assert used - g < b * (1 + GRID_SLACK)  # at most one grid step more
        assert laplace_noise(b, d_min).scale == used
        seen_one |= t == 1
        for d in (d_min, d_min * r.randrange(1, 10**4)):
            assert (d + g) / used <= d / b
    assert seen_one
