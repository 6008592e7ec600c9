"""A damaged ledger is always refused (issue 29): fault injection through the command line.

The fast subset runs in the normal suite (one position per damage kind); the full sweep
(50 seeded positions per kind, ``-m slow``) is the one ``docs/jobs.md`` reports::

    .venv/bin/python -m pytest -m slow tests/jobs/test_ledger_sweep.py

Every case must end refused (exit 6, nothing computed or charged, the damage left as it
was), or with provably unchanged values: zero silent alterations, zero tracebacks, no stored
key in a message. See :mod:`ledger_sweep`.
"""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from job_helpers import RELEASES, spend_parts, write_job
from ledger_sweep import EXTRA_RELEASE, _cli, flip, run_sweep, sqlite_regions

from hdp_spark.core.ledger import UNIT
from hdp_spark.jobs import load_job
from hdp_spark.ledger import SqliteLedger, open_ledger
from hdp_spark.ledger._columnar import encode_totals
from hdp_spark.ledger.io import PandasIO


def _report(sweep_counts: dict[str, int], failures: list[object]) -> str:
    return f"{dict(sweep_counts)}; failures: {failures[:5]}"


@pytest.mark.parametrize("backend", ["sqlite", "parquet"])
def test_fast_sweep_refuses_every_damage(backend: str, tmp_path: Path) -> None:
    sweep = run_sweep(tmp_path, backend, per_kind=1, seed=29)
    assert sum(sweep.counts.values()) >= 40
    assert sweep.failures() == [], _report(sweep.counts, sweep.failures())
    assert sweep.counts["refused"] >= 30  # the sweep really damages what runs read
    assert sweep.counts["found by verify"] >= 3  # and what only `verify` reads


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "parquet"])
def test_full_sweep_refuses_every_damage(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """About 6 (SQLite) and 3 (parquet) minutes on the loaded test machine: runs only when
    asked for (``-m slow``, or ``HDP_LEDGER_SWEEP=full``), not with the whole suite."""
    asked = "slow" in str(request.config.getoption("-m") or "") or os.environ.get(
        "HDP_LEDGER_SWEEP") == "full"
    if not asked:
        pytest.skip("the full sweep runs with -m slow or HDP_LEDGER_SWEEP=full")
    sweep = run_sweep(tmp_path, backend, per_kind=50, seed=2029)
    print(f"\n{backend} sweep: {sum(sweep.counts.values())} cases: {dict(sweep.counts)}")
    assert sweep.failures() == [], _report(sweep.counts, sweep.failures())


def _spend_over_budget(path: Path, budget: float) -> int:
    audit = SqliteLedger(path, create=False).audit()
    return sum(1 for units in audit.values() if units * UNIT > budget + 1e-9)


def test_a_damaged_ledger_never_lets_anyone_exceed_the_budget(tmp_path: Path) -> None:
    """Budget 1.0, one release charged; the totals snapshot then reads as 0 for everyone
    (a forged, well-formed blob: the worst case of a flipped value) or a byte is flipped in
    the spend. Every next run is refused, and nobody's audit log exceeds the budget."""
    budget = "default = 1.0"
    job = write_job(tmp_path, budget=budget, releases=RELEASES)
    code, err = _cli(["run", str(job)])
    assert code == 0, err
    path = load_job(job).ledger.path
    more = write_job(tmp_path, filename="more.toml", budget=budget,
                     releases=RELEASES + EXTRA_RELEASE)
    pristine = path.read_bytes()
    rng = random.Random(7)
    regions = sqlite_regions(path)
    damages = [flip(rng, start, stop, 1)
               for kind in ("totals", "users", "meta.state")  # what a charging run reads
               for start, stop in regions[kind][:1] for _ in range(3)]
    for damage in damages:
        path.write_bytes(pristine)
        damage(path)
        code, err = _cli(["run", str(more)])
        assert code == 6, err
        path.write_bytes(pristine)
        assert _spend_over_budget(path, 1.0) == 0
    # a forged snapshot that decodes fine: every total 0 (the ledger "forgot" the spend)
    path.write_bytes(pristine)
    conn = sqlite3.connect(path)
    with conn:
        n = conn.execute("SELECT n FROM totals").fetchone()[0]
        conn.execute("UPDATE totals SET data = ?", (encode_totals(np.zeros(n, np.int64)),))
    conn.close()
    code, err = _cli(["run", str(more)])
    assert code == 6, err
    assert "totals snapshot" in err
    # undamaged, the same run charges within the budget
    path.write_bytes(pristine)
    code, err = _cli(["run", str(more)])
    assert code == 0, err
    assert _spend_over_budget(path, 1.0) == 0


def test_a_damaged_parquet_ledger_never_lets_anyone_exceed_the_budget(tmp_path: Path) -> None:
    """Issue 29's first finding: one deleted part file of a delta (its directory kept) made
    a release's charges vanish, and later releases overspent. Now it, a flipped byte and a
    forged, well-formed part file (every spend 0) are refused; nobody exceeds the budget."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    budget = "default = 1.0"
    job = write_job(tmp_path, backend="parquet", budget=budget, releases=RELEASES)
    code, err = _cli(["run", str(job)])
    assert code == 0, err
    root = load_job(job).ledger.path
    more = write_job(tmp_path, filename="more.toml", backend="parquet", budget=budget,
                     releases=RELEASES + EXTRA_RELEASE)
    parts = spend_parts(root)
    assert parts
    saved = {p: p.read_bytes() for p in parts}

    def restore() -> None:
        for p, data in saved.items():
            p.write_bytes(data)

    def forge(p: Path) -> None:
        table = pq.read_table(p)
        zeros = pa.array([1] * table.num_rows, pa.int64())
        pq.write_table(table.set_column(1, "units", zeros), p)

    rng = random.Random(3)
    for damage in (lambda p: p.unlink(), forge,
                   lambda p: flip(rng, 0, p.stat().st_size, 1)(p)):
        damage(parts[0])
        code, err = _cli(["run", str(more)])
        assert code == 6, err
        restore()
    code, err = _cli(["run", str(more)])
    assert code == 0, err
    frame = open_ledger("parquet", root).spent(PandasIO())
    assert max(int(u) for u in frame["units"]) * UNIT <= 1.0 + 1e-9
