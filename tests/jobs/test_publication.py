"""Nothing a job publishes is a deterministic function of private data (issue 15).

* Differential test: the sample job runs on the table (twice, fresh ledgers) and on a
  neighbouring table (one salary changed, one null, one out of range; same n, ε, ids).
  Every published feature (file names and bytes, JSON fields, parquet schema, key-value
  metadata and row-group statistics, report lines and their tokens, INFO+ log records) that
  is the same in the runs on the table must be the same on the neighbour.
* Enumeration attack: user 1's salary is enumerated over 2,001 candidates around the true
  value; every hash the old scheme derived from a candidate input must be absent from what
  is published (it recovered the salary exactly against the old scheme, shown below).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from job_helpers import DATA, REPO, SCHEMA
from leak_helpers import (
    HEX_WINDOW,
    Features,
    LogCapture,
    assert_no_deterministic_leak,
    collect,
    deterministic_in_private_data,
    old_file_fingerprint,
    old_hashes,
    published_bytes,
    published_hex_windows,
    runs_until_settled,
)

from hdp_spark.core.ledger import idempotency_key
from hdp_spark.jobs import load_job, run_job
from hdp_spark.jobs.release_run import definition as _definition

SAMPLE = REPO / "jobs" / "sample_employees.toml"
EXTRA = {"format": "csv", "types": [["eps", "double"]]}  # the sample job's read settings
TRUE_SALARY_1 = 133264  # user 1 in data/employees.csv (checked below)


def sample_job(root: Path, engine: str, data: Path) -> Path:
    """The bundled sample job with its paths moved under ``root``."""
    text = SAMPLE.read_text()
    for old, new in (
        ('path = "../data/employees.csv"', f'path = "{data}"'),
        ('schema = "../schemas/employees.yaml"', f'schema = "{SCHEMA}"'),
        ('path = "../out/ledger/employees.sqlite"', f'path = "{root / "ledger" / "ledger.db"}"'),
        ('witness = "../out/witness/employees.json"', f'witness = "{root / "witness" / "w.json"}"'),
        ('path = "../out/sample_employees"', f'path = "{root / "out"}"'),
        ('engine = "pandas"', f'engine = "{engine}"'),
    ):
        assert old in text, old
        text = text.replace(old, new)
    path = root / "job.toml"
    path.write_text(text)
    return path


def with_salaries(data: bytes, salaries: Mapping[int, str]) -> bytes:
    """The CSV with the salary field of some users replaced (every other byte kept)."""
    lines = data.decode().split("\n")
    header = lines[0].split(",")
    col, uid = header.index("salary"), header.index("user_id")
    for i, line in enumerate(lines[1:], start=1):
        fields = line.split(",")
        if len(fields) == len(header) and int(fields[uid]) in salaries:
            fields[col] = salaries[int(fields[uid])]
            lines[i] = ",".join(fields)
    return "\n".join(lines).encode()


def neighbour_bytes(data: bytes) -> bytes:
    """One salary changed, one set to null, one set far above the public bounds."""
    return with_salaries(data, {1: "140001.0", 2: "", 3: "90000000.0"})


class Runner:
    """Runs the sample job on given input bytes, always at the same paths (fresh ledger and
    outputs each time), and collects what it published."""

    def __init__(self, root: Path, engine: Any, caplog: pytest.LogCaptureFixture | LogCapture
                 ) -> None:
        self.root, self.engine, self.caplog = root, engine, caplog
        self.data = root / "input" / "employees.csv"
        self.data.parent.mkdir(parents=True, exist_ok=True)
        self.job = sample_job(root, engine.name, self.data)
        self.log_text = ""

    def run(self, data: bytes) -> Features:
        for sub in ("out", "ledger", "witness"):
            shutil.rmtree(self.root / sub, ignore_errors=True)
        self.data.write_bytes(data)
        self.caplog.clear()
        with self.caplog.at_level(logging.INFO):
            result = run_job(self.job, spark=self.engine.session)
        assert [r.status for r in result.releases] == ["committed"] * 3
        records = list(self.caplog.records)
        self.log_text = "\n".join(
            f"{r.name} {r.levelname} {r.getMessage()}" for r in records
            if r.levelno >= logging.INFO
        )
        return collect(self.root / "out", records, [r.record.commit_id for r in result.releases])


def _no_deterministic_leak(
    runner: Runner, table: bytes, neighbour: bytes
) -> tuple[list[Features], list[Features]]:
    """:func:`leak_helpers.assert_no_deterministic_leak` with a runner's two inputs."""
    runs, others = assert_no_deterministic_leak(lambda: runner.run(table),
                                                lambda: runner.run(neighbour))
    return list(runs), list(others)


@dataclass(frozen=True)
class SampleRuns:
    """The publication rule's runs of the sample job on one engine, shared by the tests of
    this module that publish that job on the bundled table: the features of every run on
    the table and on the neighbour, what is still determined by the data over them (empty
    unless the rule is broken; asserted by the test of the rule), and the outputs and
    INFO+ log of the first run on the table (fresh ledger and outputs, as every run)."""

    runner: Runner
    table_runs: list[Mapping[tuple[str, ...], Any]]
    neighbour_runs: list[Mapping[tuple[str, ...], Any]]
    found: dict[tuple[str, ...], tuple[Any, Any]]
    first_out: Path
    first_log_text: str


@pytest.fixture(scope="module", params=["pandas", "spark"])
def sample_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> SampleRuns:
    """The sample job's runs on the table and the neighbour (:func:`runs_until_settled`),
    once per engine for the module: the enumeration attack reads the first run on the table
    instead of running the same job on the same input again."""
    name = request.param
    session = request.getfixturevalue("spark") if name == "spark" else None
    engine = SimpleNamespace(name=name, session=session)  # what Runner reads of an Engine
    root = tmp_path_factory.mktemp(f"sample_runs_{name}")
    runner = Runner(root, engine, LogCapture())
    table = DATA.read_bytes()
    first = root / "first_out"
    first_log: list[str] = []

    def on_table() -> Features:
        feats = runner.run(table)
        if not first.exists():
            shutil.copytree(root / "out", first)
            first_log.append(runner.log_text)
        return feats

    runs, others, found = runs_until_settled(on_table, lambda: runner.run(neighbour_bytes(table)))
    return SampleRuns(runner, runs, others, found, first, first_log[0])


def test_published_outputs_are_not_functions_of_private_data(
    sample_runs: SampleRuns
) -> None:
    table = DATA.read_bytes()
    neighbour = neighbour_bytes(table)
    t, n = pd.read_csv(DATA), pd.read_csv(pd.io.common.BytesIO(neighbour))
    assert len(t) == len(n)
    assert t["user_id"].equals(n["user_id"])
    assert t["eps"].equals(n["eps"])
    changed = t["salary"].ne(n["salary"]) & ~(t["salary"].isna() & n["salary"].isna())
    assert list(t.loc[changed, "user_id"]) == [1, 2, 3]
    assert n["salary"].isna().sum() == t["salary"].isna().sum() + 1
    assert n["salary"].max() > 250000

    runner = sample_runs.runner
    table_runs, neighbour_runs = sample_runs.table_runs, sample_runs.neighbour_runs
    found = sample_runs.found
    assert found == {}, f"published features determined by private data: {found}"
    other = neighbour_runs[0]
    # the runs were not vacuous: DP values, random commit ids and public facts are there
    assert any(k[-1] == "salary_mean" for k in other)
    assert other[("file", "manifest.json", "json", "job")] == "sample_employees"
    assert all(run[("names",)] != other[("names",)] for run in table_runs)

    # Non-vacuity: what the old scheme published is caught by the same comparison.
    planted = [dict(f) for f in (*table_runs, *neighbour_runs)]
    for i, feats in enumerate(planted):
        fp = old_file_fingerprint(runner.data, table if i < len(table_runs) else neighbour,
                                  EXTRA)
        feats[("file", "salary_by_dept/<commit>/values.json", "json", "input_fingerprint")] = fp
        feats[("file", "report.md", "text", "5", "3")] = fp.split(":")[1][:32] + "…"
    found = deterministic_in_private_data(planted[:len(table_runs)],
                                          planted[len(table_runs):])
    assert set(found) == {
        ("file", "salary_by_dept/<commit>/values.json", "json", "input_fingerprint"),
        ("file", "report.md", "text", "5", "3"),
    }


@pytest.mark.spark
def test_spark_table_input_publishes_nothing_deterministic(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A Spark ``[input] table`` (fingerprinted by row hashes, now keyed) on the same rule."""

    class Session:
        name, session = "spark", spark

    table, neighbour = DATA.read_bytes(), neighbour_bytes(DATA.read_bytes())
    runner = Runner(tmp_path, Session(), caplog)
    text = runner.job.read_text()
    text = re.sub(r'path = "[^"]*employees.csv"', 'table = "hdp_leak_input"', text)
    runner.job.write_text(text)
    assert load_job(runner.job).input.table == "hdp_leak_input"

    def register(data: bytes) -> bytes:
        frame = pd.read_csv(pd.io.common.BytesIO(data))
        spark.createDataFrame(frame.astype({"salary": float, "eps": float})) \
            .createOrReplaceTempView("hdp_leak_input")
        return data

    original = runner.run

    def run(data: bytes) -> Features:
        register(data)
        return original(data)

    runner.run = run  # type: ignore[method-assign]
    try:
        _no_deterministic_leak(runner, table, neighbour)
    finally:
        spark.catalog.dropTempView("hdp_leak_input")


# -- the enumeration attack -----------------------------------------------------------------


def _definitions(job: Path) -> dict[str, dict[str, Any]]:
    return {rel.id: _definition(rel) for rel in load_job(job).releases}


def candidate_hashes(
    runner: Runner, table: bytes, candidates: range
) -> dict[int, list[str]]:
    """For each candidate salary of user 1: every hash the old scheme derived from the
    candidate input (:func:`leak_helpers.old_hashes`), computed fast (the file's bytes are
    spliced and the pandas row hashes updated for the one changed row); spot-checked against
    the direct computation."""
    field = b"\n1,finance,coastal,director,"
    start = table.index(field) + len(field)
    end = table.index(b",", start)
    assert table[start:end] == f"{TRUE_SALARY_1}.0".encode()
    prefix = hashlib.sha256(table[:start])
    base = pd.read_csv(pd.io.common.BytesIO(table))
    row = int(base.index[base["user_id"] == 1][0])
    h = pd.util.hash_pandas_object(base, index=False).to_numpy(np.uint64)
    rest_sum = int(h.astype(object).sum()) - int(h[row])
    rest_xor = int(np.bitwise_xor.reduce(np.delete(h, row)))
    copies = base.iloc[[row] * len(candidates)].copy()
    copies["salary"] = [float(c) for c in candidates]
    row_hashes = pd.util.hash_pandas_object(copies, index=False).to_numpy(np.uint64)
    fp_extra = json.dumps(EXTRA, sort_keys=True)
    definitions = _definitions(runner.job)
    out = {}
    for c, rh in zip(candidates, row_hashes, strict=True):
        tail = f"{c}.0".encode() + table[end:]
        file_hasher = prefix.copy()
        file_hasher.update(tail)
        digest = file_hasher.hexdigest()
        payload = json.dumps({"mode": "content", "files": [[runner.data.name, digest]],
                              "extra": json.loads(fp_extra)}, sort_keys=True, default=str)
        file_fp = "files-content:" + hashlib.sha256(payload.encode()).hexdigest()
        table_payload = (f"{len(base)}:{rest_sum + int(rh)}:{rest_xor ^ int(rh)}:"
                         f"{list(base.columns)}").encode()
        table_fp = "table:" + hashlib.sha256(table_payload).hexdigest()
        hashes = [digest, file_fp.split(":", 1)[1], table_fp.split(":", 1)[1]]
        for fp in (file_fp, table_fp):
            hashes += [idempotency_key("sample_employees", rid, fp, d)
                       for rid, d in definitions.items()]
        out[c] = hashes
    for c in (candidates[0], TRUE_SALARY_1):  # the fast path computes the old scheme
        data = with_salaries(table, {1: f"{c}.0"})
        df = base.copy()
        df.loc[row, "salary"] = float(c)
        assert out[c] == old_hashes(runner.data, data, df, EXTRA, "sample_employees",
                                    definitions)
    return out


def enumerate_salary(hashes: Mapping[int, list[str]], out: Path, log_text: str) -> list[int]:
    """The candidates for user 1's salary whose old-scheme hashes occur in what is published
    under ``out`` or in ``log_text`` (as 12+ hex digits, or as 6+ raw digest bytes)."""
    windows = published_hex_windows(out, log_text)
    blob = published_bytes(out, log_text)
    w = HEX_WINDOW // 2
    raw_windows = {blob[i:i + w] for i in range(len(blob) - w + 1)}
    hits = []
    for c, candidate in hashes.items():
        for h in candidate:
            raw = bytes.fromhex(h)
            if any(h[i:i + HEX_WINDOW] in windows for i in range(len(h) - HEX_WINDOW + 1)) or \
                    any(raw[i:i + w] in raw_windows for i in range(len(raw) - w + 1)):
                hits.append(c)
                break
    return hits


CANDIDATES = range(TRUE_SALARY_1 - 1000, TRUE_SALARY_1 + 1001)


def test_enumeration_attack_finds_nothing(sample_runs: SampleRuns, tmp_path: Path) -> None:
    table = DATA.read_bytes()
    assert with_salaries(table, {1: f"{TRUE_SALARY_1}.0"}) == table  # the true value
    # what the sample job published on the table (its first run under the publication rule)
    runner, out = sample_runs.runner, sample_runs.first_out
    assert (out / "manifest.json").is_file()
    hashes = candidate_hashes(runner, table, CANDIDATES)
    assert enumerate_salary(hashes, out, sample_runs.first_log_text) == []

    # The same attack against what the old scheme published recovers the salary exactly:
    # values.json carried the fingerprint, report.md its prefix, directory names and the
    # manifest the first 16 digits of the key (a hash of the fingerprint).
    old = tmp_path / "old_out"
    shutil.copytree(out, old)
    fp = old_file_fingerprint(runner.data, table, EXTRA)
    definitions = _definitions(runner.job)
    manifest = json.loads((old / "manifest.json").read_text())
    for rid, entry in manifest["releases"].items():
        old_id = idempotency_key("sample_employees", rid, fp, definitions[rid])[:16]
        src = old / rid / entry["commit_id"]
        doc = json.loads((src / "values.json").read_text())
        doc["input_fingerprint"], doc["commit_id"] = fp, old_id
        (src / "values.json").write_text(json.dumps(doc))
        src.rename(old / rid / old_id)
        entry["commit_id"] = old_id
    (old / "manifest.json").write_text(json.dumps(manifest))
    assert enumerate_salary(hashes, old, "") == [TRUE_SALARY_1]
    # each form on its own suffices: the report's 32-digit prefix alone
    only_report = tmp_path / "old_report"
    only_report.mkdir()
    (only_report / "report.md").write_text(f"| input fingerprint | `{fp.split(':')[1][:32]}…` |")
    assert enumerate_salary(hashes, only_report, "") == [TRUE_SALARY_1]
    # and the table hash of the pandas engine (``[input] table`` fingerprints), likewise
    only_log = tmp_path / "old_log"
    only_log.mkdir()
    table_hash = hashes[TRUE_SALARY_1][2]
    assert enumerate_salary(hashes, only_log, f"fingerprint table:{table_hash}") == [
        TRUE_SALARY_1]


def test_comparator_flags_planted_functions_of_the_data() -> None:
    """Unit test of the comparator on planted features."""
    table: list[dict[tuple[str, ...], Any]] = [
        {("a",): 1, ("noise",): 0.3, ("id",): "x1", ("det",): "h(D)"},
        {("a",): 1, ("noise",): 0.7, ("id",): "x2", ("det",): "h(D)"},
    ]
    neighbour = {("a",): 1, ("noise",): 0.1, ("id",): "x3", ("det",): "h(D')",
                 ("only_on_neighbour",): 5}
    assert deterministic_in_private_data(table, [neighbour]) == {
        ("det",): ("h(D)", "h(D')"),
        ("only_on_neighbour",): ("<absent>", 5),
    }
    hashed: Callable[[bytes], str] = lambda b: hashlib.sha256(b).hexdigest()  # noqa: E731
    assert deterministic_in_private_data(
        [{("fp",): hashed(b"t")}, {("fp",): hashed(b"t")}], [{("fp",): hashed(b"n")}]
    ) != {}
    # a value that differs between runs on the neighbour is not determined by the data
    assert deterministic_in_private_data(
        [{("size",): 5527}, {("size",): 5527}], [{("size",): 5525}, {("size",): 5527}]
    ) == {}


def test_extra_runs_stop_when_settled_and_keep_a_function_of_the_data() -> None:
    """Unit test of :func:`leak_helpers.runs_until_settled` on planted runs: a coincidence
    of fresh values is cleared by the next run on the neighbour (4 runs); a function of the
    data stays flagged through every extra run (2 + 10 on the table, 1 + 10 on the
    neighbour); each extra run starts the spacing after the last run on its table ended."""
    times: dict[str, list[tuple[float, float]]] = {"t": [], "n": []}

    def runs(side: str, values: list[Any]) -> Callable[[], Features]:
        def run() -> Features:
            began = time.monotonic()
            feats: Features = {("v",): values[len(times[side])]}
            times[side].append((began, time.monotonic()))
            return feats
        return run

    t, n, found = runs_until_settled(runs("t", [1, 1, 1, 2, 3, 4, 5]),
                                     runs("n", [7, 1, 8, 9, 10, 11]), spacing_s=0.05)
    assert (len(t), len(n), found) == (2, 2, {})  # the neighbour's run cleared it
    for side in times:
        times[side].clear()
    t, n, found = runs_until_settled(runs("t", ["h(D)"] * 12), runs("n", ["h(D')"] * 11),
                                     spacing_s=0.05)
    assert (len(t), len(n), found) == (12, 11, {("v",): ("h(D)", "h(D')")})
    for side, spans in times.items():
        first_extra = 2 if side == "t" else 1
        for (_, end), (start, _) in zip(spans[first_extra - 1:], spans[first_extra:],
                                        strict=False):
            assert start - end >= 0.05
