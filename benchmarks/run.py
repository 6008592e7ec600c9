"""Run the benchmarks and write their figures into benchmarks/log/runs.md.

Every benchmark is a script run as a subprocess with its own CLI (so each has its own Spark
session and an honest peak RSS). The registry below names them; scripts matching
``benchmarks/bench_*.py`` or ``benchmarks/repro_*.py`` that it does not name are discovered
and run as "external" entries with their own CLI (no arguments; ``--smoke`` only if the
script declares it), and the per-aggregator notebooks in ``benchmarks/log/`` are linked
from the "Other aggregators" section.

The runner never edits ``benchmarks/RESULTS.md``: that page is the hand-curated summary for
users, which quotes the figures recorded in ``benchmarks/log/``.

Modes:
  (default)   full sizes; each entry's section of log/runs.md is replaced, with the command,
              the load average before/after, the wall time and the raw figures.
  --smoke     tiny sizes, every entry must exit 0 and (for report-protocol entries) produce
              at least one figure, all finite. Speed targets are never asserted. Writes to a
              temporary directory, not log/runs.md (unless --results is given).
  --only A,B  run only these entries (names from --list).
  --jobs N    (smoke only) run N entries at once: they only have to run, not be timed.
  --in-process  (smoke only) run the main venv's scripts in --jobs long-lived host
              processes (``smoke_host.py``), one after another in each, sharing one Spark
              session per host instead of a JVM start per script (the test suite's smoke).

Anchor entries need the benchmark venvs (``bash benchmarks/setup_anchors.sh``); without
them they are skipped, and the skip is reported, never a failure.

Examples:
  .venv/bin/python benchmarks/run.py --list
  .venv/bin/python benchmarks/run.py --smoke
  .venv/bin/python benchmarks/run.py --only mean,scaling
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BENCH_DIR, REPO_ROOT, count_numbers, load_average, machine, non_finite
from registry import REGISTRY, Entry, discover
from smoke_host import Host

LOG_DIR = BENCH_DIR / "log"
RESULTS = LOG_DIR / "runs.md"
VENVS = {
    "main": None,  # the interpreter running this script
    "anchors": BENCH_DIR / ".venv-anchors" / "bin" / "python",
    "tmlt": BENCH_DIR / ".venv-tmlt" / "bin" / "python",
}


def interpreter(entry: Entry) -> Path | None:
    if entry.venv == "main":
        return Path(sys.executable)
    path = VENVS[entry.venv]
    return path if path is not None and path.exists() else None


@dataclass
class Outcome:
    entry: Entry
    status: str  # ok | failed | skipped
    reason: str = ""
    runs: list[dict[str, Any]] = field(default_factory=list)


def run_entry(
    entry: Entry,
    smoke: bool,
    out_dir: Path,
    plots: Path,
    timeout: float | None,
    host: Host | None = None,
) -> Outcome:
    """Run the entry's scripts (``host``: in that smoke host, if the entry runs on the main
    venv; else one subprocess each)."""
    py = interpreter(entry)
    if py is None:
        return Outcome(
            entry,
            "skipped",
            f"venv `benchmarks/.venv-{entry.venv}` missing "
            "(create it with `bash benchmarks/setup_anchors.sh`)",
        )
    arg_sets = entry.smoke if smoke else entry.runs
    if arg_sets is None:
        return Outcome(entry, "skipped", "the script declares no --smoke mode")
    outcome = Outcome(entry, "ok")
    for i, extra in enumerate(arg_sets):
        json_path = out_dir / f"{entry.name}-{i}.json"
        cmd = [str(py), str(BENCH_DIR / entry.script), *extra]
        if smoke:
            cmd.append("--smoke")
        shown = " ".join(shlex.quote(_rel(c)) for c in cmd)  # the runner adds --json/--plots
        if entry.protocol:
            cmd += ["--json", str(json_path), "--plots", str(plots)]
        env = entry_env(py)
        log_path = out_dir / f"{entry.name}-{i}.log"
        print(f"[run.py] {entry.name}: {shown}", flush=True)
        load_before = load_average()
        started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        commit = _git_commit()
        start = time.perf_counter()
        limit = timeout if timeout is not None else entry.timeout
        if host is not None and entry.venv == "main":
            code = host.run(cmd[1:], log_path, limit)
        else:
            code = _subprocess(cmd, env, log_path, limit)
        wall = time.perf_counter() - start
        run: dict[str, Any] = {
            "started": started,
            "commit": commit,
            "command": shown,
            "wall_s": round(wall, 1),
            "load_before": load_before,
            "load_after": load_average(),
            "log": str(log_path),
            "exit": code,
        }
        outcome.runs.append(run)
        if code != 0:
            tail = log_path.read_text(errors="replace").splitlines()[-15:]
            outcome.status = "failed"
            outcome.reason = (
                ("timed out after " + f"{limit:.0f} s" if code is None else f"exit {code}")
                + "\n    "
                + "\n    ".join(tail)
            )
            return outcome
        if entry.protocol:
            if not json_path.exists():
                outcome.status, outcome.reason = "failed", f"no report written ({json_path.name})"
                return outcome
            report = json.loads(json_path.read_text())
            run["report"] = report
            bad = non_finite(report.get("figures"))
            numbers = count_numbers(report.get("figures"))
            if bad or numbers == 0:
                outcome.status = "failed"
                outcome.reason = (
                    f"non-finite figures: {', '.join(bad[:10])}"
                    if bad
                    else "the report holds no figure"
                )
                return outcome
            run["figures"] = numbers
        print(f"[run.py] {entry.name}: ok in {wall:.0f} s", flush=True)
    return outcome


def _subprocess(cmd: list[str], env: dict[str, str], log_path: Path, limit: float) -> int | None:
    """The script's exit code in its own process, or None if it timed out."""
    with log_path.open("w") as log:
        try:
            return subprocess.run(cmd, cwd=REPO_ROOT, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, timeout=limit, check=False
                                  ).returncode
        except subprocess.TimeoutExpired:
            return None


def entry_env(py: Path) -> dict[str, str]:
    """The environment of a benchmark script run by ``py``."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = str(py)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    return env


def _rel(text: str) -> str:
    return text.replace(str(REPO_ROOT) + os.sep, "")


# ------------------------------------------------------------------------ log/runs.md
HEADER = """# Benchmark runs (written by `benchmarks/run.py`)

Every section below is replaced by the run that produced it, with the exact command, the
load average before/after (the machine has 2 cores; a load above 2 means other work shared
them) and the raw figures. Speed figures are ratios against a native baseline measured in the
same run (medians of interleaved runs); absolute seconds are for orientation only. The
summary for users is [../RESULTS.md](../RESULTS.md); the hand-written notebook of these runs
is [2026-11-notebook.md](2026-11-notebook.md).

Re-run one section: `.venv/bin/python benchmarks/run.py --only NAME` (names: `--list`).
Anchor sections need `bash benchmarks/setup_anchors.sh` first (benchmark-only venvs).
"""


def marker(name: str, end: bool = False) -> str:
    return f"<!-- {'END' if end else 'BEGIN'} run.py:{name} -->"


def section_text(outcome: Outcome, argv: list[str]) -> str:
    e = outcome.entry
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"## {e.title}", ""]
    if e.note:
        lines += [e.note, ""]
    lines.append(
        f"Runner: `.venv/bin/python benchmarks/run.py {' '.join(argv)}` — section written {now}."
    )
    lines.append("")
    if outcome.status != "ok":
        lines += [f"**Not measured ({outcome.status})**: {outcome.reason.splitlines()[0]}", ""]
    for run in outcome.runs:
        lines.append(
            f"Command: `{run['command']}` — started {run.get('started', '?')} at commit "
            f"`{run.get('commit', '?')}` (wall {run['wall_s']} s; load average before "
            f"{run['load_before']}, after {run['load_after']})."
        )
        lines.append("")
        report = run.get("report")
        if report:
            lines += [report["markdown"].strip(), ""]
            for p in report.get("plots", []):
                rel = Path(p).name
                lines.append(f"![{rel}](../plots/{rel})")
            if report.get("plots"):
                lines.append("")
            raw = json.dumps(report.get("figures"), indent=1, default=str)
            lines += [
                "<details><summary>raw figures (JSON)</summary>",
                "",
                "```json",
                raw,
                "```",
                "",
                "</details>",
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"


def other_aggregators(outcomes: list[Outcome]) -> str:
    lines = [
        "## Other aggregators",
        "",
        "The histogram, heavy hitters, user-level mean and LDP benchmarks are run with "
        "their own commands; their figures and notes are in these files of this folder "
        "(summarised in [../RESULTS.md](../RESULTS.md)):",
        "",
    ]
    # the per-aggregator notebooks: not this file, not the dated notebooks (YYYY-MM-*.md)
    files = sorted(f for f in LOG_DIR.glob("*.md") if f != RESULTS and not f.name[0].isdigit())
    lines += [f"- [{f.name}]({f.name})" for f in files] or ["- (none yet)"]
    ran = [o for o in outcomes if o.entry.name not in {e.name for e in REGISTRY}]
    if ran:
        lines += ["", "Runner status of their scripts in this run:", ""]
        for o in ran:
            cmd = o.runs[0]["command"] if o.runs else o.entry.script
            lines.append(
                f"- `{o.entry.script}`: {o.status}"
                + (f" ({o.reason.splitlines()[0]})" if o.reason else "")
                + f" — `{cmd}`"
            )
    return "\n".join(lines) + "\n"


def update_results(
    path: Path,
    outcomes: list[Outcome],
    argv: list[str],
    entries: list[Entry],
    final: bool = True,
    sections: bool = True,
) -> None:
    text = path.read_text() if path.exists() else HEADER
    path.parent.mkdir(parents=True, exist_ok=True)
    names = [e.name for e in REGISTRY] + ["other-aggregators"]
    for name in names:  # make sure every section has its markers, in registry order
        if marker(name) not in text:
            title = next((e.title for e in REGISTRY if e.name == name), "Other aggregators")
            text = (
                text.rstrip()
                + f"\n\n{marker(name)}\n## {title}\n\n(not run yet)\n{marker(name, True)}\n"
            )
    for o in outcomes if sections else []:
        if o.entry.name not in {e.name for e in REGISTRY}:
            continue
        if (
            o.status == "skipped"
            and marker(o.entry.name) in text
            and "(not run yet)" not in _section(text, o.entry.name)
        ):
            continue  # keep the last measured figures when a venv is missing
        text = _replace(text, o.entry.name, section_text(o, argv))
    if final:
        text = _replace(text, "other-aggregators", other_aggregators(outcomes))
    path.write_text(text)


def _section(text: str, name: str) -> str:
    m = re.search(re.escape(marker(name)) + r"(.*?)" + re.escape(marker(name, True)), text, re.S)
    return m.group(1) if m else ""


def _replace(text: str, name: str, body: str) -> str:
    pattern = re.escape(marker(name)) + r".*?" + re.escape(marker(name, True))
    return re.sub(
        pattern, lambda _: f"{marker(name)}\n{body}{marker(name, True)}", text, flags=re.S
    )


def _git_commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "hdp_spark"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" + uncommitted hdp_spark changes" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 1)[1],
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes; check finite figures")
    parser.add_argument("--only", default="", help="comma-separated entry names")
    parser.add_argument("--skip", default="", help="comma-separated entry names to leave out")
    parser.add_argument(
        "--no-external",
        action="store_true",
        help="leave out the discovered scripts of other aggregators",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="smoke only: run this many entries at once (their figures are then not timings)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="smoke only: the main venv's scripts run in --jobs host processes sharing one "
        "Spark session each (smoke_host.py), not one subprocess each",
    )
    parser.add_argument("--list", action="store_true", help="list the entries and exit")
    parser.add_argument(
        "--results",
        type=Path,
        default=None,
        help="runs file to update (default: benchmarks/log/runs.md; smoke: none)",
    )
    parser.add_argument("--out", type=Path, default=None, help="logs and JSON (default: temp)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds per subprocess (default: 3 h full, 300 s smoke)",
    )
    args = parser.parse_args(raw)
    entries = discover()
    if args.list:
        for e in entries:
            py = interpreter(e)
            where = "registry" if e in REGISTRY else "external"
            print(
                f"{e.name:22s} {where:8s} venv={e.venv:8s}{'' if py else ' (missing)'} "
                f"{e.script}  smoke={'yes' if e.smoke is not None else 'no'}"
            )
        return 0
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1; got {args.jobs}")
    if args.jobs > 1 and not args.smoke:
        parser.error(f"--jobs > 1 needs --smoke (entries sharing the cores are not timed); "
                     f"got --jobs {args.jobs}")
    if args.in_process and not args.smoke:
        parser.error("--in-process needs --smoke (full runs give each script its own process)")
    only = {x for x in args.only.split(",") if x}
    unknown = only - {e.name for e in entries}
    if unknown:
        parser.error(f"unknown entries {sorted(unknown)}; see --list")
    skip = {x for x in args.skip.split(",") if x}
    chosen = [
        e
        for e in entries
        if (not only or e.name in only)
        and e.name not in skip
        and not (args.no_external and e not in REGISTRY)
    ]
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="hdp-bench-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = out_dir / "plots" if args.smoke else BENCH_DIR / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    timeout = args.timeout if args.timeout is not None else (300.0 if args.smoke else None)
    print(
        f"[run.py] {len(chosen)} entries, {'smoke' if args.smoke else 'full'} mode, logs in "
        f"{out_dir}, machine {machine()}, load {load_average()}",
        flush=True,
    )
    start = time.perf_counter()
    results = args.results if args.results is not None else (None if args.smoke else RESULTS)
    outcomes: list[Outcome] = []
    hosts: list[Host] = []
    local = threading.local()

    def smoke_entry(e: Entry) -> Outcome:
        host = None
        if args.in_process:  # one host per pool thread, started on its first script
            if not hasattr(local, "host"):
                local.host = Host(sys.executable, entry_env(Path(sys.executable)),
                                  out_dir / f"host-{len(hosts)}.log")
                hosts.append(local.host)
            host = local.host
        return run_entry(e, True, out_dir, plots, timeout, host)

    if args.jobs > 1 or args.in_process:  # smoke: the entries only have to run
        try:
            with ThreadPoolExecutor(args.jobs) as pool:
                outcomes = list(pool.map(smoke_entry, chosen))
        finally:
            for host in hosts:
                host.close()
        if results is not None:
            update_results(results, outcomes, raw, entries, final=False)
    for e in chosen if args.jobs == 1 and not args.in_process else []:
        outcomes.append(run_entry(e, args.smoke, out_dir, plots, timeout))
        if results is not None:  # after every entry, so a long run leaves finished sections
            update_results(results, outcomes[-1:], raw, entries, final=False)
    total = time.perf_counter() - start
    if results is not None:  # entry sections are written already; now the links section
        update_results(results, outcomes, raw, entries, sections=False)
        print(f"[run.py] wrote {results}")
    print(f"\n[run.py] summary ({total:.0f} s):")
    for o in outcomes:
        figures = sum(r.get("figures", 0) for r in o.runs)
        wall = sum(r["wall_s"] for r in o.runs)
        print(
            f"  {o.entry.name:22s} {o.status:8s} {wall:7.1f} s  {figures:5d} figures"
            + (f"  {o.reason}" if o.reason else "")
        )
    failed = [o for o in outcomes if o.status == "failed"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
