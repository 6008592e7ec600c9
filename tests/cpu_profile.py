"""Opt-in profile of the test run: each test's wall time and the CPU time of the test
process's whole tree (its JVMs, job servers and subprocesses included), so a loaded machine
can still say where the suite's time goes (issue 53).

``HDP_TEST_PROFILE=/tmp/prof bash scripts/test.sh`` writes one tab-separated line per test
(node id, wall seconds, CPU seconds from setup to teardown) to ``/tmp/prof.<worker>.tsv``;
``python tests/cpu_profile.py /tmp/prof`` sums them per test directory. Off by default.

The tree's CPU is the sum of user+system time (own and reaped children's) over the live
process tree, read from ``/proc``: a JVM's time counts while it runs, and once it exits
through its parent's children's time. Session-scoped fixtures are charged to the first test
that uses them."""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PR_SET_CHILD_SUBREAPER = 36


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found.extend(int(c) for c in f.read().split())
    except OSError:
        pass
    return found


def _cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # after the command: state ppid ... utime(12) stime(13) cutime(14) cstime(15), 0-based
    return sum(int(v) for v in fields[11:15]) / _TICK


def tree_cpu(root: int | None = None) -> float:
    """CPU seconds of the live tree under ``root`` (this process by default)."""
    todo = [os.getpid() if root is None else root]
    total = 0.0
    while todo:
        pid = todo.pop()
        total += _cpu(pid)
        todo.extend(_children(pid))
    return total


class Profile:
    """The per-test writer (a pytest plugin object, registered by ``conftest.py``)."""

    def __init__(self, prefix: str) -> None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        # a subprocess's own children (the JVM of a Spark script the test runs) are
        # reparented here, not to init, when it exits before them: their CPU stays in the
        # tree (as zombies nobody reaps until the run ends, whose times /proc still shows)
        if sys.platform.startswith("linux"):
            import ctypes

            ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.out = Path(f"{prefix}.{worker}.tsv")

    def start(self) -> tuple[float, float]:
        return time.monotonic(), tree_cpu()

    def stop(self, nodeid: str, began: tuple[float, float]) -> None:
        wall, cpu = time.monotonic() - began[0], tree_cpu() - began[1]
        with self.out.open("a") as f:
            f.write(f"{nodeid}\t{wall:.3f}\t{cpu:.3f}\n")


def summarize(prefix: str) -> str:
    """Per test directory: tests, summed wall and CPU seconds (all workers' files)."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    folder = Path(prefix).parent
    for path in sorted(folder.glob(Path(prefix).name + ".*.tsv")):
        for line in path.read_text().splitlines():
            nodeid, wall, cpu = line.split("\t")
            parts = nodeid.split("/")
            key = "/".join(parts[:2]) if len(parts) > 2 else parts[0].split("::")[0]
            row = sums[key]
            row[0] += 1
            row[1] += float(wall)
            row[2] += float(cpu)
    lines = [f"{'directory':<24}{'tests':>7}{'wall s':>10}{'cpu s':>10}"]
    total = [0, 0.0, 0.0]
    for key, (n, wall, cpu) in sorted(sums.items(), key=lambda kv: -kv[1][2]):
        lines.append(f"{key:<24}{int(n):>7}{wall:>10.1f}{cpu:>10.1f}")
        total = [total[0] + n, total[1] + wall, total[2] + cpu]
    lines.append(f"{'total':<24}{int(total[0]):>7}{total[1]:>10.1f}{total[2]:>10.1f}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarize(sys.argv[1]))
