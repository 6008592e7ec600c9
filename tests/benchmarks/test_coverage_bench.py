"""Fast smoke of ``benchmarks/bench_coverage.py`` (issue 48's coverage table).

Runs the script at its ``--smoke`` size (a few seconds, core finalize only) in a subprocess,
as ``benchmarks/run.py`` does, and checks the report: every figure finite, every cell of
both tables present, and the facts that hold whatever the noise (a method with uniform
weights publishes no bias and its released interval is the noise-only one; ``hpf-a``'s bias
bound is positive on every mix).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import non_finite  # noqa: E402


def test_bench_coverage_smoke(tmp_path: Path) -> None:
    out = tmp_path / "coverage.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_coverage.py"), "--smoke", "--json",
           str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "| method | independent | comonotone | rank-0.5 | small-60 | public-20 |" in proc.stdout
    fig = json.loads(out.read_text())["figures"]
    assert non_finite(fig) == []
    mixes = {"independent", "comonotone", "rank-0.5", "small-60", "public-20"}
    for kind in ("mean", "histogram"):
        assert {c["mix"] for c in fig[kind]} == mixes
    for c in fig["mean"]:
        if c["method"] == "uniform":
            assert c["bias_bound"] == 0
            assert c["coverage"] == c["noise_only_coverage"]
            assert c["width_ratio"] == 1
    assert all(c["bias_bound"] > 0 for c in fig["histogram"] if c["method"] == "hpf-a")
