"""`--ledger` and `--witness` on the command line: a witness is one per ledger.

docs/setup.md tells a newcomer to try Spark on the sample job with a fresh ledger after the
pandas run. The job file names a rollback witness for its own ledger; `--ledger` used to
keep it for the other ledger, and the trial stopped with exit code 6 ("the ledger witness
... belongs to another ledger"). Now another ledger does not inherit the job's witness:
`--witness` gives it its own (checked and advanced), and without it the run says at WARNING
that a rollback of that ledger cannot be detected. The job's own ledger keeps its witness.

Every test runs in a copy of `jobs/` beside links to `data/` and `schemas/`, from that
directory (the command's relative paths are the ones the docs print).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ledger_sweep import _cli

ROOT = Path(__file__).resolve().parents[2]
JOB = "jobs/sample_employees.toml"
OWN_WITNESS = Path("out/witness/employees.json")
NO_WITNESS = "has no witness"


def _checkout(tmp: Path, monkeypatch: pytest.MonkeyPatch, *, report: bool = False) -> Path:
    """A checkout's job, data and schemas under ``tmp`` (the current directory); the
    report off unless asked (the witness logic does not depend on it; plots cost seconds)."""
    (tmp / "jobs").mkdir()
    text = (ROOT / JOB).read_text()
    if not report:
        text = text.replace("report = true", "report = false")
        assert "report = false" in text
    (tmp / JOB).write_text(text)
    (tmp / "data").symlink_to(ROOT / "data")
    (tmp / "schemas").symlink_to(ROOT / "schemas")
    monkeypatch.chdir(tmp)
    return tmp


def _commits(witness: Path) -> int:
    return int(json.loads(witness.read_text())["commits"])


def _sample_run() -> None:
    """The pandas sample job as the docs run it first (its own ledger and witness)."""
    code, err = _cli(["run", JOB])
    assert code == 0, err
    assert _commits(OWN_WITNESS) == 3


def test_a_trial_ledger_after_the_sample_run_succeeds_without_the_jobs_witness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _checkout(tmp_path, monkeypatch)
    _sample_run()
    own = OWN_WITNESS.read_bytes()
    code, err = _cli(["run", JOB, "--ledger", "out/ledger/trial.sqlite",
                      "--output", "out/trial"])
    assert code == 0, err  # was exit code 6: the job's witness belongs to its own ledger
    assert NO_WITNESS in err
    assert "trial.sqlite" in err
    assert OWN_WITNESS.read_bytes() == own  # the job's witness is not touched
    assert len(list(Path("out/trial").glob("*/*/values.json"))) == 3
    # the job's own ledger still runs against its witness (re-published, nothing charged)
    code, err = _cli(["run", JOB])
    assert code == 0, err
    assert NO_WITNESS not in err
    assert OWN_WITNESS.read_bytes() == own


def test_the_witness_flag_is_created_checked_and_advanced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _checkout(tmp_path, monkeypatch)
    _sample_run()
    trial = ["run", JOB, "--ledger", "out/ledger/trial.sqlite", "--output", "out/trial",
             "--witness", "out/witness/trial.json"]
    code, err = _cli(trial)
    assert code == 0, err
    assert NO_WITNESS not in err
    assert _commits(Path("out/witness/trial.json")) == 3  # advanced at every commit
    code, err = _cli(trial)  # re-run: checked against it, re-published
    assert code == 0, err
    assert _commits(Path("out/witness/trial.json")) == 3
    # checked: the trial ledger re-created (outputs gone too) is refused by its witness
    Path("out/ledger/trial.sqlite").unlink()
    shutil.rmtree("out/trial")
    code, err = _cli(trial)
    assert code == 6, err
    assert "belongs to another ledger" in err
    assert "trial.json" in err
    # and another ledger's witness (the job's, copied) is refused for the trial ledger
    shutil.copy(OWN_WITNESS, "out/witness/copied.json")
    code, err = _cli([*trial[:-1], "out/witness/copied.json"])
    assert code == 6, err
    assert "belongs to another ledger" in err


def test_a_witness_inside_the_ledger_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _checkout(tmp_path, monkeypatch)
    for ledger, witness in (("out/ledger/trial.sqlite", "out/ledger/trial.sqlite"),
                            ("out/ledger/trial", "out/ledger/trial/witness.json")):
        code, err = _cli(["run", JOB, "--ledger", ledger, "--output", "out/trial",
                          "--witness", witness])
        assert code == 2, err
        assert "`--witness` must lie outside the ledger" in err
        assert witness in err
    assert not Path("out").exists()  # refused before anything is read or written


def test_the_jobs_own_ledger_keeps_its_own_witness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _checkout(tmp_path, monkeypatch)
    _sample_run()
    own = OWN_WITNESS.read_bytes()
    refused = (
        ["--witness", "out/witness/other.json"],  # without --ledger
        ["--ledger", "out/ledger/employees.sqlite", "--witness", "out/witness/other.json"],
        ["--ledger", "out/ledger/trial.sqlite", "--witness", str(OWN_WITNESS)],
    )
    for flags in refused:
        code, err = _cli(["run", JOB, *flags])
        assert code == 2, (flags, err)
        assert "`--witness` must" in err, err
    assert not Path("out/witness/other.json").exists()
    assert not Path("out/ledger/trial.sqlite").exists()
    # --ledger naming the job's own ledger (another spelling of it) keeps its witness
    code, err = _cli(["run", JOB, "--ledger", "./out/ledger/../ledger/employees.sqlite",
                      "--witness", str(OWN_WITNESS)])
    assert code == 0, err
    assert NO_WITNESS not in err
    code, err = _cli(["check", JOB, "--ledger", "out/ledger/employees.sqlite"])
    assert code == 0, err
    assert NO_WITNESS not in err
    assert OWN_WITNESS.read_bytes() == own
    # ... and is still refused by it when it went back in time
    Path("out/ledger/employees.sqlite").unlink()
    shutil.rmtree("out/sample_employees")
    code, err = _cli(["run", JOB, "--ledger", "out/ledger/employees.sqlite"])
    assert code == 6, err
    assert "employees.json" in err


def _documented_trial() -> list[str]:
    """docs/setup.md's Spark trial command, as printed."""
    text = (ROOT / "docs" / "setup.md").read_text()
    (command,) = re.findall(r"`(bash scripts/run-sample\.sh --engine spark[^`]*)`", text)
    return str(command).split()


@pytest.mark.spark
def test_the_documented_spark_trial_runs_as_printed_after_the_pandas_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bash scripts/run-sample.sh` runs `python -m hdp_spark.jobs run JOB "$@"` (after the
    install step): the same command, here with the test's interpreter."""
    script = (ROOT / "scripts" / "run-sample.sh").read_text().strip().splitlines()
    assert script[-1] == f'.venv/bin/python -m hdp_spark.jobs run {JOB} "$@"'
    command = _documented_trial()
    assert command[:2] == ["bash", "scripts/run-sample.sh"]
    assert "--witness" in command
    _checkout(tmp_path, monkeypatch, report=True)
    proc = subprocess.run([sys.executable, "-m", "hdp_spark.jobs", "run", JOB],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    own = OWN_WITNESS.read_bytes()
    proc = subprocess.run([sys.executable, "-m", "hdp_spark.jobs", "run", JOB, *command[2:]],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("computed by engine spark") == 3, proc.stdout
    assert NO_WITNESS not in proc.stderr
    witness = Path(command[command.index("--witness") + 1])
    assert _commits(witness) == 3
    assert OWN_WITNESS.read_bytes() == own
    assert (Path(command[command.index("--output") + 1]) / "report.md").is_file()
