"""Every code block of README.md and docs/*.md runs alone, as a reader copies it: each
```python block by itself (never concatenated with another) in a fresh
``.venv/bin/python`` process started from the repository root, in a newcomer's
environment (nothing the suite sets, the venv not activated), on the bundled data, and
prints a result that fits an 80-column terminal, with no warning and no traceback. A
block that is not Python to run (shell commands, a job file, a schema, expected output, a
deliberately partial line) is marked in the page by an HTML comment just before it,
``<!-- not run: <reason> -->``; every block is either run or marked with a reason (issue
53).

pandas blocks are one test each; Spark blocks share one test (each still its own process,
~10-60 s each with the JVM's start-up, so they are marked slow)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from reader_env import newcomer_env, without_daemon_race

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```\s*$", flags=re.DOTALL | re.M)
_MARK = re.compile(r"<!-- not run: (?P<reason>[^>]*?) -->\s*$")
WIDTH = 80
SPARK_PROCESSES = 2
"""Spark blocks run this many at a time, each still alone in its own fresh process."""
SPARK_BUDGET_S = 900.0
"""All Spark blocks together, one process each, on a loaded 2-core machine (measured: 7
blocks in ~3-6 minutes)."""


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    body: str
    reason: str | None  # the marker's reason, or None: the block is run

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def spark(self) -> bool:
        """Whether the block's code (not its comments) uses Spark."""
        code = "\n".join(line.split("#", 1)[0] for line in self.body.splitlines())
        return "pyspark" in code or "hdp_spark.spark" in code


def blocks() -> list[Block]:
    out = []
    for page in PAGES:
        text = page.read_text()
        for m in _BLOCK.finditer(text):
            before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            mark = _MARK.search(before)
            out.append(Block(str(page.relative_to(ROOT)), text[:m.start()].count("\n") + 1,
                             m["lang"], m["body"], mark["reason"].strip() if mark else None))
    return out


def _python() -> str:
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def _env() -> dict[str, str]:
    """A newcomer's environment: nothing the test suite sets for itself, the venv not
    activated (``reader_env.newcomer_env``), an 80-column terminal."""
    env = newcomer_env()
    env["COLUMNS"] = str(WIDTH)
    return env


def _run(block: Block, tmp_path: Path) -> str:
    """Run the block alone in a fresh process; return its stdout (asserting it succeeded
    and printed a result that fits the terminal)."""
    script = tmp_path / f"block_{block.line}.py"
    script.write_text(block.body)
    proc = subprocess.run([_python(), str(script)], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, f"{block.id} failed alone:\n{proc.stderr[-3000:]}"
    # no warning on a correct set-up, and no traceback (PySpark's own daemon race aside)
    assert "UserWarning" not in proc.stderr, f"{block.id} warns:\n{proc.stderr[-3000:]}"
    assert "Traceback" not in without_daemon_race(proc.stderr), (
        f"{block.id} prints a traceback:\n{proc.stderr[-3000:]}")
    out = proc.stdout
    assert out.strip(), f"{block.id} prints nothing"
    if _by_dept(block):  # the README's grouped releases show every public department
        missing = [d for d in DEPTS if d not in out]
        assert not missing, f"{block.id} shows no row for {missing}:\n{out}"
    wide = [ln for ln in out.splitlines() if len(ln) > WIDTH]
    assert not wide, f"{block.id} prints lines wider than {WIDTH} columns:\n" + "\n".join(wide)
    # pandas drops middle columns of a wide frame as "..." (the estimate among them)
    assert not re.search(r"\s\.\.\.\s", out), f"{block.id} prints an elided frame:\n{out}"
    return out


DEPTS = ("engineering", "finance", "operations", "research", "sales")
"""The bundled sample's departments (public keys of the README's grouped releases)."""


def _by_dept(block: Block) -> bool:
    """A README block that releases per department over the public keys (the quickstart's
    release and its Columns with ``keys="public"``)."""
    return block.page == "README.md" and (
        'by="dept", keys=' in block.body
        or ('groupBy("dept")' in block.body and 'keys="public"' in block.body))


def _ids(items: list[Block]) -> list[str]:
    return [b.id for b in items]


RUN = [b for b in blocks() if b.reason is None and b.lang == "python"]
PANDAS = [b for b in RUN if not b.spark]
SPARK = [b for b in RUN if b.spark]


def test_every_block_is_run_or_marked_with_a_reason() -> None:
    found = blocks()
    assert len(found) >= 35  # the pages' blocks were found (not vacuous)
    for block in found:
        if block.reason is None:
            assert block.lang == "python", (
                f"{block.id}: a ```{block.lang or '(plain)'} block must be marked "
                "<!-- not run: <reason> --> (only Python blocks run)")
        else:
            assert len(block.reason) >= 10, f"{block.id}: give the marker a reason"
    assert len(PANDAS) >= 10
    assert len(SPARK) >= 4


def test_a_marker_is_only_a_marker_before_a_block() -> None:
    """A marker the parser would not see (blank line or prose between it and the block)
    is an error, not a silently run block."""
    for page in PAGES:
        text = page.read_text()
        for m in re.finditer(r"<!-- not run: [^>]*-->", text):
            after = text[m.end():].lstrip(" ")
            assert after.startswith("\n```"), f"{page.name}: marker not right before a block"


@pytest.mark.parametrize("block", PANDAS, ids=_ids(PANDAS))
def test_pandas_block_runs_alone(block: Block, tmp_path: Path) -> None:
    _run(block, tmp_path)


@pytest.mark.spark
@pytest.mark.slow
def test_spark_blocks_run_alone(tmp_path: Path) -> None:
    """Each Spark block in its own fresh process (a Spark session each), two processes at
    a time, all within the budget."""
    t0 = time.perf_counter()

    def run(block: Block) -> str | None:
        try:
            _run(block, tmp_path)
        except AssertionError as exc:
            return str(exc)
        return None

    # the processes are independent (each its own Spark): two at a time
    with ThreadPoolExecutor(SPARK_PROCESSES) as pool:
        failures = [f for f in pool.map(run, SPARK) if f is not None]
    took = time.perf_counter() - t0
    assert not failures, "\n\n".join(failures)
    assert took < SPARK_BUDGET_S, f"{len(SPARK)} Spark blocks took {took:.0f} s"
