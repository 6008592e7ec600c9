"""The driver against a pure-Python reference counter, and the count stage's noise
(seed-004 §5 oracles 11, 13, 18; pre-noise statistics checked three ways)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial import hdp_heavy_hitters, run_heavy_hitters
from hdp_spark.core.partial.heavy_hitters import count_half_width
from hdp_spark.core.partial.tree import NodeRequest
from hdp_spark.errors import ParameterError
from hdp_spark.pandas import release_heavy_hitters
from hdp_spark.pandas._heavy_hitters import encode_codes


class ReferenceCounter:
    """The TreeCounter contract, row by row in plain Python (an independent reference)."""

    def __init__(self, records: Sequence[tuple[int, ...]]) -> None:
        self.records = Counter(records)  # record -> multiplicity
        self.passes = 0

    @staticmethod
    def _key(rec: tuple[int, ...], attrs: Sequence[int], weights: Sequence[int]) -> int:
        return sum(rec[j] * w for j, w in zip(attrs, weights, strict=True))

    def count_level(self, requests: Sequence[NodeRequest], floor: int) -> dict[int, dict[int, int]]:
        self.passes += 1
        out = {}
        for r in requests:
            c: Counter[int] = Counter()
            for rec, m in self.records.items():
                if all(self._key(rec, f.attrs, f.weights) in set(f.members) for f in r.filters):
                    c[self._key(rec, r.attrs, r.weights)] += m
            out[r.node] = {k: v for k, v in c.items() if v > floor}
        return out

    def count_keys(self, weights: Sequence[int], keys: Sequence[int]) -> dict[int, int]:
        self.passes += 1
        wanted = set(keys)
        c: Counter[int] = Counter()
        for rec, m in self.records.items():
            c[self._key(rec, range(len(weights)), weights)] += m
        return {k: v for k, v in c.items() if k in wanted}


def _data(seed: int, n: int = 3000, d: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.choice([0, 1, 2, 3], size=(n, d), p=[.55, .25, .15, .05])
    x[: n // 3] = [1, 0, 2, 0, 1, 3][:d]
    x[n // 3: n // 2] = [0, 0, 0, 1, 1, 1][:d]
    frame = pd.DataFrame(x, columns=[f"a{j}" for j in range(d)]).astype(object)
    frame.iloc[::97, min(2, d - 1)] = None   # nulls and out-of-domain values -> "other"
    frame.iloc[::89, d - 1] = 17
    return frame


def _spec(d: int = 6, **kw):
    cols = [f"a{j}" for j in range(d)]
    args = {"domains": {c: [0, 1, 2, 3] for c in cols}, "eps0": 1.0, "delta": 1e-4,
            "threshold": 40} | kw
    return hdp_heavy_hitters(cols, **args)


@pytest.mark.parametrize("d", [2, 3, 6])
def test_pandas_release_equals_reference_counter(d: int) -> None:
    """Same seed, same exact statistics => same release: pandas' vectorized counts equal
    the row-by-row reference (the noise is bound to the exact statistics)."""
    frame = _data(seed=d, d=d)
    spec = _spec(d)
    codes = encode_codes(frame, spec.domains)
    ref = ReferenceCounter([tuple(int(v) for v in row) for row in codes])
    a = run_heavy_hitters(spec, ref, ReleaseKey.from_unsafe_seed(5))
    b = release_heavy_hitters(frame, spec, unsafe_seed=5)
    assert a.rows == b.rows
    assert len(a.rows) >= 2
    assert ref.passes == spec.budget.shape.depth + 1  # one pass per level + the count pass


def test_recoding_is_data_independent() -> None:
    spec = _spec(other={"a0": 3})
    frame = pd.DataFrame({f"a{j}": [0, None, 7, "x", 2.0, float("nan")] for j in range(6)},
                         dtype=object)
    codes = encode_codes(frame, spec.domains)
    assert codes[:, 0].tolist() == [0, 3, 3, 3, 2, 3]   # absorbed by the declared value 3
    assert codes[:, 1].tolist() == [0, 4, 4, 4, 2, 4]   # extra "other" category (code 4)


def test_max_candidates_stops_on_public_list_sizes() -> None:
    frame = _data(seed=1)
    with pytest.raises(ParameterError, match="max_candidates"):
        release_heavy_hitters(frame, _spec(max_candidates=10), unsafe_seed=1)


def _count_stage_runs(runs: int):
    """Releases of a 2-attribute table whose single heavy key has count 5000."""
    spec = hdp_heavy_hitters(["a", "b"], domains={"a": [0, 1], "b": [0, 1]}, eps0=1.0,
                             count_fraction=0.5, delta=1e-6, other={"a": 0, "b": 0})
    ref = ReferenceCounter([(1, 1)] * 5000 + [(0, 0)] * 2)
    out = []
    for r in range(runs):
        res = run_heavy_hitters(spec, ref, ReleaseKey.from_unsafe_seed(f"count-{r}"))
        row = next(x for x in res.rows if (x["a"], x["b"]) == (1, 1))
        out.append((row["noisy_count"], row["count_ci_low"], row["count_ci_high"]))
    return spec, out


def test_count_stage_noise_moments_and_intervals() -> None:
    """Oracle 11 (discrete law: E|Z| = 2q/(1-q^2), Var = 2q/(1-q)^2, q = e^{-1/b}) and the
    (1 - beta) intervals."""
    spec, out = _count_stage_runs(2000)
    b = float(spec.budget.count_scale)
    assert b == 4.0
    z = np.array([v - 5000 for v, _, _ in out], dtype=float)
    q = math.exp(-1 / b)
    mean_abs, var = 2 * q / (1 - q * q), 2 * q / (1 - q) ** 2
    n = len(z)
    assert abs(z.mean()) <= 4.5 * math.sqrt(var / n)
    assert abs(np.abs(z).mean() - mean_abs) <= 4.5 * math.sqrt(var / n)
    assert abs(z.var() - var) <= 0.15 * var
    covered = np.mean([lo <= 5000 <= hi for _, lo, hi in out])
    assert covered >= 0.95 - 4.5 * math.sqrt(0.05 * 0.95 / n)
    h = count_half_width(spec.budget.count_scale, 0.05)
    assert 2 * q ** (h + 1) / (1 + q) <= 0.05 < 2 * q ** h / (1 + q)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_engine_pruning_leaves_the_release_unchanged(seed: int, monkeypatch) -> None:
    """Restricting level passes to rows whose halves can still be high (the driver's
    engine filters) changes no count of a high candidate, hence no output."""
    import hdp_spark.core.partial.heavy_hitters as core

    frame = _data(seed=10 + seed, n=4000)
    spec = _spec(threshold=15, delta=1e-3)
    codes = encode_codes(frame, spec.domains)
    records = [tuple(int(v) for v in row) for row in codes]
    pruned = run_heavy_hitters(spec, ReferenceCounter(records), ReleaseKey.from_unsafe_seed(seed))
    monkeypatch.setattr(core, "_engine_filter", lambda survivors, *a, **k: survivors)
    plain = run_heavy_hitters(spec, ReferenceCounter(records), ReleaseKey.from_unsafe_seed(seed))
    assert pruned.rows == plain.rows
    assert len(plain.rows) >= 2
