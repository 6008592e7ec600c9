"""``method="auto"`` (issue 35): the predictions are the exact methods' figures, the choice
is their argmin (first in the fixed order on ties), the release is the chosen method's
release bit for bit (so each row's privacy loss is the chosen method's), bad names are
refused as before."""

from __future__ import annotations

import dataclasses
import math
import struct

import numpy as np
import pytest

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.histogram.auto import (
    HISTOGRAM_CANDIDATES,
    candidates,
    histogram_candidate_errors,
    histogram_predictions,
    resolve_histogram,
)
from hdp_spark.core.histogram.finalize import finalize_histogram
from hdp_spark.core.histogram.spec import HistogramSpec, histogram_weights
from hdp_spark.core.mean.auto import (
    MEAN_CANDIDATES,
    LevelTable,
    choose_mean,
    figures,
    mean_candidate_errors,
    mean_phi,
    mean_predictions,
)
from hdp_spark.core.mean.finalize import finalize_mean, mean_weights, resolve_mean
from hdp_spark.core.mean.spec import MEAN_METHODS, MeanSpec
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.stats import GroupStats, LevelRow
from hdp_spark.errors import ParameterError

INF = math.inf


def _tables(seed: int, count: int) -> list[tuple[list[float], list[int]]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        size = int(rng.integers(1, 9))
        vals = {float(x) for x in np.exp(rng.uniform(-6, 5, size))}
        if rng.random() < 0.25:
            vals.add(0.0)
        if rng.random() < 0.25:
            vals.add(INF)
        v = sorted(vals)
        m = [int(rng.choice([1, 2, 7, 40, 300, 5000])) for _ in v]
        out.append((v, m))
    return out


TABLES = [*_tables(35, 150), ([0.5], [40]), ([INF], [3]), ([0.0], [4]), ([0.0, INF], [2, 2]),
          ([1e-9, 1e90], [1, 1]), ([0.01, 0.02], [2, 1]),
          # wider than auto_solvers._NARROW: the batch table sums by cumsum, narrow groups
          # alone by a loop over columns (the same additions in the same order)
          ([0.0, *(0.01 * 1.07**i for i in range(70)), INF], [3, *range(1, 71), 2])]


def _exact_figures(w_exact: object, m: list[int]) -> tuple[float, float]:
    ws = [float(x) for x in w_exact.w]  # type: ignore[attr-defined]
    n = sum(m)
    return sum(c * abs(x - 1 / n) for x, c in zip(ws, m, strict=True)) / 2, float(
        w_exact.eta)  # type: ignore[attr-defined]


@pytest.mark.parametrize("method", MEAN_CANDIDATES)
def test_mean_predictions_use_the_methods_exact_weights(method: str) -> None:
    spec = MeanSpec("x", "eps", 0.0, 1.0, method=method)  # type: ignore[arg-type]
    for v, m in TABLES:
        exact = mean_weights(spec, v, m)
        f = figures(LevelTable.single(v, m), mean_phi(method, LevelTable.single(v, m), 0.05))
        assert bool(f.trivial[0]) == exact.trivial, (v, m)
        if exact.trivial:
            continue
        bias, eta = _exact_figures(exact, m)
        # the predicted MSE (where float solvers may tie far below its resolution, e.g.
        # S1 at ε = (1e-9, 1e90), the parts may differ, not the sum)
        assert f.bias[0] ** 2 + 2 * f.eta[0] ** 2 == pytest.approx(
            bias**2 + 2 * eta**2, rel=1e-6, abs=1e-15), (v, m)
        assert f.bias[0] == pytest.approx(bias, rel=1e-6, abs=1e-9), (v, m)


@pytest.mark.parametrize("method", HISTOGRAM_CANDIDATES)
@pytest.mark.parametrize("k", [2, 7])
def test_histogram_predictions_use_the_methods_exact_weights(method: str, k: int) -> None:
    spec = HistogramSpec("c", "eps", tuple(range(k)), method=method,  # type: ignore[arg-type]
                         other=None)
    names = candidates(k)
    for v, m in TABLES[:80]:
        exact = histogram_weights(spec, v, m)
        pred = histogram_predictions(LevelTable.single(v, m), k, 0.05)[names.index(method), 0]
        if exact.trivial:
            assert pred == 0.25
            continue
        bias, eta = _exact_figures(exact, m)
        assert pred == pytest.approx(bias**2 + 8 * eta**2, rel=1e-6, abs=1e-15), (v, m)


def test_mean_choice_is_the_first_argmin_of_the_predictions() -> None:
    seen = set()
    for v, m in TABLES:
        spec = MeanSpec("x", "eps", -3.0, 5.0, method="auto", beta=0.1)
        pred = mean_predictions(LevelTable.single(v, m), 0.1)[:, 0]
        chosen = resolve_mean(spec, v, m).method
        assert chosen == MEAN_CANDIDATES[int(np.argmin(pred))]
        assert pred[MEAN_CANDIDATES.index(chosen)] == pred.min()
        assert all(p > pred.min() for p in pred[:MEAN_CANDIDATES.index(chosen)])  # ties: first
        table = mean_candidate_errors(v, m, 0.1, 8.0)
        assert [c for c, _ in table] == list(MEAN_CANDIDATES)
        assert [r for _, r in table] == pytest.approx([8.0 * math.sqrt(p) for p in pred])
        seen.add(chosen)
    assert len(seen) >= 3  # the tables exercise several choices


def test_histogram_choice_is_the_first_argmin_and_skips_ln_k_for_one_bin() -> None:
    assert "hpf-ce" not in candidates(1)
    assert "hpf-we" not in candidates(1)
    for k in (1, 4):
        spec = HistogramSpec("c", "eps", tuple(range(k)), method="auto", other=None)
        for v, m in TABLES[:60]:
            pred = histogram_predictions(LevelTable.single(v, m), k, 0.05)[:, 0]
            chosen = resolve_histogram(spec, v, m).method
            assert chosen == candidates(k)[int(np.argmin(pred))]
            table = dict(histogram_candidate_errors(spec, v, m))
            assert table[chosen] == min(table.values())


def test_ties_go_to_the_first_candidate() -> None:
    """No row may carry weight: every candidate predicts 1/4, the first wins."""
    spec = MeanSpec("x", "eps", 0.0, 1.0, method="auto")
    assert resolve_mean(spec, [0.0], [5]).method == "adpm"
    assert resolve_mean(spec, [], []).method == "adpm"
    hist = HistogramSpec("c", "eps", ("a", "b"), method="auto")
    assert resolve_histogram(hist, [0.0], [5]).method == "hpf-a"


def _bits(x: object) -> object:
    return struct.pack(">d", x) if isinstance(x, float) else x


def test_auto_release_is_the_chosen_methods_release() -> None:
    """Same estimate, noise, interval, τ, method and per-level (weight, eps_effective) as a
    release with the chosen method written out: each row's privacy loss is the chosen
    method's (whose bound the privacy tests check for every fixed method)."""
    key = ReleaseKey.from_unsafe_seed("auto")
    rng = np.random.default_rng(7)
    for i, (v, m) in enumerate(TABLES):
        stats = GroupStats(tuple(LevelRow(lv, c, (int(rng.integers(0, c * FIXED_ONE + 1)),))
                                 for lv, c in zip(v, m, strict=True)))
        auto = MeanSpec("x", "eps", -1.0, 2.0, method="auto")
        chosen = resolve_mean(auto, v, m)
        got = finalize_mean(auto, stats, 0, key, (i,), "lab")
        want = finalize_mean(chosen, stats, 0, key, (i,), "lab")
        assert got.method == chosen.method
        for field in dataclasses.fields(got):
            a, b = getattr(got, field.name), getattr(want, field.name)
            assert _bits(a) == _bits(b) or (a != a and b != b), (field.name, v, m)


def test_auto_histogram_release_is_the_chosen_methods_release() -> None:
    key = ReleaseKey.from_unsafe_seed("auto-h")
    rng = np.random.default_rng(8)
    spec = HistogramSpec("c", "eps", ("a", "b", "c"), method="auto")
    for i, (v, m) in enumerate(TABLES[:40]):
        rows = []
        for lv, c in zip(v, m, strict=True):
            cut = sorted(int(x) for x in rng.integers(0, c + 1, 3))
            counts = (cut[0], cut[1] - cut[0], cut[2] - cut[1], c - cut[2])
            rows.append(LevelRow(lv, c, counts))
        stats = GroupStats(tuple(rows))
        chosen = resolve_histogram(spec, v, m)
        got = finalize_histogram(spec, stats, key, (i,))
        want = finalize_histogram(chosen, stats, key, (i,))
        assert got == want or (got.method == want.method and got.noisy == want.noisy)
        assert got.method == chosen.method


def test_choice_of_a_group_does_not_depend_on_the_other_groups() -> None:
    """The batch table (many groups, wide padding) chooses as one group alone: the scalar
    and the batch finalize choose identically."""
    offsets = np.zeros(len(TABLES) + 1, dtype=np.int64)
    np.cumsum([len(v) for v, _ in TABLES], out=offsets[1:])
    levels = np.array([x for v, _ in TABLES for x in v])
    counts = np.array([c for _, m in TABLES for c in m], dtype=np.int64)
    together = choose_mean(LevelTable.of(offsets, levels, counts), 0.05)
    alone = [int(choose_mean(LevelTable.single(v, m), 0.05)[0]) for v, m in TABLES]
    assert together.tolist() == alone
    both = mean_predictions(LevelTable.of(offsets, levels, counts), 0.05)
    for g, (v, m) in enumerate(TABLES):
        one = mean_predictions(LevelTable.single(v, m), 0.05)[:, 0]
        assert [_bits(float(x)) for x in both[:, g]] == [_bits(float(x)) for x in one]


@pytest.mark.parametrize("bad", ["Auto", "best", "", "ldp-auto"])
def test_bad_method_names_are_refused_as_before(bad: str) -> None:
    with pytest.raises(ParameterError, match=r"`method` must be one of adpm, .*auto; got "):
        MeanSpec("x", "eps", 0.0, 1.0, method=bad)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"`method` must be one of hpf-a, .*auto; got "):
        HistogramSpec("c", "eps", ("a",), method=bad)  # type: ignore[arg-type]
    assert "auto" in MEAN_METHODS


def test_histogram_batch_choice_equals_the_per_group_choice() -> None:
    """The histogram kernel's batch finalize (one vectorized choice for all groups, in
    chunks) equals its per-group finalize, group by group."""
    from hdp_spark.core.kernels import HistogramKernel
    from hdp_spark.core.pipeline import GroupCells, NoiseContext

    rng = np.random.default_rng(9)
    spec = HistogramSpec("c", "eps", ("a", "b", "c"), method="auto")
    tables = []
    for v, m in TABLES:
        rows = []
        for lv, c in zip(v, m, strict=True):
            cut = sorted(int(x) for x in rng.integers(0, c + 1, 3))
            rows.append(LevelRow(lv, c, (cut[0], cut[1] - cut[0], cut[2] - cut[1], c - cut[2])))
        tables.append(GroupStats(tuple(rows)))
    tables.append(GroupStats(()))
    key = ReleaseKey.from_unsafe_seed("batch-h")
    groups = tuple((g,) for g in range(len(tables)))
    kernel = HistogramKernel()
    got = kernel.finalize_batch(spec, tables, 0, key, groups, "h")
    want = [kernel.finalize(spec, GroupCells(t, 0), NoiseContext(key, g, "h"))
            for t, g in zip(tables, groups, strict=True)]
    assert got == want
    assert len({r.method for r in got}) >= 2


def test_chunked_choices_equal_one_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of a few cells (a group never split) choose as one table of all groups."""
    import hdp_spark.core.mean.auto as mean_auto
    from hdp_spark.core.mean.auto import choose_mean_cells

    offsets = np.zeros(len(TABLES) + 1, dtype=np.int64)
    np.cumsum([len(v) for v, _ in TABLES], out=offsets[1:])
    levels = np.array([x for v, _ in TABLES for x in v])
    counts = np.array([c for _, m in TABLES for c in m], dtype=np.int64)
    whole = choose_mean(LevelTable.of(offsets, levels, counts), 0.05).tolist()
    monkeypatch.setattr(mean_auto, "CHUNK_CELLS", 7)
    assert choose_mean_cells(offsets, levels, counts, 0.05).tolist() == whole
