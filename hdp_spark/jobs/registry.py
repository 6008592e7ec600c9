"""Aggregator kinds the job runner knows, by name (``kind = "mean"`` in a job file).

A kind tells the runner how to build its spec from the job file's parameters, which ε
column (and ε grid) it reads, how to run a release of its specs on an engine, and what
effective ε each (group, ε level) received, which is what the ledger charges. New aggregator
kinds plug in with :func:`register_kind`; nothing else in the runner changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from hdp_spark.core.levels import EpsGrid
from hdp_spark.core.mean.spec import MeanSpec
from hdp_spark.errors import JobError, ParameterError

__all__ = [
    "AggregatorKind",
    "ChargeUnit",
    "Interval",
    "KindResult",
    "get_kind",
    "kinds",
    "register_kind",
]

Key = tuple[object, ...]


@dataclass(frozen=True, slots=True)
class Interval:
    """Columns of the released rows that hold one estimate and its interval (for reports)."""

    label: str
    estimate: str
    low: str
    high: str


@dataclass(frozen=True, slots=True)
class KindResult:
    """What one kind released in one release.

    Attributes:
        rows: one plain dict per public key (in the order of the key set; one row for a
            global release): the group columns, then the kind's output columns.
        effective: ``effective[spec name][(group key, ε level)]`` = the effective ε every row
            of that cell received (0 for weight-0 cells).
        tau: ``tau[spec name][group key]`` = the "privacy for free" level τ of capped rules
            (rows above it are charged τ only), or absent.
    """

    rows: list[dict[str, Any]]
    effective: Mapping[str, Mapping[tuple[Key, float], float]]
    tau: Mapping[str, Mapping[Key, float]] = dataclasses.field(default_factory=dict)


ChargeUnit = Literal["row", "user", "person", "none"]
"""How the ledger charges a kind (see :class:`AggregatorKind`)."""

ReleaseFn = Callable[[str, Any, Sequence[Any], tuple[str, ...], "tuple[Key, ...] | None",
                      "str | None"], KindResult]


@dataclass(frozen=True, slots=True)
class AggregatorKind:
    """How the job runner builds, runs and charges one kind of aggregator.

    Attributes:
        name: the ``kind`` of the job file.
        build: job-file parameters -> a validated spec (raises ``ParameterError``/``TypeError``).
        release: ``(engine, df, specs, by, keys, unsafe_seed) -> KindResult``; ``engine`` is
            ``"pandas"`` or ``"spark"`` and ``df`` the engine's native table.
        eps_column: the ε column a spec reads.
        eps_grid: the ε grid a spec rounds onto (None for exact levels).
        output_name: the spec's output column prefix.
        intervals: the spec's estimate/interval columns (for the report).
        describe: canonical parameters of a spec (part of the release's idempotency key).
        numeric_columns: the value columns a spec reads as numbers. The runner reads them
            as doubles (unless the schema or ``[input.types]`` types them), so a malformed
            private cell becomes null instead of changing the column's type.
        unit: how the ledger charges the kind.

            * ``"row"``: the protected unit is a row; each row is charged the effective ε
              of its (group, ε level) cell; the table must hold one row per user.
            * ``"user"``: the protected unit is a user with all their rows; ε is constant
              within a user, and the user is charged the effective ε of their cell ONCE
              (the largest over their rows), not once per row. Repeated user ids allowed.
            * ``"person"``: one global ε for everybody (no ε column); each person (row) is
              charged :attr:`uniform_eps`'s effective value; a person without that much
              budget left is left out of the release (policy "cap"/"exclude") or the
              release is refused ("fail"). One row per person, no ``by``.
            * ``"none"``: post-processing of data randomized elsewhere (LDP reports):
              charges nothing and its ε column is never capped (ε must stay exact).
        uniform_eps: a ``"person"`` kind's per-person ε demand, from the spec only.
        grouped: whether the kind accepts ``by`` / ``keys``.
        user_column: the user column a ``"user"`` spec reads (must be ``[input] user_id``).

    Privacy:
        ``release`` must be a complete, noise-adding release (its rows are published as
        is) or, for ``unit = "none"``, post-processing of already-private reports; and
        ``effective`` must bound each unit's privacy loss: the ledger charges it.
    """

    name: str
    build: Callable[[Mapping[str, Any]], Any]
    release: ReleaseFn
    eps_column: Callable[[Any], str]
    eps_grid: Callable[[Any], EpsGrid | None]
    output_name: Callable[[Any], str]
    intervals: Callable[[Any], Sequence[Interval]]
    describe: Callable[[Any], Mapping[str, Any]]
    numeric_columns: Callable[[Any], tuple[str, ...]] = lambda _spec: ()
    unit: ChargeUnit = "row"
    uniform_eps: Callable[[Any], float] = lambda _spec: 0.0
    grouped: bool = True
    user_column: Callable[[Any], str | None] = lambda _spec: None


_KINDS: dict[str, AggregatorKind] = {}


def register_kind(kind: AggregatorKind, *, replace: bool = False) -> None:
    """Make ``kind`` available to job files as ``kind = "<name>"``.

    Raises:
        ParameterError: a kind of that name exists and ``replace`` is False.
    """
    if kind.name in _KINDS and not replace:
        msg = f"aggregator kind {kind.name!r} is already registered; pass replace=True."
        raise ParameterError(msg)
    _KINDS[kind.name] = kind


def kinds() -> tuple[str, ...]:
    """Names of the registered kinds."""
    _ensure_builtins()
    return tuple(sorted(_KINDS))


def get_kind(name: str, *, setting: str = "kind") -> AggregatorKind:
    """The registered kind ``name``.

    Raises:
        JobError: no such kind.
    """
    _ensure_builtins()
    try:
        return _KINDS[name]
    except KeyError:
        msg = f"`{setting}` must be one of {', '.join(sorted(_KINDS))}; got {name!r}."
        raise JobError(msg) from None


# -- built-in kinds ----------------------------------------------------------------------


def _engine_module(engine: str) -> Any:
    import importlib

    return importlib.import_module(f"hdp_spark.{'pandas' if engine == 'pandas' else 'spark'}")


def _grid(raw: object) -> EpsGrid | None:
    if raw is None or isinstance(raw, EpsGrid):
        return raw
    if not isinstance(raw, Mapping):
        msg = f"`eps_grid` must be a table with ratio, lowest, highest; got {raw!r}."
        raise ParameterError(msg)
    return EpsGrid(**dict(raw))


def _build_mean(params: Mapping[str, Any]) -> MeanSpec:
    from hdp_spark.aggregators import hdp_mean

    p = dict(params)
    for required in ("column", "eps", "lower", "upper"):
        if required not in p:
            msg = f"`{required}` is required."
            raise ParameterError(msg)
    column, eps = p.pop("column"), p.pop("eps")
    lower, upper = p.pop("lower"), p.pop("upper")
    if "eps_grid" in p:
        p["eps_grid"] = _grid(p["eps_grid"])
    return hdp_mean(column, eps=eps, lower=lower, upper=upper, **p)


def _release_mean(
    engine: str,
    df: Any,
    specs: Sequence[Any],
    by: tuple[str, ...],
    keys: tuple[Key, ...] | None,
    unsafe_seed: str | None,
) -> KindResult:
    mod = _engine_module(engine)
    result = mod.release(
        df, *specs, by=list(by) or None, keys=list(keys) if keys is not None else None,
        unsafe_seed=unsafe_seed,
    )
    effective: dict[str, dict[tuple[Key, float], float]] = {}
    tau: dict[str, dict[Key, float]] = {}
    for spec in specs:
        per = result.results[spec.name]
        effective[spec.name] = {
            (key, lv.eps): lv.eps_effective for key in result.keys for lv in per[key].levels
        }
        tau[spec.name] = {key: per[key].tau for key in result.keys}
    return KindResult(result.rows(), effective, tau)


def _describe_dataclass(spec: Any) -> Mapping[str, Any]:
    return dataclasses.asdict(spec)


MEAN = AggregatorKind(
    name="mean",
    build=_build_mean,
    release=_release_mean,
    eps_column=lambda s: s.eps,
    eps_grid=lambda s: s.eps_grid,
    output_name=lambda s: s.name,
    intervals=lambda s: (Interval(s.name, s.name, s.name + "_ci_low", s.name + "_ci_high"),),
    describe=_describe_dataclass,
    numeric_columns=lambda s: (s.column,),
)
"""Heterogeneous-DP mean (:func:`hdp_spark.hdp_mean`); parameters as its keywords."""


@dataclass(frozen=True, slots=True)
class HistogramEntry:
    """A histogram aggregator of a job: its spec and the release option ``project``."""

    spec: Any
    project: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.project, bool):
            msg = f"`project` must be true or false, got {self.project!r}."
            raise ParameterError(msg)


def _build_histogram(params: Mapping[str, Any]) -> HistogramEntry:
    from hdp_spark.aggregators import hdp_histogram

    p = dict(params)
    for required in ("column", "eps", "categories"):
        if required not in p:
            msg = f"`{required}` is required."
            raise ParameterError(msg)
    column, eps, categories = p.pop("column"), p.pop("eps"), p.pop("categories")
    project = p.pop("project", False)
    if "eps_grid" in p:
        p["eps_grid"] = _grid(p["eps_grid"])
    return HistogramEntry(hdp_histogram(column, eps=eps, categories=categories, **p), project)


def _bin(name: str, label: object) -> str:
    return f"{name}[{label}]"


def _release_histogram(
    engine: str,
    df: Any,
    entries: Sequence[Any],
    by: tuple[str, ...],
    keys: tuple[Key, ...] | None,
    unsafe_seed: str | None,
) -> KindResult:
    mod = _engine_module(engine)
    rows: list[dict[str, Any]] | None = None
    effective: dict[str, dict[tuple[Key, float], float]] = {}
    tau: dict[str, dict[Key, float]] = {}
    for entry in entries:
        spec = entry.spec
        name = spec.name
        result = mod.histogram_release(
            df, spec, by=list(by) or None, keys=list(keys) if keys is not None else None,
            unsafe_seed=f"{unsafe_seed}/{name}" if unsafe_seed else None,
            project=entry.project,
        )
        wide = []
        for key in result.keys:
            r = result.results[key]
            row: dict[str, Any] = dict(zip(by, key, strict=True))
            freqs = r.frequencies(entry.project)
            for label, f, (lo, hi) in zip(r.labels, freqs, r.intervals(), strict=True):
                col = _bin(name, label)
                row[col], row[col + "_ci_low"], row[col + "_ci_high"] = f, lo, hi
            row.update({
                f"{name}_noise_scale": r.noise_scale,
                f"{name}_bias_bound": r.bias_bound,
                f"{name}_n": r.n,
                f"{name}_tau": r.tau,
                f"{name}_method": r.method,
                f"{name}_fallback": r.fallback,
                f"{name}_eps_levels": [
                    {"eps": lv.eps, "n": lv.n, "weight": lv.weight,
                     "eps_effective": lv.eps_effective}
                    for lv in r.levels
                ],
            })
            wide.append(row)
        if rows is None:
            rows = wide
        else:
            for mine, theirs in zip(rows, wide, strict=True):
                mine.update(theirs)
        effective[name] = {
            (key, lv.eps): lv.eps_effective
            for key in result.keys for lv in result.results[key].levels
        }
        tau[name] = {key: result.results[key].tau for key in result.keys}
    return KindResult(rows or [], effective, tau)


def _describe_histogram(entry: Any) -> Mapping[str, Any]:
    return {**dataclasses.asdict(entry.spec), "project": entry.project}


HISTOGRAM = AggregatorKind(
    name="histogram",
    build=_build_histogram,
    release=_release_histogram,
    eps_column=lambda e: e.spec.eps,
    eps_grid=lambda e: e.spec.eps_grid,
    output_name=lambda e: e.spec.name,
    intervals=lambda e: tuple(
        Interval(str(label), _bin(e.spec.name, label), _bin(e.spec.name, label) + "_ci_low",
                 _bin(e.spec.name, label) + "_ci_high")
        for label in e.spec.labels
    ),
    describe=_describe_histogram,
)
"""Heterogeneous-DP histogram (:func:`hdp_spark.hdp_histogram`, Chaudhuri & Courtade); parameters as
its keywords plus ``project``. Wide output: ``<name>[<label>]`` (frequency) with ``_ci_low`` /
``_ci_high`` per released bin, then ``<name>_n``, ``_noise_scale``, ``_bias_bound``, ``_tau``,
``_method``, ``_fallback``, ``_eps_levels``."""


def _ensure_builtins() -> None:
    if "mean" not in _KINDS:
        _KINDS["mean"] = MEAN
    if "histogram" not in _KINDS:
        _KINDS["histogram"] = HISTOGRAM
    from hdp_spark.jobs import builtin_kinds as _more

    for kind in _more.BUILTIN:
        _KINDS.setdefault(kind.name, kind)


def check_kind_result(kind: str, result: KindResult, n_keys: int) -> None:
    """Raise if a kind broke its contract (one row per key)."""
    if len(result.rows) != n_keys:
        msg = f"aggregator kind {kind!r} returned {len(result.rows)} rows for {n_keys} keys."
        raise JobError(msg)
