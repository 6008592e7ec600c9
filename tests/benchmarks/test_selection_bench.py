"""Fast smoke of ``benchmarks/bench_selection.py`` (issue 22's partition-selection benchmark).

Runs the script at its ``--smoke`` size (pandas only, a few seconds) in a subprocess, as
``benchmarks/run.py`` does, and checks the report: every figure finite, and the facts that
must hold whatever the noise (one-person-sized groups never released, the largest groups
always released, the predicted n₅₀ of the note's setting, the measured release count close
to its exact expectation, a plot written).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import non_finite  # noqa: E402


def test_bench_selection_smoke(tmp_path: Path) -> None:
    out = tmp_path / "selection.json"
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "bench_selection.py"),
        "--smoke",
        "--json",
        str(out),
        "--plots",
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "| group size |" in proc.stdout
    report = json.loads(out.read_text())
    fig = report["figures"]
    assert non_finite(fig) == []
    buckets = {b["bucket"]: b for b in fig["buckets"]}
    for name in ("ours1", "ours2"):
        # a group of < 10 rows has Σκ <= 10·c, far below T ≈ c + 52: released w.p. ~1e-6
        assert buckets["1–9"][f"released_{name}"] == 0
        # a group of >= 1,000 rows has Σκ >> T: released w.p. 1 - tiny
        assert buckets["1,000–5,000"][f"released_{name}"] == 1
        sel = fig["selection"][name]
        assert abs(sel["z"]) < 5, sel
        assert 0 < sel["released_share"] < 1
    # the note's §6 numbers for its setting (δ = 1e-6, f = 0.5, u = 2, LogU[0.05, 5])
    assert abs(fig["selection"]["ours1"]["n50_predicted"] - 96) < 5
    assert abs(fig["selection"]["ours2"]["n50_predicted"] - 66) < 4
    assert abs(fig["selection"]["eps_min"]["threshold_rows"] - 1050.8) < 1
    assert buckets["1–9"]["released_eps_min"] == 0
    assert report["plots"], "no plot written"
    assert all(Path(p).exists() for p in report["plots"])
