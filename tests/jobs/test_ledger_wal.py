"""A damaged or lost SQLite ``-wal`` file (issue 51, finding 4): SQLite drops a damaged
frame and every later one silently, so the ledger reads as its older, consistent self.
``verify`` reads the file itself first: damage before a later commit is refused (exit 6);
what it cannot tell apart (the newest commit's frames failing at the end of the file, a
lost file) it says in its output, and a witness decides (exit 6 when commits are lost)."""

from __future__ import annotations

import contextlib
import io
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from job_helpers import GLOBAL_RELEASE, GROUPED_RELEASE, write_job

from hdp_spark.cli import main
from hdp_spark.jobs import load_job, run_job
from hdp_spark.ledger._sqlite_wal import check_wal


def _cli(args: list[str]) -> tuple[int, str]:
    """``hdp-release ARGS -q``: exit code and everything printed (stdout and stderr)."""
    text = io.StringIO()
    with contextlib.redirect_stderr(text), contextlib.redirect_stdout(text):
        code = main([*args, "-q"])
    return code, text.getvalue()


def _crashed_copy(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of a ledger as a crash leaves it: its newest commit only in the ``-wal``
    file (a reader's open connection keeps SQLite from checkpointing it), and the job's
    witness, which saw that commit."""
    job = write_job(tmp_path, releases=GROUPED_RELEASE)
    run_job(job)
    spec = load_job(job)
    holder = sqlite3.connect(spec.ledger.path)
    holder.execute("SELECT count(*) FROM commits").fetchone()
    try:
        job.write_text(job.read_text() + GLOBAL_RELEASE)
        run_job(job)
        copy = tmp_path / "copy"
        copy.mkdir()
        for suffix in ("", "-wal"):
            shutil.copy2(f"{spec.ledger.path}{suffix}", copy / f"l.sqlite{suffix}")
    finally:
        holder.close()
    assert spec.ledger.witness is not None
    return copy / "l.sqlite", spec.ledger.witness


def _frames(wal: Path) -> tuple[int, int]:
    data = wal.read_bytes()
    page = int.from_bytes(data[8:12], "big")
    return (len(data) - 32) // (24 + page), page


def _flip(wal: Path, frame: int) -> None:
    data = bytearray(wal.read_bytes())
    _count, page = _frames(wal)
    data[32 + frame * (24 + page) + 24 + page // 2] ^= 0x10
    wal.write_bytes(bytes(data))


def test_a_sound_wal_with_a_commit_verifies(tmp_path: Path) -> None:
    ledger, witness = _crashed_copy(tmp_path)
    frames, _page = _frames(Path(f"{ledger}-wal"))
    assert frames >= 2
    report = check_wal(ledger)
    assert report is not None
    assert (report.frames, report.unverifiable) == (frames, 0)
    code, out = _cli(["verify", str(ledger), "--witness", str(witness)])
    assert code == 0, out


def test_damage_before_a_later_commit_in_the_wal_is_refused_by_verify(tmp_path: Path) -> None:
    ledger, _witness = _crashed_copy(tmp_path)
    _flip(Path(f"{ledger}-wal"), 0)
    code, err = _cli(["verify", str(ledger)])
    assert code == 6, err
    assert "frame 1 of its `l.sqlite-wal` file fails SQLite's checksum" in err


@pytest.mark.parametrize("how", ["last frame", "header", "lost"])
def test_what_verify_cannot_check_in_the_wal_it_says_and_the_witness_decides(
    tmp_path: Path, how: str
) -> None:
    ledger, witness = _crashed_copy(tmp_path)
    wal = Path(f"{ledger}-wal")
    keep = tmp_path / "keep"
    shutil.copytree(ledger.parent, keep)
    if how == "last frame":
        _flip(wal, _frames(wal)[0] - 1)
    elif how == "header":
        data = bytearray(wal.read_bytes())
        data[17] ^= 0x01  # salt-1
        wal.write_bytes(bytes(data))
    else:
        wal.unlink()
    code, out = _cli(["verify", str(ledger)])
    if how == "header":
        assert code == 6, out
        assert "header of its `l.sqlite-wal` file fails SQLite's checksum" in out
    else:
        assert code == 0, out
        assert "not checked (no --witness): whether the ledger lost commits" in out
        assert "WARNING" in out
        if how == "last frame":
            assert "the -wal file ends in 1 frame(s) failing SQLite's checksum" in out
    shutil.rmtree(ledger.parent)
    shutil.copytree(keep, ledger.parent)
    if how == "last frame":
        _flip(wal, _frames(wal)[0] - 1)
    elif how == "lost":
        wal.unlink()
    else:
        return
    code, err = _cli(["verify", str(ledger), "--witness", str(witness)])
    assert code == 6, err
    assert "is behind its witness" in err
    assert "saw 2 commit(s), the ledger holds 1" in err


@pytest.mark.parametrize("order", ["<", ">"])
def test_the_vectorized_frame_checksums_equal_sqlites_loop(order: str) -> None:
    """All frames' checksums at once (numpy, linear in the starting checksum) equal
    SQLite's word-by-word loop, in both byte orders, from any starting checksum."""
    from hdp_spark.ledger._sqlite_wal import _FRAME, _HEADER, _checksum, _frame_sums

    rng = np.random.default_rng(51)
    page, frames = 1024, 7
    data = rng.integers(0, 256, _HEADER + frames * (_FRAME + page), dtype=np.uint8).tobytes()
    top, adds = _frame_sums(data, order, page, frames)
    for i in range(frames):
        start = (int(rng.integers(0, 2**32)), int(rng.integers(0, 2**32)))
        at = _HEADER + i * (_FRAME + page)
        want = _checksum(data[at:at + 8] + data[at + _FRAME:at + _FRAME + page], order, *start)
        got = tuple((top[r][0] * start[0] + top[r][1] * start[1] + int(adds[i][r]))
                    & 0xFFFFFFFF for r in (0, 1))
        assert got == want
