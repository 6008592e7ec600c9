"""Which kernel computes which spec: the core's half of the aggregator registry.

The built-in kernels are entered by :mod:`hdp_spark.core.kernels` when it is imported; an
aggregator registered with :func:`hdp_spark.register_aggregator` enters its kernel here too,
so the one release pipeline (``agg``, jobs, Columns) finds it with no other change.
"""

from __future__ import annotations

import importlib
import sys

from hdp_spark.core.pipeline import Kernel
from hdp_spark.errors import ParameterError

__all__ = ["ensure_kernel", "kernel_of", "register_kernel", "selected_kernel_of",
           "unregister_kernel"]

_TABLE: dict[type, Kernel] = {}
_SELECTED: dict[type, Kernel] = {}
_BUILTINS = "hdp_spark.core.kernels"


def register_kernel(types: type | tuple[type, ...], kernel: Kernel, *,
                    selected: Kernel | None = None, replace: bool = False) -> None:
    """Make ``kernel`` the kernel of the spec classes ``types`` (and ``selected`` their
    kernel under partition selection, ``keys=select_keys(...)``, if they support it).

    Raises:
        ParameterError: a class already has a kernel and ``replace`` is False.

    Privacy:
        The kernel's finalize is the mechanism: it must add the noise its aggregator's
        documentation claims (see :class:`~hdp_spark.core.pipeline.Kernel`).
    """
    for cls in types if isinstance(types, tuple) else (types,):
        if not isinstance(cls, type):
            msg = f"`spec_types` must hold classes, got {cls!r}."
            raise ParameterError(msg)
        if cls in _TABLE and _TABLE[cls] is not kernel and not replace:
            msg = f"spec class {cls.__name__} already has a kernel; pass replace=True."
            raise ParameterError(msg)
        _TABLE[cls] = kernel
        if selected is not None:
            _SELECTED[cls] = selected


def unregister_kernel(types: tuple[type, ...]) -> None:
    """Forget the kernel of ``types`` (an aggregator unregistered: tests)."""
    for cls in types:
        _TABLE.pop(cls, None)
        _SELECTED.pop(cls, None)


def ensure_kernel(types: tuple[type, ...], kernel: Kernel, selected: Kernel | None) -> None:
    """Enter ``kernel`` for the classes of ``types`` that have none: what a Spark Column's
    finalize does on an executor, whose interpreter never saw the driver's registrations
    (the kernel travels with the finalize).

    Privacy:
        None: the driver's registration, repeated.
    """
    _builtins()
    for cls in types:
        _TABLE.setdefault(cls, kernel)
        if selected is not None:
            _SELECTED.setdefault(cls, selected)


def _builtins() -> None:
    if _BUILTINS not in sys.modules:  # the built-ins enter themselves when loaded
        importlib.import_module(_BUILTINS)


def _lookup(table: dict[type, Kernel], spec: object) -> Kernel | None:
    _builtins()
    for cls in type(spec).__mro__:
        kernel = table.get(cls)
        if kernel is not None:
            return kernel
    return None


def kernel_of(spec: object) -> Kernel:
    """The kernel of ``spec`` (its class, or the nearest registered base class).

    Raises:
        ParameterError: ``spec`` is not an aggregator spec.
    """
    kernel = _lookup(_TABLE, spec)
    if kernel is not None:
        return kernel
    msg = (
        "aggregators must come from hdp_mean, hdp_histogram, hdp_user_mean, "
        "hdp_heavy_hitters, hdp_marginals, hdp_mwem, ldp_mean, ldp_mean_vector, "
        "ldp_distribution or an aggregator registered with register_aggregator, got "
        f"{type(spec).__name__}."
    )
    raise ParameterError(msg)


def selected_kernel_of(spec: object) -> Kernel:
    """The partition-selection kernel of ``spec``.

    Raises:
        ParameterError: ``spec``'s aggregator does not support ``select_keys``.
    """
    kernel = _lookup(_SELECTED, spec)
    if kernel is not None:
        return kernel
    msg = (
        "`keys=select_keys(...)` supports hdp_mean and hdp_histogram so far, got "
        f"{type(spec).__name__}."
    )
    raise ParameterError(msg)
