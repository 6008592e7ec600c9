"""Client-side local randomizers on numpy arrays, one ε_i per row.

Privacy-critical: each row's ε_i-LDP guarantee is this module. The randomizers are
Algorithms 1, 2, 4 and 5's LOCAL-RANDOMIZER of Aliakbarpour, Fallah, Roy & Stevens,
*High-Probability Bounds For Heterogeneous Local Differential Privacy*. Argument: Laplace
on a value clamped to a range of width 2 (unit scale) with scale 2/ε_i is ε_i-LDP (the exact
sampler rounds the scale up onto its 2**-30 grid, see
:func:`hdp_spark.core.noise.vector.laplace_unit`); randomized response keeps the
bit with probability at most e^ε/(1+e^ε) (a dyadic rounded down), so the two output
probabilities differ by a factor <= e^ε; Duchi's sphere halves (Algorithm 4) carry
probabilities e^ε/(1+e^ε) and 1/(1+e^ε) for any radius; the frequency oracle sends one
public row index and one randomized-response sign. Inputs are clamped/projected onto the
public domain first (out of range, the ratios above no longer hold), and no float
sampler is used (a float Laplace's outputs can be impossible under a neighbouring input).

The mechanisms themselves (clamping, sampling) are in :mod:`hdp_spark.ldp.mechanisms`;
this module keys and runs them (:func:`run_randomizer`) and holds the public functions.

In local DP each device randomizes its own value with its own ε_i and sends only the
report; the server never sees raw values. These functions are what a device runs (on one
row or a batch). The same code powers the pandas and Spark *simulation* transforms
(:func:`hdp_spark.pandas.ldp_simulate`, :func:`hdp_spark.spark.ldp_simulate`), which exist
to test pipelines and reproduce experiments on central data; in production the
randomization happens on the device.

Randomness: every draw comes from :mod:`hdp_spark.core.noise.vector` (exact, integer-only
samplers on ChaCha20). The generator is keyed by a :class:`~hdp_spark.core.noise.ReleaseKey`
and a context that binds the mechanism, its parameters and a BLAKE2b digest of the exact
input. So the same (key, input) replays the same reports (re-evaluation leaks nothing new),
and changed input under the same key gets unrelated reports (no differencing attack).
``key=None`` (the default) draws a fresh key from OS entropy on every call: calling twice on
the same value is then two releases, and the budget is spent twice. Never reuse a key
across different queries on purpose.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from hdp_spark.core.ldp.common import (
    LDP_EPS_MIN,
    check_beta,
    check_positive_int,
)
from hdp_spark.core.ldp.oracle import MAX_CATEGORIES, FrequencyOracle, Projection
from hdp_spark.core.noise import ReleaseKey, encode_context
from hdp_spark.core.noise import vector as vx
from hdp_spark.core.noise.rows import RowStreams
from hdp_spark.errors import EpsilonColumnError, InternalError, ParameterError
from hdp_spark.ldp.mechanisms import (
    DuchiRandomizer,
    JLRandomizer,
    LaplaceRandomizer,
    Randomizer,
    RRRandomizer,
)

__all__ = [
    "DuchiRandomizer",
    "FrequencyReports",
    "JLRandomizer",
    "LaplaceRandomizer",
    "RRRandomizer",
    "Randomizer",
    "duchi",
    "jl_frequency_report",
    "laplace",
    "randomized_response",
    "resolve_key",
    "row_keys",
    "run_randomizer",
]

_CONTEXT_TAG = "hdp_spark/ldp/v1"
_ROW_CONTEXT_TAG = "hdp_spark/ldp/rows/v1"
_UNIT = 2.0**-vx.LAPLACE_GRID_BITS


def resolve_key(key: ReleaseKey | None, unsafe_seed: int | str | bytes | None) -> ReleaseKey:
    """The caller's key, a seeded one (tests only), or a fresh one from OS entropy."""
    if key is not None and unsafe_seed is not None:
        msg = "pass at most one of `key` and `unsafe_seed`, got both."
        raise ParameterError(msg)
    if key is not None:
        if not isinstance(key, ReleaseKey):
            msg = f"`key` must be a ReleaseKey, got {type(key).__name__}."
            raise ParameterError(msg)
        return key
    return ReleaseKey.resolve(unsafe_seed)


def _eps_array(eps: npt.ArrayLike, n: int) -> npt.NDArray[np.float64]:
    try:
        e = np.asarray(eps, dtype=np.float64)
    except (TypeError, ValueError):
        msg = "`eps` must be a number or an array of numbers."
        raise ParameterError(msg) from None
    if e.ndim == 0:
        e = np.full(n, float(e))
    if e.shape != (n,):
        msg = f"`eps` must be a scalar or have one value per row ({n}), got shape {e.shape}."
        raise ParameterError(msg)
    bad = int(np.count_nonzero(~(np.isfinite(e) & (e >= LDP_EPS_MIN))))
    if bad:
        msg = (
            f"`eps` must be finite and >= 2**-20 for every randomized row; {bad} row(s) "
            "break this rule (rows with ε = 0 must not be randomized: they report nothing)."
        )
        raise EpsilonColumnError(msg)
    return e


def _digest(*arrays: npt.NDArray[Any]) -> bytes:
    h = hashlib.blake2b(digest_size=32)
    for a in arrays:
        c = np.ascontiguousarray(a)
        h.update(str((c.dtype.str, c.shape)).encode())
        h.update(c.tobytes())
    return h.digest()


def row_keys(
    randomizer: Randomizer,
    prepared: npt.NDArray[Any],
    eps: npt.NDArray[np.float64],
    key: ReleaseKey,
    ids: Sequence[bytes],
) -> npt.NDArray[np.uint8]:
    """One 256-bit stream key per row: keyed BLAKE2b of (row id, exact input, ε).

    The BLAKE2b key is derived from the release key and the randomizer's parameters
    (``KeyedStream``), so the row key is a PRF of (release key, randomizer, id, value, ε):
    the same row gets the same stream in any batch, partition or engine; a changed value or
    ε under the same key and id gets an unrelated stream (no differencing). The encoding is
    injective: the id is length-prefixed and the value and ε have a fixed width per
    randomizer.
    """
    n = prepared.shape[0]
    if len(ids) != n:
        msg = "run_randomizer needs one id per row"
        raise InternalError(msg)
    master = key.stream(encode_context((_ROW_CONTEXT_TAG, randomizer.params()))).derive_seed(256)
    mac_key = master.to_bytes(32, "big")
    body = np.concatenate(
        [
            np.ascontiguousarray(prepared).reshape(n, -1).view(np.uint8).reshape(n, -1),
            np.ascontiguousarray(eps, dtype="<f8").view(np.uint8).reshape(n, 8),
        ],
        axis=1,
    )
    width = body.shape[1]
    blob = body.tobytes()
    out = np.empty((n, 32), dtype=np.uint8)
    flat = bytearray()
    for i, ident in enumerate(ids):
        h = hashlib.blake2b(len(ident).to_bytes(8, "big"), key=mac_key, digest_size=32)
        h.update(ident)
        h.update(blob[i * width : (i + 1) * width])
        flat += h.digest()
    out[:] = np.frombuffer(bytes(flat), dtype=np.uint8).reshape(n, 32)
    return out


def run_randomizer(
    randomizer: Randomizer,
    values: Any,
    eps: npt.ArrayLike,
    key: ReleaseKey,
    tag: tuple[object, ...] = (),
    ids: Sequence[bytes] | None = None,
) -> Mapping[str, npt.NDArray[Any]]:
    """Validate, prepare and randomize one batch; the generator is created here.

    Args:
        randomizer: the mechanism.
        values: the batch of true values (1-D, or (n, d) for Duchi).
        eps: scalar or per-row ε (each finite and >= 2**-20).
        key: the release key.
        tag: extra context for a batch-keyed call (without ``ids``).
        ids: one identity per row (canonical bytes, see
            :func:`hdp_spark.pandas.ldp.id_bytes`). With ids, each row draws from its own
            stream (:func:`row_keys`): its report depends on the key, the randomizer and
            the row (id, value, ε) only, never on the batch it is in. Without, one
            generator keyed by a digest of the whole batch draws for all rows.

    Returns:
        Output arrays keyed by column suffix (``""``, or ``"_j"``/``"_b"``).
    """
    prepared = randomizer.prepare(values)
    e = _eps_array(eps, prepared.shape[0])
    if ids is not None:
        streams = RowStreams(row_keys(randomizer, prepared, e, key, ids))
        return randomizer.sample(streams, prepared, e)
    context = encode_context(
        (_CONTEXT_TAG, randomizer.params(), tag, _digest(prepared, e))
    )
    rng = vx.generator(key, context)
    return randomizer.sample(rng, prepared, e)


def laplace(
    x: npt.ArrayLike,
    eps: npt.ArrayLike,
    *,
    lower: float = -1.0,
    upper: float = 1.0,
    fill: float | None = None,
    key: ReleaseKey | None = None,
    unsafe_seed: int | str | bytes | None = None,
) -> npt.NDArray[np.float64]:
    """Laplace local randomizer (Aliakbarpour et al., Alg. 1): one real-valued report per row.

    Args:
        x: values (1-D). NaN is imputed with ``fill``; values are clamped to the bounds.
        eps: ε_i per row (or one scalar), finite and >= 2**-20.
        lower: public lower bound of x.
        upper: public upper bound of x.
        fill: public value imputed for NaN (default: the midpoint).
        key: release key; default a fresh one from OS entropy per call.
        unsafe_seed: reproducible reports for tests. UNSAFE: the seed reveals the noise.

    Returns:
        Reports in data units, mid + half (u + Z) with u the unit-scale value and Z exact
        discrete Laplace on the grid 2**-30 of scale just above 2/ε_i.

    Privacy:
        Row i's report is ε_i-LDP for its value x_i (replace-one of the value; the row's
        presence is not hidden). ε_i enters as the noise scale (upper - lower)/ε_i, inflated
        by at most one grid step to pay for the rounding (exact argument in
        :func:`hdp_spark.core.noise.vector.laplace_unit`). Public: ε_i, the bounds, fill.
    """
    r = LaplaceRandomizer(lower, upper, fill)
    return run_randomizer(r, x, eps, resolve_key(key, unsafe_seed))[""]


def randomized_response(
    bits: npt.ArrayLike,
    eps: npt.ArrayLike,
    *,
    lower: float = -1.0,
    upper: float = 1.0,
    fill: float | None = None,
    key: ReleaseKey | None = None,
    unsafe_seed: int | str | bytes | None = None,
) -> npt.NDArray[np.int8]:
    """Randomized response (Aliakbarpour et al., Alg. 2): one ±1 report per row.

    Args:
        bits: ±1 values (or booleans, True = +1). With ``lower``/``upper`` set, values equal
            to ``upper`` are +1 and to ``lower`` -1; values in between are rounded to an
            endpoint at random (unbiased). 0/1 data must be passed as booleans or with
            ``lower=0, upper=1`` (a 0 would otherwise be read as the midpoint).
        eps: ε_i per row (or one scalar), finite and >= 2**-20.
        lower: public value reported as -1.
        upper: public value reported as +1.
        fill: public value for NaN (default: the midpoint, i.e. a fair coin).
        key: release key; default a fresh one from OS entropy per call.
        unsafe_seed: reproducible reports for tests. UNSAFE.

    Returns:
        int8 array of ±1. The flip is -x, never a bitwise NOT.

    Privacy:
        Row i's report is ε_i-LDP: it keeps the bit with probability K/2**64 with
        K/(2**64 - K) <= e^{ε_i} checked exactly (rounded in the privacy-safe direction).
        Public: ε_i and the bounds.
    """
    r = RRRandomizer(lower, upper, fill)
    return run_randomizer(r, bits, eps, resolve_key(key, unsafe_seed))[""]


def duchi(
    vectors: npt.ArrayLike,
    eps: npt.ArrayLike,
    *,
    radius: float = 1.0,
    key: ReleaseKey | None = None,
    unsafe_seed: int | str | bytes | None = None,
) -> npt.NDArray[np.float64]:
    """Duchi et al.'s randomizer (Aliakbarpour et al., Alg. 4) for rows in the ℓ2 ball of radius r.

    Args:
        vectors: array of shape (n, d). Rows outside the ball are projected onto it;
            NaN/infinite coordinates are imputed as 0.
        eps: ε_i per row (or one scalar), finite and >= 2**-20.
        radius: public radius r.
        key: release key; default a fresh one from OS entropy per call.
        unsafe_seed: reproducible reports for tests. UNSAFE.

    Returns:
        Reports of shape (n, d), each of norm B_i = c(ε_i) r A_d (the corrected radius),
        unbiased: E[Y_i | x_i] = x_i.

    Privacy:
        Row i's report is ε_i-LDP for its whole vector: the side of the hemisphere is
        chosen by exact integer comparisons with ratio <= e^{ε_i}; the direction within
        it is drawn independently of the data. Public: ε_i, r, d.
    """
    arr = np.asarray(vectors, dtype=np.float64) if not isinstance(vectors, np.ndarray) else vectors
    if arr.ndim != 2:
        msg = f"`vectors` must have shape (n, d), got {np.shape(arr)}."
        raise ParameterError(msg)
    r = DuchiRandomizer(int(arr.shape[1]), radius)
    return run_randomizer(r, arr, eps, resolve_key(key, unsafe_seed))[""]


@dataclass(frozen=True, eq=False, slots=True)
class FrequencyReports:
    """Frequency-oracle reports of a batch.

    Attributes:
        index: row index j of each report, in [0, oracle.m).
        sign: sign b of each report, ±1 (int8).
        oracle: the public protocol parameters the reports were made with.
    """

    index: npt.NDArray[np.int64]
    sign: npt.NDArray[np.int8]
    oracle: FrequencyOracle


def jl_frequency_report(
    values: npt.ArrayLike,
    eps: npt.ArrayLike,
    d: int | None = None,
    *,
    oracle: FrequencyOracle | None = None,
    beta: float = 0.05,
    projection: Projection = "jl",
    key: ReleaseKey | None = None,
    unsafe_seed: int | str | bytes | None = None,
) -> FrequencyReports:
    """JL + randomized-response frequency oracle (Aliakbarpour et al., Alg. 5).

    One (j, b) report per row.

    Args:
        values: categories in [0, d); anything else is "no item" (⊥, a fair sign).
        eps: ε_i per row (or one scalar), finite and >= 2**-20.
        d: domain size (needed when ``oracle`` is not given).
        oracle: the public parameters every device shares. When omitted, it is planned
            from ``eps`` (all participants' ε; the corrected γ and m) with ``beta`` and
            ``projection`` and a fresh public Φ seed.
        beta: failure probability m is sized for (only without ``oracle``).
        projection: ``"jl"`` (the paper) or ``"hadamard"`` (only without ``oracle``).
        key: release key; default a fresh one from OS entropy per call.
        unsafe_seed: reproducible reports for tests. UNSAFE.

    Returns:
        :class:`FrequencyReports` (j, b and the oracle to aggregate with).

    Privacy:
        Row i's report is ε_i-LDP for its category: j is independent of the value, and b
        goes through randomized response with ratio <= e^{ε_i} (exact integers; ⊥ versus
        an item has ratio <= 2e^ε/(1+e^ε)). Φ, d and m are public.
    """
    if oracle is None:
        if d is None:
            msg = "pass `d` (domain size) or `oracle`, got neither."
            raise ParameterError(msg)
        check_positive_int("d", d, MAX_CATEGORIES)
        check_beta(beta)
        e = np.asarray(eps, dtype=np.float64)
        n = np.asarray(values).shape[0] if np.ndim(values) else 1
        e_all = np.full(n, float(e)) if e.ndim == 0 else e
        oracle = FrequencyOracle.plan(e_all, d, beta=beta, projection=projection)
    elif d is not None and d != oracle.d:
        msg = f"`d` must equal `oracle.d` ({oracle.d}), got {d!r}."
        raise ParameterError(msg)
    out = run_randomizer(JLRandomizer(oracle), values, eps, resolve_key(key, unsafe_seed))
    return FrequencyReports(out["_j"], out["_b"], oracle)
