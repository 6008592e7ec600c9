"""The record-count Column's finalize families (marginals, MWEM, attribute histograms,
heavy hitters): one group's whole-record counts give, field for field, the pandas release
API's table and report for the same key."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.pandas as hp
from hdp_spark.aggregators import attribute_histogram_spec
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial.record_counter import RecordCounter
from hdp_spark.core.partial.tree import key_weights
from hdp_spark.errors import ParameterError
from hdp_spark.pandas._heavy_hitters import encode_codes
from hdp_spark.spark.records_families import family_of, run_group

DOMAINS: dict[str, list[Any]] = {"a": ["x", "y", "z"], "b": [1, 2, 3], "c": [True, False]}
COLS = ["a", "b", "c"]


def _frame(n: int = 3000, seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "a": rng.choice(["x", "y", "z", "w", None], n, p=[0.5, 0.25, 0.1, 0.1, 0.05]),
        "b": rng.choice([1, 2, 3, 9], n, p=[0.6, 0.2, 0.15, 0.05]),
        "c": rng.choice([True, False], n, p=[0.7, 0.3]),
    })


def _counter(pdf: pd.DataFrame, spec: Any) -> RecordCounter:
    sizes = [d.size for d in spec.domains]
    codes = encode_codes(pdf, spec.domains)
    record = codes @ np.asarray(key_weights(range(len(sizes)), sizes), dtype=np.int64)
    keys, counts = np.unique(record, return_counts=True)
    return RecordCounter(keys, counts, sizes)


def _specs() -> list[tuple[Any, Any]]:
    """(spec, its pandas release function)."""
    return [
        (hp.hdp_marginals(COLS, domains=DOMAINS, eps0=1.0, k=2), hp.marginals),
        (hp.hdp_mwem(COLS, domains=DOMAINS, eps0=2.0, k=2, rounds=4), hp.mwem),
        (hp.hdp_mwem(COLS, domains=DOMAINS, eps0=2.0, marginals=[["a"], ["b", "c"]],
                     per_round=2), hp.mwem),
        (attribute_histogram_spec(COLS, domains=DOMAINS, eps0=0.5, other={"b": 1}), None),
        (hp.hdp_heavy_hitters(COLS, domains=DOMAINS, eps0=2.0), hp.heavy_hitters),
    ]


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: (None if v is None or (isinstance(v, float) and np.isnan(v)) else v)
             for k, v in row.items()} for row in table.astype(object).to_dict("records")]


@pytest.mark.parametrize("case", range(5))
def test_record_counts_give_the_release_apis_fields(case: int) -> None:
    spec, release = _specs()[case]
    pdf = _frame()
    family = family_of(spec)
    for seed in range(2):
        key = ReleaseKey.from_unsafe_seed(f"fam-{seed}")
        if release is None:  # attribute histograms: the release API takes the keywords
            out = hp.attribute_histograms(
                pdf, COLS, domains=DOMAINS, eps0=0.5, other={"b": 1}, unsafe_seed=key)
        else:
            out = release(pdf, spec, unsafe_seed=key)
        report = out.report if isinstance(out.report, dict) else out.report.as_dict()
        got = run_group(spec, _counter(pdf, spec), key)
        names = [n for n, _ in family.fields(spec)]
        assert len(got) == len(names)
        row = dict(zip(names, got, strict=True))
        assert row[family.main] == _records(out.table)
        assert len(row[family.main]) >= 3
        for f in family.report:
            assert row[f.suffix] == report[f.suffix], f.suffix
        assert row["unsafe_seed"] is True


def test_other_groups_keys_give_other_noise() -> None:
    spec = hp.hdp_marginals(COLS, domains=DOMAINS, eps0=1.0, k=2)
    counter = _counter(_frame(), spec)
    one = run_group(spec, counter, ReleaseKey.from_unsafe_seed("g1"))
    two = run_group(spec, counter, ReleaseKey.from_unsafe_seed("g2"))
    assert [c["noisy_count"] for c in one[0]] != [c["noisy_count"] for c in two[0]]


def test_a_spec_of_another_family_is_refused() -> None:
    with pytest.raises(ParameterError, match="`spec` of a record-count Column must come "
                                             "from hdp_heavy_hitters"):
        family_of(hp.hdp_mean("x", eps="e", lower=0, upper=1))


def test_attribute_histograms_run_in_agg() -> None:
    """The attribute histograms' kernel: ``agg`` releases the release API's long table as
    one list column named by the spec's alias."""
    pdf = _frame(500)
    spec = attribute_histogram_spec(COLS, domains=DOMAINS, eps0=0.5, alias="h")
    got = hp.agg(pdf, spec, unsafe_seed=5)
    want = hp.attribute_histograms(pdf, COLS, domains=DOMAINS, eps0=0.5, unsafe_seed=5)
    assert list(got.columns) == ["h"]
    assert list(got["h"][0]) == _records(want.table)
    with pytest.raises(ParameterError, match="`alias` must be a non-empty column name"):
        attribute_histogram_spec(COLS, domains=DOMAINS, eps0=0.5, alias="")
