"""One descriptor per aggregator: everything the library needs to run it everywhere.

An :class:`Aggregator` names, once, what used to be spread over about ten places: the spec
classes it accepts, its kernel (cells, finalize, output fields: the mechanism), its public
constructor, the main field of its Spark Column's struct, its SQL function, its job kind,
its ``explain`` hook and its public output range. :func:`register_aggregator` enters it;
from then on ``agg`` (both engines), the Spark Column (:func:`hdp_spark.spark.as_column`),
jobs (``kind = "<name>"``) and ``explain`` find it through :func:`aggregator_of`, and no
other module tests a spec's type. The model is OpenDP's constructor-plus-registration and
Spark's own function registry: a name, a builder, and the facts callers need.

The built-in aggregators are registered by :mod:`hdp_spark.aggregators.builtin`, loaded on
the first lookup.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from hdp_spark.core.kernel_table import kernel_of, register_kernel, unregister_kernel
from hdp_spark.core.pipeline import Engine, Kernel, OutputField
from hdp_spark.errors import ParameterError

if TYPE_CHECKING:
    from hdp_spark.jobs.kind import AggregatorKind

__all__ = [
    "Aggregator",
    "ExplainHook",
    "Explained",
    "SqlForm",
    "aggregator_of",
    "aggregators",
    "register_aggregator",
    "unregister_aggregator",
]

Explained = tuple[tuple[str, ...], list[tuple[str, OutputField]], list[tuple[Any, ...]]]
"""What an explain hook returns: (group columns, output columns, rows)."""


class ExplainHook(Protocol):
    """``explain`` of one family of aggregators on a core engine over the whole table."""

    def __call__(self, engine: Engine, specs: Sequence[Any], *, by: Any, keys: Any
                 ) -> Explained:
        """(group columns, output columns, rows); must read public columns only."""
        ...


@dataclass(frozen=True, slots=True, eq=False)
class SqlForm:
    """The generic SQL form of a registered aggregator (the JVM extension's
    ``hdp_aggregate``): ``hdp_aggregate('<name>', value, eps, lower, upper, options[,
    'public'])`` over level cells, or ``hdp_aggregate('<name>', category, eps, array(...),
    options[, 'public'])`` over category cells; ``options`` is a constant JSON object.

    Attributes:
        cells: ``"level"`` or ``"category"``: the cells the native aggregate computes (the
            kernel's request must be of that kind, with the call's bounds or domain).
        spec: ``(column, eps, bounds or categories, options) -> spec``: the call's spec, on
            the executors (``bounds`` is (lower, upper); ``categories`` a list).
        probe: a spec of the aggregator whose output fields type every call's struct.
    """

    cells: str
    spec: Callable[[str, str, Any, dict[str, Any]], Any]
    probe: Any

    def __post_init__(self) -> None:
        if self.cells not in ("level", "category"):
            msg = f"`cells` must be 'level' or 'category', got {self.cells!r}."
            raise ParameterError(msg)
        if not callable(self.spec):
            msg = f"`spec` must be callable, got {self.spec!r}."
            raise ParameterError(msg)


def _unit_range(spec: object) -> tuple[float, float]:
    return (0.0, 1.0)


def _identifier(name: object) -> bool:
    return isinstance(name, str) and name.isidentifier() and name == name.lower()


@dataclass(frozen=True, slots=True, eq=False)
class Aggregator:
    """One aggregator, described once.

    Attributes:
        name: the family's name, lower case (``"mean"``): ``explain``'s ``kind``, the
            Column finalize's name (``hdp_<name>_finalize``) and, by default, the job kind.
        spec_types: the spec classes this aggregator accepts (a subclass matches too).
        kernel: its :class:`~hdp_spark.core.pipeline.Kernel`: cells, finalize and output
            fields; a :class:`~hdp_spark.core.pipeline.BatchCellKernel` over a level or
            category request can also run as a Spark Column.
        constructor: the public function that builds a spec (``hdp_mean``).
        column_field: the name of the estimate's field inside the Column's struct
            (``"estimate"``, ``"bins"``); None: not available as a Column.
        column_builder: ``"module:function"`` of an aggregator's own Spark Column builder,
            ``function(spec, *, keys=None) -> Column``, for aggregators whose cells are not
            the level or category cells of the generic Column (heavy hitters: record
            counts); None: the generic Column when ``column_field`` is set.
        sql: the SQL function of the JVM extension (``"hdp_mean"``); None: no SQL form.
        sql_form: the generic SQL form (:class:`SqlForm`: ``hdp_aggregate('<name>', ...)``)
            of an aggregator the extension does not know by name.
        job_kind: its job kind: an :class:`~hdp_spark.jobs.kind.AggregatorKind` (entered
            into the job registry by :func:`register_aggregator`), the name of a kind
            already registered there, or None (not usable in jobs).
        explain: its ``explain`` hook; aggregators with different hooks are explained in
            separate calls. None: ``explain`` refuses it.
        selected: its kernel under ``keys=select_keys(...)``; None: not supported.
        output_range: the public range of its estimate (mean: (lower, upper);
            frequencies: (0, 1)): reports and ``plan`` scale widths by it.

    Privacy:
        The kernel is the mechanism: registering an aggregator vouches that its finalize
        adds the noise its documentation claims and that its job kind's ``effective``
        charges bound each unit's loss (see :class:`~hdp_spark.jobs.kind.AggregatorKind`).
    """

    name: str
    spec_types: tuple[type, ...]
    kernel: Kernel
    constructor: Callable[..., Any]
    column_field: str | None = None
    column_builder: str | None = None
    sql: str | None = None
    job_kind: AggregatorKind | str | None = None
    explain: ExplainHook | None = None
    selected: Kernel | None = None
    output_range: Callable[[Any], tuple[float, float]] = _unit_range
    sql_form: SqlForm | None = None

    def __post_init__(self) -> None:
        if not _identifier(self.name):
            msg = f"`name` must be a lower-case identifier, got {self.name!r}."
            raise ParameterError(msg)
        if (not isinstance(self.spec_types, tuple) or not self.spec_types
                or not all(isinstance(t, type) for t in self.spec_types)):
            msg = f"`spec_types` must be a non-empty tuple of classes, got {self.spec_types!r}."
            raise ParameterError(msg)
        for role, obj in (("kernel", self.kernel), ("selected", self.selected)):
            if obj is None and role == "selected":
                continue
            if not (callable(getattr(obj, "fields", None))
                    and callable(getattr(obj, "values", None))):
                msg = f"`{role}` must be a Kernel (with fields and values), got {obj!r}."
                raise ParameterError(msg)
        if not callable(self.constructor):
            msg = f"`constructor` must be callable, got {self.constructor!r}."
            raise ParameterError(msg)
        for role, text in (("column_field", self.column_field), ("sql", self.sql)):
            if text is not None and not _identifier(text):
                msg = f"`{role}` must be a lower-case identifier or None, got {text!r}."
                raise ParameterError(msg)
        if self.column_builder is not None and (
                not isinstance(self.column_builder, str) or self.column_builder.count(":") != 1
                or self.column_field is None):
            msg = ("`column_builder` must be 'module:function' beside a `column_field`, got "
                   f"{self.column_builder!r}.")
            raise ParameterError(msg)
        if self.explain is not None and not callable(self.explain):
            msg = f"`explain` must be callable or None, got {self.explain!r}."
            raise ParameterError(msg)
        if self.sql_form is not None and not isinstance(self.sql_form, SqlForm):
            msg = f"`sql_form` must be a SqlForm or None, got {self.sql_form!r}."
            raise ParameterError(msg)
        if not callable(self.output_range):
            msg = f"`output_range` must be callable, got {self.output_range!r}."
            raise ParameterError(msg)

    @property
    def constructor_name(self) -> str:
        """The constructor's public name, for messages."""
        return str(getattr(self.constructor, "__name__", self.name))

    def job_kind_name(self) -> str | None:
        """The job kind's name (``kind = ...`` in a job file), or None."""
        if self.job_kind is None or isinstance(self.job_kind, str):
            return self.job_kind
        return self.job_kind.name


_REGISTRY: dict[str, Aggregator] = {}
_BUILTIN = "hdp_spark.aggregators.builtin"


def _loaded() -> dict[str, Aggregator]:
    if not _REGISTRY:
        importlib.import_module(_BUILTIN)
    return _REGISTRY


def register_aggregator(aggregator: Aggregator, *, replace: bool = False) -> None:
    """Make ``aggregator`` available to ``agg``, Columns, jobs and ``explain``.

    Enters its kernel into the core's kernel table and, when ``job_kind`` is an
    :class:`~hdp_spark.jobs.kind.AggregatorKind`, the kind into the job registry.

    Raises:
        ParameterError: ``aggregator`` is not an :class:`Aggregator`, or its name or one of
            its spec classes is taken and ``replace`` is False.

    Privacy:
        See :class:`Aggregator`: the registration vouches for the kernel's mechanism.
    """
    if not isinstance(aggregator, Aggregator):
        msg = f"`aggregator` must be an Aggregator, got {type(aggregator).__name__}."
        raise ParameterError(msg)
    _loaded()  # the built-ins first (while they load, this returns at once)
    taken = _REGISTRY.get(aggregator.name)
    if taken is not None and not replace:
        msg = (f"an aggregator named {aggregator.name!r} is already registered; pass "
               "replace=True.")
        raise ParameterError(msg)
    for other in _REGISTRY.values():
        clash = set(other.spec_types) & set(aggregator.spec_types)
        if clash and other.name != aggregator.name:
            names = ", ".join(sorted(t.__name__ for t in clash))
            msg = (f"spec class {names} already belongs to the aggregator {other.name!r}; "
                   "unregister it first.")
            raise ParameterError(msg)
    register_kernel(aggregator.spec_types, aggregator.kernel, selected=aggregator.selected,
                    replace=True)
    if aggregator.job_kind is not None and not isinstance(aggregator.job_kind, str):
        from hdp_spark.jobs.registry import register_kind

        register_kind(aggregator.job_kind, replace=replace)
    _REGISTRY[aggregator.name] = aggregator


def unregister_aggregator(name: str) -> None:
    """Remove the aggregator ``name`` (and its kernel and job kind): tests and plugins.

    Raises:
        ParameterError: no aggregator has that name.

    Privacy:
        None.
    """
    aggregator = _loaded().pop(name, None)
    if aggregator is None:
        msg = f"`name` must be a registered aggregator, got {name!r}."
        raise ParameterError(msg)
    unregister_kernel(aggregator.spec_types)
    if aggregator.job_kind is not None and not isinstance(aggregator.job_kind, str):
        from hdp_spark.jobs.registry import unregister_kind

        unregister_kind(aggregator.job_kind.name)


def aggregators() -> tuple[Aggregator, ...]:
    """Every registered aggregator, in registration order."""
    return tuple(_loaded().values())


def aggregator_of(spec: object) -> Aggregator:
    """The descriptor of ``spec`` (its class, or the nearest registered base class).

    Raises:
        ParameterError: ``spec`` is not the spec of a registered aggregator.

    Privacy:
        None: reads the type of a public spec.
    """
    registry = _loaded()
    kernel_of(spec)  # the error agg raises for anything that is not an aggregator
    for cls in type(spec).__mro__:
        for aggregator in registry.values():
            if cls in aggregator.spec_types:
                return aggregator
    names = ", ".join(a.constructor_name for a in registry.values())
    msg = f"aggregators must come from {names}; got {type(spec).__name__}."
    raise ParameterError(msg)
