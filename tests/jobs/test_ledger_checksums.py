"""Checksums over everything the ledger keeps (issue 29): the cases named by the issue, one
by one, on the ledger API and through ``hdp-release verify``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from job_helpers import (
    RELEASES,
    records,
    spend_parts,
    unseal_parquet_to_v1,
    unseal_to_v3,
    write_job,
)
from ledger_sweep import _cli

from hdp_spark.errors import LedgerDamagedError
from hdp_spark.jobs import load_job
from hdp_spark.ledger import ParquetLedger, SqliteLedger, open_ledger
from hdp_spark.ledger.io import PandasIO
from hdp_spark.ledger.sqlite import _FORMAT


def _ran(tmp_path: Path, backend: str, **kwargs: object) -> tuple[Path, Path]:
    job = write_job(tmp_path, backend=backend, releases=RELEASES, **kwargs)  # type: ignore[arg-type]
    code, err = _cli(["run", str(job)])
    assert code == 0, err
    return job, load_job(job).ledger.path


def _sql(path: Path, sql: str, args: tuple[object, ...] = ()) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(sql, args)
    conn.close()


def _spent(backend: str, path: Path) -> dict[str, int]:
    frame = open_ledger(backend, path, create=False).spent(PandasIO())  # type: ignore[arg-type]
    return dict(zip(frame["user_id"].astype(str), frame["units"].astype(int), strict=True))


@pytest.mark.parametrize("backend", ["sqlite", "parquet"])
def test_verify_passes_on_a_sound_ledger(tmp_path: Path, backend: str) -> None:
    _job, path = _ran(tmp_path, backend)
    code, out = _cli(["verify", str(path)])
    assert code == 0, out
    report = open_ledger(backend, path).verify()  # type: ignore[arg-type]
    assert report.commits == 2
    assert report.items > 2


@pytest.mark.parametrize("name", ["nope.sqlite", "nope_dir"])
def test_verify_of_a_path_that_does_not_exist_says_so(tmp_path: Path, name: str) -> None:
    """A mistyped path is not a damaged ledger: nothing cites it (exit 2, not 6)."""
    path = tmp_path / "ledger" / name
    code, err = _cli(["verify", str(path)])
    assert code == 2
    assert f"the path `{path}` does not exist" in err
    assert "cite" not in err
    assert not path.exists()
    assert not path.parent.exists()


def test_a_lost_sqlite_secret_is_damage_not_a_new_ledger(tmp_path: Path) -> None:
    job, path = _ran(tmp_path, "sqlite")
    _sql(path, "DELETE FROM meta WHERE name = 'mac_secret'")
    code, err = _cli(["run", str(job)])
    assert code == 6
    assert "lacks mac_secret" in err
    with pytest.raises(LedgerDamagedError, match="lacks mac_secret"):
        SqliteLedger(path)


def test_a_sealed_sqlite_ledger_is_never_sealed_again(tmp_path: Path) -> None:
    """A format row turned back to 3 would make the next open re-seal damaged rows."""
    _job, path = _ran(tmp_path, "sqlite")
    _sql(path, "UPDATE meta SET value = 'hdp_spark.ledger.sqlite/3' WHERE name = 'format'")
    with pytest.raises(LedgerDamagedError, match="format row disagrees"):
        SqliteLedger(path)


def test_a_flipped_key_in_the_index_copy_is_never_recharged(tmp_path: Path) -> None:
    """The index copy of an idempotency key (``quick_check`` says ok) changed: lookups do
    not use the index, so the re-run re-publishes; ``verify`` finds the damage."""
    job, path = _ran(tmp_path, "sqlite")
    before = {r.release_id: r.commit_id for r in records(job)}
    spent = _spent("sqlite", path)
    key = sorted(r.key for r in records(job))[0]
    data = bytearray(path.read_bytes())
    at = [i for i in range(len(data)) if data.startswith(key.encode(), i)]
    assert len(at) == 2  # the table's and the index's copy
    for pos in at:
        damaged = bytearray(data)
        damaged[pos + 5] = ord("0") if damaged[pos + 5] != ord("0") else ord("1")
        path.write_bytes(bytes(damaged))
        code, err = _cli(["run", str(job)])
        if code == 0:  # the index copy: re-published, nothing charged
            assert {r.release_id: r.commit_id for r in records(job)} == before
            assert _spent("sqlite", path) == spent
            vcode, verr = _cli(["verify", str(path)])
            assert vcode == 6, verr
            assert key not in verr
        else:
            assert code == 6, err
            assert key not in err
    path.write_bytes(bytes(data))


def test_damage_in_the_older_audit_log_is_found_by_verify(tmp_path: Path) -> None:
    job, path = _ran(tmp_path, "sqlite")
    conn = sqlite3.connect(path)
    seq = conn.execute("SELECT MIN(seq) FROM charges").fetchone()[0]
    totals_seq = int(conn.execute(
        "SELECT value FROM meta WHERE name = 'totals_seq'").fetchone()[0])
    conn.close()
    assert seq <= totals_seq  # folded into the snapshot: no run reads it
    _sql(path, "UPDATE charges SET mac = ? WHERE seq = ?", ("0" * 64, seq))
    code, err = _cli(["run", str(job)])
    assert code == 0, err  # re-publishes: it reads none of the audit log
    code, err = _cli(["verify", str(path)])
    assert code == 6
    assert "audit log" in err


def test_a_format_3_ledger_is_upgraded_once_with_everything_kept(tmp_path: Path) -> None:
    job, path = _ran(tmp_path, "sqlite")
    spent = _spent("sqlite", path)
    ids = {r.release_id: r.commit_id for r in records(job)}
    unseal_to_v3(path)
    code, out = _cli(["verify", str(path)])  # the explicit upgrade
    assert code == 0, out
    conn = sqlite3.connect(path)
    fmt = conn.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()[0]
    conn.close()
    assert fmt == _FORMAT
    assert _spent("sqlite", path) == spent
    code, err = _cli(["run", str(job)])
    assert code == 0, err
    assert {r.release_id: r.commit_id for r in records(job)} == ids  # re-published


def test_a_lost_parquet_secret_or_id_is_damage(tmp_path: Path) -> None:
    job, root = _ran(tmp_path, "parquet")
    for name in ("_secret", "_id"):
        saved = (root / name).read_bytes()
        (root / name).unlink()
        code, err = _cli(["run", str(job)])
        assert code == 6, err
        assert f"`{name}` is missing" in err
        assert not (root / name).exists()  # not re-created
        (root / name).write_bytes(saved)


@pytest.mark.parametrize("garbage", [b"", b"x\n", b"7\x00\n", b"-1\n"])
def test_a_garbled_parquet_head_is_damage(tmp_path: Path, garbage: bytes) -> None:
    _job, root = _ran(tmp_path, "parquet")
    (root / "_head").write_bytes(garbage)
    with pytest.raises(LedgerDamagedError, match="`_head` is garbled"):
        ParquetLedger(root)


def test_a_deleted_or_extra_parquet_part_file_is_damage(tmp_path: Path) -> None:
    """Issue 29's first finding: a deleted part file (its directory kept) was accepted."""
    job, root = _ran(tmp_path, "parquet")
    part = spend_parts(root)[0]  # a file of the spend runs read
    saved = part.read_bytes()
    part.unlink()
    code, err = _cli(["run", str(job)])
    assert code == 6, err
    assert "lacks 1 it lists" in err
    part.write_bytes(saved)
    (part.parent / "part-extra.parquet").write_bytes(saved)
    code, err = _cli(["run", str(job)])
    assert code == 6, err
    assert "holds 1 file(s) its manifest does not list" in err


def test_damage_in_an_archived_parquet_delta_is_found_by_verify(tmp_path: Path) -> None:
    job, root = _ran(tmp_path, "parquet")
    job.write_text(job.read_text().replace("lock_timeout = 60",
                                           "lock_timeout = 60\ncompact_every = 1"))
    extra = job.read_text().replace('id = "tenure_overall"', 'id = "tenure_again"')
    job.write_text(extra)
    code, err = _cli(["run", str(job)])
    assert code == 0, err
    manifest = json.loads(max((root / "_manifests").iterdir()).read_text())
    assert manifest["archived"]
    part = sorted((root / manifest["archived"][0]).glob("*.parquet"))[0]
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0x40
    part.write_bytes(bytes(data))
    code, err = _cli(["verify", str(root)])
    assert code == 6
    assert "is altered" in err


def test_a_format_1_parquet_ledger_is_sealed_on_first_open(tmp_path: Path) -> None:
    job, root = _ran(tmp_path, "parquet")
    spent = _spent("parquet", root)
    unseal_parquet_to_v1(root)
    versions = len(list((root / "_manifests").iterdir()))
    ledger = ParquetLedger(root)
    assert len(list((root / "_manifests").iterdir())) == versions + 1
    newest = json.loads(max((root / "_manifests").iterdir()).read_text())
    assert newest["format"] == "hdp_spark.ledger.parquet/2"
    assert newest["files"]
    assert newest["mac"]
    assert ledger.verify().items == len(newest["files"])
    assert _spent("parquet", root) == spent
    code, err = _cli(["run", str(job)])
    assert code == 0, err


def test_an_unreadable_row_of_an_old_format_is_damage_not_sealed(tmp_path: Path) -> None:
    """Format 3 had no checksums: a blob that does not decode is refused by the upgrade
    (never sealed as if it were sound), and the file stays in format 3."""
    _job, path = _ran(tmp_path, "sqlite")
    unseal_to_v3(path)
    _sql(path, "UPDATE users SET data = ?", (b"PAR1 not parquet PAR1",))
    with pytest.raises(LedgerDamagedError, match="cannot be decoded"):
        SqliteLedger(path)
    conn = sqlite3.connect(path)
    fmt = conn.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()[0]
    conn.close()
    assert fmt == "hdp_spark.ledger.sqlite/3"


def _relabel(manifest: Path, old: bytes, new: bytes) -> None:
    data = manifest.read_bytes()
    assert data.count(old) == 1
    manifest.write_bytes(data.replace(old, new))


@pytest.mark.parametrize("label", [b"hdp_spark.ledger.parquet/1", b"hdp_spark.ledger.parquet/3",
                                   b"hdp_spark.ledger.parquet/0", b"hdp_spark.ledgdr.parquet/2"])
def test_a_rewritten_label_of_an_older_parquet_manifest_fails_verify(
    tmp_path: Path, label: bytes
) -> None:
    """The format label is covered by the manifest's MAC: an older manifest relabelled (to
    format 1, an unknown format, or by a bit flip) is damage, not skipped (issue 51)."""
    _job, root = _ran(tmp_path, "parquet")
    manifests = sorted((root / "_manifests").iterdir())
    assert len(manifests) >= 2
    _relabel(manifests[0], b"hdp_spark.ledger.parquet/2", label)
    code, err = _cli(["verify", str(root)])
    assert code == 6, err
    assert manifests[0].name in err
    assert "MAC" in err


@pytest.mark.parametrize("label", [b"hdp_spark.ledger.parquet/1", b"hdp_spark.ledger.parquet/3"])
def test_a_rewritten_label_of_the_newest_parquet_manifest_is_refused(
    tmp_path: Path, label: bytes
) -> None:
    """Relabelled as format 1 the newest manifest would be 'upgraded' (re-sealed as it is)
    without its MAC ever being checked: refused instead."""
    job, root = _ran(tmp_path, "parquet")
    newest = max((root / "_manifests").iterdir())
    _relabel(newest, b"hdp_spark.ledger.parquet/2", label)
    count = len(list((root / "_manifests").iterdir()))
    for args in (["run", str(job)], ["verify", str(root)]):
        code, err = _cli(args)
        assert code == 6, err
        assert "fails its MAC" in err
    assert len(list((root / "_manifests").iterdir())) == count


def test_an_unsealed_manifest_after_a_sealed_one_is_damage(tmp_path: Path) -> None:
    """A manifest stripped to what format 1 wrote (label, no MAC, no file list) after a
    sealed one: a ledger never goes back to the unsealed format."""
    _job, root = _ran(tmp_path, "parquet")
    manifests = sorted((root / "_manifests").iterdir())
    doc = json.loads(manifests[-1].read_text())
    for name in ("mac", "files"):
        doc.pop(name)
    doc["format"] = "hdp_spark.ledger.parquet/1"
    manifests[-1].write_text(json.dumps(doc))
    with pytest.raises(LedgerDamagedError, match="after a sealed manifest"):
        ParquetLedger(root)
