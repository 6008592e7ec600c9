"""The schema model and file format (engine-free): parsing, validation, rules, the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hdp_spark.core.validation import Rule, RuleKind
from hdp_spark.errors import (
    DuplicateUserError,
    EpsilonColumnError,
    ParameterError,
    SchemaError,
    UserIdError,
)
from hdp_spark.schema import (
    ColumnSchema,
    EpsilonColumn,
    TableSchema,
    UserIdColumn,
    ValidationReport,
    load_schema,
)

ROOT = Path(__file__).resolve().parents[2]
EMPLOYEES = ROOT / "schemas" / "employees.yaml"


def test_bundled_schema_loads() -> None:
    schema = load_schema(EMPLOYEES)
    assert schema.name == "employees"
    assert schema.epsilon == EpsilonColumn("eps", allow_zero=False, allow_public=True,
                                           min=0.01, max=10.0)
    assert schema.user_id == UserIdColumn("user_id", "integer", unique=True)
    assert schema.column_names == ("eps", "user_id", "dept", "region", "job_family",
                                   "salary", "tenure_years")
    salary = schema.column("salary")
    assert salary is not None
    assert (salary.lower, salary.upper) == (0.0, 300000.0)
    assert schema.declared_type("eps") == "float"
    assert schema.declared_type("nope") is None


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_round_trip_through_other_formats(tmp_path: Path, suffix: str) -> None:
    schema = load_schema(EMPLOYEES)
    data = schema.to_dict()
    path = tmp_path / f"s{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(data))
    else:
        path.write_text(_to_toml(data))
    assert load_schema(path) == schema
    assert TableSchema.from_dict(data) == schema


def _to_toml(data: dict[str, object]) -> str:
    def value(v: object) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)

    lines = [f"{k} = {value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for section in ("epsilon", "user_id"):
        lines.append(f"[{section}]")
        lines += [f"{k} = {value(v)}" for k, v in data[section].items()]  # type: ignore[attr-defined]
    for name, spec in data["columns"].items():  # type: ignore[attr-defined]
        lines.append(f"[columns.{name}]")
        lines += [f"{k} = {value(v)}" for k, v in spec.items()]
    return "\n".join(lines) + "\n"


def test_defaults_are_positive_only_and_no_public_rows() -> None:
    schema = TableSchema("t", EpsilonColumn("eps"))
    keys = [r.key for r in schema.rules()]
    assert keys == ["eps:not_null", "eps:non_negative", "eps:positive", "eps:finite"]
    relaxed = TableSchema("t", EpsilonColumn("eps", allow_zero=True, allow_public=True))
    assert [r.key for r in relaxed.rules()] == ["eps:not_null", "eps:non_negative"]
    assert all(r.blocking for r in schema.rules())


def test_release_scope_keeps_public_rules_only() -> None:
    schema = load_schema(EMPLOYEES)
    every = schema.rules("all")
    release = schema.rules("release")
    assert set(release) == {r for r in every if r.blocking}
    assert {r.column for r in release} == {"eps", "user_id", "table"}
    assert not any(r.blocking for r in every if r.column in ("salary", "dept"))
    with pytest.raises(ParameterError, match="`scope`"):
        schema.rules("some")  # type: ignore[arg-type]


BAD_SCHEMAS = [
    ({"name": "t"}, "`schema` must set epsilon"),
    ({"name": "t", "epsilon": {"column": "e"}, "colums": {}}, r"unknown key\(s\) \['colums'\]"),
    ({"name": "t", "epsilon": {"column": "e", "alow_zero": True}}, "`epsilon` has unknown"),
    ({"name": "t", "epsilon": {"column": "e", "min": 0}}, r"`epsilon.min` must be > 0, got 0"),
    ({"name": "t", "epsilon": {"column": "e", "max": float("inf")}}, "`epsilon.max` must be fin"),
    ({"name": "t", "epsilon": {"column": "e", "min": 2.0, "max": 1.0}}, "`epsilon.min` must be <="),
    ({"name": "t", "epsilon": {"column": "e", "min": "1e-2"}}, r"`epsilon.min` must be a number"),
    ({"name": "t", "epsilon": {"column": "e", "allow_zero": "no"}}, "`epsilon.allow_zero` must"),
    ({"name": "t", "epsilon": {"column": ""}}, "`epsilon.column` must be a non-empty"),
    ({"name": "t", "version": 2, "epsilon": {"column": "e"}}, "`version` must be 1, got 2"),
    ({"name": "t", "epsilon": {"column": "e"}, "user_id": {"column": "u", "type": "uuid"}},
     "`user_id.type`"),
    ({"name": "t", "epsilon": {"column": "e"}, "columns": {"e": {"type": "float"}}},
     "declared once"),
    ({"name": "t", "epsilon": {"column": "e"}, "columns": {"x": {"type": "decimal"}}},
     "`columns.x.type` must be one of"),
    ({"name": "t", "epsilon": {"column": "e"}, "columns": {"x": {"type": "float", "lower": 1}}},
     "both `lower` and `upper`"),
    ({"name": "t", "epsilon": {"column": "e"},
      "columns": {"x": {"type": "float", "lower": 2, "upper": 1}}}, r"`columns.x.lower` must be <"),
    ({"name": "t", "epsilon": {"column": "e"},
      "columns": {"x": {"type": "string", "lower": 0, "upper": 1}}}, "bounds need"),
    ({"name": "t", "epsilon": {"column": "e"},
      "columns": {"x": {"type": "float", "domain": [1.5]}}}, "a domain needs"),
    ({"name": "t", "epsilon": {"column": "e"},
      "columns": {"x": {"type": "integer", "domain": [1, "2"]}}}, "must hold integer values"),
    ({"name": "t", "epsilon": {"column": "e"},
      "columns": {"x": {"type": "integer", "domain": [True]}}}, "must hold integer values"),
    ({"name": "t", "epsilon": {"column": "e"},
      "columns": {"x": {"type": "string", "domain": ["a", "a"]}}}, "must not repeat"),
    ({"name": "t", "epsilon": {"column": "e"},
      "columns": {"x": {"type": "string", "domain": []}}}, "must not be empty"),
    ({"name": "t", "epsilon": {"column": "e"}, "columns": {"x": {"nullable": True}}},
     "`columns.x` must set type"),
    ({"name": "t", "epsilon": {"column": "e"}, "min_rows": -1}, "`min_rows` must be >= 0"),
    ({"name": "t", "epsilon": {"column": "e"}, "columns": ["x"]}, "`columns` must map"),
]


@pytest.mark.parametrize(("data", "message"), BAD_SCHEMAS)
def test_bad_schema_definitions_name_the_field(data: dict[str, object], message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        TableSchema.from_dict(data)


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="readable schema file"):
        load_schema(tmp_path / "missing.yaml")
    bad = tmp_path / "s.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ParameterError, match="not valid YAML"):
        load_schema(bad)
    empty = tmp_path / "e.yaml"
    empty.write_text("")
    with pytest.raises(ParameterError, match="`schema` must be a mapping"):
        load_schema(empty)
    other = tmp_path / "s.ini"
    other.write_text("x")
    with pytest.raises(ParameterError, match=r"must end in \.yaml"):
        load_schema(other)


def test_schema_objects_are_frozen() -> None:
    schema = load_schema(EMPLOYEES)
    with pytest.raises(AttributeError):
        schema.name = "x"  # type: ignore[misc]
    col = ColumnSchema("c", "string", domain=["a", "b"])  # type: ignore[arg-type]
    assert col.domain == ("a", "b")


def _report(counts: dict[str, int], rows: int = 10, unique: bool = True) -> ValidationReport:
    schema = TableSchema("t", EpsilonColumn("eps", min=0.1), UserIdColumn("uid", unique=unique),
                         (ColumnSchema("x", "float", nullable=False, lower=0, upper=1),),
                         min_rows=5)
    rules = schema.rules()
    return ValidationReport("t", "pandas", "all", rows, rules,
                            tuple(counts.get(r.key, 0) for r in rules))


def test_report_verdicts_and_dict() -> None:
    clean = _report({})
    assert clean.ok
    assert clean.release_ok
    assert not clean.violations
    clean.raise_for_release()
    values_only = _report({"x:not_null": 3, "x:in_bounds": 2})
    assert not values_only.ok
    assert values_only.release_ok
    assert dict(values_only.violations) == {"x:not_null": 3, "x:in_bounds": 2}
    values_only.raise_for_release()  # value rules never block a release
    data = values_only.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["violations"] == {"x:not_null": 3, "x:in_bounds": 2}
    assert len(data["rules"]) == len(values_only.rules)


@pytest.mark.parametrize(
    ("counts", "error", "fragments"),
    [
        ({"eps:positive": 4}, EpsilonColumnError, ["`eps`", "`positive`", ": 4 violation"]),
        ({"eps:in_range": 2, "uid:unique": 1}, EpsilonColumnError, ["`in_range`", "`unique`"]),
        ({"uid:unique": 3}, DuplicateUserError, ["`uid`", "`unique`", ": 3 violation"]),
        ({"uid:not_null": 1}, UserIdError, ["`uid`", "`not_null`"]),
        ({"eps:constant_per_user": 2}, EpsilonColumnError, ["`constant_per_user`"]),
        ({"table:min_rows": 5}, SchemaError, ["`min_rows`", "at least 5", "has 0 row"]),
    ],
)
def test_raise_for_release(counts: dict[str, int], error: type[Exception],
                           fragments: list[str]) -> None:
    report = _report(counts | {"x:not_null": 9}, rows=0 if "table:min_rows" in counts else 10,
                     unique="eps:constant_per_user" not in counts)
    with pytest.raises(error) as info:
        report.raise_for_release()
    text = str(info.value)
    for fragment in fragments:
        assert fragment in text
    assert "x:not_null" not in text
    assert "`x`" not in text
    assert "no budget was spent" in text


def test_report_rejects_inconsistent_input() -> None:
    rule = Rule("e", "not_null", RuleKind.MISSING, "epsilon", "d")
    with pytest.raises(ParameterError):
        ValidationReport("t", "pandas", "all", 1, (rule,), ())
    with pytest.raises(ParameterError):
        ValidationReport("t", "pandas", "all", -1, (rule,), (0,))
    with pytest.raises(ParameterError):
        ValidationReport("t", "pandas", "all", 1, (rule,), (-1,))


def test_user_id_rules() -> None:
    row_level = TableSchema("t", EpsilonColumn("e"), UserIdColumn("u"))
    assert [r.key for r in row_level.rules() if r.role != "epsilon" or r.column != "e"
            or r.kind.value in ("eps_varies",)] == ["u:not_null", "u:unique"]
    user_level = TableSchema("t", EpsilonColumn("e"), UserIdColumn("u", unique=False))
    keys = [r.key for r in user_level.rules()]
    assert "u:unique" not in keys
    assert keys[-2:] == ["u:not_null", "e:constant_per_user"]
    rule = user_level.rules()[-1]
    assert rule.error is EpsilonColumnError
    assert rule.params == ("u",)
