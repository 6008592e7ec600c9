"""`unsafe_seed` is visible on every output it touches: a frame marker (pandas
``attrs["hdp_unsafe_seed"]``, Spark field metadata on every column), a WARNING of logger
``hdp_spark`` per release, and the job's ``values.parquet`` schema metadata."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.ldp as L

MARK = "hdp_unsafe_seed"


def _data() -> pd.DataFrame:
    rng = np.random.default_rng(7)  # design-ok: synthetic test data
    n = 60
    uid = np.arange(n) % 20
    return pd.DataFrame({
        "rid": np.arange(n),
        "uid": uid,
        "x": rng.uniform(0, 10, n),
        "eps": np.where(uid % 2 == 0, 0.5, 1.0),
        "dept": rng.choice(["a", "b"], n),
        "color": rng.choice(["red", "blue"], n),
    })


def _releases(mod: Any) -> dict[str, Callable[[Any, Any], Any]]:
    """name -> run(frame, seed) returning the released frame."""
    hh = mod.hdp_heavy_hitters(["color", "dept"],
                               domains={"color": ["red", "blue"], "dept": ["a", "b"]},
                               eps0=2.0, delta=1e-4, threshold=5)
    return {
        "mean": lambda f, s: mod.agg(
            f, mod.hdp_mean("x", eps="eps", lower=0, upper=10), unsafe_seed=s),
        "histogram": lambda f, s: mod.histogram(
            f, mod.hdp_histogram("dept", eps="eps", categories=["a", "b"]), unsafe_seed=s),
        "user_mean": lambda f, s: mod.user_mean(
            f, mod.hdp_user_mean("x", user="uid", eps="eps", lower=0, upper=10),
            unsafe_seed=s),
        "heavy_hitters": lambda f, s: mod.heavy_hitters(f, hh, unsafe_seed=s).table,
        "attribute_histograms": lambda f, s: mod.attribute_histograms(
            f, ["color"], domains={"color": ["red", "blue"]}, eps0=1.0, unsafe_seed=s).table,
        "ldp_simulate": lambda f, s: mod.ldp_simulate(
            f, "x", eps="eps", randomizer=L.LaplaceRandomizer(0, 10), unsafe_seed=s,
            id="rid"),
    }


def _marked(engine_name: str, frame: Any) -> list[bool]:
    """Per column (Spark) or once (pandas): does the output carry the marker?"""
    if engine_name == "pandas":
        return [frame.attrs.get(MARK) is True]
    return [f.metadata.get(MARK) is True for f in frame.schema.fields]


@pytest.mark.spark
@pytest.mark.parametrize(
    "name",
    ["mean", "histogram", "user_mean", "heavy_hitters", "attribute_histograms", "ldp_simulate"],
)
def test_unsafe_seed_marks_output_and_warns(
    engine: Any, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    run = _releases(engine.module)[name]
    frame = engine.frame(_data())
    with caplog.at_level(logging.WARNING, logger="hdp_spark"):
        seeded = run(frame, 5)
    warnings = [r for r in caplog.records
                if r.name == "hdp_spark" and r.levelno == logging.WARNING
                and "unsafe_seed" in r.getMessage()]
    assert warnings, "no WARNING for a seeded release"
    marks = _marked(engine.name, seeded)
    assert marks
    assert all(marks)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hdp_spark"):
        fresh = run(frame, None)
    assert not [r for r in caplog.records if "unsafe_seed" in r.getMessage()]
    assert not any(_marked(engine.name, fresh))
    if engine.name == "spark":  # same values and columns as without the marker
        assert seeded.columns == fresh.columns
        assert [f.dataType for f in seeded.schema.fields] == [
            f.dataType for f in fresh.schema.fields]


@pytest.mark.spark
def test_spark_marker_survives_parquet(spark: Any, tmp_path: Path) -> None:
    import hdp_spark.spark as hs

    out = hs.agg(spark.createDataFrame(_data()), hs.hdp_mean("x", eps="eps", lower=0, upper=10),
                 unsafe_seed=1)
    out.write.parquet(str(tmp_path / "o"))
    back = spark.read.parquet(str(tmp_path / "o"))
    assert all(f.metadata.get(MARK) is True for f in back.schema.fields)


def test_pandas_marker_survives_copy_and_parquet(tmp_path: Path) -> None:
    import hdp_spark.pandas as hpd

    out = hpd.agg(_data(), hpd.hdp_mean("x", eps="eps", lower=0, upper=10), unsafe_seed=1)
    assert out.copy().attrs.get(MARK) is True
    out.to_parquet(tmp_path / "o.parquet")
    assert pd.read_parquet(tmp_path / "o.parquet").attrs.get(MARK) is True
