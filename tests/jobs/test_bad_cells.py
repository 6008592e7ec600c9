"""An error is an output too: a malformed private cell is read as null, on both engines.

Only public columns (ε, user id) may stop a job, with an error naming the column and the rule
and never the cell's value; nothing is written when they do.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from job_helpers import DATA, GLOBAL_RELEASE, GROUPED_RELEASE, SCHEMA, write_job

from hdp_spark.errors import EpsilonColumnError, JobError, SchemaError, UserIdError
from hdp_spark.jobs import load_job, run_job
from hdp_spark.jobs._pandas import _cast as pandas_cast
from hdp_spark.jobs.spec import InputSpec
from hdp_spark.schema import load_schema

BAD_SALARY = "424242.4242x"
BAD_TENURE = "2x6"


def _csv_with(tmp: Path, name: str, cells: dict[tuple[int, str], str]) -> Path:
    """The sample table with some cells replaced by raw text (rows by position)."""
    data = pd.read_csv(DATA, dtype=str, keep_default_na=False)
    for (row, column), text in cells.items():
        data.loc[row, column] = text
    path = tmp / name
    data.to_csv(path, index=False)
    return path


def _values(run: Any) -> dict[str, list[dict[str, Any]]]:
    return {r.release_id: run.values(r.release_id) for r in run.releases}


def test_malformed_value_cells_are_nulls(engine: Any, tmp_path: Path) -> None:
    # Spark: one grouped release (Spark jobs are slow); pandas also the global tenure mean.
    releases = GROUPED_RELEASE + GLOBAL_RELEASE if engine.name == "pandas" else GROUPED_RELEASE
    # Reference: the same cells left empty (null), on pandas.
    null_dir = tmp_path / "null"
    null_dir.mkdir()
    nulls = _csv_with(null_dir, "nulls.csv", {(3, "salary"): "", (7, "tenure_years"): ""})
    ref = run_job(write_job(null_dir, data=nulls, schema=True, seed="cells",
                            releases=releases, report=True))
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    bad = _csv_with(bad_dir, "bad.csv",
                    {(3, "salary"): BAD_SALARY, (7, "tenure_years"): BAD_TENURE})
    job = write_job(bad_dir, engine=engine.name, data=bad, schema=True, seed="cells",
                    releases=releases, report=True)
    run = run_job(job, spark=engine.session)
    assert [r.status for r in run.releases] == ["committed"] * len(run.releases)
    # The malformed cells were imputed exactly like nulls: same pre-noise statistics, so
    # (same seed) the same released numbers.
    assert _values(run) == _values(ref)
    rows = run.values("salary_by_dept")
    assert all(math.isfinite(r["salary_mean"]) for r in rows)
    # Nothing published mentions the malformed cells or counts them.
    published = [p.read_text() for p in (bad_dir / "out").rglob("*")
                 if p.is_file() and p.suffix in (".json", ".md")]
    assert published
    for text in published:
        for word in (BAD_SALARY, BAD_TENURE, "not_null", "violation"):
            assert word not in text


def test_malformed_value_cell_without_schema_is_null(engine: Any, tmp_path: Path) -> None:
    """Without a schema the aggregators' numeric value columns are still read as doubles: a
    reader that infers types (Spark's CSV) would otherwise type the column as strings
    because of one private cell, and the release would fail on it."""
    null_dir, bad_dir = tmp_path / "null", tmp_path / "bad"
    null_dir.mkdir()
    bad_dir.mkdir()
    nulls = _csv_with(null_dir, "nulls.csv", {(3, "salary"): ""})
    bad = _csv_with(bad_dir, "bad.csv", {(3, "salary"): BAD_SALARY})
    ref = run_job(write_job(null_dir, engine=engine.name, data=nulls, seed="noschema",
                            releases=GROUPED_RELEASE), spark=engine.session)
    run = run_job(write_job(bad_dir, engine=engine.name, data=bad, seed="noschema",
                            releases=GROUPED_RELEASE), spark=engine.session)
    assert _values(run) == _values(ref)
    assert ("salary", "double") in load_job(
        write_job(tmp_path, data=bad, releases=GROUPED_RELEASE)
    ).input.with_value_types(["salary"]).casts


def test_sample_job_with_one_bad_salary_runs(tmp_path: Path) -> None:
    """The issue's reproduction: the sample job on a copy of the table with one bad cell."""
    bad = _csv_with(tmp_path, "employees.csv", {(3, "salary"): BAD_SALARY})
    text = (Path(DATA).parents[1] / "jobs" / "sample_employees.toml").read_text()
    text = (text.replace('"../data/employees.csv"', f'"{bad}"')
            .replace('"../schemas/employees.yaml"', f'"{SCHEMA}"')
            .replace('"../out/ledger/employees.sqlite"', f'"{tmp_path / "l.sqlite"}"')
            .replace('"../out/witness/employees.json"', f'"{tmp_path / "witness.json"}"')
            .replace('"../out/sample_employees"', f'"{tmp_path / "out"}"'))
    job = tmp_path / "sample.toml"
    job.write_text(text)
    run = run_job(job)
    assert len(run.releases) == 3
    assert all(r.status == "committed" for r in run.releases)


@pytest.mark.parametrize(
    ("column", "cell", "error", "rule"),
    [
        ("eps", "0.5x", EpsilonColumnError, r"column `eps`, rule `not_null`"),
        ("user_id", "4x", UserIdError, r"Column `user_id` must have type integer"),
    ],
)
def test_malformed_public_cell_fails_before_writing(
    engine: Any, tmp_path: Path, column: str, cell: str, error: type[SchemaError], rule: str
) -> None:
    bad = _csv_with(tmp_path, "bad.csv", {(3, column): cell})
    job = write_job(tmp_path, engine=engine.name, data=bad, schema=True,
                    releases=GROUPED_RELEASE)
    with pytest.raises(error, match=rule) as info:
        run_job(job, spark=engine.session)
    assert cell not in str(info.value)
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "ledger.sqlite").exists()


def test_bad_schema_file_fails_before_anything(tmp_path: Path) -> None:
    job = write_job(tmp_path, schema=True)
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nepsilon: {column: eps, bogus: 1}\n")
    job.write_text(job.read_text().replace(str(SCHEMA), str(broken)))
    with pytest.raises(JobError, match=r"`\[input\] schema`.*bogus"):
        run_job(job)
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "ledger.sqlite").exists()


def test_schema_types_become_casts_and_input_types_win() -> None:
    schema = load_schema(SCHEMA)
    spec = InputSpec(path=DATA, types=(("salary", "string"),)).with_schema_types(schema)
    casts = dict(spec.casts)
    assert casts["salary"] == "string"          # [input.types] overrides the schema
    assert casts["tenure_years"] == "long"
    assert casts["dept"] == "string"
    assert "eps" not in casts                   # public columns are not cast from the schema
    assert "user_id" not in casts
    job = load_job(Path(DATA).parents[1] / "jobs" / "sample_employees.toml")
    assert job.input.schema_types == ()         # set by the runner, not by the file
    with pytest.raises(JobError, match=r"`\[input\] schema x` must be one of"):
        InputSpec(path=DATA, schema_types=(("x", "int"),))  # type: ignore[arg-type]


CELLS = ["7", " 8 ", "2.5", "1e3", "inf", "Infinity", "-inf", "NaN", "x", "", "+3", "7.0",
         "1d", "2F", "0x10", "1,5", "9007199254740993", "1e300", "true", " No ", "t", "0",
         None]


def _norm(values: list[Any]) -> list[Any]:
    out = []
    for v in values:
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            out.append(None)
        else:
            out.append(v)
    return out


@pytest.mark.parametrize("kind", ["double", "long", "boolean", "string"])
def test_casts_agree_between_engines_and_never_raise(spark: Any, kind: str) -> None:
    from pyspark.sql import types as T

    from hdp_spark.spark.job_adapter import _cast as spark_cast

    expected = _norm(pandas_cast(pd.Series(CELLS, dtype=object), kind).tolist())
    df = spark.createDataFrame([(c,) for c in CELLS],
                               T.StructType([T.StructField("v", T.StringType())]))
    spark.conf.set("spark.sql.ansi.enabled", "true")
    got = _norm([r[0] for r in df.select(spark_cast(df, "v", kind)).collect()])
    assert got == expected
    if kind == "double":
        assert expected[:4] == [7.0, 8.0, 2.5, 1000.0]
        assert expected[8:10] == [None, None]
        assert expected[12:16] == [None, None, None, None]
    if kind == "long":
        assert expected[:4] == [7, 8, None, 1000]
        assert expected[4] is None  # inf: never an error


def test_long_cast_of_numeric_columns() -> None:
    s = pd.Series([1.0, 2.5, float("nan"), float("inf"), 2.0**70, -3.0])
    assert _norm(pandas_cast(s, "long").tolist()) == [1, None, None, None, None, -3]
    ints = pandas_cast(pd.Series([2**62, 5]), "long")
    assert ints.tolist() == [2**62, 5]  # integer columns are exact
    assert _norm(pandas_cast(pd.Series([1.0, 0.0, float("nan")]), "boolean").tolist()) == [
        True, False, None]
