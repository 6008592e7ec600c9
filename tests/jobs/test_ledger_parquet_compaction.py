"""When the parquet ledger writes a snapshot (issue 29: a run's open-and-verify reads about
one snapshot's worth of rows), and that a kill at any moment of a compaction loses nothing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from job_helpers import REPO

from hdp_spark.ledger import CommitRecord, ParquetLedger
from hdp_spark.ledger._parquet_integrity import seal_manifest
from hdp_spark.ledger._parquet_session import compaction_due
from hdp_spark.ledger.io import PandasIO

IO = PandasIO()
USERS = [f"u{i:03d}" for i in range(40)]


def record(i: int, users: int) -> CommitRecord:
    return CommitRecord(f"{i:016x}" * 4, "job", f"r{i}", "fp", "2026-01-01T00:00:00+00:00",
                        '{"rows": []}', users, 10 * users, commit_id=f"{i:016x}")


def commit(ledger: ParquetLedger, i: int, charges: dict[str, int]) -> None:
    with ledger.session(IO) as s:
        s.spent()
        s.commit(record(i, len(charges)), IO.from_pairs(list(charges), list(charges.values())))


def spent(ledger: ParquetLedger) -> dict[str, int]:
    users, units = IO.to_pairs(ledger.spent(IO))
    return dict(zip(users, units, strict=True))


def test_compaction_due() -> None:
    assert not compaction_due(None, 1, 10**7, 0, 20)  # a lone delta is read as a snapshot
    assert compaction_due(None, 2, 2, 0, 20)
    assert not compaction_due("s", 1, 9, 10, 20)
    assert compaction_due("s", 1, 10, 10, 20)  # as many charges as the snapshot has users
    assert compaction_due("s", 3, 10, 10**6, 3)  # compact_every still bounds the deltas
    assert compaction_due(None, 1, 1, 0, 1)


def test_a_snapshot_once_the_deltas_hold_as_many_charges_as_it_has_users(
    tmp_path: Path,
) -> None:
    ledger = ParquetLedger(tmp_path / "l")  # compact_every = 20: never reached here
    everyone = dict.fromkeys(USERS, 3)
    commit(ledger, 1, everyone)
    m = ledger._latest()
    assert (m["snapshot"], len(m["deltas"]), m["delta_rows"]) == (None, 1, 40)
    commit(ledger, 2, everyone)  # 80 charges, no snapshot yet: folded
    m = ledger._latest()
    assert m["snapshot"]
    assert m["deltas"] == []
    assert m["snapshot_rows"] == 40
    assert len(m["archived"]) == 2
    expected = dict.fromkeys(USERS, 6)
    for i, who in enumerate((USERS[:15], USERS[15:39]), start=3):
        commit(ledger, i, dict.fromkeys(who, 1))
        for u in who:
            expected[u] = expected.get(u, 0) + 1
        assert spent(ledger) == expected
    m = ledger._latest()
    assert len(m["deltas"]) == 2
    assert m["delta_rows"] == 39
    commit(ledger, 5, {"new": 1})  # 40 charges since the snapshot: folded
    expected["new"] = 1
    m = ledger._latest()
    assert m["deltas"] == []
    assert m["snapshot_rows"] == 41
    assert m["delta_rows"] == 0
    assert spent(ledger) == expected
    ledger.verify()
    # the audit log is whole: the archived deltas sum to the spend
    summed = IO.read_parquet([str(ledger.root / d) for d in m["archived"]
                              if "/delta-" in d])
    assert dict(zip(*IO.to_pairs(summed), strict=True)) == expected


def test_a_manifest_without_row_counts_compacts_at_the_next_delta(tmp_path: Path) -> None:
    """A ledger written before the counts were recorded (they read as 0) folds its deltas
    at its next commit with charges, and records them from then on."""
    ledger = ParquetLedger(tmp_path / "l", compact_every=2)
    for i in (1, 2):
        commit(ledger, i, dict.fromkeys(USERS, 1))
    m = ledger._latest()
    old = {k: v for k, v in m.items() if k not in ("mac", "snapshot_rows", "delta_rows")}
    path = ledger.root / "_manifests" / f"{m['version']:020d}.json"
    path.write_text(json.dumps(seal_manifest(ledger._sealer, old)))
    ledger = ParquetLedger(tmp_path / "l", compact_every=20)
    commit(ledger, 3, {"u001": 1})
    m = ledger._latest()
    assert m["deltas"] == []
    assert m["snapshot_rows"] == 40
    assert spent(ledger) == {**dict.fromkeys(USERS, 2), "u001": 3}


# -- kill -9 during a compaction ---------------------------------------------------------

_KILLER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    import hdp_spark.ledger._parquet_session as ps
    from hdp_spark.ledger import CommitRecord, ParquetLedger
    from hdp_spark.ledger.io import PandasIO

    root, where = Path(sys.argv[1]), sys.argv[2]
    def die(*_a, **_k):
        os.kill(os.getpid(), signal.SIGKILL)
    io = PandasIO()
    if where == "writing":  # half a snapshot file on disk
        def compact(paths, path):
            Path(path).mkdir(parents=True)
            (Path(path) / "part-00000.parquet").write_bytes(b"PAR1" + b"x" * 100)
            die()
        io.compact = compact
    elif where == "written":  # the whole snapshot in _tmp, flushed, not yet moved
        real_tree = ps.fsync_tree
        def tree(path):
            real_tree(path)
            if Path(path).name.startswith("snap-"):
                die()
        ps.fsync_tree = tree
    elif where == "moved":  # the snapshot in spent/, its manifest not yet published
        real_pub = ps.publish_exclusive
        def pub(path, *a, **k):
            if Path(path).parent.name == "_manifests":
                die()
            return real_pub(path, *a, **k)
        ps.publish_exclusive = pub
    elif where == "published":  # the manifest published, `_head` not yet written
        real_write = ps.atomic_write
        def write(path, *a, **k):
            if Path(path).name == "_head":
                die()
            return real_write(path, *a, **k)
        ps.atomic_write = write
    users = [f"u{i:03d}" for i in range(40)]
    ledger = ParquetLedger(root)
    with ledger.session(io) as s:
        s.spent()
        s.commit(CommitRecord(f"{2:016x}" * 4, "job", "r2", "fp",
                              "2026-01-01T00:00:00+00:00", '{"rows": []}', 40, 400,
                              commit_id=f"{2:016x}"), io.from_pairs(users, [1] * 40))
    sys.exit(3)  # not reached
""")


@pytest.mark.parametrize("where", ["writing", "written", "moved", "published"])
def test_a_kill_during_a_compaction_loses_nothing(tmp_path: Path, where: str) -> None:
    root = tmp_path / "l"
    ledger = ParquetLedger(root)
    commit(ledger, 1, dict.fromkeys(USERS, 1))
    proc = subprocess.run([sys.executable, "-c", _KILLER, str(root), where], cwd=REPO,
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    reopened = ParquetLedger(root)  # opens: no damage, whatever the moment of the kill
    committed = where == "published"
    assert spent(reopened) == dict.fromkeys(USERS, 2 if committed else 1)
    assert (reopened.find(record(2, 40).key) is not None) == committed
    if not committed:  # the run is repeated (the runner re-runs an uncommitted release)
        commit(reopened, 2, dict.fromkeys(USERS, 1))
    commit(reopened, 3, {"u000": 5})
    m = reopened._latest()
    assert m["snapshot"]
    assert m["snapshot_rows"] == 40
    assert spent(reopened) == {**dict.fromkeys(USERS, 2), "u000": 7}
    reopened.verify()
    # the crashed attempt's files are gone (the next session removed them)
    listed = {Path(d).name for d in [m["snapshot"], *m["deltas"], *m["archived"]]}
    assert {p.name for p in (root / "spent").iterdir()} == listed
    assert list((root / "_tmp").iterdir()) == []
