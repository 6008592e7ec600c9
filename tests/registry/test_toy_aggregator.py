"""The descriptor test (issue 49): a toy aggregator defined in one test module
(``toy_aggregator.py``) and registered once appears in ``agg`` on both engines, as a Spark
Column, in a job and in ``explain``, with no other file changed. Its per-row privacy loss is
what its docstring claims (ε₀ for counted rows, 0 for the others) and its noise is the
discrete Laplace of scale 1/ε₀ it documents."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from toy_aggregator import NAME, TOY, ToyCountSpec, toy_count

import hdp_spark
from hdp_spark.errors import ParameterError


@pytest.fixture
def toy() -> Iterator[None]:
    hdp_spark.register_aggregator(TOY)
    try:
        yield
    finally:
        hdp_spark.unregister_aggregator(NAME)


def _table(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({"dept": rng.choice(["a", "b"], n),
                         "eps": rng.choice([0.5, 1.0, 2.0], n),
                         "x": rng.random(n)})


def test_unregistered_the_toy_is_refused() -> None:
    import hdp_spark.pandas as hp

    with pytest.raises(ParameterError, match="register_aggregator, got ToyCountSpec"):
        hp.agg(_table(), toy_count(eps="eps", eps0=1.0))


def test_registering_twice_and_clashing_spec_classes_are_refused(toy: None) -> None:
    with pytest.raises(ParameterError, match="already registered"):
        hdp_spark.register_aggregator(TOY)
    other = hdp_spark.Aggregator("toy_other", (ToyCountSpec,), TOY.kernel, toy_count)
    with pytest.raises(ParameterError, match="already belongs to the aggregator 'toy_count'"):
        hdp_spark.register_aggregator(other)
    with pytest.raises(ParameterError, match="must be an Aggregator"):
        hdp_spark.register_aggregator(object())  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="must be a registered aggregator"):
        hdp_spark.unregister_aggregator("nope")


@pytest.mark.parametrize(("bad", "match"), [
    ({"name": "Toy"}, "`name` must be a lower-case identifier"),
    ({"spec_types": ()}, "`spec_types` must be a non-empty tuple of classes"),
    ({"kernel": object()}, "`kernel` must be a Kernel"),
    ({"constructor": 3}, "`constructor` must be callable"),
    ({"column_field": "Count"}, "`column_field` must be a lower-case identifier"),
    ({"explain": 3}, "`explain` must be callable or None"),
])
def test_a_bad_descriptor_is_refused(bad: dict[str, Any], match: str) -> None:
    fields = {"name": NAME, "spec_types": (ToyCountSpec,), "kernel": TOY.kernel,
              "constructor": toy_count, **bad}
    with pytest.raises(ParameterError, match=match):
        hdp_spark.Aggregator(**fields)


def test_the_toy_in_agg_on_both_engines(toy: None, engine: Any) -> None:
    pdf = _table()
    out = engine.agg(pdf, toy_count(eps="eps", eps0=1.0, alias="c"),
                     hdp_spark.hdp_mean("x", eps="eps", lower=0, upper=1),
                     by="dept", keys=["a", "b"], unsafe_seed=5)
    exact = pdf[pdf.eps >= 1.0].groupby("dept").size()
    assert list(out["dept"]) == ["a", "b"]
    assert list(out["c_eps0"]) == [1.0, 1.0]
    # discrete Laplace(1/1): |noise| <= 20 except with probability 2·e^-20 per group
    assert all(abs(int(c) - int(exact[k])) <= 20
               for k, c in zip(out["dept"], out["c"], strict=True))
    assert "x_mean" in out.columns  # beside a built-in, in one release


def test_the_toy_noise_is_discrete_laplace_of_scale_one_over_eps0(toy: None) -> None:
    """300 fresh releases: the noise's mean absolute value is the scale's law's
    E|Y| = 2q/(1-q²) with q = e^-ε₀; the sample mean lies within 5 standard errors
    (false-failure probability < 1e-6 by Chebyshev's bound on 300 draws, loosely)."""
    import hdp_spark.pandas as hp

    pdf = _table(60)
    eps0 = 0.5
    exact = int((pdf.eps >= eps0).sum())
    draws = np.array([int(hp.agg(pdf, toy_count(eps="eps", eps0=eps0, alias="c"),
                                 unsafe_seed=f"noise-{i}")["c"][0]) - exact
                      for i in range(300)])
    q = math.exp(-eps0)
    mean_abs = 2 * q / (1 - q * q)
    second = 2 * q * (1 + q * q) / (1 - q * q) ** 2  # E[Y²] of the two-sided geometric
    se = math.sqrt((second - mean_abs**2) / len(draws))
    assert abs(np.abs(draws).mean() - mean_abs) < 5 * se + 0.05
    assert abs(draws.mean()) < 5 * math.sqrt(second / len(draws))


def test_the_toy_as_a_spark_column(toy: None, spark: Any) -> None:
    from pyspark.sql import functions as F

    import hdp_spark.spark as hs

    # the executors import the toy's module, as a user ships a plugin's code to them
    spark.sparkContext.addPyFile(str(Path(__file__).parent / "toy_aggregator.py"))
    pdf = _table()
    df = spark.createDataFrame(pdf)
    col = hs.as_column(toy_count(eps="eps", eps0=1.0, alias="c"), keys="public")
    rows = {r["dept"]: r["c"] for r in
            df.groupBy("dept").agg(col).orderBy("dept").collect()}
    exact = pdf[pdf.eps >= 1.0].groupby("dept").size()
    assert set(rows) == {"a", "b"}
    for k, r in rows.items():
        assert r["eps0"] == 1.0
        assert abs(r["count"] - int(exact[k])) <= 20
    again = {r["dept"]: r["c"] for r in df.groupBy("dept").agg(col).collect()}
    assert again == rows  # one query, one release: re-evaluation repeats its numbers
    other = df.where(F.col("x") >= 0).groupBy("dept").agg(col).collect()
    assert len(other) == 2  # another query: a release of its own
    with pytest.raises(ParameterError, match="not supported by `toy_count`"):
        hs.as_column(toy_count(eps="eps", eps0=1.0), keys=hdp_spark.select_keys(
            delta=1e-6, c=1.0, share=0.5))


def test_the_toy_in_sql(toy: None, spark: Any) -> None:
    """``hdp_aggregate('toy_count', ...)`` after ``register_sql``: the SQL form equals the
    Column's struct shape, re-running the query repeats it, and a bad call is refused at
    analysis, naming the argument."""
    import hdp_spark.spark as hs

    spark.sparkContext.addPyFile(str(Path(__file__).parent / "toy_aggregator.py"))
    pdf = _table()
    spark.createDataFrame(pdf).createOrReplaceTempView("toy_people")
    hs.register_sql(spark)
    query = ("SELECT dept, hdp_aggregate('toy_count', eps, eps, 0, 1, '{\"eps0\": 1.0}', "
             "'public') AS c FROM toy_people GROUP BY dept ORDER BY dept")
    rows = [(r["dept"], r["c"]["count"], r["c"]["eps0"]) for r in spark.sql(query).collect()]
    exact = pdf[pdf.eps >= 1.0].groupby("dept").size()
    assert [d for d, _, _ in rows] == ["a", "b"]
    for dept, count, eps0 in rows:
        assert eps0 == 1.0
        assert abs(count - int(exact[dept])) <= 20  # discrete Laplace(1): see above
    again = [(r["dept"], r["c"]["count"], r["c"]["eps0"]) for r in spark.sql(query).collect()]
    assert again == rows
    from pyspark.errors import PySparkException

    with pytest.raises(PySparkException, match=r"`name` .* must be an aggregator with a SQL "
                                                r"form registered on this session"):
        spark.sql("SELECT hdp_aggregate('nope', eps, eps, 0, 1, '{}') FROM toy_people"
                  ).collect()
    with pytest.raises(PySparkException, match=r"`options` .* must be a constant JSON"):
        spark.sql("SELECT hdp_aggregate('toy_count', eps, eps, 0, 1, eps) FROM toy_people"
                  ).collect()
    with pytest.raises(PySparkException, match="must be 'public' or omitted"):
        spark.sql("SELECT dept, hdp_aggregate('toy_count', eps, eps, 0, 1, '{}', 'pub') "
                  "FROM toy_people GROUP BY dept").collect()


def test_an_aggregator_without_a_column_form_is_refused_by_as_column(spark: Any) -> None:
    """Every built-in has a Column form now; an aggregator registered without one (the toy's
    descriptor with no ``column_field``, under its own spec type) is refused by name."""
    import dataclasses

    from toy_aggregator import TOY, ToyCountSpec

    import hdp_spark.spark as hs
    from hdp_spark import register_aggregator, unregister_aggregator

    @dataclasses.dataclass(frozen=True, slots=True)
    class NoColumnSpec(ToyCountSpec):
        pass

    def no_column(*, eps: str, eps0: float) -> NoColumnSpec:
        return NoColumnSpec(eps=eps, eps0=eps0)

    register_aggregator(dataclasses.replace(
        TOY, name="no_column", spec_types=(NoColumnSpec,), constructor=no_column,
        column_field=None, column_builder=None, sql=None, sql_form=None, job_kind=None))
    try:
        with pytest.raises(ParameterError, match="`no_column` is not available as a Spark "
                                                 "Column yet"):
            hs.as_column(no_column(eps="eps", eps0=1.0))
    finally:
        unregister_aggregator("no_column")


def test_the_toy_in_explain(toy: None, engine: Any) -> None:
    pdf = _table()
    out = engine.module.explain(engine.frame(pdf), toy_count(eps="eps", eps0=2.0),
                                  by="dept", keys=["a", "b"])
    if not isinstance(out, pd.DataFrame):
        out = out.toPandas()
    exact = pdf[pdf.eps >= 2.0].groupby("dept").size()
    assert list(out["kind"]) == [NAME, NAME]
    assert list(out["n"]) == [int(exact["a"]), int(exact["b"])]
    with pytest.raises(ParameterError, match="not both in one call"):
        engine.module.explain(engine.frame(pdf), toy_count(eps="eps", eps0=2.0),
                                hdp_spark.hdp_mean("x", eps="eps", lower=0, upper=1))


def test_the_toy_in_a_job_charges_what_it_claims(toy: None, tmp_path: Path) -> None:
    """The job runs the toy and the ledger charges each counted row ε₀ and the others
    nothing: the per-user privacy loss its docstring claims."""
    from hdp_spark.jobs import run_job
    from hdp_spark.ledger import SqliteLedger

    pdf = _table(200).assign(user_id=np.arange(1, 201))
    pdf.to_csv(tmp_path / "t.csv", index=False)
    job = tmp_path / "toy.toml"
    job.write_text(f"""
[job]
name = "toy"
engine = "pandas"
unsafe_seed = "toy"

[input]
path = "{tmp_path / 't.csv'}"
user_id = "user_id"
eps = "eps"

[budget]
default = 5.0

[ledger]
path = "{tmp_path / 'ledger.sqlite'}"

[output]
path = "{tmp_path / 'out'}"
report = false

[[releases]]
id = "toy_by_dept"
by = ["dept"]
keys = ["a", "b"]

  [[releases.aggregators]]
  kind = "{NAME}"
  eps0 = 1.0
""")
    run_job(job)
    book = SqliteLedger(tmp_path / "ledger.sqlite")
    charges: dict[str, int] = {}
    for record in book.records("toy"):
        charges.update(book.charges(record.key))
    counted = {str(u) for u, e in zip(pdf.user_id, pdf.eps, strict=True) if e >= 1.0}
    assert set(charges) == counted  # only the counted rows are charged
    assert len(set(charges.values())) == 1  # each the same units: ε₀


def test_the_generic_sql_finalize_refuses_bad_options_and_mismatched_cells(toy: None) -> None:
    """What the executors' finalize checks: options must be a JSON object, and the spec
    the form builds must read the cells the SQL call computed."""
    from hdp_spark.spark.sql_generic import _checked_spec, _options

    with pytest.raises(ParameterError, match="must be a JSON object such as"):
        _options("[1, 2]", NAME)
    with pytest.raises(ParameterError, match="must be a JSON object such as"):
        _options("{not json", NAME)
    assert _options('{"eps0": 2}', NAME) == {"eps0": 2}
    assert _checked_spec(TOY, "eps", "eps", (0.0, 1.0), {"eps0": 2.0}).eps0 == 2.0
    with pytest.raises(ParameterError, match="must read the cells the SQL call computes"):
        _checked_spec(TOY, "eps", "eps", (0.0, 5.0), {"eps0": 2.0})
    with pytest.raises(ParameterError, match="`sql_form` must be a SqlForm or None"):
        hdp_spark.Aggregator(NAME, (ToyCountSpec,), TOY.kernel, toy_count, sql_form=3)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="`cells` must be 'level' or 'category'"):
        hdp_spark.SqlForm("rows", toy_count, None)


def test_as_column_of_heavy_hitters_is_their_own_column(spark: Any) -> None:
    """An aggregator with its own native aggregate names its Column builder in its
    descriptor: ``hs.as_column`` of a heavy-hitters spec is the heavy-hitters Column."""
    import hdp_spark.spark as hs
    from hdp_spark.spark.columns_partial import _Heavy

    spec = hdp_spark.hdp_heavy_hitters(["a", "b"], domains={"a": ["x", "y"], "b": [0, 1]},
                                       eps0=1.0)
    col = hs.as_column(spec, keys="public")
    assert isinstance(col, _Heavy)
    assert col.spec == spec
    assert col.groups == "public"
    with pytest.raises(ParameterError, match="select_keys"):
        hs.as_column(spec, keys=hdp_spark.select_keys(delta=1e-6, c=1.0, share=0.5))
    with pytest.raises(ParameterError, match="`column_builder` must be 'module:function'"):
        hdp_spark.Aggregator(NAME, (ToyCountSpec,), TOY.kernel, toy_count,
                             column_builder="nope")


def test_the_aggregators_subpackage_is_not_shadowed_by_the_registry() -> None:
    """``import hdp_spark.aggregators as a`` is the package of constructors (the registry's
    listing is exported as ``registered_aggregators``: a top-level ``aggregators`` function
    once shadowed the subpackage and broke the benchmarks)."""
    import importlib

    pkg = importlib.import_module("hdp_spark.aggregators")
    assert hdp_spark.aggregators is pkg  # type: ignore[attr-defined]
    assert callable(pkg.hdp_mean)
    assert [a.name for a in hdp_spark.registered_aggregators()][:2] == ["mean", "histogram"]
