"""The test run's shared Spark servers for jobs that cannot run in the test process: one
Spark Connect server (configured), one Connect server without the extension, one
``local-cluster[2,1,1024]`` (two executor JVMs, each with its own Python workers). Each is
one ``tests/job_server.py`` process, started the first time a test needs it and stopped at
the end of the run; each job runs in a new session of it (own SQL conf, temporary views and
functions), so jobs stay isolated while the JVMs start once (issue 53: a Spark start-up per
module cost 30-80 s each)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

import pytest
from job_server import MARK

SERVER = Path(__file__).with_name("job_server.py")
TESTS = Path(__file__).parent
CLUSTER = "local-cluster[2,1,1024]"


class JobServer:
    """One ``job_server.py`` process for one mode, started lazily by :meth:`run`."""

    def __init__(self, mode: str, timeout: float = 900.0) -> None:
        self.mode = mode
        self.timeout = timeout
        self._proc: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None
        self._lock = threading.Lock()

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("SPARK_REMOTE", None)
        env["PYSPARK_PYTHON"] = sys.executable
        # the executors' Python workers import a job's module-level functions by name
        folders = [str(TESTS), *(str(p) for p in sorted(TESTS.iterdir()) if p.is_dir())]
        env["PYTHONPATH"] = os.pathsep.join([*folders, env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep)
        return env

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        self._log.flush()
        return Path(self._log.name).read_text(errors="replace")[-3000:]

    def _answer(self) -> dict[str, Any]:
        assert self._proc is not None
        assert self._proc.stdout is not None
        result: list[str] = []

        def read() -> None:
            assert self._proc is not None
            assert self._proc.stdout is not None
            for line in self._proc.stdout:
                if line.startswith(MARK):
                    result.append(line[len(MARK):])
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(self.timeout)
        if not result:
            self.close()
            pytest.fail(f"the {self.mode} job server gave no answer:\n{self._log_tail()}")
        answer: dict[str, Any] = json.loads(result[0])
        return answer

    def _start(self) -> None:
        self._log = tempfile.NamedTemporaryFile(
            "w+", prefix=f"hdp-job-server-{self.mode.split('[')[0]}-", suffix=".log")
        self._proc = subprocess.Popen(
            [sys.executable, str(SERVER), self.mode], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, text=True, env=self._env())
        assert self._answer() == {"ok": "ready"}

    def run(self, job: Path, *args: Any, func: str = "run",
            conf: dict[str, str] | None = None) -> Any:
        """``func(session, *args)`` of the module at ``job``, in a new session of this
        server; the job's JSON-able result, or the test fails with the job's traceback."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            assert self._proc is not None
            assert self._proc.stdin is not None
            request = {"job": str(job), "func": func, "args": list(args), "conf": conf or {}}
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            answer = self._answer()
        if "error" in answer:
            pytest.fail(f"{job.name}:{func} failed on the {self.mode} server:\n"
                        f"{answer['error'][-3000:]}")
        return answer["ok"]

    def close(self) -> None:
        """Stop the server (its Spark stops when its stdin closes)."""
        if self._proc is not None:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.terminate()  # its JVM exits when the Python side is gone
                try:
                    self._proc.wait(10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
