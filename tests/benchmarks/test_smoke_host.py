"""The smoke host (``benchmarks/smoke_host.py``) runs a script as ``__main__`` in its own
process and reports the script's exit code: success, ``sys.exit(n)``, ``sys.exit("text")``
and an exception each give the code the script would have exited with as a process, its
output goes to the script's log, and the host's ``sys.argv`` and ``sys.path`` come back."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import run as bench_run  # noqa: E402 - benchmarks/run.py
from smoke_host import run_script  # noqa: E402 - benchmarks/ is not a package


@pytest.mark.parametrize(("body", "code", "printed"), [
    ("import sys\nprint('argv', sys.argv[1:])\n", 0, "argv ['--smoke']"),
    ("import sys\nprint('before')\nsys.exit(3)\n", 3, "before"),
    ("import sys\nsys.exit('the script gave up')\n", 1, "the script gave up"),
    ("raise ValueError('broken benchmark')\n", 1, "ValueError: broken benchmark"),
    ("if __name__ == '__main__':\n    print('as main')\n", 0, "as main"),
])
def test_a_script_runs_as_main_with_its_exit_code(tmp_path: Path, body: str, code: int,
                                                   printed: str) -> None:
    script = tmp_path / "bench_x.py"
    script.write_text(body)
    log = tmp_path / "bench_x.log"
    argv, path = list(sys.argv), list(sys.path)
    assert run_script([str(script), "--smoke"], log) == code
    assert printed in log.read_text()
    assert sys.argv == argv
    assert sys.path == path


def test_in_process_needs_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        bench_run.main(["--in-process", "--only", "solvers"])
    assert exc.value.code == 2
    assert "--in-process needs --smoke" in capsys.readouterr().err
