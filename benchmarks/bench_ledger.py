"""Privacy ledger at scale: size on disk and commit time per release, both backends.

For each backend (SQLite; parquet through pyarrow, the pandas engine's writer), R releases
(default 3) each charge every one of N users (default 10M; charges from 8 distinct ε levels
drawn at random per user and release, as a release over an ε grid gives). User ids are
random 16-hex-digit strings by default (``--ids random``: nothing to gain from their order,
the honest case), or ``u<9 digits>`` in order (``--ids seq``). Reported per backend: the wall
time of each commit (``session.commit``: from the engine's frame to the atomic commit point,
with its fsyncs) and its CPU time (all threads of the process: on a shared, overloaded
machine wall time mostly measures waiting for a core), the time to read the spend inside
the next session, the ledger's size on disk after each release (a SQLite ledger after a WAL
checkpoint), and bytes per charge:
overall (users, totals and audit log together), and of the last release alone.

Also: a run's open-and-verify (open the ledger, then read the spend in a session with
every checksum checked, as a pandas frame; ``--repeats`` times, median, wall and CPU) and
``verify`` (every checksum of the ledger: audit log, archived deltas, SQLite's
``integrity_check``). The process's peak RSS is reported too (run one backend per process
to get each backend's peak).

Targets (issues 18 and 29, reported, never asserted): <= 16 bytes per charge, a commit of
10M charges in <= 30 s, open-and-verify <= 2 s at 10M users, verify <= 10 s per 10M charges.

Run: .venv/bin/python benchmarks/bench_ledger.py [--users 10000000] [--releases 3]
[--backends sqlite,parquet] [--ids random|seq] [--repeats 3] [--smoke]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import add_report_args, fmt, md_table, use_repo, write_report

use_repo()


def _size(path: Path) -> int:
    if path.is_file():
        conn = sqlite3.connect(path)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _user_ids(users: int, kind: str) -> list[str]:
    import numpy as np

    if kind == "seq":
        return [f"u{i:09d}" for i in range(users)]
    rng = np.random.default_rng(2026)  # benchmark ids, not privacy noise  # design-ok
    return [f"{x:016x}" for x in rng.integers(0, 2**63, users, dtype=np.int64)]


def run_backend(
    backend: str, users: int, releases: int, root: Path, ids: str, repeats: int = 3
) -> dict[str, Any]:
    import numpy as np

    from hdp_spark.ledger import CommitRecord, open_ledger
    from hdp_spark.ledger.io import PandasIO

    io = PandasIO()
    path = root / ("ledger.sqlite" if backend == "sqlite" else "ledger")
    ledger = open_ledger(backend, path)  # type: ignore[arg-type]
    names = _user_ids(users, ids)
    rng = np.random.default_rng(7)  # benchmark charges  # design-ok
    levels = np.array([2**k for k in range(22, 30)], dtype=np.int64)  # 8 ε levels
    commit_s, commit_cpu, read_s, sizes = [], [], [], []
    for r in range(1, releases + 1):
        units = levels[rng.integers(0, len(levels), users)]
        frame = io.from_pairs(names, units.tolist())
        record = CommitRecord(
            key=f"{r:064x}", job="bench", release_id=f"r{r}", fingerprint="bench",
            committed_at="2026-01-01T00:00:00+00:00", outcome=json.dumps({"rows": []}),
            users_charged=users, units_charged=int(units.sum()), commit_id=f"{r:016x}",
        )
        with ledger.session(io) as session:
            t0 = time.perf_counter()
            spent = session.spent()
            read_s.append(time.perf_counter() - t0)
            assert len(spent) == (users if r > 1 else 0)
            t0, c0 = time.perf_counter(), time.process_time()
            session.commit(record, frame)
            commit_s.append(time.perf_counter() - t0)
            commit_cpu.append(time.process_time() - c0)
        sizes.append(_size(path))
    t0 = time.perf_counter()
    spent = ledger.spent(io)
    read_s.append(time.perf_counter() - t0)
    assert len(spent) == users
    # what a run does before it computes: open (checks the file / manifest and the sealed
    # state) and, in its session, read the spend (every part's checksum checked)
    # (repeated: on a shared machine one figure says little; each run starts from scratch)
    open_verify_s, open_verify_cpu = [], []
    for _ in range(repeats):
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        reopened = open_ledger(backend, path, create=False)  # type: ignore[arg-type]
        with reopened.session(io) as session:
            read = session.spent()
        open_verify_s.append(time.perf_counter() - t0)
        open_verify_cpu.append(time.process_time() - c0)
        del read
    t0, c0 = time.perf_counter(), time.process_time()
    reopened.verify()
    verify_s, verify_cpu = time.perf_counter() - t0, time.process_time() - c0
    last = sizes[-1] - sizes[-2] if releases > 1 else sizes[-1]
    return {
        "commit_seconds": commit_s,
        "commit_cpu_seconds": commit_cpu,
        "read_spent_seconds": read_s,
        "open_and_verify_seconds": open_verify_s,
        "open_and_verify_cpu_seconds": open_verify_cpu,
        "verify_seconds": verify_s,
        "verify_cpu_seconds": verify_cpu,
        "size_bytes": sizes,
        "bytes_per_charge": sizes[-1] / (users * releases),
        "bytes_per_charge_last_release": last / users,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=10_000_000)
    parser.add_argument("--releases", type=int, default=3)
    parser.add_argument("--backends", default="sqlite,parquet")
    parser.add_argument("--ids", choices=("random", "seq"), default="random")
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory")
    parser.add_argument("--repeats", type=int, default=3,
                        help="open-and-verify measurements per backend (median reported)")
    add_report_args(parser)
    args = parser.parse_args()
    users = 20_000 if args.smoke else args.users
    figures: dict[str, Any] = {"users": users, "releases": args.releases, "ids": args.ids,
                               "load_before": os.getloadavg()[0]}
    rows = []
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    for backend in args.backends.split(","):
        root = Path(tempfile.mkdtemp(prefix=f"bench-ledger-{backend}-", dir=args.dir))
        try:
            result = run_backend(backend, users, args.releases, root, args.ids,
                                 max(1, args.repeats))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        figures[backend] = result
        rows.append([
            backend, fmt(max(result["commit_seconds"]), 3),
            fmt(max(result["commit_cpu_seconds"]), 3),
            fmt(max(result["read_spent_seconds"]), 3),
            f"{fmt(statistics.median(result['open_and_verify_seconds']), 3)} "
            f"({fmt(statistics.median(result['open_and_verify_cpu_seconds']), 3)} CPU; "
            f"CPU {fmt(min(result['open_and_verify_cpu_seconds']), 3)}-"
            f"{fmt(max(result['open_and_verify_cpu_seconds']), 3)})",
            f"{fmt(result['verify_seconds'], 3)} ({fmt(result['verify_cpu_seconds'], 3)} CPU)",
            fmt(result["size_bytes"][-1] / 2**20, 4), fmt(result["bytes_per_charge"], 3),
            fmt(result["bytes_per_charge_last_release"], 3),
        ])
    import resource

    figures["max_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    markdown = "\n".join([
        f"### Ledger at {users:,} users x {args.releases} releases ({args.ids} ids, load "
        f"{os.getloadavg()[0]:.2f} at the end)",
        "",
        md_table(["backend", "slowest commit (s)", "its CPU time (s, all threads)",
                  "slowest spend read (s)", "open + checked spend read, median (s)",
                  "verify, all checksums (s)", "size (MiB)",
                  "bytes/charge", "bytes/charge, last release"], rows),
        "",
        "Targets (issues 18, 29): <= 16 bytes per charge, a commit of 10M charges in <= 30 s, "
        "open-and-verify <= 2 s at 10M users, verify <= 10 s per 10M charges.",
        "",
        f"Peak RSS of the process (every backend it ran): "
        f"{figures['max_rss_mib'] / 1024:.2f} GiB.",
    ])
    figures["load_after"] = os.getloadavg()[0]
    write_report(args.json, name="ledger", figures=figures, markdown=markdown,
                 meta={"cpu_count": os.cpu_count()})


if __name__ == "__main__":
    main()
