"""``explain`` under a privacy unit with ``keys=select_keys(...)`` (issue 50).

* it reads no column and names no group (one row per aggregator): tables that differ in
  every value, ε, person and group give the same frame, on both engines;
* its threshold and margin are the release's (the margin for δ/max_groups), and its noise
  scales the selection's;
* ``release_probability_at`` is the exact chance the release's own noisy weight reaches
  the threshold (checked against the mechanism's draws), at most δ/G for one person alone;
* every error path names its argument.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.pandas as hpd
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.privacy_unit import PrivacyUnit
from hdp_spark.core.privacy_unit.weights import unit_selection
from hdp_spark.core.selection.mechanism import noisy_weights
from hdp_spark.errors import ParameterError
from hdp_spark.explain_unit import WEIGHT_LADDER, release_probability
from tests.conftest import Engine

SELECT = hpd.select_keys(delta=1e-6, c=1.0, share=0.3)
UNIT: dict[str, Any] = {"privacy_unit": "user_id", "max_groups": 2, "max_rows": 3}
SEL = unit_selection(PrivacyUnit("user_id", 2, 3), SELECT)


def _events(seed: int, n: int = 2000, persons: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "user_id": rng.integers(0, persons, n).astype(np.int64),
        "country": rng.choice(["DE", "FR", "IT", f"X{seed}"], n),
        "amount": rng.uniform(0, 500, n),
        "category": rng.choice(["a", "b", "c"], n),
        "eps": rng.choice([0.5, 1.0, 4.0], n),
    })


def _specs() -> tuple[Any, Any]:
    return (hpd.hdp_mean("amount", eps="eps", lower=0, upper=500),
            hpd.hdp_histogram("category", eps="eps", categories=["a", "b", "c"]))


def _explain(engine: Engine, df: pd.DataFrame, **kwargs: Any) -> pd.DataFrame:
    call: dict[str, Any] = {"by": "country", "keys": SELECT, **UNIT, **kwargs}
    out = engine.module.explain(engine.frame(df), *_specs(), **call)
    frame: pd.DataFrame = out if engine.name == "pandas" else out.toPandas()
    return frame


def _comparable(frame: pd.DataFrame) -> list[Any]:
    return [[(k, [sorted(d.items()) for d in v] if isinstance(v, list | np.ndarray) else v)
             for k, v in row.items()]
            for row in frame.to_dict("records")]


def test_reads_no_column_and_names_no_group(engine: Engine) -> None:
    one = _explain(engine, _events(0))
    other = _events(1, n=300, persons=7)
    other["eps"] = np.nan  # not even the ε column is read
    assert _comparable(one) == _comparable(_explain(engine, other))
    assert list(one["aggregator"]) == ["amount_mean", "category_histogram"]
    assert "country" not in one.columns  # which groups exist is private
    assert not [c for c in one.columns if c in ("n", "eps_levels")]


def test_engines_agree(spark: Any) -> None:
    local = _explain(Engine("pandas"), _events(0))
    remote = _explain(Engine("spark", spark), _events(0))
    assert _comparable(local) == _comparable(remote)


def test_threshold_and_scales_are_the_release_s() -> None:
    out = _explain(Engine("pandas"), _events(0))
    gamma = float(SEL.gamma)
    mean, hist = out.iloc[0], out.iloc[1]
    assert mean["threshold"] == pytest.approx(SEL.threshold * gamma)
    assert mean["margin"] == pytest.approx(SEL.margin * gamma)
    assert mean["threshold"] - mean["margin"] == pytest.approx(SEL.cap_units * gamma)
    assert (mean["delta"], mean["eps_cap"], mean["weight_share"]) == (1e-6, 1.0, 0.3)
    assert mean["weight_noise_scale"] == pytest.approx(float(SEL.selection_scale) * gamma)
    assert mean["noise_scale"] == pytest.approx(float(SEL.mean_scale(2)) * gamma * 500)
    assert hist["noise_scale"] == pytest.approx(float(SEL.count_scale(2)) * gamma)
    chance = [d["probability"] for d in mean["release_probability_at"]]
    assert [d["weight"] for d in mean["release_probability_at"]] == list(WEIGHT_LADDER)
    assert chance == sorted(chance)
    assert chance[0] < 1e-5
    assert chance[-1] == 1.0


def test_one_person_alone_is_released_with_at_most_delta_per_group() -> None:
    alone = float(SEL.cap_units * SEL.gamma)  # the most one person brings to a group
    p = release_probability(SEL, alone)
    assert p <= SEL.delta / SEL.max_groups
    assert p > SEL.delta / SEL.max_groups / 10  # the margin is the least such: not loose


@pytest.mark.statistical
def test_release_probability_is_the_mechanism_s() -> None:
    """4,000 noisy weights of the release's own sampler at three weights near the
    threshold: the share reaching T is within 4 standard errors of the predicted chance."""
    gamma = float(SEL.gamma)
    key = ReleaseKey.resolve("explain-select")
    trials = 4000
    for steps in (SEL.threshold - 6000, SEL.threshold, SEL.threshold + 4000):
        weight = steps * gamma
        draws = noisy_weights(SEL, [steps] * trials, key, [(f"g{i}",) for i in range(trials)])
        share = float(np.mean([w >= SEL.threshold for w in draws]))
        p = release_probability(SEL, weight)
        assert abs(share - p) <= 4 * np.sqrt(p * (1 - p) / trials) + 1e-3, (steps, share, p)


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"by": None}, "`keys=select_keys(...)` chooses group keys: it needs `by`"),
    ({"eps_cap": 0.5}, "`eps_cap` and `weight_share` are select_keys(c=..., share=...)"),
    ({"weight_share": 0.2}, "`eps_cap` and `weight_share` are select_keys(c=..., share=...)"),
    ({"max_groups": 0}, "`max_groups` must be an int in [1, 10000]"),
])
def test_errors(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(ParameterError) as err:
        _explain(Engine("pandas"), _events(0, n=50, persons=10), **kwargs)
    assert needle in str(err.value)
