"""pandas backend of the partial-DP releases: same plan, names and columns as Spark's.

Per attribute, values are recoded once against the public domain (``pd.Categorical``:
hash lookups, null/out-of-domain -> the public "other" code). Each tree level is one
vectorized pass over the code matrix (mixed-radix keys, membership of the children's
lists, counts of the keys above the level's floor); the count stage reads the root pass's
aggregate.
The driver logic is :mod:`hdp_spark.core.partial`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hdp_spark.core.kernels import HeavyHittersKernel, MarginalsKernel, release_specs
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial.api import attribute_histogram_spec, hdp_heavy_hitters
from hdp_spark.core.partial.heavy_hitters import (
    HeavyHittersResult,
)
from hdp_spark.core.partial.histograms import (
    HISTOGRAM_COLUMNS,
    HistogramResult,
    finalize_histograms,
)
from hdp_spark.core.partial.mwem import MwemSpec, hdp_mwem
from hdp_spark.core.partial.mwem_release import release_mwem
from hdp_spark.core.partial.output import PartialRelease
from hdp_spark.core.partial.projection import MarginalsResult, MarginalsSpec, hdp_marginals
from hdp_spark.core.partial.spec import AttributeDomain, CodedSpec, HeavyHittersSpec
from hdp_spark.core.partial.tree import NodeRequest, key_space
from hdp_spark.core.schema import TableSchema
from hdp_spark.errors import ParameterError, SchemaError
from hdp_spark.pandas._common import mark_unsafe, real_dtype
from hdp_spark.pandas.engine import PandasEngine

__all__ = [
    "PandasTreeCounter",
    "attribute_histograms",
    "hdp_heavy_hitters",
    "hdp_marginals",
    "hdp_mwem",
    "heavy_hitters",
    "marginals",
    "mwem",
    "release_heavy_hitters",
]

_DENSE_FACTOR = 4
"""Count by bincount when a key space is at most this many times the number of rows."""

Codes = npt.NDArray[np.int64]


def _check_frame(df: object) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        msg = f"`df` must be a pandas DataFrame, got {type(df).__name__}."
        raise ParameterError(msg)
    return df


def _check_type(series: pd.Series, dom: AttributeDomain) -> None:
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_object_dtype(dtype):
        return
    kind = dom.kind
    if kind == "str":
        ok = pd.api.types.is_string_dtype(dtype)
    elif kind == "bool":
        ok = pd.api.types.is_bool_dtype(dtype)
    else:
        ok = real_dtype(dtype)
    if not ok:
        msg = (
            f"attribute column `{dom.column}` has dtype {dtype}, which cannot hold the "
            f"{kind} values of its domain."
        )
        raise SchemaError(msg)


def encode_codes(df: pd.DataFrame, domains: Sequence[AttributeDomain]) -> Codes:
    """The n x d matrix of attribute codes (null/out-of-domain -> the "other" code)."""
    out = np.empty((len(df), len(domains)), dtype=np.int64, order="F")  # columns contiguous
    for j, dom in enumerate(domains):
        if dom.column not in df.columns:
            msg = f"attribute column `{dom.column}` is not in the table."
            raise SchemaError(msg)
        series = df[dom.column]
        _check_type(series, dom)
        codes = pd.Categorical(series, categories=list(dom.values)).codes
        out[:, j] = np.where(codes < 0, dom.other_code, codes)
    return out


def check_unit(df: pd.DataFrame, privacy_unit: str | None) -> None:
    """Raise unless ``privacy_unit`` (if given) is a unique, non-null id column.

    The error states the number of offending rows (a schema violation for the operator),
    never an id or any other value.
    """
    if privacy_unit is None:
        return
    if privacy_unit not in df.columns:
        msg = f"`privacy_unit` column `{privacy_unit}` is not in the table."
        raise SchemaError(msg)
    ids = df[privacy_unit]
    bad = int(len(ids) - ids.dropna().nunique())
    if bad:
        msg = (
            f"`privacy_unit` column `{privacy_unit}` must hold one non-null id per row (one "
            f"row per person): {bad} row(s) repeat an id or have a null id."
        )
        raise SchemaError(msg)


def _key(codes: Codes, attrs: Sequence[int], weights: Sequence[int]) -> Codes:
    key = np.zeros(codes.shape[0], dtype=np.int64)
    for j, w in zip(attrs, weights, strict=True):
        key += codes[:, j] * np.int64(w)
    return key


def _count(keys: Codes, space: int) -> tuple[Codes, Codes]:
    """Distinct keys and their counts (dense bincount for small key spaces)."""
    if space <= max(_DENSE_FACTOR * keys.size, 1 << 16):
        counts = np.bincount(keys, minlength=space)
        present = np.flatnonzero(counts)
        return present.astype(np.int64), counts[present].astype(np.int64)
    uniq, cnt = np.unique(keys, return_counts=True)
    return uniq.astype(np.int64), cnt.astype(np.int64)


class PandasTreeCounter:
    """The :class:`~hdp_spark.core.partial.heavy_hitters.TreeCounter` of a pandas table."""

    def __init__(self, codes: Codes, sizes: Sequence[int]) -> None:
        self._codes = codes
        self._sizes = tuple(sizes)
        # The aggregate of the last single-node level (the root), reused by count_keys.
        self._root: tuple[tuple[int, ...], Codes, Codes] | None = None

    @classmethod
    def from_frame(cls, df: pd.DataFrame, spec: CodedSpec) -> PandasTreeCounter:
        """Recode ``df`` against the spec's domains."""
        codes = encode_codes(_check_frame(df), spec.domains)
        return cls(codes, [d.size for d in spec.domains])

    def count_level(
        self, requests: Sequence[NodeRequest], floor: int
    ) -> dict[int, dict[int, int]]:
        """One pass: per node, the counts of the candidate keys above ``floor``."""
        out: dict[int, dict[int, int]] = {}
        for r in requests:
            key = _key(self._codes, r.attrs, r.weights)
            mask: npt.NDArray[np.bool_] | None = None
            for f in r.filters:
                child = _key(self._codes, f.attrs, f.weights)
                inside = np.isin(child, np.asarray(f.members, dtype=np.int64))
                mask = inside if mask is None else mask & inside
            if mask is not None:
                key = key[mask]
            uniq, cnt = _count(key, key_space(r.attrs, self._sizes))
            self._root = (r.weights, uniq, cnt) if len(requests) == 1 else None
            keep = cnt > floor
            out[r.node] = dict(zip(uniq[keep].tolist(), cnt[keep].tolist(), strict=True))
        return out

    def count_keys(self, weights: Sequence[int], keys: Sequence[int]) -> dict[int, int]:
        """Exact counts of the given whole-record keys (from the root pass's aggregate when
        the last level was the root's; otherwise one pass)."""
        if self._root is not None and tuple(weights) == self._root[0]:
            uniq, cnt = self._root[1], self._root[2]
        else:
            key = _key(self._codes, range(len(self._sizes)), weights)
            uniq, cnt = np.unique(key, return_counts=True)
        keep = np.isin(uniq, np.asarray(keys, dtype=np.int64))
        return dict(zip(uniq[keep].tolist(), cnt[keep].tolist(), strict=True))


def release_heavy_hitters(
    df: pd.DataFrame,
    spec: HeavyHittersSpec,
    *,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> HeavyHittersResult:
    """Run one heavy-hitters release and return the engine-neutral result."""
    if not isinstance(spec, HeavyHittersSpec):
        msg = f"`spec` must come from hdp_heavy_hitters(...), got {type(spec).__name__}."
        raise ParameterError(msg)
    r = release_specs(PandasEngine(df), [spec], schema=schema, unsafe_seed=unsafe_seed)
    result: HeavyHittersResult = r.results[spec.name][()]
    return result


def _table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], types: Mapping[str, str]
) -> pd.DataFrame:
    data = {c: pd.array([r[c] for r in rows], dtype=types[c])  # type: ignore[call-overload]
            for c in columns}
    return pd.DataFrame(data, columns=list(columns))


def heavy_hitters(
    df: pd.DataFrame,
    spec: HeavyHittersSpec,
    *,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> PartialRelease:
    """Release the partial-DP heavy hitters of a pandas DataFrame.

    Args:
        df: one row per person, with the attribute columns of ``spec``.
        spec: from :func:`hdp_spark.hdp_heavy_hitters`.
        unsafe_seed: reproducible noise for tests and examples. UNSAFE in production:
            anyone who knows the seed can remove the noise.
        schema: optional :class:`~hdp_spark.schema.TableSchema` of ``df``: the attribute
            columns (and ``privacy_unit``) must be declared, and its blocking rules run
            first (counts only), before any noise is drawn.

    Returns:
        ``.table``: one row per released key, sorted by key (domain order): the attribute
        columns (null for the extra "other" category), ``noisy_count``,
        ``count_ci_low``, ``count_ci_high`` (null when ``count_fraction`` is 0);
        ``.report``: the public :class:`~hdp_spark.core.partial.HeavyHittersReport`.

    Privacy:
        See :func:`hdp_spark.hdp_heavy_hitters`: ε₀ per attribute, the report's
        ``eps_person`` per person (replacement neighbours, n public). Each call is one
        release with fresh noise; calling twice spends twice. The table is materialized.
    """
    result = release_heavy_hitters(df, spec, unsafe_seed=unsafe_seed, schema=schema)
    kernel = HeavyHittersKernel()
    columns = [(f.suffix, f) for f in kernel.items(spec)]
    table = PandasEngine(df).materialize((), columns, kernel.table_rows(spec, result),
                                   result.report.unsafe_seed)
    return PartialRelease(table, result.report)


def release_histograms(
    df: pd.DataFrame,
    cols: Sequence[str],
    *,
    domains: Mapping[str, Sequence[object]],
    eps0: float,
    other: Mapping[str, object] | None = None,
    beta: float = 0.05,
    privacy_unit: str | None = None,
    unsafe_seed: int | str | bytes | None = None,
) -> HistogramResult:
    """Engine-neutral result of :func:`attribute_histograms`."""
    spec = attribute_histogram_spec(
        cols, domains=domains, eps0=eps0, other=other, beta=beta, privacy_unit=privacy_unit
    )
    df = _check_frame(df)
    codes = encode_codes(df, spec.domains)
    check_unit(df, spec.privacy_unit)
    counts = []
    for j, dom in enumerate(spec.domains):
        cnt = np.bincount(codes[:, j], minlength=dom.size)
        counts.append({c: int(v) for c, v in enumerate(cnt.tolist()) if v})
    return finalize_histograms(spec, counts, ReleaseKey.resolve(unsafe_seed))


def attribute_histograms(
    df: pd.DataFrame,
    cols: Sequence[str],
    *,
    domains: Mapping[str, Sequence[object]],
    eps0: float,
    other: Mapping[str, object] | None = None,
    beta: float = 0.05,
    privacy_unit: str | None = None,
    unsafe_seed: int | str | bytes | None = None,
) -> PartialRelease:
    """Release each attribute's histogram over its public domain under per-attribute ε₀.

    Args:
        df: one row per person.
        cols: attribute columns.
        domains: public values of every attribute (``{col: [values...]}``).
        eps0: per-attribute budget ε₀ (pure DP).
        other: ``{col: value}``: the declared value absorbing null/out-of-domain values;
            other columns get an extra "other" category (``value`` null).
        beta: the count intervals hold the noise with probability >= 1 - beta.
        privacy_unit: optional id column checked to be unique and non-null.
        unsafe_seed: reproducible noise for tests. UNSAFE in production.

    Returns:
        ``.table``: long format, one row per (attribute, domain value), every value of
        every domain included: ``attribute``, ``value`` (the domain value as text, null
        for the extra category), ``code``, ``noisy_count``, ``count_ci_low``,
        ``count_ci_high``; ``.report``: :class:`~hdp_spark.core.partial.HistogramReport`.

    Privacy:
        Protected unit: one attribute of one person, ε₀ (each histogram has L1
        sensitivity 2 under a change of its attribute and reads no other attribute:
        parallel composition, Lemma 10). Per person (whole record): the report's
        ``eps_person`` = d·ε₀ pure, or ``rho_person`` = d·ε₀²/2 zCDP. ε₀ enters only
        through the noise scale 2/ε₀ (rounded up). Public: cols, domains, other, n.
        Null/out-of-domain values are recoded, never raised on.
    """
    result = release_histograms(
        df, cols, domains=domains, eps0=eps0, other=other, beta=beta,
        privacy_unit=privacy_unit, unsafe_seed=unsafe_seed,
    )
    types = {"attribute": "object", "value": "object", "code": "int64", "noisy_count": "int64",
             "count_ci_low": "int64", "count_ci_high": "int64"}
    table = _table(result.rows, HISTOGRAM_COLUMNS, types)
    return PartialRelease(mark_unsafe(table, result.report.unsafe_seed), result.report)


def release_marginals(
    df: pd.DataFrame,
    spec: MarginalsSpec,
    *,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> MarginalsResult:
    """Run one marginals release and return the engine-neutral result."""
    if not isinstance(spec, MarginalsSpec):
        msg = f"`spec` must come from hdp_marginals(...), got {type(spec).__name__}."
        raise ParameterError(msg)
    r = release_specs(PandasEngine(df), [spec], schema=schema, unsafe_seed=unsafe_seed)
    result: MarginalsResult = r.results[spec.name][()]
    return result


def marginals(
    df: pd.DataFrame,
    spec: MarginalsSpec,
    *,
    unsafe_seed: int | str | bytes | None = None,
    schema: TableSchema | None = None,
) -> PartialRelease:
    """Release partial-DP marginals of a pandas DataFrame (the projection mechanism).

    Args:
        df: one row per person, with the attribute columns of ``spec``.
        spec: from :func:`hdp_spark.hdp_marginals`.
        unsafe_seed: reproducible noise for tests and examples. UNSAFE in production.
        schema: optional :class:`~hdp_spark.schema.TableSchema` of ``df`` (blocking rules
            run first).

    Returns:
        ``.table``: long format, one row per (marginal, cell), every cell of every
        marginal: ``marginal`` (its columns joined by ``,``), one column per attribute
        (the cell's value; null outside the marginal or for the extra "other" category),
        ``noisy_count`` (exact count + discrete Gaussian), ``projected_count`` and
        ``projected_fraction`` (the consistent marginals after projection);
        ``.report``: the :class:`~hdp_spark.core.partial.projection.MarginalsReport`.

    Privacy:
        See :func:`hdp_spark.hdp_marginals`: ρ_j = deg(j)/σ² <= ½ε₀² per attribute j,
        |W|/σ² per person (zCDP; replacement neighbours, n public). Each call is one
        release with fresh noise. The table is materialized.
    """
    result = release_marginals(df, spec, unsafe_seed=unsafe_seed, schema=schema)
    kernel = MarginalsKernel()
    columns = [(f.suffix, f) for f in kernel.items(spec)]
    table = PandasEngine(df).materialize((), columns, kernel.table_rows(spec, result),
                                   result.report.unsafe_seed)
    return PartialRelease(table, result.report)


def mwem(
    df: pd.DataFrame,
    spec: MwemSpec,
    *,
    unsafe_seed: int | str | bytes | None = None,
) -> PartialRelease:
    """Release the answers of a partial-DP MWEM synthetic distribution (§4.2).

    One aggregation pass counts every cell of every marginal (native, as for
    ``marginals``); the rounds run on the driver over the public domain.

    Returns:
        ``.table``: one row per (marginal, cell): ``marginal``, one column per attribute
        (null outside the marginal or for the extra "other" category), ``mwem_fraction``;
        ``.report``: a dict (budget, T, ε_T, the selected query tuples).

    Privacy:
        See :func:`hdp_spark.hdp_mwem`: ρ = ½ε₀² per attribute, (ℓ² + ℓ)ε₀²/4 per person
        (zCDP; replacement neighbours, n public). Each call is one release.
    """
    return release_mwem(PandasEngine(df), spec, unsafe_seed)
