"""Means and histograms under a privacy unit (issue 50): ``agg(..., privacy_unit=...)``.

* the per-person loss, computed exactly from the release's own cell tables for a table and
  its person-level neighbours (one person's rows removed, or replaced by rows in other
  groups), is at most that person's ε, and reaches most of it for an adversarial person
  (the argument: ``hdp_spark/core/privacy_unit/weights.py``);
* an audit of the sampled noisy weights (many keys) against the claimed share;
* pandas and Spark release the same numbers for the same key;
* the outputs hold no exact count, and every error path names its argument.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from audit_stats import assert_audit, key, power_floor

import hdp_spark.pandas as hpd
from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.histogram.spec import HistogramSpec
from hdp_spark.core.kernels import release_specs
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.core.pipeline import Release
from hdp_spark.core.privacy_unit import PrivacyUnit
from hdp_spark.core.privacy_unit.options import UnitOptions
from hdp_spark.core.privacy_unit.weights import unit_selection
from hdp_spark.core.selection.mechanism import (
    _bin_counts,
    _mean_numerator,
    group_units,
    group_weight,
    noisy_weights,
)
from hdp_spark.core.selection.spec import SelectKeys
from hdp_spark.errors import ParameterError
from tests.conftest import Engine

KEYS = ["DE", "FR", "IT", "ES"]
CATS = ["a", "b", "c"]


def _events(seed: int = 0, n: int = 3000, persons: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "user_id": rng.integers(0, persons, n).astype(np.int64),
        "country": rng.choice([*KEYS, "XX"], n),
        "amount": rng.uniform(0, 500, n),
        "category": rng.choice(CATS, n),
        "eps": rng.choice([0.25, 0.5, 1.0, 2.0], n),
    })


def _specs() -> tuple[MeanSpec, HistogramSpec]:
    return (hpd.hdp_mean("amount", eps="eps", lower=0, upper=500),
            hpd.hdp_histogram("category", eps="eps", categories=CATS))


def _release(engine: Engine, df: pd.DataFrame, unit: PrivacyUnit, seed: str = "pu"
             ) -> Release:
    from hdp_spark.pandas.engine import PandasEngine

    if engine.name == "pandas":
        native: Any = PandasEngine(df)
    else:
        from hdp_spark.spark.engine import SparkEngine

        native = SparkEngine(engine.frame(df))
    return release_specs(native, _specs(), by="country", keys=KEYS, unsafe_seed=seed,
                         unit=UnitOptions(unit))


def _statistics(r: Release) -> dict[str, dict[Any, Any]]:
    """W_g, N_g and C_g of every group, exactly, from the release's cell tables."""
    selection = r.selection
    assert selection is not None
    _mean, hist = r.specs
    levels, cats = r.tables
    out: dict[str, dict[Any, Any]] = {"W": {}, "N": {}, "C": {}}
    for k in r.keys:
        stats = levels.get(k)
        if stats is None:
            out["W"][k], out["N"][k] = 0, Fraction(0)
        else:
            units = group_units(selection, stats)
            out["W"][k] = group_weight(selection, [s.level for s in stats.rows],
                                       [s.count for s in stats.rows])
            out["N"][k] = Fraction(_mean_numerator(units, stats, 0), 2 * FIXED_ONE)
        cstats = cats.get(k)
        out["C"][k] = ([0] * hist.k if cstats is None else
                       _bin_counts(hist, group_units(selection, cstats), cstats))
    return out


def _loss(r1: Release, r2: Release) -> float:
    """The exact privacy loss bound of the release between two tables: Σ |Δ|/scale over
    every noisy quantity (W̃, each mean's Ñ, each bin's C̃), in ε units."""
    sel = r1.selection
    assert sel is not None
    a, b = _statistics(r1), _statistics(r2)
    parts = len(r1.specs)
    loss = Fraction(0)
    for k in r1.keys:
        loss += abs(a["W"][k] - b["W"][k]) / sel.selection_scale
        loss += abs(a["N"][k] - b["N"][k]) / sel.mean_scale(parts)
        loss += sum(abs(x - y) for x, y in zip(a["C"][k], b["C"][k], strict=True)
                    ) / sel.count_scale(parts)
    return float(loss)


def _adversary(df: pd.DataFrame, person: int, eps: float) -> pd.DataFrame:
    """``person``'s rows replaced by many extreme rows in every public group."""
    rows = [{"user_id": person, "country": c, "amount": 500.0, "category": "a", "eps": eps}
            for c in KEYS for _ in range(40)]
    return pd.concat([df[df["user_id"] != person], pd.DataFrame(rows)], ignore_index=True)


@pytest.mark.parametrize(("max_groups", "max_rows"), [(1, 1), (2, 5), (4, 3)])
def test_per_person_loss_is_at_most_their_eps(engine: Engine, max_groups: int,
                                              max_rows: int) -> None:
    unit = PrivacyUnit("user_id", max_groups, max_rows)
    base = _events(seed=max_groups * 10 + max_rows)
    person, eps_p = 7, 1.0
    table = _adversary(base, person, eps_p)
    removed = table[table["user_id"] != person].reset_index(drop=True)
    moved = pd.concat([removed, pd.DataFrame(
        [{"user_id": person, "country": "XX", "amount": 0.0, "category": "b", "eps": eps_p}]
        * 10 + [{"user_id": person, "country": "DE", "amount": 0.0, "category": "c",
                 "eps": eps_p}] * 10)], ignore_index=True)
    r_table = _release(engine, table, unit)
    for neighbour in (removed, moved):
        loss = _loss(r_table, _release(engine, neighbour, unit))
        assert loss <= eps_p + 1e-12
    # the bound is nearly attained (the adversary fills every bound with extreme rows):
    # removal under the replace scales (u = 2) costs half of ε_p, less the rounding of k
    assert _loss(r_table, _release(engine, removed, unit)) >= 0.45 * eps_p


def test_a_person_in_fewer_groups_gets_no_more_per_group() -> None:
    selection = unit_selection(PrivacyUnit("u", 3, 2), KEYS)
    one = group_weight(selection, [1.5], [2])
    assert one == 2 * ((1024 * Fraction(1, 2) // 1) // 2)  # ε_p/3 = 0.5 per group, 2 rows
    assert selection.units(1.5) * 2 * 3 * selection.gamma <= Fraction(3, 2)


@pytest.mark.statistical
def test_audit_of_the_noisy_weight() -> None:
    """W̃ of a global release with and without one person (their bounded rows), sampled
    under many keys (the draws of ``weigh_public``): the loss on W̃ is at most its share
    f·ε_p (add/remove scale), and the audit can see most of it."""
    selection = SelectKeys(0.0, 1.0, 0.9, None, "add_remove", max_groups=1, max_rows=4,
                           keys_public=True)
    eps_p = 1.0
    person = 4 * selection.units(eps_p)
    others = 500
    t = selection.selection_scale
    q = math.exp(-t.denominator / t.numerator)
    cut = others + person // 2

    def above(w: int) -> float:  # P[W + Z >= cut]
        z = cut - w
        return q**z / (1 + q) if z >= 0 else 1 - q ** (1 - z) / (1 + q)

    n = 6000
    p1, p2 = above(others + person), above(others)
    floor = power_floor(n, math.floor(p1 * 1e6) / 1e6, math.ceil(p2 * 1e6) / 1e6)

    def hits(weight: int, tag: str) -> int:
        return sum(noisy_weights(selection, [weight], key(f"pu-audit-{tag}-{i}"), [()])[0]
                   >= cut for i in range(n))

    k1 = hits(others + person, "with")
    k2 = hits(others, "without")
    assert_audit(k1, k2, n, 0.9 * eps_p + 1e-9, floor)


def test_engines_agree(spark: Any) -> None:
    df = _events(seed=4)
    specs = _specs()
    kwargs: dict[str, Any] = {"by": "country", "keys": KEYS, "privacy_unit": "user_id",
                              "max_groups": 2, "max_rows": 3, "unsafe_seed": 5}
    import hdp_spark.spark as hs

    local = hpd.agg(df, *specs, **kwargs)
    remote = hs.agg(spark.createDataFrame(df).repartition(3), *specs, **kwargs).toPandas()
    assert list(local.columns) == list(remote.columns)
    for column in local.columns:
        if column == "category_histogram":
            def bins(v: Any) -> list[dict[str, Any]]:
                return [b.asDict() if hasattr(b, "asDict") else dict(b) for b in v]

            assert [bins(v) for v in remote[column]] == [bins(v) for v in local[column]]
        else:
            assert list(remote[column]) == list(local[column]), column


def test_outputs_publish_no_count(engine: Engine) -> None:
    out = engine.agg(_events(), *_specs(), by="country", keys=KEYS, privacy_unit="user_id",
                     max_groups=2, max_rows=3, unsafe_seed=1)
    assert not [c for c in out.columns if c.endswith("_n") or "eps_levels" in c]
    assert set(out["amount_mean_privacy"]) == {"privacy_unit"}
    assert set(out["amount_mean_delta"]) == {0.0}
    assert (out["amount_mean_ci_low"] == 0).all()
    assert (out["amount_mean_ci_high"] == 500).all()


def test_global_release(engine: Engine) -> None:
    out = engine.agg(_events(), *_specs(), privacy_unit="user_id", max_rows=4, unsafe_seed=2)
    assert len(out) == 1
    assert 0 <= out["amount_mean"].iloc[0] <= 500


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"max_groups": 2}, "`max_groups` bounds a privacy unit: it needs `privacy_unit`"),
    ({"eps_cap": 2.0}, "`eps_cap` bounds a privacy unit"),
    ({"privacy_unit": "user_id", "max_rows": 0}, "`max_rows` must be an int in [1, 1000000]"),
    ({"privacy_unit": "user_id", "keys": None},
     "a grouped release needs public `keys` or `keys=select_keys(...)`"),
    ({"privacy_unit": "amount"}, "identifies people: no aggregator may read it"),
    ({"privacy_unit": "country"}, "identifies people"),
    ({"privacy_unit": "user_id", "keys": hpd.select_keys(delta=1e-6, c=1.0, share=0.3),
      "eps_cap": 2.0}, "`eps_cap` and `weight_share` are select_keys(c=..., share=...)"),
    ({"privacy_unit": "user_id", "weight_share": 1.5},
     "`weight_share` must be in (0, 1), got 1.5"),
    ({"privacy_unit": "user_id", "eps_cap": -1.0}, "`eps_cap` must be a finite number > 0"),
])
def test_errors(kwargs: dict[str, Any], needle: str) -> None:
    call: dict[str, Any] = {"by": "country", "keys": KEYS, **kwargs}
    with pytest.raises(ParameterError) as err:
        hpd.agg(_events(n=50, persons=10), *_specs(), **call)
    assert needle in str(err.value)


def test_other_aggregators_are_refused_for_now() -> None:
    spec = hpd.hdp_user_mean("amount", user="user_id", eps="eps", lower=0, upper=500)
    with pytest.raises(ParameterError, match="supports hdp_mean and hdp_histogram so far"):
        hpd.agg(_events(n=50, persons=10), spec, privacy_unit="user_id")
