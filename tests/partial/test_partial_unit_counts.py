"""The partial-DP family under ``privacy_unit``: a person's NUMBER of rows is private.

The neighbours are a person's rows replaced by any rows (any number, down to none, or more
than R so that the person counts nowhere), or a person added or removed. Exact losses for
each mechanism against such neighbours (brute force over the tree's outcomes, exact Rényi
divergences of the discrete Gaussian, L1 of the histograms), the measured ñ of MWEM (its
noise and its ρ₀), the marginals' ñ, and that nothing published depends on n (no ``_n``
in a job, no row count in its INFO log: tests/jobs/test_partial_unit_jobs.py)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.partial.budget import solve_budget
from hdp_spark.core.partial.mwem import hdp_mwem, run_mwem
from hdp_spark.core.partial.projection import finalize_marginals, marginal_requests, noisy_total
from hdp_spark.core.partial.spec import unit_neighbours
from partial.partial_testlib import Record, max_log_ratio, own_inclusion
from partial.test_partial_unit_rows import (
    COLS,
    OTHER,
    D,
    _cell_counts,
    _frame,
    _hh,
    _kept,
    _marginals,
    _persons,
    _renyi_shift,
    with_threshold_rows,
)


def _replaced(df: pd.DataFrame, pid: int, records: list[Record]) -> pd.DataFrame:
    """``df`` with ALL of person ``pid``'s rows replaced by ``records`` (any number)."""
    rest = df[df["id"] != pid]
    new = pd.DataFrame([(pid, *r) for r in records], columns=["id", *COLS])
    return pd.concat([rest, new], ignore_index=True) if records else rest.reset_index(drop=True)


def _neighbours(rng: np.random.Generator, max_rows: int) -> list[list[Record]]:
    """A person's replacement rows: every number from 0 to R + 2 (R + 1, R + 2: counted
    nowhere), values drawn, plus all rows on one record (the tight direction)."""
    out: list[list[Record]] = []
    for count in range(max_rows + 3):
        out.append([tuple(int(v) for v in rng.integers(0, 2, D)) for _ in range(count)])
        out.append([(1, 1, 1, 1)] * count)
    return out


def test_the_neighbours_stated_are_person_level() -> None:
    text = unit_neighbours("id", 3)
    assert "any number" in text
    assert "added or removed" in text
    assert "number of rows is private" in text
    assert "n is public" in unit_neighbours(None, 1)


@pytest.mark.parametrize("max_rows", [1, 2, 3])
def test_hh_tree_exact_loss_when_a_person_s_row_count_changes(max_rows: int) -> None:
    """Exact max over all outcomes of the tree (d = 4) between a table and a neighbour
    whose person has another number of rows (0 to R + 2), or is added or removed: within
    the reported eps_person (the tree part; no count stage here)."""
    spec = _hh(max_rows, privacy_unit="id") if max_rows == 1 else _hh(max_rows)
    b = spec.budget
    incl = own_inclusion(spec)
    rng = np.random.default_rng(700 + max_rows)
    worst = 0.0
    for trial in range(12):
        df = _frame(trial, persons=40)
        counted, _heavy = _persons(df, max_rows)
        table = with_threshold_rows(df, rng, b)
        x = _kept(table, max_rows)
        for records in _neighbours(rng, max_rows):
            xp = _kept(_replaced(table, counted, records), max_rows)
            worst = max(worst, max_log_ratio(x, xp, D, incl), max_log_ratio(xp, x, D, incl))
    assert worst <= b.eps_person + 1e-9
    assert worst > 0  # not vacuous


def test_hh_removal_bound_never_exceeds_the_replacement_bound() -> None:
    """eps_person takes max(replacement bound, R·N/t): over many configurations the
    second (a row added or removed) is below the first, so the max changes nothing."""
    for d in (2, 3, 4, 5, 7, 9, 16):
        for eps0 in (0.05, 0.3, 1.0, 4.0):
            for leaves in (False, True):
                for rows in (1, 3):
                    b = solve_budget(d, eps0, 0.0, 1e-6, None, 0.05, leaves, rows)
                    t = float(b.tree_scale)
                    replacement = min(d * b.eps_tree, rows * 2.0 * b.noisy_nodes / t)
                    assert rows * b.noisy_nodes / t < replacement
                    assert b.eps_person == pytest.approx(replacement)


@pytest.mark.parametrize("max_rows", [2, 3])
def test_marginals_exact_renyi_when_a_person_s_row_count_changes(max_rows: int) -> None:
    """The exact Rényi divergence of the noisy counts between a table and a neighbour with
    the person's rows replaced by any number of rows (or the person removed) is at most
    α·ρ_person; all rows leaving one cell for R on another is the tight case."""
    spec = _marginals(max_rows, 1.0, k=2)
    b = spec.budget
    s2 = float(b.sigma2)
    requests = marginal_requests(spec)
    df = _frame(9)
    counted, _heavy = _persons(df, max_rows)
    base_df = _replaced(df, counted, [(0, 0, 0, 0)] * max_rows)
    base = _cell_counts(base_df, spec, requests)
    rng = np.random.default_rng(max_rows)
    worst = 0.0
    for records in _neighbours(rng, max_rows):
        other = _cell_counts(_replaced(base_df, counted, records), spec, requests)
        shift = np.concatenate([o - c for o, c in zip(other, base, strict=True)])
        for alpha in (1.5, 4.0):
            div = sum(_renyi_shift(s2, int(c), alpha) for c in shift if c)
            assert div <= alpha * b.rho_person * (1 + 1e-9)
            worst = max(worst, div / alpha)
    assert worst == pytest.approx(b.rho_person, rel=1e-6)  # the tight case is reached


def test_marginals_normalise_by_the_noisy_total_under_a_unit() -> None:
    """Under a unit the answers are c̃/ñ and the report's n is round(ñ), ñ the
    inverse-variance mean of the noisy totals; an empty table is no error (n would be
    data-dependent); without a unit n is exact."""
    spec = _marginals(2, 1.0, k=2)
    counts = [{0: 30, 1: 10, 3: 5} for _ in spec.workload]
    res = finalize_marginals(spec, counts, ReleaseKey.resolve(3))
    noisy = [tuple(int(r["noisy_count"]) for r in res.rows if r["marginal"] == label)
             for label in dict.fromkeys(r["marginal"] for r in res.rows)]
    n_hat = noisy_total(noisy)
    weights = [1 / len(t) for t in noisy]
    assert n_hat == pytest.approx(max(1.0, sum(w * sum(t) for w, t in zip(
        weights, noisy, strict=True)) / sum(weights)))
    assert res.report.n == round(n_hat)
    for table, target in zip(noisy, res.noisy_tables, strict=True):
        assert np.allclose(np.asarray(table) / n_hat, target)
    empty = finalize_marginals(spec, [{} for _ in spec.workload], ReleaseKey.resolve(4))
    assert empty.report.n >= 1
    plain = _marginals(1, 1.0, k=2)
    assert finalize_marginals(plain, counts, ReleaseKey.resolve(3)).report.n == 45


def test_marginals_n_varies_over_keys_under_a_unit() -> None:
    """The report's n is noisy: over fresh keys it varies around n, with the spread of
    the noisy totals (σ²/Σ(1/|cells|) per draw)."""
    spec = _marginals(2, 1.0, k=2)
    counts = [{0: 300, 1: 100, 3: 50} for _ in spec.workload]
    ns = np.array([finalize_marginals(spec, counts, ReleaseKey.resolve(100 + i)).report.n
                   for i in range(400)], dtype=float)
    var = float(spec.budget.sigma2) / sum(1 / 4 for _ in spec.workload)
    assert len(set(ns.tolist())) > 10
    # mean within 5 standard errors (false failure ~6e-7)
    assert abs(ns.mean() - 450) < 5 * math.sqrt(var / 400) + 0.5


@pytest.mark.parametrize("max_rows", [1, 3])
def test_mwem_measures_n_under_a_unit(max_rows: int) -> None:
    """ñ = n + Z₀, Z₀ a discrete Gaussian of variance 4R²/ε₀² (exactly ρ₀ = ε₀²/8 for a
    person moving n by R): the report's n is noisy with that variance and mean n, and
    ρ_person carries ρ₀ (ρ per attribute does not); without a unit n is exact, ρ₀ = 0."""
    eps0, n = 0.8, 500
    binary = {c: [0, 1] for c in COLS}
    unit = hdp_mwem(COLS, domains=binary, eps0=eps0, other=OTHER, k=1, rounds=3,
                    privacy_unit="id", max_rows=max_rows)
    plain = hdp_mwem(COLS, domains=binary, eps0=eps0, other=OTHER, k=1, rounds=3)
    assert unit.count_sigma2() == Fraction(4 * max_rows**2) / Fraction(eps0) ** 2
    rho0 = max_rows**2 / (2 * float(unit.count_sigma2()))
    assert rho0 == pytest.approx(eps0**2 / 8)
    assert unit.rho_count == pytest.approx(rho0)
    counts = [{0: n // 2, 1: n - n // 2} for _ in unit.workload]
    ns = np.array([run_mwem(unit, counts, ReleaseKey.resolve(i)).report["n"]
                   for i in range(300)], dtype=float)
    var = float(unit.count_sigma2())
    assert abs(ns.mean() - n) < 5 * math.sqrt(var / 300) + 0.5  # false failure ~6e-7
    # sample variance within ±35 % of σ₀² (300 draws: ~6 standard errors)
    assert 0.65 * var < ns.var(ddof=1) < 1.35 * var + 1
    rho_attr, rho_person = unit.rho_for(n)
    e_t = float(unit.eps_round_for(3))
    assert rho_person == pytest.approx(max_rows**2 * 2 * 3 * e_t**2 / 2 + rho0)
    assert unit.rho_person == pytest.approx(2 * eps0**2 / 4 + rho0)
    assert rho_attr == pytest.approx(max_rows**2 * 3 * e_t**2)  # no ρ₀ per attribute
    report = run_mwem(unit, counts, ReleaseKey.resolve(1)).report
    assert report["rho_attribute"] == rho_attr  # ñ changes no attribute's loss
    empty = run_mwem(unit, [{} for _ in unit.workload], ReleaseKey.resolve(2))
    assert empty.report["n"] >= 1  # no data-dependent error
    assert plain.rho_count == 0.0
    assert run_mwem(plain, counts, ReleaseKey.resolve(1)).report["n"] == n
