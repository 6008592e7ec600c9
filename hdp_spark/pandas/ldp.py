"""pandas implementation of the local-DP aggregators and of the simulation transform.

The per-row rules mirror :mod:`hdp_spark.spark.ldp` operation for operation (same IEEE-754
double arithmetic), so both engines produce identical level tables for identical reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hdp_spark.core.keys import normalize_key
from hdp_spark.core.ldp.common import (
    duchi_report_bound,
    encode_reports_numpy,
    laplace_report_bound,
    sphere_constant,
    split_limbs,
)
from hdp_spark.core.ldp.oracle import FrequencyOracle, Projection
from hdp_spark.core.ldp.release import (
    REPORT_MARKS_ATTR,
    count_kind,
)
from hdp_spark.core.ldp.specs import LdpDistributionSpec, LdpMeanSpec, LdpSpec, LdpVectorMeanSpec
from hdp_spark.core.ldp.stats import LdpCells, LdpGroupStats, build_ldp_groups
from hdp_spark.core.levels import levels_numpy
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.errors import ParameterError, SchemaError
from hdp_spark.ldp.randomizers import (
    DuchiRandomizer,
    JLRandomizer,
    Randomizer,
    RRRandomizer,
    resolve_key,
    run_randomizer,
)
from hdp_spark.pandas._common import (
    mark_unsafe,
    numeric_column,
)

__all__ = ["id_bytes", "ldp_oracle", "ldp_simulate", "ldp_tables", "report_codes",
           "report_marks", "simulate_frame"]


def _column(df: pd.DataFrame, column: str, role: str) -> pd.Series:
    if column not in df.columns:
        msg = f"{role} column `{column}` is not in the table."
        raise SchemaError(msg)
    return df[column]


def _safe_level(level: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Level where it is a usable ε, else 1.0 (those rows are dropped downstream)."""
    return np.where((level > 0) & np.isfinite(level), level, 1.0)


def _cells(work: dict[str, Any], by: tuple[str, ...], sums: list[str]) -> pd.DataFrame:
    """Native groupby: one row per (group, level, index) with the count and limb sums."""
    frame = pd.DataFrame(work)
    group_cols = [f"__by{i}" for i in range(len(by))] + ["__level", "__idx"]
    named = {"__n": ("__level", "size")} | {s: (s, "sum") for s in sums}
    return frame.groupby(group_cols, sort=False, dropna=False).agg(**named).reset_index()


def _to_cells(res: pd.DataFrame, width: int, columns: list[tuple[str, str, int]]) -> LdpCells:
    """Columnar cells from the groupby result.

    ``columns`` lists (hi column, lo column, k): k = -1 keeps the row's own index
    (scalar means, frequency oracle); k >= 0 turns a valid vector row into coordinate k.
    """
    if width and len(res):
        frame = res[[f"__by{i}" for i in range(width)]]
        codes, uniques = pd.MultiIndex.from_frame(frame).factorize()
        keys = [tuple(normalize_key(v) for v in k) for k in uniques]
        key_code = np.asarray(codes, dtype=np.int64)
    else:
        keys = [()] if len(res) or not width else []
        key_code = np.zeros(len(res), dtype=np.int64)
    level = res["__level"].to_numpy(dtype=np.float64)
    idx = res["__idx"].to_numpy(dtype=np.int64)
    count = res["__n"].to_numpy(dtype=np.int64)
    parts: list[tuple[npt.NDArray[Any], ...]] = []
    for hi_col, lo_col, k in columns:
        index = idx if k < 0 else np.where(idx < 0, -1, k)
        keep = np.ones(len(res), dtype=bool) if k <= 0 else idx >= 0
        parts.append((
            key_code[keep], level[keep], index[keep], count[keep],
            res[hi_col].to_numpy(dtype=np.int64)[keep], res[lo_col].to_numpy(dtype=np.int64)[keep],
        ))
    cat = [np.concatenate([p[i] for p in parts]) for i in range(6)]
    return LdpCells(keys, cat[0], cat[1], cat[2], cat[3], cat[4], cat[5])


def _by(base: dict[str, Any]) -> tuple[str, ...]:
    return tuple(k for k in base if k.startswith("__by"))


IntArray = npt.NDArray[np.int64]


def _mean_codes(df: pd.DataFrame, spec: LdpMeanSpec, level: npt.NDArray[np.float64]
                ) -> tuple[IntArray, IntArray]:
    """(index, q) of each row: 0 / -1 (missing report), the fixed-point value or sign (0
    unless used)."""
    y = numeric_column(df, spec.report, "report")
    valid = ~np.isnan(y)
    use = valid & (level > 0) & np.isfinite(level)
    if spec.mechanism == "laplace":
        mid = (float(spec.lower) + float(spec.upper)) / 2.0
        half = (float(spec.upper) - float(spec.lower)) / 2.0
        z = np.where(use, (y - mid) / half, 0.0)
        q = encode_reports_numpy(z, laplace_report_bound(_safe_level(level)))
    else:
        q = np.sign(np.where(use, y, 0.0)).astype(np.int64)
    return np.where(valid, 0, -1).astype(np.int64), np.where(use, q, 0).astype(np.int64)


def _mean_table(
    df: pd.DataFrame, spec: LdpMeanSpec, base: dict[str, Any], level: npt.NDArray[np.float64]
) -> LdpCells:
    idx, q = _mean_codes(df, spec, level)
    hi, lo = split_limbs(q)
    work = base | {"__idx": idx, "__hi": hi, "__lo": lo}
    by = _by(base)
    return _to_cells(_cells(work, by, ["__hi", "__lo"]), len(by), [("__hi", "__lo", -1)])


def _vector_matrix(
    series: pd.Series, d: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Array column -> (n, d) matrix and the rows holding a usable length-d report."""
    items = series.to_numpy(dtype=object)
    n = items.shape[0]
    mat = np.zeros((n, d), dtype=np.float64)
    present = np.fromiter(
        (isinstance(a, list | tuple | np.ndarray) and len(a) == d for a in items),
        dtype=bool, count=n,
    )
    if present.any():
        try:
            mat[present] = np.vstack(items[present].tolist()).astype(np.float64)
        except (TypeError, ValueError):
            for i in np.flatnonzero(present):
                try:
                    mat[i] = np.asarray(items[i], dtype=np.float64)
                except (TypeError, ValueError):
                    present[i] = False
    bad = np.isnan(mat).any(axis=1)
    mat[bad] = 0.0
    return mat, present & ~bad


def _vector_codes(df: pd.DataFrame, spec: LdpVectorMeanSpec, level: npt.NDArray[np.float64]
                  ) -> tuple[IntArray, IntArray]:
    """(index, q) of each row: 0 / -1 (missing or malformed report), the (n, d) matrix of
    the coordinates' fixed-point values (0 unless used)."""
    mat, valid = _vector_matrix(_column(df, spec.report, "report"), spec.d)
    use = valid & (level > 0) & np.isfinite(level)
    bound = duchi_report_bound(_safe_level(level), sphere_constant(spec.d))
    q = encode_reports_numpy(mat / float(spec.radius), bound[:, None])
    return np.where(valid, 0, -1).astype(np.int64), np.where(use[:, None], q, 0)


def _vector_table(
    df: pd.DataFrame, spec: LdpVectorMeanSpec, base: dict[str, Any],
    level: npt.NDArray[np.float64],
) -> LdpCells:
    d = spec.d
    idx, q = _vector_codes(df, spec, level)
    hi, lo = split_limbs(q)
    work = base | {"__idx": idx}
    sums = []
    for k in range(d):
        work[f"__hi{k}"] = hi[:, k]
        work[f"__lo{k}"] = lo[:, k]
        sums += [f"__hi{k}", f"__lo{k}"]
    by = _by(base)
    return _to_cells(_cells(work, by, sums), len(by),
                     [(f"__hi{k}", f"__lo{k}", k) for k in range(d)])


def _distribution_codes(df: pd.DataFrame, spec: LdpDistributionSpec,
                        level: npt.NDArray[np.float64]) -> tuple[IntArray, IntArray]:
    """(index, q) of each row: the projection row j / -1 (missing or malformed), the sign
    (0 unless used)."""
    j = numeric_column(df, spec.index, "index")
    b = numeric_column(df, spec.sign, "sign")
    m = float(spec.oracle.m)
    with np.errstate(invalid="ignore"):
        valid = (~np.isnan(j)) & (j >= 0) & (j < m) & (j == np.floor(j)) & (~np.isnan(b))
    use = valid & (level > 0) & np.isfinite(level)
    idx = np.where(valid, j, -1.0).astype(np.int64)
    return idx, np.where(use, np.sign(np.where(use, b, 0.0)), 0.0).astype(np.int64)


def _distribution_table(
    df: pd.DataFrame, spec: LdpDistributionSpec, base: dict[str, Any],
    level: npt.NDArray[np.float64],
) -> LdpCells:
    idx, q = _distribution_codes(df, spec, level)
    hi, lo = split_limbs(q)
    work = base | {"__idx": idx, "__hi": hi, "__lo": lo}
    by = _by(base)
    return _to_cells(_cells(work, by, ["__hi", "__lo"]), len(by), [("__hi", "__lo", -1)])


_CODES: dict[type, Callable[[pd.DataFrame, Any, npt.NDArray[np.float64]],
                            tuple[IntArray, IntArray]]] = {
    LdpMeanSpec: _mean_codes,
    LdpVectorMeanSpec: _vector_codes,
    LdpDistributionSpec: _distribution_codes,
}


def report_codes(df: pd.DataFrame, spec: LdpSpec) -> tuple[IntArray, IntArray]:
    """Each row's codes: the index (-1 for a missing or malformed report) and the (n, k)
    matrix of q (k = 1, or d for a vector: each coordinate's), what the cells add up; a
    row's order key is (index, q_1..q_k), as :func:`hdp_spark.spark.privacy_unit.
    keep_one_report` orders rows. Two rows with equal codes and ε add the same to every
    cell.

    Privacy:
        None: per-row codes over the reports (already ε_i-LDP); used to order a person's
        reports, never published.
    """
    level = levels_numpy(numeric_column(df, spec.eps, "ε"), None)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        idx, q = _CODES[type(spec)](df, spec, level)
    return idx, (q if q.ndim == 2 else q[:, None])


_TABLES: dict[type, Callable[[pd.DataFrame, Any, dict[str, Any], npt.NDArray[np.float64]],
                             LdpCells]] = {
    LdpMeanSpec: _mean_table,
    LdpVectorMeanSpec: _vector_table,
    LdpDistributionSpec: _distribution_table,
}
"""Per spec class, its cells (the spec's class was checked by ``validate_ldp_specs``)."""


def ldp_tables(
    df: pd.DataFrame,
    specs: Sequence[LdpSpec],
    by: tuple[str, ...],
    keys: tuple[tuple[object, ...], ...] | None,
) -> list[dict[tuple[object, ...], LdpGroupStats]]:
    """The per-(group, ε level, index) tables of each spec (pre-finalize aggregates)."""
    if not isinstance(df, pd.DataFrame):
        msg = f"`df` must be a pandas DataFrame, got {type(df).__name__}."
        raise ParameterError(msg)
    for col in by:
        _column(df, col, "group")
    if keys is not None:
        if len(by) == 1:
            mask = df[by[0]].isin([k[0] for k in keys]).to_numpy()
        else:
            index = pd.MultiIndex.from_frame(df[list(by)])
            mask = np.asarray(index.isin(list(keys)))
        df = df.loc[mask]
    tables = []
    for spec in specs:
        level = levels_numpy(numeric_column(df, spec.eps, "ε"), None)
        base: dict[str, Any] = {f"__by{i}": df[c].to_numpy() for i, c in enumerate(by)}
        base["__level"] = level
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            cells = _TABLES[type(spec)](df, spec, base, level)
        tables.append(build_ldp_groups(spec.eps, cells, count_kind(spec)))
    return tables


def report_marks(df: pd.DataFrame) -> dict[str, str]:
    """``{column: mechanism}`` of the report columns ``ldp_simulate`` marked in ``df.attrs``."""
    marks = df.attrs.get(REPORT_MARKS_ATTR) if isinstance(df, pd.DataFrame) else None
    if not isinstance(marks, dict):
        return {}
    return {str(c): str(m) for c, m in marks.items() if c in df.columns}


def ldp_oracle(
    df: pd.DataFrame,
    *,
    eps: str,
    d: int,
    beta: float = 0.05,
    projection: Projection = "jl",
    m: int | None = None,
    phi_seed: int | None = None,
) -> FrequencyOracle:
    """Plan a :class:`~hdp_spark.ldp.FrequencyOracle` from a table's ε column (pass A).

    Privacy:
        Reads the ε column only (public in this model).
    """
    return FrequencyOracle.plan(
        numeric_column(df, eps, "ε"), d, beta=beta, projection=projection, m=m, phi_seed=phi_seed
    )


def _output_names(randomizer: Randomizer, output: str) -> dict[str, str]:
    if isinstance(randomizer, JLRandomizer):
        return {"_j": output + "_j", "_b": output + "_b"}
    return {"": output}


def id_bytes(pdf: pd.DataFrame, column: str | None) -> list[bytes]:
    """Canonical identity of each row: its ``column`` value, or its position when None.

    Integers (any integer dtype, or Python ints) encode as ``b"i"`` + 8 bytes, strings as
    ``b"s"`` + UTF-8, so the same id gives the same bytes on pandas and Spark.

    Raises:
        SchemaError: the column is missing, holds a null, or holds something else than
            integers (in the int64 range) and strings.
    """
    if column is None:
        pos = np.arange(len(pdf), dtype=">i8").tobytes()
        return [b"i" + pos[8 * i : 8 * i + 8] for i in range(len(pdf))]
    series = _column(pdf, column, "id")
    rule = f"id column `{column}` must hold non-null integers or strings"
    if pd.api.types.is_bool_dtype(series):
        msg = f"{rule}, got dtype {series.dtype}."
        raise SchemaError(msg)
    if pd.api.types.is_integer_dtype(series):
        if series.isna().any():
            msg = f"{rule}; it holds nulls."
            raise SchemaError(msg)
        raw = series.to_numpy(dtype=np.int64).astype(">i8").tobytes()
        return [b"i" + raw[8 * i : 8 * i + 8] for i in range(len(series))]
    out: list[bytes] = []
    for v in series.to_numpy(dtype=object):
        if isinstance(v, str):
            out.append(b"s" + v.encode("utf-8", "surrogatepass"))
        elif isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_):
            try:
                out.append(b"i" + int(v).to_bytes(8, "big", signed=True))
            except OverflowError:
                msg = f"{rule} in the int64 range."
                raise SchemaError(msg) from None
        else:
            msg = f"{rule}; it holds {type(v).__name__} values."
            raise SchemaError(msg)
    return out


def simulate_frame(
    pdf: pd.DataFrame,
    column: str,
    eps: str,
    randomizer: Randomizer,
    key: ReleaseKey,
    output: str,
    id_column: str | None = None,
) -> pd.DataFrame:
    """Randomize one batch: rows with ε = 0 get null reports, the others one report each.

    Each row draws from its own stream keyed by (key, randomizer, row id, value, ε): the
    reports do not depend on how the table is split into batches.
    """
    ids = id_bytes(pdf, id_column)
    e = numeric_column(pdf, eps, "ε")
    active = e != 0.0
    raw = _column(pdf, column, "value").to_numpy(dtype=object if isinstance(
        randomizer, DuchiRandomizer) else None)
    if isinstance(randomizer, DuchiRandomizer):
        values: Any = np.zeros((int(active.sum()), randomizer.d), dtype=np.float64)
        bad = 0
        for i, item in enumerate(raw[active]):
            if item is None or (isinstance(item, float) and np.isnan(item)):
                continue
            arr = np.asarray(item, dtype=np.float64)
            if arr.shape != (randomizer.d,):
                bad += 1
                continue
            values[i] = arr
        if bad:
            msg = (
                f"value column `{column}` must hold arrays of length {randomizer.d}; "
                f"{bad} row(s) break this rule."
            )
            raise SchemaError(msg)
    elif isinstance(randomizer, RRRandomizer) and raw.dtype == np.bool_:
        values = raw[active]
    else:
        values = pd.to_numeric(pd.Series(raw[active]), errors="coerce").to_numpy(
            dtype=np.float64, na_value=np.nan
        )
    active_ids = [ids[i] for i in np.flatnonzero(active)]
    reports = run_randomizer(randomizer, values, e[active], key, ids=active_ids)
    out = pdf.copy()
    n = len(pdf)
    for suffix, name in _output_names(randomizer, output).items():
        rep = reports[suffix]
        if isinstance(randomizer, DuchiRandomizer):
            col: list[Any] = [None] * n
            for pos, row in zip(np.flatnonzero(active), rep, strict=True):
                col[int(pos)] = row
            out[name] = col
        elif rep.dtype == np.float64:
            full = np.full(n, np.nan)
            full[active] = rep
            out[name] = full
        else:
            dtype = pd.Int8Dtype() if rep.dtype == np.int8 else pd.Int64Dtype()
            series = pd.Series(np.zeros(n, dtype=rep.dtype), index=pdf.index).astype(dtype)
            series[~active] = None
            series[active] = rep
            out[name] = series
    return out


def ldp_simulate(
    df: pd.DataFrame,
    column: str,
    *,
    eps: str,
    randomizer: Randomizer,
    output: str | None = None,
    key: ReleaseKey | None = None,
    unsafe_seed: int | str | bytes | None = None,
    id: str | None = None,
) -> pd.DataFrame:
    """SIMULATION ONLY: add LDP reports of ``column`` to a central pandas table.

    Real local DP randomizes on the device and the server never holds raw values. This
    helper exists to test pipelines and reproduce experiments.

    Args:
        df: the table (raw values and the ε column).
        column: value column (for :class:`~hdp_spark.ldp.DuchiRandomizer`: arrays of
            length d; null arrays are imputed as the zero vector).
        eps: ε column; rows with ε = 0 get a null report; other rows need finite
            ε >= 2**-20.
        randomizer: :class:`~hdp_spark.ldp.LaplaceRandomizer`, ``RRRandomizer``,
            ``DuchiRandomizer`` or ``JLRandomizer``.
        output: report column (``<output>_j``/``<output>_b`` for the frequency oracle);
            default ``"<column>_report"``.
        key: release key; default fresh from OS entropy.
        unsafe_seed: reproducible reports for tests. UNSAFE: the output is marked
            (``attrs["hdp_unsafe_seed"]``) and a WARNING is logged.
        id: column identifying each row (integers or strings, no nulls; e.g. the user
            id). Each row's report is drawn from its own stream keyed by (key, id, value,
            ε), so the same rows give the same reports on pandas and on Spark, whatever the
            batches or partitions. Default: the row's position (0..n-1). Ids should be
            unique: two rows with the same id, value and ε get the same report.

    Returns:
        A copy of ``df`` with the report column(s), marked as reports in
        ``attrs["hdp_ldp_reports"]`` (``{column: mechanism}``, what :func:`ldp_agg` checks).

    Privacy:
        Each report is ε_i-LDP for its row's value (the randomizers' guarantees); the
        same (key, row) gives the same report, a changed value or ε an unrelated one. The
        input table is NOT protected.
    """
    if not isinstance(df, pd.DataFrame):
        msg = f"`df` must be a pandas DataFrame, got {type(df).__name__}."
        raise ParameterError(msg)
    if id is not None and not isinstance(id, str):
        msg = f"`id` must be a column name, got {type(id).__name__}."
        raise ParameterError(msg)
    k = resolve_key(key, unsafe_seed)
    name = output or f"{column}_report"
    out = simulate_frame(df, column, eps, randomizer, k, name, id)
    marks = dict(report_marks(df))
    marks.update({col: randomizer.mechanism for col in _output_names(randomizer, name).values()})
    out.attrs[REPORT_MARKS_ATTR] = marks
    return mark_unsafe(out, k.unsafe)
