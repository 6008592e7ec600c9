"""The rollback witness (issue 51): a ledger restored together with its outputs is refused
when the job names a witness, and said to be undetectable (one WARNING) when it does not.

The scenario of the issue: a backup of the ledger and the outputs is taken, later runs
commit and charge, the backup is restored, and the next run would charge everybody again
against the older spend (people over budget). With a witness: exit code 6 naming both the
ledger and the witness, nothing computed or charged.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from job_helpers import (
    GLOBAL_RELEASE,
    GROUPED_RELEASE,
    REPO,
    records,
    spent_by_user,
    write_job,
)
from ledger_sweep import _cli

from hdp_spark.errors import LedgerDamagedError
from hdp_spark.jobs import load_job, run_job
from hdp_spark.jobs.faults import ENV
from hdp_spark.ledger import open_ledger
from hdp_spark.ledger.witness import Witness

BACKENDS = ["sqlite", "parquet"]
SECOND = GLOBAL_RELEASE.replace('id = "tenure_overall"', 'id = "tenure_later"')


def _jobs(tmp: Path, backend: str, witness: bool = True, engine: str = "pandas"
          ) -> tuple[Path, Path]:
    """Yesterday's job (one release) and today's (a second release on the same ledger)."""
    first = write_job(tmp, backend=backend, releases=GROUPED_RELEASE, witness=witness,
                      engine=engine)
    later = write_job(tmp, filename="later.toml", backend=backend, witness=witness,
                      releases=GROUPED_RELEASE + SECOND, engine=engine)
    return first, later


def _witness(job: Path) -> Path:
    witness = load_job(job).ledger.witness
    assert witness is not None
    return witness


def _copy(job: Path, to: Path) -> None:
    """Back the ledger and the outputs up (the ledger closed: no -wal to lose)."""
    spec = load_job(job)
    to.mkdir()
    for src in (spec.ledger.path, spec.output.path):
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, to / src.name)


def _restore(job: Path, frm: Path) -> None:
    spec = load_job(job)
    for dst in (spec.ledger.path, spec.output.path):
        if dst.is_dir():
            shutil.rmtree(dst)
        else:
            for extra in ("", "-wal", "-shm"):
                Path(f"{dst}{extra}").unlink(missing_ok=True)
        (shutil.copytree if (frm / dst.name).is_dir() else shutil.copy2)(frm / dst.name, dst)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_ledger_restored_with_its_outputs_is_refused_by_its_witness(
    tmp_path: Path, backend: str
) -> None:
    first, later = _jobs(tmp_path, backend)
    code, err = _cli(["run", str(first)])
    assert code == 0, err
    _copy(first, tmp_path / "backup")
    code, err = _cli(["run", str(later)])
    assert code == 0, err
    spent = spent_by_user(later)
    _restore(later, tmp_path / "backup")
    restored = records(later)
    assert len(restored) == 1
    code, err = _cli(["run", str(later)])
    assert code == 6, err
    spec = load_job(later)
    assert f"the ledger `{spec.ledger.path}` is behind its witness `{_witness(later)}`" \
        in err
    assert "saw 2 commit(s), the ledger holds 1" in err
    assert records(later) == restored  # nothing computed or charged
    code, err = _cli(["verify", str(spec.ledger.path), "--witness", str(_witness(later))])
    assert code == 6, err
    assert "is behind its witness" in err
    assert spent_by_user(later) != spent


@pytest.mark.parametrize("backend", BACKENDS)
def test_without_a_witness_a_rollback_goes_unnoticed_and_a_run_says_so(
    tmp_path: Path, backend: str
) -> None:
    first, later = _jobs(tmp_path, backend, witness=False)
    code, err = _cli(["run", str(first)])
    assert code == 0, err
    assert err.count("rollback (the ledger restored together with its outputs) cannot be "
                     "detected") == 1
    assert err.count("WARNING") == 1, err
    _copy(first, tmp_path / "backup")
    assert _cli(["run", str(later)])[0] == 0
    _restore(later, tmp_path / "backup")
    code, err = _cli(["run", str(later)])
    assert code == 0, err  # the limit the witness removes: charged again
    assert err.count("cannot be detected") == 1
    assert len(records(later)) == 2
    ledger = load_job(later).ledger.path
    code, err = _cli(["verify", str(ledger)])
    assert code == 0
    assert err.count("WARNING") == 1, err
    assert "a rollback of ledger" in err


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_witness_of_another_history_or_ledger_is_refused(tmp_path: Path, backend: str
                                                           ) -> None:
    """A ledger rolled back and then advanced again (as many commits as its witness saw,
    other ones) fails the chain; a re-created ledger fails the ledger id."""
    first, later = _jobs(tmp_path, backend)
    assert _cli(["run", str(first)])[0] == 0
    _copy(first, tmp_path / "backup")
    assert _cli(["run", str(later)])[0] == 0
    spec = load_job(later)
    saved = _witness(later).read_bytes()
    _restore(later, tmp_path / "backup")
    other = write_job(tmp_path, filename="other.toml", backend=backend, witness=False,
                      releases=GROUPED_RELEASE + GLOBAL_RELEASE)
    assert _cli(["run", str(other)])[0] == 0  # a second commit, not the witnessed one
    code, err = _cli(["run", str(later)])
    assert code == 6, err
    assert "does not hold the history its witness" in err
    # a new ledger (and outputs) under the old witness
    shutil.rmtree(spec.output.path)
    if spec.ledger.path.is_dir():
        shutil.rmtree(spec.ledger.path)
    else:
        spec.ledger.path.unlink()
    _witness(later).write_bytes(saved)
    code, err = _cli(["run", str(later)])
    assert code == 6, err
    assert "belongs to another ledger" in err


@pytest.mark.parametrize("damage", ["flip", "truncate", "counter", "id"])
def test_a_damaged_witness_is_refused(tmp_path: Path, damage: str) -> None:
    first, _later = _jobs(tmp_path, "sqlite")
    assert _cli(["run", str(first)])[0] == 0
    witness = _witness(first)
    text = witness.read_text()
    if damage == "flip":
        doc = json.loads(text)
        doc["head"] = doc["head"][:-1] + ("0" if doc["head"][-1] != "0" else "1")
        text = json.dumps(doc)
    elif damage == "counter":  # a smaller count reads as "nothing lost": must fail the MAC
        doc = json.loads(text)
        doc["commits"] = 0
        text = json.dumps(doc)
    elif damage == "id":  # a garbled id is damage, not "another ledger"
        doc = json.loads(text)
        doc["ledger_id"] = "\u0007" + doc["ledger_id"][1:]
        text = json.dumps(doc)
    else:
        text = text[: len(text) // 2]
    witness.write_text(text)
    code, err = _cli(["run", str(first)])
    assert code == 6, err
    assert f"the ledger witness `{witness}` is damaged" in err


def test_a_witness_inside_the_ledger_or_the_outputs_is_refused(tmp_path: Path) -> None:
    job = write_job(tmp_path, backend="parquet", witness=tmp_path / "ledger" / "w.json")
    code, err = _cli(["run", str(job)])
    assert code == 2
    assert "`[ledger] witness` must lie outside the ledger" in err
    job = write_job(tmp_path, witness=tmp_path / "out" / "w.json")
    code, err = _cli(["run", str(job)])
    assert code == 2
    assert "`[ledger] witness` must lie outside `[output] path`" in err


def test_a_lost_witness_is_re_created_with_a_warning(tmp_path: Path) -> None:
    first, later = _jobs(tmp_path, "sqlite")
    assert _cli(["run", str(first)])[0] == 0
    witness = _witness(first)
    doc = json.loads(witness.read_text())
    assert doc["commits"] == 1
    assert "WARNING" not in _cli(["run", str(first)])[1]
    witness.unlink()
    code, err = _cli(["run", str(later)])
    assert code == 0, err
    assert "did not exist: created at 1 commit(s)" in err
    assert json.loads(witness.read_text())["commits"] == 2


def test_the_witness_api_never_moves_backwards(tmp_path: Path) -> None:
    first, later = _jobs(tmp_path, "sqlite")
    run_job(first)
    run_job(later)
    spec = load_job(later)
    ledger = open_ledger("sqlite", spec.ledger.path)
    witness = Witness(_witness(later))
    assert witness.check(ledger).lag == 0
    assert witness.advance(ledger).witnessed == 2
    assert json.loads(_witness(later).read_text())["commits"] == 2
    with pytest.raises(LedgerDamagedError, match="is behind its witness"):
        witness.check(_Fewer(ledger))
    with pytest.raises(LedgerDamagedError, match="is behind its witness"):
        witness.advance(_Fewer(ledger))
    assert json.loads(_witness(later).read_text())["commits"] == 2


class _Fewer:
    """A ledger view that lost its newest commit."""

    def __init__(self, ledger: object) -> None:
        self._ledger = ledger
        self.ledger_id = ledger.ledger_id  # type: ignore[attr-defined]
        self.path = ledger.path  # type: ignore[attr-defined]

    def mac(self, message: bytes) -> str:
        return str(self._ledger.mac(message))  # type: ignore[attr-defined]

    def history(self) -> list[tuple[str, str]]:
        return list(self._ledger.history())[:-1]  # type: ignore[attr-defined]


# -- kill -9 at every stage of a commit, with a witness ----------------------------------

STAGES = ["tenure_later:locked", "tenure_later:computed", "tenure_later:charged",
          "tenure_later:committed", "tenure_later:witnessed", "tenure_later:staged",
          "tenure_later:published", "reported"]


def _crash(job: Path, stage: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, ENV: stage, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "hdp_spark.jobs", "run", str(job), "-q"],
                          env=env, capture_output=True, text=True, cwd=REPO, check=False,
                          timeout=300)


@pytest.mark.parametrize("backend", BACKENDS)
def test_kill_at_every_stage_of_a_commit_with_a_witness(tmp_path: Path, backend: str) -> None:
    """No lost or double charge, no stuck run: the witness is never ahead of the ledger (it
    is written after the commit), and one behind (killed between the two) is caught up."""
    (tmp_path / "ref").mkdir()
    ref_first, ref_later = _jobs(tmp_path / "ref", backend)
    run_job(ref_first)
    run_job(ref_later)
    reference = spent_by_user(ref_later)
    for stage in STAGES:
        tmp = tmp_path / stage.replace(":", "-")
        tmp.mkdir()
        first, later = _jobs(tmp, backend)
        run_job(first)
        done = _crash(later, stage)
        assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
        witness = _witness(later)
        seen = json.loads(witness.read_text())["commits"]
        held = len(records(later))
        assert seen <= held <= seen + 1, stage  # never ahead; at most one behind
        if stage.endswith(":committed"):
            assert (seen, held) == (1, 2)  # the case of a witness behind by one step
        code, err = _cli(["verify", str(load_job(later).ledger.path), "--witness",
                          str(witness)])
        assert code == 0, err  # a lagging witness is not damage
        code, err = _cli(["run", str(later)])  # recovery: not blocked
        assert code == 0, (stage, err)
        assert spent_by_user(later) == reference, stage
        assert len(records(later)) == 2
        assert json.loads(witness.read_text())["commits"] == 2, stage


@pytest.mark.spark
def test_a_rollback_is_refused_on_the_spark_engine(tmp_path: Path, spark: Any) -> None:
    """The same witness on the Spark engine (parquet ledger, the Spark default): restored
    with its outputs, the ledger is refused; the pandas engine then agrees."""
    first, later = _jobs(tmp_path, "parquet", engine="spark")
    run_job(first, spark=spark)
    _copy(first, tmp_path / "backup")
    run_job(later, spark=spark)
    _restore(later, tmp_path / "backup")
    restored = records(later)
    with pytest.raises(LedgerDamagedError, match="is behind its witness"):
        run_job(later, spark=spark)
    assert records(later) == restored
    with pytest.raises(LedgerDamagedError, match="is behind its witness"):
        run_job(later, engine="pandas")
