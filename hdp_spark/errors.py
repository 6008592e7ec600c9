"""Exception hierarchy of hdp_spark.

Every error the library raises on purpose is an :class:`HdpError`. Each subclass also
inherits the built-in exception it refines, so ``except ValueError`` keeps working.

Messages name the parameter, the rule and the value the *caller* passed (or a count of
offending rows); they never contain row values, ε_i values or data statistics.
"""

from __future__ import annotations

__all__ = [
    "EngineNotSupportedError",
    "EpsilonColumnError",
    "HdpError",
    "InternalError",
    "ParameterError",
    "SchemaError",
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


class EngineNotSupportedError(HdpError, NotImplementedError):
    """The object passed is not a table of a supported engine."""


class InternalError(HdpError, AssertionError):
    """An internal invariant failed: this is probably a bug in hdp_spark."""

    def __init__(self, message: str) -> None:
        super().__init__(
            f"{message}\n\nThis is probably a bug in hdp_spark; please report it."
        )
