"""Shared helpers of the benchmarks: a local Spark session, interleaved timing, the report
protocol that ``benchmarks/run.py`` reads, and process-memory probes.

Report protocol: a benchmark called with ``--json PATH`` writes
``{"name", "figures", "markdown", "plots", "meta"}`` there. ``figures`` holds every number
(nested dicts/lists of numbers, strings, booleans); the runner's smoke mode checks that each
number is finite (``None`` marks a figure that was deliberately not measured).
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
PLOTS_DIR = BENCH_DIR / "plots"


def use_repo() -> None:
    """Make ``hdp_spark`` (work tree) and the benchmark helpers importable, also from the
    anchor venvs, whose interpreter is not the project's."""
    for p in (str(REPO_ROOT), str(BENCH_DIR)):
        if p not in sys.path:
            sys.path.insert(0, p)


def spark_session(memory: str = "8g", conf: dict[str, str] | None = None,
                  extension: bool = False) -> Any:
    """A local[2] session sized for 10M cached rows (``conf``: extra settings;
    ``extension``: built with hdp_spark's JVM extension, ``hs.configure``).

    The Python workers use this interpreter (``PYSPARK_PYTHON``), which matters when a
    benchmark runs from an anchor venv with another Python version than the default.
    """
    from pyspark.sql import SparkSession

    # forced, not defaulted: an inherited PYSPARK_PYTHON of another venv makes the workers
    # fail with PYTHON_VERSION_MISMATCH (or silently use other package versions)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("hdp_spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", memory)
        .config("spark.sql.shuffle.partitions", "2")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    if extension:
        import hdp_spark.spark as hs

        builder = hs.configure(builder)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def uniform(seed: int) -> Any:
    """A uniform [0, 1) Spark column from the row's ``id`` (``spark.range``): deterministic,
    unlike ``F.rand``, which the Column aggregators refuse below them (it can change the
    rows between two evaluations of one query)."""
    from pyspark.sql import functions as F

    bits = 1 << 40
    return (F.pmod(F.xxhash64(F.col("id"), F.lit(seed)), F.lit(bits)).cast("double")
            / float(bits))


def interleaved(
    cases: dict[str, Callable[[], object]], repeats: int = 5, warmup: int = 1
) -> dict[str, float]:
    """Median wall time of each case, running the cases in turn (A, B, A, B, ...)."""
    return {
        name: statistics.median(ts)
        for name, ts in interleaved_runs(cases, repeats, warmup)[0].items()
    }


def interleaved_runs(
    cases: dict[str, Callable[[], object]], repeats: int = 5, warmup: int = 1,
    keep_values: bool = True,
) -> tuple[dict[str, list[float]], dict[str, list[object]]]:
    """Every wall time and every return value of each case, cases run in turn.

    Warm-up rounds are timed but dropped (their values are dropped too). With
    ``keep_values=False`` no return value is kept (large collected results would otherwise
    stay alive and slow the later rounds' garbage collection).
    """
    for _ in range(warmup):
        for fn in cases.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    values: dict[str, list[object]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            start = time.perf_counter()
            out = fn()
            times[name].append(time.perf_counter() - start)
            if keep_values:
                values[name].append(out)
    return times, values


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def quartiles(xs: Sequence[float]) -> list[float]:
    """[p25, median, p75] of ``xs`` (inclusive method; one value: itself three times)."""
    if len(xs) == 1:
        return [float(xs[0])] * 3
    return [float(q) for q in statistics.quantiles(xs, n=4, method="inclusive")]


def load_average() -> list[float]:
    """1, 5 and 15 minute load averages of the machine."""
    return [round(x, 2) for x in os.getloadavg()]


def driver_peak_rss_mib() -> float:
    """Peak resident memory of this (Python driver) process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _proc_status_kib(pid: int, field: str) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1])
    except OSError:
        return None
    return None


def jvm_pid(spark: Any) -> int | None:
    """Process id of the local Spark JVM (classic PySpark launches it as a child)."""
    try:
        return int(spark.sparkContext._gateway.proc.pid)
    except Exception:  # Spark Connect or an unexpected layout: not measured
        return None


def jvm_peak_rss_mib(spark: Any) -> float | None:
    """Peak resident memory (VmHWM) of the local Spark JVM so far, in MiB."""
    pid = jvm_pid(spark)
    if pid is None:
        return None
    kib = _proc_status_kib(pid, "VmHWM")
    return None if kib is None else kib / 1024.0


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
    }
    try:
        import pyspark

        info["pyspark"] = pyspark.__version__
    except ImportError:
        pass
    try:
        mem = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
        info["memory_gib"] = round(int(mem) / 2**20, 1)
    except OSError:
        pass
    return info


def non_finite(obj: Any, path: str = "") -> list[str]:
    """Paths of the numbers in ``obj`` that are NaN or infinite (``None`` is allowed)."""
    bad: list[str] = []
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return bad
    if isinstance(obj, int | float):
        if not math.isfinite(obj):
            bad.append(path or "<root>")
        return bad
    if isinstance(obj, dict):
        for k, v in obj.items():
            bad += non_finite(v, f"{path}.{k}" if path else str(k))
        return bad
    if isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            bad += non_finite(v, f"{path}[{i}]")
        return bad
    bad.append(f"{path} (unexpected type {type(obj).__name__})")
    return bad


def count_numbers(obj: Any) -> int:
    """How many numeric figures ``obj`` holds."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return 0
    if isinstance(obj, int | float):
        return 1
    if isinstance(obj, dict):
        return sum(count_numbers(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(count_numbers(v) for v in obj)
    return 0


def write_report(
    path: Path | None,
    *,
    name: str,
    figures: dict[str, Any],
    markdown: str,
    plots: Iterable[Path] = (),
    meta: dict[str, Any] | None = None,
) -> None:
    """Write the report protocol file (and always print the markdown)."""
    print(markdown)
    if path is None:
        return
    payload = {
        "name": name,
        "figures": figures,
        "markdown": markdown,
        "plots": [str(p) for p in plots],
        "meta": {"machine": machine(), "load_end": load_average(), **(meta or {})},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=_json_default))


def _json_default(obj: Any) -> Any:
    try:
        import numpy as np

        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:
        pass
    return str(obj)


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub markdown table; floats printed with 4 significant digits."""

    def cell(x: Any) -> str:
        if isinstance(x, bool) or x is None:
            return "—" if x is None else str(x)
        if isinstance(x, float):
            return fmt(x)
        return str(x)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def fmt(x: float, digits: int = 4) -> str:
    """Compact number: 4 significant digits, scientific for very small or large values."""
    if x is None:
        return "—"
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    ax = abs(x)
    if ax >= 1e5 or ax < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def plots_dir(arg: Path | None) -> Path:
    """Where PNGs go (created)."""
    out = arg or PLOTS_DIR
    out.mkdir(parents=True, exist_ok=True)
    return out


def pyplot() -> Any:
    """matplotlib's pyplot on the non-interactive Agg backend, or None if not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def add_report_args(parser: Any) -> None:
    """The flags every benchmark of the runner accepts."""
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    parser.add_argument("--plots", type=Path, default=None, help="PNG directory")
