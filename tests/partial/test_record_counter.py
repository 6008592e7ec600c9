"""RecordCounter (the heavy-hitters Column's tree counter over distinct-record counts) gives
the release the pandas engine's tree counter gives on the rows, for the same key."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial import hdp_heavy_hitters, run_heavy_hitters
from hdp_spark.core.partial.record_counter import RecordCounter
from hdp_spark.core.partial.tree import key_weights
from hdp_spark.errors import InternalError
from hdp_spark.pandas._heavy_hitters import PandasTreeCounter, encode_codes


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "a": rng.choice(["x", "y", "z", "w", None], n, p=[0.5, 0.25, 0.1, 0.1, 0.05]),
        "b": rng.choice([1, 2, 3, 9], n, p=[0.6, 0.2, 0.15, 0.05]),
        "c": rng.choice([True, False], n, p=[0.7, 0.3]),
        "d": rng.choice([0.5, 1.5, 2.5], n, p=[0.8, 0.15, 0.05]),
        "e": rng.integers(0, 5, n),
    })


@pytest.mark.parametrize(("cols", "options"), [
    (["a", "b", "c"], {}),
    (["a", "b", "c", "d", "e"], {"threshold": 3}),
    (["a", "b"], {"count_fraction": 0.0}),
    (["a", "b", "c", "d", "e"], {"leaf_thresholding": True, "eps0": 6.0}),
    (["e", "a", "d"], {"other": {"a": "x"}, "delta": 1e-3}),
])
def test_record_counts_give_the_rows_release(cols: list[str], options: dict[str, object]
                                              ) -> None:
    pdf = _frame(6000, 3)
    domains = {"a": ["x", "y", "z"], "b": [1, 2, 3], "c": [True, False],
               "d": [0.5, 1.5, 2.5], "e": [0, 1, 2, 3, 4]}
    spec = hdp_heavy_hitters(cols, domains={c: domains[c] for c in cols},
                             **{"eps0": 1.0, **options})  # type: ignore[arg-type]
    sizes = [d.size for d in spec.domains]
    codes = encode_codes(pdf, spec.domains)
    record = codes @ np.asarray(key_weights(range(len(sizes)), sizes), dtype=np.int64)
    keys, counts = np.unique(record, return_counts=True)
    for seed in range(3):
        key = ReleaseKey.from_unsafe_seed(f"rc-{seed}")
        want = run_heavy_hitters(spec, PandasTreeCounter(codes, sizes), key)
        got = run_heavy_hitters(spec, RecordCounter(keys, counts, sizes), key)
        assert got == want
    assert want.rows  # the comparison covers released records


def test_an_empty_table_releases_what_the_rows_counter_releases() -> None:
    spec = hdp_heavy_hitters(["a", "b"], domains={"a": ["x"], "b": [1, 2]}, eps0=1.0)
    key = ReleaseKey.from_unsafe_seed(1)
    empty = np.empty((0, 2), dtype=np.int64)
    want = run_heavy_hitters(spec, PandasTreeCounter(empty, [2, 3]), key)
    assert run_heavy_hitters(spec, RecordCounter([], [], [2, 3]), key) == want


def test_mismatched_arrays_are_an_internal_error() -> None:
    with pytest.raises(InternalError, match="two arrays of one length"):
        RecordCounter([1, 2], [1], [2, 2])
