"""A smoke host: runs benchmark scripts one after another in this one process, sharing one
Spark session, for ``benchmarks/run.py --smoke --in-process`` (the test suite's smoke).

A smoke run only checks that every script runs at tiny sizes and prints finite figures; its
timings are not figures. Started as a subprocess per script, each Spark benchmark paid a JVM
start, Spark's first-query warm-up and the imports again (issue 53: ~15-30 s each of a
113 s smoke test). Here they are paid once per host.

Protocol (one JSON object per line): run.py writes ``{"argv": [script, args...], "log":
path}`` to the host's stdin; the host runs the script as ``__main__`` with that ``sys.argv``,
its stdout and stderr (file descriptors 1 and 2) sent to the log, and answers ``{"exit":
code}`` on the reply channel (its original stdout). A script's ``SparkSession.stop()`` is a
no-op here, so the next script's ``getOrCreate()`` gets the same session; the session is
built up front with the extension (``hdp_spark.spark.configure``), as the Column benchmarks
build theirs. Static settings a script asks for (driver memory) are the host's, which does
not matter at smoke sizes. Full (timed) runs never use a host: each script keeps its own
process, session and honest peak RSS.
"""

from __future__ import annotations

import json
import os
import runpy
import select
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent


def _session() -> Any:
    from pyspark.sql import SparkSession

    import hdp_spark.spark as hs

    session = (
        hs.configure(SparkSession.builder.master("local[2]"))
        .appName("hdp_spark-bench-smoke")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "3g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def run_script(argv: list[str], log: Path) -> int:
    """Run ``argv[0]`` as ``__main__`` with ``sys.argv = argv``, output into ``log``."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    saved_argv, saved_path = sys.argv, list(sys.path)
    saved_streams = sys.stdout, sys.stderr
    with log.open("w", buffering=1) as out:
        # the descriptors for what child processes (Spark's) write, the streams for Python
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        sys.stdout = sys.stderr = out
        try:
            sys.argv = list(argv)
            sys.path.insert(0, str(Path(argv[0]).resolve().parent))
            runpy.run_path(argv[0], run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc)
        except BaseException:  # the script's failure is its exit code
            traceback.print_exc()
            code = 1
        finally:
            out.flush()
            sys.stdout, sys.stderr = saved_streams
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sys.argv, sys.path[:] = saved_argv, saved_path
    return code


class Host:
    """run.py's side: one host process, started on first use and again after a timeout."""

    def __init__(self, python: str, env: dict[str, str], log: Path) -> None:
        self.python, self.env, self.log = python, env, log
        self.proc: subprocess.Popen[str] | None = None

    def run(self, argv: list[str], log: Path, timeout: float) -> int | None:
        """The script's exit code, or None if it timed out (the host is then stopped)."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [self.python, str(Path(__file__).resolve()), str(self.log)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                cwd=BENCH_DIR.parent, env=self.env)
        proc = self.proc
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(json.dumps({"argv": argv, "log": str(log)}) + "\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            self.close(kill=True)
            return None
        line = proc.stdout.readline()
        if not line:  # the host died with the script
            code = proc.wait()
            self.proc = None
            with log.open("a") as out:
                out.write(f"\n[smoke host] exited with code {code}; its log: {self.log}\n")
            return code or 1
        return int(json.loads(line)["exit"])

    def close(self, kill: bool = False) -> None:
        """Stop the host (its Spark session with it)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if kill:
            proc.kill()
        else:
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    # replies go to the original stdout; everything else (this process's prints and the
    # JVM's output, which inherits descriptors 1 and 2) goes to the host log (argv[1])
    reply = os.fdopen(os.dup(1), "w", buffering=1)
    with open(sys.argv[1], "a") as host_log:
        os.dup2(host_log.fileno(), 1)
        os.dup2(host_log.fileno(), 2)
    from pyspark.sql import SparkSession

    session = _session()
    stop = SparkSession.stop
    SparkSession.stop = lambda self: None  # type: ignore[method-assign]
    try:
        for line in sys.stdin:
            request = json.loads(line)
            code = run_script(request["argv"], Path(request["log"]))
            reply.write(json.dumps({"exit": code}) + "\n")
    finally:
        stop(session)


if __name__ == "__main__":
    main()
