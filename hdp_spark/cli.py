"""Command-line interface: ``hdp-release`` / ``python -m hdp_spark.jobs``.

Commands::

    run JOB.toml [--engine pandas|spark]    validate, check budgets, compute, publish, charge
    check JOB.toml [--engine pandas|spark]  dry run: data quality and budget situation only
    plan JOB.toml [--plot PNG] [--users CSV]  predicted accuracy, charges and budget
                                            allocations; charges and writes nothing
    verify LEDGER [--backend sqlite|parquet]  check every checksum of a ledger (audit log and
                                            archived deltas included); upgrades an old ledger

Progress goes to stderr through :mod:`logging` (stage timings); the summary goes to stdout.
``check`` prints the data-quality counts (nulls, out-of-bounds values per rule) for the
operator: they are functions of private data and must not be published; ``run`` writes them
only to the data-quality report beside the ledger.
Exit codes: 0 success; 2 job file, input or schema error; 3 budget refused
(``policy = "fail"``); 4 ledger busy or conflicting; 5 engine unavailable (Spark without
Java or pyspark; nothing read or written); 6 ledger damaged: missing, empty, truncated,
corrupt, or older than the outputs citing it (nothing computed or charged; restore it from a
backup); 7 storage failure: ledger or output directory read-only or full (one line names the
path and the cause); 1 any other hdp_spark error.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from hdp_spark.errors import (
    BudgetExceededError,
    EngineUnavailableError,
    HdpError,
    JobError,
    LedgerDamagedError,
    LedgerError,
    ParameterError,
    SchemaError,
    StorageError,
)

__all__ = ["main"]


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Run heterogeneous-DP release jobs with a privacy ledger."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("run", "run a job: validate, check budgets, compute, publish, charge the ledger"),
        ("check", "dry run: validate the input and show each release's budget situation"),
    ):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("job", help="the TOML job file")
        p.add_argument("--engine", choices=("pandas", "spark"), help="override the job's engine")
        p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
        p.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    text = ("predict every release's accuracy and each user's charge under each budget "
            "allocation, from the public columns only; charges nothing, writes nothing to "
            "the ledger")
    p = sub.add_parser("plan", help=text, description=text)
    p.add_argument("job", help="the TOML job file")
    p.add_argument("--engine", choices=("pandas", "spark"), help="override the job's engine")
    p.add_argument("--plot", metavar="PNG", help="where to write the plot of predicted "
                   "interval widths (default: plan-<job name>.png in the current directory)")
    p.add_argument("--no-plot", action="store_true", help="do not write the plot")
    p.add_argument("--users", metavar="CSV", help="also write the per-user table (user id, "
                   "budget before, charge per release, budget after): for the operator only")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    text = ("check everything a ledger keeps, in one pass: every file's and value set's "
            "checksum, the audit log and archived deltas included (exit code 6 if damaged); "
            "a ledger of an older format is upgraded (sealed) first")
    p = sub.add_parser("verify", help=text, description=text)
    p.add_argument("ledger", help="the ledger: a SQLite file or a parquet directory")
    p.add_argument("--backend", choices=("sqlite", "parquet"),
                   help="default: parquet for a directory, sqlite otherwise")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    return parser


def _logging(verbose: bool, quiet: bool) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)


def _exit_code(exc: HdpError) -> int:
    if isinstance(exc, BudgetExceededError):
        return 3
    if isinstance(exc, LedgerDamagedError):
        return 6
    if isinstance(exc, StorageError):
        return 7
    if isinstance(exc, LedgerError):
        return 4
    if isinstance(exc, EngineUnavailableError):
        return 5
    if isinstance(exc, JobError | SchemaError | ParameterError):
        return 2
    return 1


def _print_quality(quality: Mapping[str, Any]) -> None:
    """The data-quality counts, one line per rule (for the operator's eyes only)."""
    print("data quality (operator only, do not publish):")
    schema = quality.get("schema")
    if schema is not None:
        for rule in schema["rules"]:
            block = " (blocks releases)" if rule["blocking"] else ""
            print(f"  {rule['rule']}: {rule['count']} violation(s){block}")
    inp = quality.get("input") or {}
    for name, count in inp.items():
        if name != "rows":
            print(f"  {name}: {count}")
    exp = quality.get("expectations")
    if isinstance(exp, Mapping) and "results" in exp:
        failed = sum(not r["success"] for r in exp["results"])
        print(f"  great-expectations suite: {len(exp['results'])} expectation(s), "
              f"{failed} failed")


def _plan(args: argparse.Namespace) -> int:
    from pathlib import Path

    from hdp_spark.jobs.planning import (
        plan_budget,
        render_plan,
        write_plan_plot,
        write_user_table,
    )

    plan = plan_budget(args.job, engine=args.engine)
    sys.stdout.write(render_plan(plan))
    if not args.no_plot:
        target = Path(args.plot) if args.plot else Path(f"plan-{plan.job.name}.png")
        written = write_plan_plot(plan, target)
        print(f"plot: {written}" if written else "plot: skipped (matplotlib is not installed)")
    if args.users:
        print(f"per-user table (operator only): {write_user_table(plan, Path(args.users))}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from pathlib import Path

    from hdp_spark.ledger import open_ledger

    path = Path(args.ledger)
    backend: Literal["sqlite", "parquet"] = "parquet" if path.is_dir() else "sqlite"
    if args.backend == "sqlite" or args.backend == "parquet":
        backend = args.backend
    ledger = open_ledger(backend, path, create=False)
    report = ledger.verify()
    print(f"ledger {path} ({backend}) verified: {report.commits} commit(s), {report.users} "
          f"user(s), {report.charges} charge(s) in the audit log, {report.items} checksum(s) "
          "checked; nothing damaged")
    return 0


def main(argv: Sequence[str] | None = None, *, prog: str = "hdp-release") -> int:
    """Entry point of ``hdp-release`` and ``python -m hdp_spark.jobs``.

    Args:
        argv: arguments (default: ``sys.argv[1:]``).
        prog: program name shown in usage messages.

    Returns:
        The process exit code (see the module docstring).

    Privacy:
        ``run`` charges the ledger for every newly committed release; re-running a job
        re-publishes committed releases without charging them again. Error messages name
        settings, rules and counts, never data values.
    """
    args = _parser(prog).parse_args(argv)
    _logging(args.verbose, args.quiet)
    from hdp_spark.jobs.runner import check_job, run_job

    try:
        if args.command == "verify":
            return _verify(args)
        if args.command == "plan":
            return _plan(args)
        if args.command == "run":
            result = run_job(args.job, engine=args.engine)
            for r in result.releases:
                print(f"{r.release_id}: {r.status} {r.record.commit_id} -> {r.path}")
            print(f"manifest: {result.manifest}")
            if result.report is not None:
                print(f"report: {result.report}")
        else:
            checked = check_job(args.job, engine=args.engine)
            _print_quality(checked.quality)
            print(f"data-quality report (operator only): {checked.quality_report}")
            for plan in checked.plans:
                state = "committed (would re-publish)" if plan.committed else "new"
                print(
                    f"{plan.release_id}: {state}; {plan.rows_in_release} row(s) in the release, "
                    f"{plan.users_over_budget} user(s) over their remaining budget"
                )
    except HdpError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return _exit_code(exc)
    return 0
