"""Per-query keys: a Column's key derived with a query fingerprint (HMAC-SHA256)."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.errors import ParameterError


def test_query_keys_are_deterministic_distinct_and_keep_the_mark() -> None:
    key = ReleaseKey.fresh()
    a, b = key.for_query("a" * 64), key.for_query("b" * 64)
    assert a == key.for_query("a" * 64)  # one query re-evaluated: one key
    assert len({a.material, b.material, key.material}) == 3
    assert not a.unsafe
    seeded = ReleaseKey.from_unsafe_seed(3)
    assert seeded.for_query("a" * 64).unsafe
    # the documented derivation, so that another implementation can be checked against it
    want = hmac.new(key.material, b"hdp_spark/query-key/v1\x00" + b"a" * 64,
                    hashlib.sha256).digest()
    assert a.material == want


def test_query_key_needs_a_fingerprint() -> None:
    with pytest.raises(ParameterError, match="`fingerprint` must be a non-empty string"):
        ReleaseKey.fresh().for_query("")


def test_resolve_takes_a_seeded_key_but_never_a_secret_one() -> None:
    seeded = ReleaseKey.from_unsafe_seed(1).for_query("q")
    assert ReleaseKey.resolve(seeded) is seeded
    with pytest.raises(ParameterError, match="got a secret release key"):
        ReleaseKey.resolve(ReleaseKey.fresh())
