"""Job files: the sample parses, every rule names the setting and the bad value."""

from __future__ import annotations

from pathlib import Path

import pytest
from job_helpers import REPO, job_text, write_job

from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.errors import JobError, ParameterError
from hdp_spark.jobs import (
    AggregatorKind,
    Interval,
    KindResult,
    get_kind,
    kinds,
    load_job,
    register_kind,
)
from hdp_spark.jobs.spec import BudgetSpec, LedgerSpec


def test_sample_job_parses() -> None:
    job = load_job(REPO / "jobs" / "sample_employees.toml")
    assert job.name == "sample_employees"
    assert job.engine == "pandas"
    assert job.ledger_backend == "sqlite"
    assert job.input.path == REPO / "data" / "employees.csv"
    assert job.input.schema == REPO / "schemas" / "employees.yaml"
    assert job.output.path == REPO / "out" / "sample_employees"
    assert [r.id for r in job.releases] == ["salary_by_dept", "salary_by_region",
                                            "tenure_overall"]
    first = job.releases[0]
    assert first.by == ("dept",)
    assert first.keys is not None
    assert ("finance",) in first.keys
    spec = first.aggregators[0].spec
    assert isinstance(spec, MeanSpec)
    assert (spec.column, spec.eps, spec.lower, spec.upper) == ("salary", "eps", 20000, 250000)
    assert job.with_engine("spark").ledger_backend == "sqlite"  # chosen by the path
    # a declared unit is presentation only: kept beside the spec, not passed to the kind
    assert first.aggregators[0].unit is None
    assert job.releases[2].aggregators[0].unit == "years"


def _job(tmp: Path, text: str) -> Path:
    p = tmp / "j.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ('policy = "cap"', 'policy = "skip"', r"`\[budget\] policy` must be one of .*'skip'"),
        ('charge = "effective"', 'charge = "max"', r"`\[budget\] charge`.*'max'"),
        ("default = 4.0", "default = -1", r"`\[budget\] default` must be a finite number > 0"),
        ('engine = "pandas"', 'engine = "dask"', r"`\[job\] engine`.*'dask'"),
        ('name = "t_job"', 'name = "bad name/x"', r"`\[job\] name`.*'bad name/x'"),
        ('backend = "sqlite"', 'backend = "delta"', r"`\[ledger\] backend`.*'delta'"),
        ("lock_timeout = 60", "lock_timeout = 0", r"`\[ledger\] lock_timeout`"),
        ('kind = "mean"', 'kind = "median"', r"aggregator #1: kind` must be one of .*'median'"),
        ("lower = 20000", "lower = 300000", r"salary_by_dept.*\(mean\): `lower` must be < "),
        ('by = ["dept"]', "by = []", r"`\[\[releases\]\] id = 'salary_by_dept': keys`"),
        ('id = "tenure_overall"', 'id = "salary_by_dept"', r"must be unique.*salary_by_dept"),
        ('user_id = "user_id"', 'user_id = "user_id"\nbogus = 1',
         r"unknown key `bogus` in \[input\]; valid keys: eps, expectations, fingerprint"),
        ('user_id = "user_id"', 'user_id = "user_id"\nexpectations = "yes"',
         r"`\[input\] expectations` must be true or false; got 'yes'"),
        ('user_id = "user_id"', 'user_id = "user_id"\nexpectations = true',
         r"`\[input\] expectations` needs `\[input\] schema`.*; got True"),
        ('types = { eps = "double" }', 'types = { eps = "decimal" }', r"input.types\] eps"),
        ('column = "salary"', 'column = "salary"\nmystery = 3',
         r"unknown key `mystery` in .*salary_by_dept.*aggregator #1 \(kind = 'mean'\); valid"),
        ('column = "salary"', 'column = "salary"\nunit = 3', r"aggregator #1: unit` must be"),
    ],
)
def test_rules_name_setting_and_value(tmp_path: Path, old: str, new: str, match: str) -> None:
    text = job_text(tmp_path)
    assert old in text
    with pytest.raises(JobError, match=match):
        load_job(_job(tmp_path, text.replace(old, new, 1)))


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        # the key as typed, where it was typed, and the closest valid key
        ('column = "salary"', 'colum = "salary"',
         r"^unknown key `colum` \(did you mean `column`\?\) in "
         r"\[\[releases\]\] id = 'salary_by_dept': aggregator #1 \(kind = 'mean'\); "
         r"valid keys: alias, beta, .*column, .*upper\.$"),
        ("upper = 250000", "uper = 250000\n  lowr = 1",
         r"^unknown keys `lowr` \(did you mean `lower`\?\), `uper` \(did you mean `upper`\?\)"),
        ('by = ["dept"]', 'bye = ["dept"]', r"^unknown key `bye` \(did you mean `by`\?\) in "
         r"\[\[releases\]\] id = 'salary_by_dept';"),
        ("[output]", "[ouput]", r"^unknown key `ouput` \(did you mean `output`\?\) in the job "
         r"file's top level"),
        ("default = 4.0", "defualt = 4.0", r"`defualt` \(did you mean `default`\?\) in \[budget\]"),
        # nothing close: no guess
        ("lower = 20000", "lower = 20000\n  zzz = 1", r"^unknown key `zzz` in .*; valid keys"),
    ],
)
def test_unknown_keys_are_named_with_the_closest_valid_key(
    tmp_path: Path, old: str, new: str, match: str
) -> None:
    text = job_text(tmp_path)
    assert old in text
    with pytest.raises(JobError, match=match):
        load_job(_job(tmp_path, text.replace(old, new, 1)))


def test_every_kind_accepts_the_keys_it_declares() -> None:
    """A declared key is one the kind's build takes (never rejected as unknown by build)."""
    for name in kinds():
        kind = get_kind(name)
        if kind.parameters is None:
            continue
        declared = set(kind.parameters())
        assert {"eps", "alias"} <= declared, name
    assert {"project", "column", "categories"} <= set(get_kind("histogram").parameters()
                                                      or ())
    ldp = set(get_kind("ldp_mean").parameters() or ())
    assert {"column", "already_randomized"} <= ldp
    assert "report" not in ldp


def test_missing_file_and_bad_toml(tmp_path: Path) -> None:
    with pytest.raises(JobError, match="must exist"):
        load_job(tmp_path / "nope.toml")
    with pytest.raises(JobError, match="not valid TOML"):
        load_job(_job(tmp_path, "[job\nname="))


def test_table_input_needs_spark(tmp_path: Path) -> None:
    text = job_text(tmp_path).replace(f'path = "{REPO / "data" / "employees.csv"}"',
                                      'table = "db.employees"')
    with pytest.raises(JobError, match=r"`\[input\] table` needs engine = 'spark'"):
        load_job(_job(tmp_path, text))
    job = load_job(_job(tmp_path, text.replace('engine = "pandas"', 'engine = "spark"')))
    assert job.input.table == "db.employees"


def test_relative_paths_resolve_against_the_job_file(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    text = job_text(tmp_path).replace(f'"{tmp_path / "out"}"', '"../out/x"')
    p = tmp_path / "jobs" / "j.toml"
    p.write_text(text)
    assert load_job(p).output.path == (tmp_path / "out" / "x").resolve()


def test_dataclasses_validate_directly() -> None:
    with pytest.raises(JobError, match="at least one of them"):
        BudgetSpec()
    with pytest.raises(JobError, match=r"`\[ledger\] compact_every`"):
        LedgerSpec(Path("x"), compact_every=0)


def test_registry_plugs_in_new_kinds(tmp_path: Path) -> None:
    assert "mean" in kinds()
    mean = get_kind("mean")
    echo = AggregatorKind(
        name="echo_test",
        build=mean.build,
        release=lambda *a: KindResult([], {}),
        eps_column=mean.eps_column,
        eps_grid=mean.eps_grid,
        output_name=lambda s: "echo",
        intervals=lambda s: (Interval("echo", "echo", "echo", "echo"),),
        describe=mean.describe,
    )
    register_kind(echo)
    with pytest.raises(ParameterError, match="already registered"):
        register_kind(echo)
    register_kind(echo, replace=True)
    job = load_job(write_job(tmp_path, releases="""
[[releases]]
id = "x"
  [[releases.aggregators]]
  kind = "echo_test"
  column = "salary"
  lower = 0
  upper = 1
"""))
    assert job.releases[0].aggregators[0].kind == "echo_test"
    # a kind that declares no parameters checks them in its build
    with pytest.raises(JobError, match=r"echo_test\): unknown or missing parameter"):
        load_job(write_job(tmp_path, releases="""
[[releases]]
id = "x"
  [[releases.aggregators]]
  kind = "echo_test"
  column = "salary"
  lower = 0
  upper = 1
  mystery = 2
"""))
