"""The README's scheduled-job quickstart: its commands are the job CLI on a bundled job file,
and `plan` runs as printed on a fresh checkout (nothing charged, no ledger written). The
`run` command itself is run by tests/jobs/test_report_cli.py."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from reader_env import reader_env

ROOT = Path(__file__).resolve().parents[2]
PREFIX = ".venv/bin/python -m hdp_spark.jobs "


def _commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("### A scheduled job with a privacy ledger", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)
    return [ln.split("#", 1)[0].strip() for ln in block.splitlines() if ln.strip()]


def test_commands_are_the_job_cli_on_a_bundled_job() -> None:
    commands = _commands()
    assert [c.split()[3] for c in commands] == ["plan", "run"]
    for command in commands:
        assert command.startswith(PREFIX), command
        assert (ROOT / command.split()[4]).is_file()


def test_plan_runs_as_printed_on_a_fresh_checkout(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    shutil.copy(ROOT / "jobs" / "sample_employees.toml", tmp_path / "jobs")
    (tmp_path / "data").symlink_to(ROOT / "data")
    (tmp_path / "schemas").symlink_to(ROOT / "schemas")
    plan = _commands()[0].removeprefix(".venv/bin/python").split()
    proc = subprocess.run([sys.executable, *plan], cwd=tmp_path, env=reader_env(),
                          capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "nothing is charged" in proc.stdout
    assert not (tmp_path / "out" / "ledger").exists()
