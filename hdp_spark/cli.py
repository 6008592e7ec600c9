"""Command-line interface: ``hdp-release`` / ``python -m hdp_spark.jobs``.

Commands::

    run JOB.toml [--engine pandas|spark]    validate, check budgets, compute, publish, charge
                                            (each command also takes --ledger PATH and
                                            --output DIR instead of the job's, and
                                            --witness PATH: the --ledger's own witness)
    check JOB.toml [--engine pandas|spark]  dry run: data quality and budget situation only;
                                            writes nothing
    plan JOB.toml [--plot PNG] [--users CSV]  predicted accuracy, charges and budget
                                            allocations of what ``run`` would compute
                                            (committed releases are marked); charges
                                            nothing; writes only its plot (default under
                                            the job's ``[output] path``)
    verify LEDGER [--backend sqlite|parquet] [--witness PATH]  check every checksum of a
                                            ledger (audit log and archived deltas included)
                                            and that it is not behind its rollback witness;
                                            upgrades an old ledger

``run`` shows a progress bar on stderr when stderr is a terminal (not with ``-q``) and prints
one line per release and a short summary on stdout. Log lines go to stderr through
:mod:`logging`: warnings and errors by default, what the job does with ``-v``, each stage's
wall time with ``-v -v``.
``check`` prints the data-quality counts (nulls, out-of-bounds values per rule) for the
operator: they are functions of private data and must not be published; ``run`` writes them
only to the data-quality report beside the ledger.
Exit codes: 0 success; 2 job file, input or schema error (or a ``verify`` path that does
not exist); 3 budget refused
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
        ("check", "dry run: validate the input and show each release's budget situation; "
                  "writes nothing (no ledger, no data-quality report, no output file)"),
    ):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("job", help="the TOML job file")
        p.add_argument("--engine", choices=("pandas", "spark"), help="override the job's engine")
        _place_flags(p)
        _log_flags(p)
    text = ("predict the accuracy and each user's charge of what `run` would compute, under "
            "each budget allocation, from the public columns only (releases committed already "
            "are marked 'committed: re-published, charges nothing'); charges nothing, writes "
            "nothing to the ledger; writes its plot under the job's [output] path")
    p = sub.add_parser("plan", help=text, description=text)
    p.add_argument("job", help="the TOML job file")
    p.add_argument("--engine", choices=("pandas", "spark"), help="override the job's engine")
    p.add_argument("--plot", metavar="PNG", help="where to write the plot of predicted "
                   "interval widths (default: plan-<job name>.png in the job's [output] path; "
                   "the only file plan writes without --plot/--users)")
    p.add_argument("--no-plot", action="store_true", help="do not write the plot")
    _place_flags(p)
    p.add_argument("--users", metavar="CSV", help="also write the per-user table (user id, "
                   "budget before, charge per release, budget after): for the operator only")
    _log_flags(p)
    text = ("check everything a ledger keeps, in one pass: every file's and value set's "
            "checksum, the audit log and archived deltas included (exit code 6 if damaged); "
            "a ledger of an older format is upgraded (sealed) first")
    p = sub.add_parser("verify", help=text, description=text)
    p.add_argument("ledger", help="the ledger: a SQLite file or a parquet directory")
    p.add_argument("--backend", choices=("sqlite", "parquet"),
                   help="default: parquet for a directory, sqlite otherwise")
    p.add_argument("--witness", metavar="PATH", help="the ledger's rollback witness (the "
                   "job's `[ledger] witness`): exit code 6 if the ledger is behind it (lost "
                   "commits, an older copy restored); without it, that is not checked")
    _log_flags(p)
    return parser


def _place_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ledger", metavar="PATH", help="use this ledger instead of the job's "
                   "`[ledger] path` (relative to the current directory), e.g. a fresh one "
                   "for a trial run; the job's `[ledger] witness` belongs to the job's "
                   "ledger and is not used for another one (see --witness)")
    p.add_argument("--witness", metavar="PATH", help="the rollback witness of the --ledger "
                   "given (one witness per ledger; outside the ledger; created by the first "
                   "run); without it, a --ledger other than the job's has none and a rollback "
                   "of it cannot be detected (one WARNING)")
    p.add_argument("--output", metavar="DIR", help="write the outputs here instead of the "
                   "job's `[output] path` (relative to the current directory)")


def _job(args: argparse.Namespace) -> Any:
    """The job file, or its spec with ``--ledger`` / ``--witness`` / ``--output`` applied.

    A witness is one per ledger: ``--ledger`` naming another ledger than the job's drops
    the job's ``[ledger] witness`` (it belongs to the job's ledger and would refuse the
    other one) and takes ``--witness`` instead, if given. The job's own ledger keeps the
    job file's witness: ``--witness`` naming another file for it, or given without
    ``--ledger``, is refused (it would let a run bypass that ledger's rollback check).
    """
    if not (args.ledger or args.output or args.witness):
        return args.job
    from dataclasses import replace
    from pathlib import Path

    from hdp_spark.jobs.settings import check_witness_apart
    from hdp_spark.jobs.spec import load_job

    spec = load_job(args.job, engine=args.engine)
    own = spec.ledger.witness
    witness = Path(args.witness).resolve() if args.witness else None
    if args.ledger:
        path = Path(args.ledger).resolve()
        if path == spec.ledger.path.resolve():  # the job's own ledger: its own witness
            if witness is not None and (own is None or witness != own.resolve()):
                _foreign_witness(args.witness, own)
            witness = own
        elif witness is not None:
            if own is not None and witness == own.resolve():
                msg = (f"`--witness` must not be the job's own `[ledger] witness` with "
                       f"another `--ledger` (one witness per ledger: it belongs to "
                       f"{str(spec.ledger.path)!r}); got {args.witness!r}.")
                raise ParameterError(msg)
            check_witness_apart(witness, path, "--witness")
        spec = replace(spec, ledger=replace(spec.ledger, path=path, witness=witness))
    elif witness is not None and (own is None or witness != own.resolve()):
        _foreign_witness(args.witness, own)
    if args.output:
        spec = replace(spec, output=replace(spec.output, path=Path(args.output).resolve()))
    return spec


def _foreign_witness(given: str, own: Any) -> None:
    """Refuse ``--witness`` for the job's own ledger when it is not the job's witness."""
    named = (f"its `[ledger] witness` {str(own)!r}" if own is not None else
             "no `[ledger] witness` (set one in the job file)")
    msg = (f"`--witness` must name the witness of the ledger given with `--ledger` (one "
           f"witness per ledger); the job's own ledger keeps the job file's, and the job "
           f"names {named}; got {given!r}.")
    raise ParameterError(msg)


def _log_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="log what the job does (INFO); twice (-v -v) also each stage's wall "
                   "time (DEBUG); three times also the libraries' own INFO and DEBUG lines "
                   "(great_expectations, py4j, pyspark, ...)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="warnings and errors only, and no progress bar")


class _OwnLines(logging.Filter):
    """Lets the records of ``hdp_spark`` through from ``own`` up, and another library's only
    from ``others`` up (their INFO lines would bury the job's own)."""

    def __init__(self, own: int, others: int) -> None:
        super().__init__()
        self.own, self.others = own, others

    def filter(self, record: logging.LogRecord) -> bool:
        mine = record.name == "hdp_spark" or record.name.startswith("hdp_spark.")
        return record.levelno >= (self.own if mine else self.others)


class _AboveTheBar(logging.StreamHandler):  # type: ignore[type-arg]
    """A stderr handler that writes above an open progress bar instead of through it."""

    def emit(self, record: logging.LogRecord) -> None:
        from hdp_spark.jobs.progress import writing_above

        with writing_above(self.stream):
            super().emit(record)


def _logging(verbose: int, quiet: bool) -> None:
    """stderr logging: the job's own warnings and errors (INFO with ``-v``, DEBUG, the
    stage timings, with ``-v -v``); other libraries' lines from WARNING up, whatever level
    they set for themselves, unless ``-v -v -v``. Only the root logger's level and its one
    handler of this CLI are set."""
    levels = (logging.WARNING, logging.INFO, logging.DEBUG)
    level = logging.WARNING if quiet else levels[min(verbose, 2)]
    others = logging.DEBUG if verbose >= 3 and not quiet else logging.WARNING
    handler = _AboveTheBar(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_OwnLines(level, others))
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_hdp_cli", False):
            root.removeHandler(old)
    handler._hdp_cli = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(min(level, others))


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


def _print_run(result: Any) -> None:
    """What ``run`` prints on stdout: one line per release, then a summary of at most
    three lines (counts and ledger, the manifest, the report). No timings: a release's
    run time may depend on private data beyond n (partition selection)."""
    for r in result.releases:
        how = (f"computed by engine {r.computed_by}" if r.status == "committed" else
               f"computed earlier by engine {r.computed_by}, nothing charged now")
        print(f"{r.release_id}: {r.status} {r.record.commit_id} ({how}) -> {r.path}")
    committed = sum(r.status == "committed" for r in result.releases)
    print(f"job {result.job.name}: {committed} committed, "
          f"{len(result.releases) - committed} re-published; "
          f"ledger {result.job.ledger.path}")
    print(f"manifest: {result.manifest}")
    if result.report is not None:
        print(f"report: {result.report}")


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

    plan = plan_budget(_job(args), engine=args.engine)
    sys.stdout.write(render_plan(plan))
    if not args.no_plot and not plan.releases:
        print("plot: none (nothing to predict)")
    elif not args.no_plot:
        target = (Path(args.plot) if args.plot
                  else plan.job.output.path / f"plan-{plan.job.name}.png")
        written = write_plan_plot(plan, target)
        print(f"plot: {written}" if written else "plot: skipped (matplotlib is not installed)")
    if args.users:
        print(f"per-user table (operator only): {write_user_table(plan, Path(args.users))}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from pathlib import Path

    from hdp_spark.ledger import open_ledger

    path = Path(args.ledger)
    if not path.exists():
        # nothing to verify, and nothing says a ledger was ever there: a mistyped path, not
        # damage (a run whose outputs cite a missing ledger is refused with exit 6)
        msg = (f"`verify LEDGER`: the path `{path}` does not exist; give the `[ledger] path` "
               "of a job that has run (a SQLite file or a parquet ledger directory).")
        raise ParameterError(msg)
    backend: Literal["sqlite", "parquet"] = "parquet" if path.is_dir() else "sqlite"
    if args.backend == "sqlite" or args.backend == "parquet":
        backend = args.backend
    from hdp_spark.ledger.witness import Witness

    wal = None
    if backend == "sqlite":  # before SQLite opens it: its last close deletes the -wal file
        from hdp_spark.ledger._sqlite_wal import check_wal

        try:
            wal = check_wal(path)
        except OSError as exc:
            msg = f"the -wal file of the ledger `{path}` cannot be read: {exc.strerror}."
            raise StorageError(msg) from exc
    ledger = open_ledger(backend, path, create=False)
    report = ledger.verify()
    print(f"ledger {path} ({backend}) verified: {report.commits} commit(s), {report.users} "
          f"user(s), {report.charges} charge(s) in the audit log, {report.items} checksum(s) "
          "checked; nothing damaged")
    if wal is not None and wal.unverifiable:
        print(f"not checked: the -wal file ends in {wal.unverifiable} frame(s) failing "
              "SQLite's checksum after its last whole commit: a commit cut short by a crash "
              "(nothing lost) or damage to the newest commit (lost; SQLite drops it "
              "silently); only --witness tells them apart" + ("" if args.witness else
                                                            "; exit code 0 does not cover it"))
    if args.witness:
        status = Witness(Path(args.witness)).check(ledger)
        seen = ("no witness file yet (a run creates it)" if status.witnessed is None else
                f"the ledger holds the {status.witnessed} commit(s) it saw"
                + (f" and {status.lag} newer (a run catches it up)" if status.lag else ""))
        print(f"witness {args.witness}: {seen}")
    else:
        logging.getLogger("hdp_spark.ledger").warning(
            "no witness given (--witness): a rollback of ledger %s cannot be detected", path)
        print("not checked (no --witness): whether the ledger lost commits or was sent back "
              "to an older copy (a restored backup; for SQLite, a damaged or lost -wal file, "
              "whose commits SQLite drops silently); exit code 0 does not cover it")
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
    from hdp_spark.jobs.dry_run import check_job
    from hdp_spark.jobs.runner import run_job

    try:
        if args.command == "verify":
            return _verify(args)
        if args.command == "plan":
            return _plan(args)
        if args.command == "run":
            from hdp_spark.jobs.progress import Progress, terminal_progress

            progress = Progress() if args.quiet else terminal_progress()
            _print_run(run_job(_job(args), engine=args.engine, progress=progress))
        else:
            checked = check_job(_job(args), engine=args.engine)
            _print_quality(checked.quality)
            print("nothing written (dry run): no ledger, no data-quality report, no output")
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
