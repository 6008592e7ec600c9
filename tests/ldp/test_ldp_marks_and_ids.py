"""ldp_agg refuses unmarked report columns (unless `already_randomized=True`), and
ldp_simulate keys each report on the row's id: independent of batches, partitions and
engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import hdp_spark.ldp as L
from hdp_spark.core.noise.rows import RowStreams, chacha20_blocks
from hdp_spark.errors import ParameterError, SchemaError

# these tables have rows with ε > 1 on purpose; the warning itself is tested in
# test_ldp_estimators
pytestmark = pytest.mark.filterwarnings("ignore::hdp_spark.core.ldp.common.LdpEpsilonWarning")


def _frame(n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(3)  # design-ok: synthetic test data
    return pd.DataFrame({
        "uid": np.arange(n) * 7 + 11,
        "x": rng.uniform(-1, 1, n),
        "c": rng.integers(0, 4, n).astype(float),
        "eps": np.where(np.arange(n) % 9 == 0, 0.0, rng.choice([0.5, 1.0, 2.0], n)),
    })


def _sim(engine: Any, frame: Any, **kw: Any) -> Any:
    return engine.module.ldp_simulate(frame, "x", eps="eps", id="uid", unsafe_seed="ids", **kw)


def _pd(engine: Any, out: Any) -> pd.DataFrame:
    return out if engine.name == "pandas" else out.toPandas()


MEAN = L.ldp_mean("x", eps="eps", mechanism="laplace")


@pytest.mark.spark
def test_unmarked_column_is_refused(engine: Any) -> None:
    frame = engine.frame(_frame())
    with pytest.raises(ParameterError, match="already_randomized=True") as info:
        engine.module.ldp_agg(frame, MEAN)
    assert "`x`" in str(info.value)
    with pytest.raises(ParameterError, match="already_randomized"):
        engine.module.ldp_agg(frame, MEAN, already_randomized="yes")
    out = _pd(engine, engine.module.ldp_agg(frame, MEAN, already_randomized=True))
    assert len(out) == 1  # the caller's declaration is accepted


@pytest.mark.spark
def test_marked_reports_from_simulate_are_accepted(engine: Any) -> None:
    sim = _sim(engine, engine.frame(_frame()), randomizer=L.LaplaceRandomizer())
    spec = L.ldp_mean("x_report", eps="eps", mechanism="laplace")
    out = _pd(engine, engine.module.ldp_agg(sim, spec))
    assert out["x_report_mean_n"][0] > 0
    with pytest.raises(ParameterError, match="expects `rr` reports"):
        engine.module.ldp_agg(sim, L.ldp_mean("x_report", eps="eps", mechanism="rr"))
    with pytest.raises(ParameterError, match="already_randomized"):  # `x` is still raw
        engine.module.ldp_agg(sim, MEAN)
    oracle = L.FrequencyOracle.plan(np.ones(10), 4, phi_seed=5)
    fo = engine.module.ldp_simulate(engine.frame(_frame()), "c", eps="eps", id="uid",
                                    randomizer=L.JLRandomizer(oracle), output="r")
    res = _pd(engine, engine.module.ldp_agg(
        fo, L.ldp_distribution("r_j", "r_b", eps="eps", oracle=oracle)))
    assert len(res["r_j_pmf"][0]) == 4


def test_pandas_marker_survives_parquet(tmp_path: Path) -> None:
    import hdp_spark.pandas as hpd

    sim = hpd.ldp_simulate(_frame(), "x", eps="eps", randomizer=L.RRRandomizer())
    sim.to_parquet(tmp_path / "r.parquet")
    back = pd.read_parquet(tmp_path / "r.parquet")
    out = hpd.ldp_agg(back, L.ldp_mean("x_report", eps="eps", mechanism="rr"))
    assert out["x_report_mean_n"][0] > 0


@pytest.mark.spark
def test_spark_marker_survives_parquet(spark: Any, tmp_path: Path) -> None:
    import hdp_spark.spark as hs

    sim = hs.ldp_simulate(spark.createDataFrame(_frame()), "x", eps="eps", id="uid",
                          randomizer=L.RRRandomizer())
    sim.select("x_report", "eps").write.parquet(str(tmp_path / "r"))
    back = spark.read.parquet(str(tmp_path / "r"))
    out = hs.ldp_agg(back, L.ldp_mean("x_report", eps="eps", mechanism="rr")).toPandas()
    assert out["x_report_mean_n"][0] > 0


@pytest.mark.spark
def test_reports_do_not_depend_on_batches_partitions_or_engine(spark: Any) -> None:
    import hdp_spark.pandas as hpd
    import hdp_spark.spark as hs

    pdf = _frame(300)
    for randomizer in (L.LaplaceRandomizer(), L.RRRandomizer(),
                       L.JLRandomizer(L.FrequencyOracle.plan(np.ones(10), 4, phi_seed=5))):
        col = "c" if isinstance(randomizer, L.JLRandomizer) else "x"
        ref = hpd.ldp_simulate(pdf, col, eps="eps", id="uid", randomizer=randomizer,
                               unsafe_seed="ids", output="r").sort_values("uid")
        ref = ref.reset_index(drop=True)
        runs = []
        for batch, parts in ((3, 1), (1000, 4), (7, 3)):
            spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(batch))
            try:
                sdf = spark.createDataFrame(pdf).repartition(parts)
                out = hs.ldp_simulate(sdf, col, eps="eps", id="uid", randomizer=randomizer,
                                      unsafe_seed="ids", output="r").toPandas()
            finally:
                spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
            runs.append(out.sort_values("uid").reset_index(drop=True))
        cols = ["r_j", "r_b"] if col == "c" else ["r"]
        for out in runs:
            for c in cols:
                np.testing.assert_array_equal(
                    out[c].astype("float64").to_numpy(), ref[c].astype("float64").to_numpy())
    # a shuffled pandas table gives each id the same report
    shuffled = pdf.sample(frac=1.0, random_state=1)
    a = hpd.ldp_simulate(pdf, "x", eps="eps", id="uid", randomizer=L.LaplaceRandomizer(),
                         unsafe_seed=2).set_index("uid")["x_report"]
    b = hpd.ldp_simulate(shuffled, "x", eps="eps", id="uid", randomizer=L.LaplaceRandomizer(),
                         unsafe_seed=2).set_index("uid")["x_report"]
    pd.testing.assert_series_equal(a.sort_index(), b.sort_index())


def test_changed_value_or_id_gets_another_report() -> None:
    import hdp_spark.pandas as hpd

    pdf = _frame(50)
    kw: dict[str, Any] = {"eps": "eps", "randomizer": L.LaplaceRandomizer(), "unsafe_seed": 4}
    base = hpd.ldp_simulate(pdf, "x", id="uid", **kw)["x_report"]
    moved = pdf.assign(x=pdf["x"] + 1e-9)
    other = hpd.ldp_simulate(moved, "x", id="uid", **kw)["x_report"]
    renamed = hpd.ldp_simulate(pdf.assign(uid=pdf["uid"] + 1), "x", id="uid", **kw)["x_report"]
    live = pdf["eps"] > 0
    assert not np.any(base[live].to_numpy() == other[live].to_numpy())
    assert not np.any(base[live].to_numpy() == renamed[live].to_numpy())
    # string ids work and differ from integer ids with the same digits
    strs = hpd.ldp_simulate(pdf.assign(uid=pdf["uid"].astype(str)), "x", id="uid", **kw)
    assert not np.any(strs["x_report"][live].to_numpy() == base[live].to_numpy())
    # the default identity is the row position
    pos = hpd.ldp_simulate(pdf, "x", **kw)["x_report"]
    byrow = hpd.ldp_simulate(pdf.assign(uid=np.arange(50)), "x", id="uid", **kw)["x_report"]
    pd.testing.assert_series_equal(pos, byrow)


def test_bad_ids_are_rejected() -> None:
    import hdp_spark.pandas as hpd

    pdf = _frame(10)
    kw: dict[str, Any] = {"eps": "eps", "randomizer": L.LaplaceRandomizer()}
    with pytest.raises(SchemaError, match=r"id column `uid`.*nulls"):
        hpd.ldp_simulate(pdf.assign(uid=pd.array([None] + [1] * 9, dtype="Int64")), "x",
                         id="uid", **kw)
    with pytest.raises(SchemaError, match=r"id column `uid`.*float"):
        hpd.ldp_simulate(pdf.assign(uid=pdf["uid"].astype(object) * 0.5), "x", id="uid", **kw)
    with pytest.raises(SchemaError, match="id column `nope`"):
        hpd.ldp_simulate(pdf, "x", id="nope", **kw)
    with pytest.raises(ParameterError, match="`id` must be a column name"):
        hpd.ldp_simulate(pdf, "x", id=3, **kw)  # type: ignore[arg-type]


@pytest.mark.spark
def test_spark_requires_an_id_column(spark: Any) -> None:
    import hdp_spark.spark as hs

    sdf = spark.createDataFrame(_frame(10))
    with pytest.raises(ParameterError, match="`id` must name a column"):
        hs.ldp_simulate(sdf, "x", eps="eps", randomizer=L.LaplaceRandomizer())
    with pytest.raises(SchemaError, match="id column `x` must hold integers or strings"):
        hs.ldp_simulate(sdf, "x", eps="eps", randomizer=L.LaplaceRandomizer(), id="x")


def test_row_streams_are_chacha20_and_per_row() -> None:
    crypto = pytest.importorskip("cryptography.hazmat.primitives.ciphers")
    keys = np.random.default_rng(1).integers(0, 256, (3, 32), dtype=np.uint8)  # design-ok
    ctr = np.array([0, 5, 2**33 + 7], dtype=np.uint64)
    got = chacha20_blocks(keys.view("<u4").reshape(3, 8).astype(np.uint32), ctr)
    for i in range(3):
        nonce = int(ctr[i]).to_bytes(8, "little") + bytes(8)
        enc = crypto.Cipher(crypto.algorithms.ChaCha20(keys[i].tobytes(), nonce), None).encryptor()
        assert got[i].astype("<u4").tobytes() == enc.update(bytes(64))
    # a row's words do not depend on which other rows draw
    a, b = RowStreams(keys), RowStreams(keys)
    first = [int(a.u64(np.array([1]))[0]) for _ in range(12)]
    both = [int(b.u64(np.array([0, 1]))[1]) for _ in range(12)]
    assert first == both
    draws = RowStreams(keys).integers(np.arange(3), np.array([1, 3, 2**62]))
    assert draws[0] == 0
    assert 0 <= draws[1] < 3
