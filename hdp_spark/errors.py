"""Exception hierarchy of hdp_spark.

Every error the library raises on purpose is an :class:`HdpError`. Each subclass also
inherits the built-in exception it refines, so ``except ValueError`` keeps working.

Messages name the parameter, the rule and the value the *caller* passed (or a count of
offending rows); they never contain row values, ε_i values or data statistics.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "DuplicateUserError",
    "EngineNotSupportedError",
    "EngineUnavailableError",
    "EpsilonColumnError",
    "HdpError",
    "InternalError",
    "JobError",
    "LedgerBusyError",
    "LedgerConflictError",
    "LedgerDamagedError",
    "LedgerError",
    "ParameterError",
    "SchemaError",
    "StorageError",
    "UserIdError",
]


class HdpError(Exception):
    """Base class of every error raised by hdp_spark."""


class ParameterError(HdpError, ValueError):
    """A parameter passed by the caller breaks a documented rule."""


class SchemaError(HdpError, ValueError):
    """The input table does not have the columns or types a release needs."""


class EpsilonColumnError(SchemaError):
    """The ε column (a public input) holds values no release can honour.

    The message names the column, the rule and the number of offending rows, never the
    offending values.
    """


class UserIdError(SchemaError):
    """The user id column (public in this model) breaks a schema rule, e.g. null ids.

    The message names the column, the rule and the number of offending rows.
    """


class DuplicateUserError(UserIdError):
    """A schema requires one row per user, and some user id occurs on several rows.

    The message gives the number of rows beyond the first of each user id, never the ids.
    """


class EngineNotSupportedError(HdpError, NotImplementedError):
    """The object passed is not a table of a supported engine."""


class EngineUnavailableError(HdpError, RuntimeError):
    """The engine a job asks for cannot start on this machine (e.g. no Java for Spark).

    Raised before anything is read or written; the message names what is missing and how
    to provide it.
    """


class JobError(HdpError, ValueError):
    """A release job file, or the table it names, breaks a documented rule of the job runner.

    The message names the job setting (``[section] key``), the rule and the value written in
    the job file, or a count of offending rows; never row values.
    """


class BudgetExceededError(HdpError, RuntimeError):
    """A release would charge users more privacy budget than they have left.

    Raised by the ``"fail"`` budget policy (the other policies cap or exclude instead). The
    message gives a count of users, never their ids or budgets.
    """


class LedgerError(HdpError, RuntimeError):
    """The privacy ledger is unreadable, inconsistent, or was used against its protocol."""


class LedgerBusyError(LedgerError):
    """Another run held the ledger's lock for longer than the lock timeout."""


class LedgerConflictError(LedgerError):
    """Another run committed to the ledger first (optimistic version check failed)."""


class LedgerDamagedError(LedgerError):
    """The ledger is missing, empty, truncated, corrupt, or older than the outputs citing it.

    A damaged ledger is never taken as a fresh start (that would recompute and re-charge
    committed releases with fresh noise): the run stops before charging or computing
    anything. Restore the ledger from a backup (``docs/jobs.md``).
    """


class StorageError(HdpError, OSError):
    """The ledger or the output directory cannot be written: disk full, read-only, no access.

    Raised before anything is charged when the problem is found up front; the message names
    the path and the cause (never data).
    """

    @staticmethod
    def cause(exc: OSError) -> str:
        """The file-system error's cause in words (disk full, read-only, or its text)."""
        import errno

        if exc.errno == errno.ENOSPC:
            return "the disk is full"
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return f"it is read-only or not writable by this user ({exc.strerror})"
        return exc.strerror or str(exc)


class InternalError(HdpError, AssertionError):
    """An internal invariant failed: this is probably a bug in hdp_spark."""

    def __init__(self, message: str) -> None:
        super().__init__(
            f"{message}\n\nThis is probably a bug in hdp_spark; please report it."
        )
