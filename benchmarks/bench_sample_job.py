"""Wall time, CPU time and Spark jobs of the sample job (issue 53).

Each round runs, in a fresh copy of ``jobs/`` (beside links to ``data/`` and ``schemas/``),
the command the docs print, through the job CLI with ``-v -v`` (stage timings at DEBUG):

  pandas  ``run jobs/sample_employees.toml`` on a fresh ``out/`` (first run), then again
          (re-run: re-publishes, charges nothing)
  spark   ``run jobs/sample_employees.toml --engine spark`` on a fresh ``out/`` (its own
          ledger; the Spark session's start-up is the stage ``engine``)

Wall time is the command's, CPU time the user + system time of the processes it ran and
reaped (the Python driver; for Spark add the JVM's, read from ``/proc`` before it exits:
see ``--spark-jobs``). The 1-minute load average is printed before each command: other
processes share the cores, so compare rounds run side by side.

``--spark-jobs`` runs the Spark job once in this process instead and counts the Spark jobs
of each stage with the status tracker (a first run on a fresh ledger, then a re-run).

``--code DIR`` runs another checkout's ``hdp_spark`` (e.g. ``git archive <commit> | tar -x
-C DIR``) with this interpreter, for before/after runs side by side.

Run: .venv/bin/python benchmarks/bench_sample_job.py --engine spark --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
JOB = "jobs/sample_employees.toml"
_STAGE = re.compile(r"stage (\S+) done in ([0-9.]+) s")


def _checkout(tmp: Path) -> None:
    (tmp / "jobs").mkdir(parents=True)
    shutil.copy(ROOT / JOB, tmp / JOB)
    (tmp / "data").symlink_to(ROOT / "data")
    (tmp / "schemas").symlink_to(ROOT / "schemas")


def _env(code: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    return env


def timed(args: list[str], cwd: Path, code: Path | None) -> dict[str, Any]:
    """One CLI command: wall and CPU time, load before it, its stage timings."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hdp_spark.jobs", *args, "-v", "-v"],
                          cwd=cwd, env=_env(code), capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{args}: exit code {proc.returncode}\n{proc.stderr[-3000:]}")
    stages: dict[str, float] = {}
    for name, took in _STAGE.findall(proc.stderr):
        stages[name] = stages.get(name, 0.0) + float(took)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "load": load, "stages": stages}


def _round(engine: str, code: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="sample-job-") as name:
        tmp = Path(name)
        _checkout(tmp)
        if engine == "pandas":
            return {"first": timed(["run", JOB], tmp, code),
                    "rerun": timed(["run", JOB], tmp, code)}
        return {"first": timed(["run", JOB, "--engine", "spark"], tmp, code)}


def _stages(stages: dict[str, float]) -> str:
    keep = ("engine", "load", "validate", "report")
    parts = [f"{k} {stages[k]:.2f}" for k in keep if k in stages]
    releases = sum(v for k, v in stages.items() if k.startswith("release:"))
    return ", ".join([*parts[:3], f"releases {releases:.2f}", *parts[3:]])


@contextmanager
def _in(tmp: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(tmp)
    try:
        yield
    finally:
        os.chdir(old)


def _cpu_of(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` (and its reaped children), from /proc."""
    if pid is None:
        return float("nan")
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    ticks = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def spark_jobs() -> dict[str, Any]:
    """The Spark job on a fresh ledger, then again, in this process: Spark jobs per stage
    (status tracker), wall time per stage, and the JVM's CPU time."""
    from pyspark.sql import SparkSession

    import hdp_spark.jobs.release_run as release_run
    from hdp_spark.jobs import run_job

    t0 = time.perf_counter()
    spark = (SparkSession.builder.appName("hdp_spark-jobs")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    session = time.perf_counter() - t0
    tracker = spark.sparkContext.statusTracker()
    try:
        gateway: Any = spark.sparkContext._gateway
        jvm: int | None = int(gateway.proc.pid)
    except Exception:  # no local JVM child: not measured
        jvm = None
    out: dict[str, Any] = {"session_s": session, "runs": [], "jvm_cpu_at_start": _cpu_of(jvm)}

    def jobs() -> int:
        return len(tracker.getJobIdsForGroup(None))

    seen: list[tuple[str, float, int]] = []
    stage = release_run.Timer.stage

    @contextmanager
    def counted(self: Any, name: str, *, shown: str | None = None) -> Iterator[None]:
        j0, s0 = jobs(), time.perf_counter()
        with stage(self, name, shown=shown):
            yield
        seen.append((name, time.perf_counter() - s0, jobs() - j0))

    release_run.Timer.stage = counted  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory(prefix="sample-job-") as name:
        tmp = Path(name)
        _checkout(tmp)
        with _in(tmp):
            for _ in range(2):
                seen.clear()
                j0, w0, c0, p0 = jobs(), time.perf_counter(), _cpu_of(jvm), time.process_time()
                run_job(JOB, engine="spark", spark=spark)
                out["runs"].append({"wall": time.perf_counter() - w0, "jobs": jobs() - j0,
                                    "jvm_cpu": _cpu_of(jvm) - c0,
                                    "python_cpu": time.process_time() - p0,
                                    "load": os.getloadavg()[0],
                                    "stages": [list(s) for s in seen]})
    release_run.Timer.stage = stage  # type: ignore[method-assign]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=("pandas", "spark"), default="pandas")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--code", type=Path, help="run this checkout's hdp_spark")
    parser.add_argument("--spark-jobs", action="store_true",
                        help="count the Spark jobs per stage (in this process)")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args()
    if args.spark_jobs:
        if args.code is not None:
            sys.path.insert(0, str(args.code))
        result: Any = spark_jobs()
        for i, run in enumerate(result["runs"]):
            print(f"{('first run', 're-run')[i]}: {run['wall']:.2f} s, {run['jobs']} Spark "
                  f"jobs, CPU {run['python_cpu']:.2f} s Python + {run['jvm_cpu']:.2f} s JVM, "
                  f"load {run['load']:.1f} after (session start {result['session_s']:.2f} s, "
                  f"JVM CPU {result['jvm_cpu_at_start']:.2f} s, before the run)")
            for name, took, n in run["stages"]:
                if ":" not in name or name.startswith("release:"):
                    print(f"  {name:28s} {took:6.2f} s {n:3d} jobs")
    else:
        result = []
        for i in range(args.rounds):
            r = _round(args.engine, args.code)
            result.append(r)
            for which, m in r.items():
                print(f"round {i + 1} {which}: {m['wall']:.2f} s wall, {m['cpu']:.2f} s CPU, "
                      f"load {m['load']:.1f}; {_stages(m['stages'])}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
