"""``bind``: one front function, engine-parametrized, as a backend's public function.

Every public entry point is written once, as ``f(engine, ...)`` in :mod:`hdp_spark.front`;
a backend exposes it as ``f(df, ...)`` with ``bind(f, PandasEngine)`` (or ``SparkEngine``).
The bound function has the front function's name, docstring and keywords (``help()`` and
IDEs show them), with ``df`` in place of ``engine``, and reports the backend's module.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

__all__ = ["bind"]

P = ParamSpec("P")
R = TypeVar("R")
E = TypeVar("E")
D = TypeVar("D")


def bind(fn: Callable[Concatenate[E, P], R], engine: Callable[[D], E], module: str, *,
         columns: Callable[..., Any] | None = None) -> Callable[Concatenate[D, P], R]:
    """``fn(engine, ...)`` as ``f(df, ...)`` = ``fn(engine(df), ...)``.

    Args:
        fn: a front function whose first parameter is the engine.
        engine: the backend's engine class (built from the frame).
        module: the backend module that exports the result (for ``help()`` and reprs).
        columns: the backend's Column form of the same aggregator, called instead when the
            first argument is a list or tuple of column names (never a DataFrame): Spark's
            ``attribute_histograms(cols, ...)`` (the front function's docstring says so).

    Privacy:
        None: changes how a function is called, never what it computes.
    """

    call: Callable[..., R] = fn

    def bound(*args: Any, **kwargs: Any) -> Any:
        if columns is not None and args and isinstance(args[0], list | tuple):
            return columns(*args, **kwargs)
        if args:
            return call(engine(args[0]), *args[1:], **kwargs)
        if "df" in kwargs:  # ``df`` by keyword, as the signature shows
            return call(engine(kwargs.pop("df")), **kwargs)
        msg = f"{fn.__name__}() missing 1 required positional argument: 'df'"
        raise TypeError(msg)

    functools.update_wrapper(bound, fn)
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    df_param = params[0].replace(name="df", annotation=Any)
    setattr(bound, "__signature__", sig.replace(parameters=[df_param, *params[1:]]))  # noqa: B010
    bound.__module__ = module
    del bound.__wrapped__  # type: ignore[attr-defined]  # show the signature above
    return cast(Callable[Concatenate[D, P], R], bound)
