"""Reproduce spec/seed-002.md §4.3 (analytic) and §4.4 (Monte-Carlo) for hdp_user_mean.

Part A (§4.3, analytic, Example 1 = B1: p = 0.5, σ_p = 1/sqrt(n), k_i = ceil(n/i), β = 0.05,
f = C3 with the true σ_p², widths ∩ [0, 1], κ_L = 2): V / V_np of the ideal private estimator
with both caps (solved by hdp_spark's exact solver), of the uniform user average, the median-k
reduction, the pooled row average and inverse-variance weighting without clipping.

Part B (§4.4, Monte-Carlo): the realistic Algorithm 2 as released by
``hdp_spark.pandas._user_mean`` on materialized rows (data and mechanism redrawn per
repetition), MSE / V_np around the true p, for the paper cap and the width cap with the
private variance step (C2) and the width cap with the oracle variance. Baselines on the same
data, all through ``hdp_spark.pandas.agg(hdp_mean(...))``:

* ``user avg``: the plain average over users (one row per user holding p̂_i, ε), user-level
  ε-DP, Lap(1/(nε));
* ``row ε/k1``: the row-level mean over all rows at ε/k_1 per row (user-level ε by group
  privacy; spec's "pooled");
* ``row ε (NOT user-DP)``: the row-level mean at ε per row, which ignores users: the
  heaviest user's loss is k_1·ε. Shown to say what a row-level library would report.

Part C (analytic): scenarios B2-B4 of §4.2 and per-user ε (half the users at ε, half at
10ε) against everyone at ε. Part D (``--mixed-reps``): the per-user-ε release by Monte-Carlo.

Part E (``--initial-reps``): the initial step's two sources on the same data (paired), the
library's per-user means p̂_i against the paper's first sample x_i^1 (Algorithm 2, Step 1).
Both variants get the same variance-step output (common random numbers). The
first-sample variant exists only here: :class:`FirstSampleUsers` is the pandas backend
with its G_mean sums replaced by each user's first row (the rows of ``_rows`` are i.i.d.
within a user, so the first row is a data-independent choice). Both variants run the same
core pipeline (``run_user_mean``) with fresh release keys.

Part F (``--cell-reps``, ``--strata-reps``): the Monte-Carlo cell n = 10⁵, ε = 0.1 of §4.4
in detail: many repetitions with robust summaries (median, trimmed mean, tail share), and a
stratified estimate over the variance step's output (the exponential mechanism is forced to
each grid point in turn and the strata are weighted by its exact probabilities).

Run (the figures in benchmarks/log/user_mean.md):
    .venv/bin/python benchmarks/repro_seed002.py --reps 300 --mc-n 10000 \
        --json benchmarks/repro_seed002.json
    .venv/bin/python benchmarks/repro_seed002.py --skip-analytic --skip-mc \
        --initial-reps 300 --seed 3024 --mc-n 10000          # also --mc-n 100000
    .venv/bin/python benchmarks/repro_seed002.py --skip-analytic --skip-mc \
        --cell-reps 500 --strata-reps 15                     # also --cell-reps 600 --seed 5024
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hdp_spark.aggregators import hdp_mean
from hdp_spark.core.encoding import encode_numpy
from hdp_spark.core.noise import ReleaseKey
from hdp_spark.core.user_mean import (
    CHI2_MEDIAN,
    KAPPA_V,
    Cut,
    FirstStage,
    MeanCell,
    UserMeanResult,
    UserMeanSpec,
    hdp_user_mean,
    run_user_mean,
    solve_user_weights,
)
from hdp_spark.core.user_mean import steps as um_steps
from hdp_spark.pandas import agg as hdp_agg
from hdp_spark.pandas import user_mean
from hdp_spark.pandas._user_mean import PandasUsers, _cells

BETA = 0.05
P = 0.5
SPEC_CELL = 2.45
"""Spec §4.4's width-cap, C2-variance figure at n = 1e5, ε = 0.1 (Part F compares with it)."""


def _b1(n: int) -> tuple[np.ndarray, float]:
    return np.ceil(n / np.arange(1, n + 1)).astype(np.int64), 1.0 / n


def _f(k: np.ndarray, n: int, s2: float) -> np.ndarray:
    log_term = math.log(4 * n / BETA)
    return np.sqrt(log_term / (2 * k)) + math.sqrt(2 * s2 * log_term)


def analytic_row(n: int, eps: float) -> dict[str, float]:
    """Spec §4.3 ratios V/V_np for one (n, ε)."""
    k, sp2 = _b1(n)
    pq = P * (1 - P)
    sig2 = pq / k + (1 - 1 / k) * sp2
    v_np = 1.0 / float(np.sum(1 / sig2))
    f = _f(k, n, sp2)
    width = np.minimum(P + f, 1.0) - np.maximum(P - f, 0.0)
    _ks, first, counts = np.unique(k, return_index=True, return_counts=True)
    s = np.sqrt(sig2[first])
    w = width[first]
    out = {"V_np": v_np}
    for name, rho in (("ideal sigma-cap", s), ("ideal width-cap", w)):
        sol = solve_user_weights(counts, s, w / eps, rho / eps, 2.0)
        out[name] = sol.objective / v_np
    out["uniform"] = (float(np.sum(sig2)) / n**2 + 2 / (n * eps) ** 2) / v_np
    k_med = int(np.median(k))
    keep = k >= k_med
    m2 = int(keep.sum())
    s_med = pq / k_med + (1 - 1 / k_med) * sp2
    w_med = float(min(P + _f(np.array([k_med]), n, sp2)[0], 1.0)
                  - max(P - _f(np.array([k_med]), n, sp2)[0], 0.0))
    out["median-k"] = (s_med / m2 + 2 * (w_med / (m2 * eps)) ** 2) / v_np
    total = float(np.sum(k))
    out["pooled"] = (float(np.sum(k.astype(float) ** 2 * sig2)) / total**2
                     + 2 * (float(k.max()) / (total * eps)) ** 2) / v_np
    wmax = float(np.max(1 / sig2)) * v_np
    out["IVW-noclip"] = (v_np + 2 * (wmax / eps) ** 2) / v_np
    return out


def scenario(name: str, n: int) -> tuple[np.ndarray, float]:
    """k_i and σ_p² of spec §4.2's scenarios B1-B4 (B2 uses Example 1's k)."""
    k, sp2 = _b1(n)
    if name == "B2 (sigma_p = 0)":
        return k, 0.0
    if name == "B3 (k = 10)":
        return np.full(n, 10, dtype=np.int64), sp2
    if name == "B4 (sigma_p = 0.15)":
        return k, 0.15**2
    return k, sp2


def ideal_ratio(k: np.ndarray, sp2: float, eps_users: np.ndarray, cap: str) -> tuple[float, float]:
    """(V_np, V/V_np) of the ideal private estimator over (k, ε) classes (§6.4-E1 solver)."""
    n = k.size
    pq = P * (1 - P)
    sig2 = pq / k + (1 - 1 / k) * sp2
    v_np = 1.0 / float(np.sum(1 / sig2))
    f = _f(k, n, sp2)
    width = np.minimum(P + f, 1.0) - np.maximum(P - f, 0.0)
    classes, first, counts = np.unique(
        np.stack([k.astype(float), eps_users]), axis=1, return_index=True, return_counts=True)
    e = classes[1]
    s = np.sqrt(sig2[first])
    w = width[first]
    rho = (w if cap == "width" else s) / e
    return v_np, solve_user_weights(counts, s, w / e, rho, 2.0).objective / v_np


def scenario_rows(n: int) -> list[dict[str, object]]:
    """Part C: B2-B4 and per-user ε (analytic, ideal estimator, both caps)."""
    out: list[dict[str, object]] = []
    names = ["B1 (Example 1)", "B2 (sigma_p = 0)", "B3 (k = 10)", "B4 (sigma_p = 0.15)"]
    for name in names:
        k, sp2 = scenario(name, n)
        for eps in (1.0, 0.1):
            e = np.full(n, eps)
            v_np, paper = ideal_ratio(k, sp2, e, "paper")
            _, width = ideal_ratio(k, sp2, e, "width")
            out.append({"scenario": name, "eps": str(eps), "V_np": v_np, "sigma-cap": paper,
                        "width-cap": width})
    k, sp2 = scenario("B1 (Example 1)", n)
    for lo in (1.0, 0.1):
        mixed = np.where(np.arange(n) % 2 == 0, lo, 10 * lo)  # independent of k
        v_np, het = ideal_ratio(k, sp2, mixed, "width")
        _, low = ideal_ratio(k, sp2, np.full(n, lo), "width")
        _, high = ideal_ratio(k, sp2, np.full(n, 10 * lo), "width")
        out.append({"scenario": f"B1, half the users at {lo}, half at {10 * lo}",
                    "eps": "per user", "V_np": v_np, "width-cap": het,
                    f"everyone at {lo}": low, f"everyone at {10 * lo}": high})
    return out


def _rows(n: int, rng: np.random.Generator, sp2: float) -> tuple[pd.DataFrame, np.ndarray]:
    k, _ = _b1(n)
    t = P * (1 - P) / sp2 - 1
    pi = rng.beta(P * t, (1 - P) * t, size=n)
    user = np.repeat(np.arange(n), k)
    x = (rng.random(user.size) < pi[user]).astype(np.float64)
    return pd.DataFrame({"user": user, "x": x}), k


def monte_carlo(n: int, eps: float, reps: int, seed: int) -> dict[str, float]:
    """Spec §4.4: MSE/V_np of the released estimators, `reps` fresh datasets and keys."""
    k, sp2 = _b1(n)
    sig2 = P * (1 - P) / k + (1 - 1 / k) * sp2
    v_np = 1.0 / float(np.sum(1 / sig2))
    specs = {
        "paper cap, C2 var": hdp_user_mean("x", user="user", eps="eps", lower=0, upper=1,
                                           cap="paper"),
        "width cap, C2 var": hdp_user_mean("x", user="user", eps="eps", lower=0, upper=1),
        "width cap, oracle var": hdp_user_mean("x", user="user", eps="eps", lower=0, upper=1,
                                               public_variance=sp2),
    }
    uniform = {"method": "uniform", "clip_output": False}
    errors: dict[str, list[float]] = {name: [] for name in specs}
    for name in ("user avg", "row eps/k1", "row eps (NOT user-DP)"):
        errors[name] = []
    rng = np.random.default_rng(seed)
    for _ in range(reps):
        df, _k = _rows(n, rng, sp2)
        df["eps"] = eps
        for name, spec in specs.items():
            est = float(user_mean(df, spec).iloc[0][spec.name])
            errors[name].append(est - P)
        per_user = df.groupby("user").agg(x=("x", "mean")).reset_index().assign(eps=eps)
        est = hdp_agg(per_user, hdp_mean("x", eps="eps", lower=0, upper=1, alias="m",
                                         **uniform)).iloc[0]["m"]  # type: ignore[arg-type]
        errors["user avg"].append(float(est) - P)
        low = df.assign(eps=eps / float(k.max()))
        est = hdp_agg(low, hdp_mean("x", eps="eps", lower=0, upper=1, alias="m",
                                    **uniform)).iloc[0]["m"]  # type: ignore[arg-type]
        errors["row eps/k1"].append(float(est) - P)
        est = hdp_agg(df, hdp_mean("x", eps="eps", lower=0, upper=1, alias="m",
                                   **uniform)).iloc[0]["m"]  # type: ignore[arg-type]
        errors["row eps (NOT user-DP)"].append(float(est) - P)
    out = {"V_np": v_np, "reps": float(reps)}
    for name, errs in errors.items():
        e = np.asarray(errs)
        mse = float(np.mean(e**2))
        out[name] = mse / v_np
        out[name + " se"] = float(np.std(e**2, ddof=1) / math.sqrt(len(e))) / v_np
        out[name + " bias"] = float(np.mean(e))
    return out


def monte_carlo_mixed(n: int, lo: float, reps: int, seed: int) -> dict[str, float]:
    """Per-user ε (§6.4): half the users (alternating ids, independent of k) at ``lo``, half
    at 10·lo; MSE/V_np of the released estimators."""
    k, sp2 = _b1(n)
    sig2 = P * (1 - P) / k + (1 - 1 / k) * sp2
    v_np = 1.0 / float(np.sum(1 / sig2))
    spec = hdp_user_mean("x", user="user", eps="eps", lower=0, upper=1)
    names = ["per-user eps, width cap, C2 var", f"everyone at {lo}, width cap, C2 var",
             "user avg, ADPM weights (seed 001)"]
    errors: dict[str, list[float]] = {name: [] for name in names}
    rng = np.random.default_rng(seed)
    for _ in range(reps):
        df, _k = _rows(n, rng, sp2)
        df["eps"] = np.where(df["user"].to_numpy() % 2 == 0, lo, 10 * lo)
        errors[names[0]].append(float(user_mean(df, spec).iloc[0][spec.name]) - P)
        errors[names[1]].append(float(user_mean(df.assign(eps=lo), spec).iloc[0][spec.name]) - P)
        per_user = df.groupby("user").agg(x=("x", "mean"), eps=("eps", "first")).reset_index()
        est = hdp_agg(per_user, hdp_mean("x", eps="eps", lower=0, upper=1, alias="m",
                                         clip_output=False)).iloc[0]["m"]
        errors[names[2]].append(float(est) - P)
    out = {"V_np": v_np, "reps": float(reps)}
    for name, errs in errors.items():
        e = np.asarray(errs)
        out[name] = float(np.mean(e**2)) / v_np
        out[name + " se"] = float(np.std(e**2, ddof=1) / math.sqrt(len(e))) / v_np
    return out


# ---------------------------------------------------------------------------------------------
# Part E: the initial step's source (per-user means, the library's, or the paper's x_i^1)
# ---------------------------------------------------------------------------------------------


class FirstSampleUsers(PandasUsers):
    """The pandas backend with the paper's initial step (Algorithm 2, Step 1): each G_mean
    user contributes its FIRST row's clamped value x_i^1 instead of its mean p̂_i.

    Benchmark-only. The core's initial step reads Σ s_i/(k_i·2^31) per class, so a class's
    total is set to k·Σ q1_i (q1 = the encoded first value): the statistic becomes Σ w x_i^1.
    Privacy is unchanged (x_i^1 ∈ [0, 1], so replacing user i still moves the statistic by at
    most w_i); "first" is the row order of the table, which ``_rows`` draws i.i.d. per user.
    """

    def __init__(self, df: pd.DataFrame, spec: UserMeanSpec) -> None:
        super().__init__(df, spec, (), ((),))
        q = encode_numpy(df[spec.column].to_numpy(dtype=np.float64), spec.lower, spec.upper,
                         spec.fill_value)
        first = pd.Series(q).groupby(df[spec.user].to_numpy(), sort=False).first()
        by_text = {str(u): int(v) for u, v in first.items()}
        self.q1 = np.array([by_text[t] for t in self.text], dtype=np.int64)

    def first_stage(self, cuts: Mapping[int, Cut]) -> FirstStage:
        stage = super().first_stage(cuts)
        role = self._roles(cuts)
        frame = pd.DataFrame({"gid": self.gid, "k": self.k, "level": self.level,
                              "s": self.k * self.q1, "role": role})
        mean: dict[int, list[MeanCell]] = {}
        for g, k, lvl, c, t in _cells(frame[frame["role"] == "m"], "s"):
            mean.setdefault(g, []).append(MeanCell(k, lvl, c, t))
        return FirstStage({g: tuple(v) for g, v in mean.items()}, stage.var, stage.fin_counts)


def release_once(df: pd.DataFrame, spec: UserMeanSpec, initial: str = "user_mean"
                 ) -> UserMeanResult:
    """One release through the core pipeline with a fresh key; ``initial`` picks the
    initial step's source (``"user_mean"``: the library, ``"first_sample"``: the paper)."""
    backend = (FirstSampleUsers(df, spec) if initial == "first_sample"
               else PandasUsers(df, spec, (), ((),)))
    return run_user_mean(spec, backend, (), ((),), ReleaseKey.fresh()).results[()]


def _summary(errs: Sequence[float], v_np: float) -> dict[str, Any]:
    """MSE/V_np ± s.e. of the mean of e², and robust summaries of e²/V_np."""
    sq = np.sort(np.asarray(errs, dtype=np.float64) ** 2 / v_np)
    cut = int(0.05 * sq.size)
    top = sq[sq.size - max(cut, 1):]
    return {
        "mse": float(sq.mean()),
        "se": float(sq.std(ddof=1) / math.sqrt(sq.size)),
        "sd": float(sq.std(ddof=1)),
        "median": float(np.median(sq)),
        "trimmed5": float(sq[: sq.size - cut].mean()) if cut else float(sq.mean()),
        "top5_share": float(top.sum() / sq.sum()),
        "bias": float(np.mean(errs)),
        "reps": float(sq.size),
    }


def monte_carlo_initial(n: int, eps: float, reps: int, seed: int) -> dict[str, Any]:
    """Part E: the released estimator with either initial source on the same data."""
    k, sp2 = _b1(n)
    sig2 = P * (1 - P) / k + (1 - 1 / k) * sp2
    v_np = 1.0 / float(np.sum(1 / sig2))
    spec = hdp_user_mean("x", user="user", eps="eps", lower=0, upper=1)
    rng = np.random.default_rng(seed)
    err: dict[str, list[float]] = {"user_mean": [], "first_sample": []}
    init: dict[str, list[float]] = {"user_mean": [], "first_sample": []}
    for _ in range(reps):
        df, _k = _rows(n, rng, sp2)
        df["eps"] = eps
        # common random numbers: both variants get the same variance-step output t (the
        # variance step reads only G_var, disjoint from G_mean, so t does not depend on the
        # initial step); the final noise is drawn afresh for each
        drawn: list[list[float]] = []
        with variance_step_probe(None, drawn):
            r = release_once(df, spec, "user_mean")
        err["user_mean"].append(r.estimate - P)
        init["user_mean"].append(r.initial - P)
        with variance_step_probe(int(drawn[-1][-1]), []):
            r = release_once(df, spec, "first_sample")
        err["first_sample"].append(r.estimate - P)
        init["first_sample"].append(r.initial - P)
    out: dict[str, Any] = {"n": n, "eps": eps, "V_np": v_np}
    for source in err:
        out[source] = _summary(err[source], v_np)
        out[source + " initial mse"] = float(np.mean(np.square(init[source])))
    diff = (np.square(err["first_sample"]) - np.square(err["user_mean"])) / v_np
    out["paired diff"] = float(diff.mean())
    out["paired diff se"] = float(diff.std(ddof=1) / math.sqrt(diff.size))
    return out


# ---------------------------------------------------------------------------------------------
# Part F: the cell n = 1e5, ε = 0.1 (plain Monte-Carlo, robust summaries, strata over t)
# ---------------------------------------------------------------------------------------------


@contextmanager
def variance_step_probe(force: int | None, record: list[list[float]]) -> Iterator[None]:
    """Record the exact probabilities of the variance step's exponential mechanism (and
    force its output to grid index ``force``; None = sample it as the library does)."""
    original: Callable[..., int] = um_steps.exponential_mechanism

    def probe(scores: Sequence[int], eps: Fraction, rng: Any) -> int:
        best = max(scores)
        w = [math.exp(-float(eps) * (best - x)) for x in scores]
        t = original(scores, eps, rng) if force is None else force
        record.append([*(x / sum(w) for x in w), float(t)])  # probabilities, then the index
        return t

    um_steps.exponential_mechanism = probe  # type: ignore[assignment]
    try:
        yield
    finally:
        um_steps.exponential_mechanism = original  # type: ignore[assignment]


def cell_study(n: int, eps: float, reps: int, strata_reps: int, seed: int) -> dict[str, Any]:
    """Part F: plain Monte-Carlo of the default release, and a stratified estimate over the
    variance step's grid index t (MSE = Σ_t P(t)·MSE(t), P(t) the mean exact EM probability)."""
    k, sp2 = _b1(n)
    sig2 = P * (1 - P) / k + (1 - 1 / k) * sp2
    v_np = 1.0 / float(np.sum(1 / sig2))
    spec = hdp_user_mean("x", user="user", eps="eps", lower=0, upper=1)
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"n": n, "eps": eps, "V_np": v_np}
    if reps:
        errs, ts, scales = [], [], []
        probs: list[list[float]] = []
        with variance_step_probe(None, probs):
            for _ in range(reps):
                df, _k = _rows(n, rng, sp2)
                df["eps"] = eps
                r = release_once(df, spec)
                errs.append(r.estimate - P)
                scales.append(r.noise_scale)
                ts.append(round(-math.log2(r.user_var * 2 * CHI2_MEDIAN
                                           / KAPPA_V)))
        out["plain"] = _summary(errs, v_np)
        out["plain errors"] = errs
        sq = np.square(np.asarray(errs)) / v_np
        boot = np.random.default_rng(seed + 1)
        for size in (100, 200, 300):
            means = sq[boot.integers(0, sq.size, size=(20_000, size))].mean(axis=1)
            out["plain"][f"P(mean of {size} reps <= {SPEC_CELL})"] = float(
                np.mean(means <= SPEC_CELL))
            out["plain"][f"5-95 % of mean of {size} reps"] = np.quantile(
                means, [0.05, 0.95]).tolist()
        out["plain"]["laplace part"] = float(np.mean(2 * np.square(scales)) / v_np)
        out["t counts"] = np.bincount(np.asarray(ts), minlength=len(probs[0]) - 1).tolist()
        out["t prob (mean exact)"] = np.mean(np.asarray(probs)[:, :-1], axis=0).tolist()
    if strata_reps:
        per_t: list[dict[str, float]] = []
        weights: list[float] = []
        t = 0
        while True:
            errs, scales = [], []
            probs = []
            with variance_step_probe(t, probs):
                for _ in range(strata_reps):
                    df, _k = _rows(n, rng, sp2)
                    df["eps"] = eps
                    r = release_once(df, spec)
                    errs.append(r.estimate - P)
                    scales.append(r.noise_scale)
            grid = len(probs[0]) - 1
            row = _summary(errs, v_np)
            row["laplace part"] = float(np.mean(2 * np.square(scales)) / v_np)
            row["s2"] = r.user_var
            per_t.append(row)
            weights.append(float(np.mean([p[t] for p in probs])))
            print(f"  stratum t = {t}: P = {weights[-1]:.4f}, MSE/V_np = {row['mse']:.3g} ± "
                  f"{row['se']:.2g}, Laplace part {row['laplace part']:.3g}", flush=True)
            t += 1
            if t >= grid:
                break
        wsum = sum(weights)
        mse = sum(w * r["mse"] for w, r in zip(weights, per_t, strict=True)) / wsum
        se = math.sqrt(sum((w / wsum * r["se"]) ** 2 for w, r in zip(weights, per_t,
                                                                     strict=True)))
        out["strata"] = per_t
        out["strata weights"] = weights
        out["stratified"] = {"mse": mse, "se": se}
    return out


def _fmt(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1e4 else f"{x:.2g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--mc-n", type=int, nargs="+", default=[10_000])
    parser.add_argument("--mc-eps", type=float, nargs="+", default=[1.0, 0.1])
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--skip-mc", action="store_true")
    parser.add_argument("--skip-analytic", action="store_true")
    parser.add_argument("--scenario-n", type=int, default=10_000)
    parser.add_argument("--mixed-reps", type=int, default=0)
    parser.add_argument("--initial-reps", type=int, default=0,
                        help="Part E: paired reps, per-user means vs first sample")
    parser.add_argument("--cell-reps", type=int, default=0, help="Part F: plain reps")
    parser.add_argument("--strata-reps", type=int, default=0, help="Part F: reps per stratum")
    parser.add_argument("--cell-n", type=int, default=100_000)
    parser.add_argument("--cell-eps", type=float, default=0.1)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    report: dict[str, object] = {"command": " ".join(sys.argv)}

    if args.skip_analytic:
        analytic_eps: tuple[float, ...] = ()
    else:
        analytic_eps = (1.0, 0.1, 0.5, 2.0)
    cols = ["V_np", "ideal sigma-cap", "ideal width-cap", "uniform", "median-k", "pooled",
            "IVW-noclip"]
    if analytic_eps:
        print("## Part A: spec §4.3, analytic V/V_np (B1, p = 0.5, β = 0.05, κ_L = 2)\n")
        print("| ε | n | " + " | ".join(cols) + " |")
        print("|---" * (len(cols) + 2) + "|")
    analytic = []
    for eps in analytic_eps:
        for n in (1_000, 10_000, 100_000, 1_000_000):
            row = analytic_row(n, eps)
            analytic.append({"eps": eps, "n": n, **row})
            print(f"| {eps} | {n:.0e} | " + " | ".join(_fmt(row[c]) for c in cols) + " |")
    report["analytic"] = analytic

    if analytic_eps:
        print(f"\n## Part C: scenarios B1-B4 and per-user ε (analytic, n = {args.scenario_n})\n")
        print("| scenario | ε | V_np | ratios (V / V_np) |")
        print("|---|---|---|---|")
        rows = scenario_rows(args.scenario_n)
        for row in rows:
            rest = ", ".join(f"{key} {_fmt(float(v))}" for key, v in row.items()  # type: ignore[arg-type]
                             if key not in ("scenario", "eps", "V_np"))
            print(f"| {row['scenario']} | {row['eps']} | {_fmt(float(row['V_np']))} | {rest} |")  # type: ignore[arg-type]
        report["scenarios"] = rows

    if not args.skip_mc:
        names = ["paper cap, C2 var", "width cap, C2 var", "width cap, oracle var", "user avg",
                 "row eps/k1", "row eps (NOT user-DP)"]
        print(f"\n## Part B: spec §4.4, Monte-Carlo MSE/V_np ({args.reps} reps, ± 1 s.e.)\n")
        print("| n | ε | " + " | ".join(names) + " | max abs bias (ours) | s/rep |")
        print("|---" * (len(names) + 4) + "|")
        mc = []
        for n in args.mc_n:
            for eps in args.mc_eps:
                start = time.perf_counter()
                row = monte_carlo(n, eps, args.reps, args.seed + n + int(eps * 1000))
                per_rep = (time.perf_counter() - start) / args.reps
                mc.append({"n": n, "eps": eps, "seconds_per_rep": per_rep, **row})
                bias = max(abs(row[c + " bias"]) for c in names[:3])
                cells = [f"{row[c]:.3g} ± {row[c + ' se']:.2g}" for c in names]
                print(f"| {n:.0e} | {eps} | " + " | ".join(cells)
                      + f" | {bias:.1e} | {per_rep:.2f} |", flush=True)
        report["monte_carlo"] = mc
    if args.mixed_reps:
        print(f"\n## Part D: per-user ε, Monte-Carlo MSE/V_np ({args.mixed_reps} reps)\n")
        mixed = []
        for n in args.mc_n:
            for lo in (0.1,):
                row = monte_carlo_mixed(n, lo, args.mixed_reps, args.seed + 7 * n)
                mixed.append({"n": n, "lo": lo, **row})
                for key in row:
                    if key not in ("V_np", "reps") and not key.endswith(" se"):
                        print(f"| {n:.0e} | {lo} / {10 * lo} | {key} | "
                              f"{row[key]:.3g} ± {row[key + ' se']:.2g} |", flush=True)
        report["mixed"] = mixed
    if args.initial_reps:
        print(f"\n## Part E: initial step, per-user means vs first sample "
              f"({args.initial_reps} paired reps, MSE/V_np ± 1 s.e.)\n")
        print("| n | ε | per-user means (library) | first sample (paper) | paired difference "
              "| initial-step MSE, means / first | s/rep |")
        print("|---|---|---|---|---|---|---|")
        initial = []
        for n in args.mc_n:
            for eps in args.mc_eps:
                start = time.perf_counter()
                row = monte_carlo_initial(n, eps, args.initial_reps,
                                          args.seed + 11 * n + int(eps * 1000))
                per_rep = (time.perf_counter() - start) / args.initial_reps
                initial.append(row)
                um, fs = row["user_mean"], row["first_sample"]
                print(f"| {n:.0e} | {eps} | {um['mse']:.3g} ± {um['se']:.2g} | "
                      f"{fs['mse']:.3g} ± {fs['se']:.2g} | {row['paired diff']:+.3g} ± "
                      f"{row['paired diff se']:.2g} | {row['user_mean initial mse']:.2e} / "
                      f"{row['first_sample initial mse']:.2e} | {per_rep:.2f} |", flush=True)
        report["initial"] = initial
    if args.cell_reps or args.strata_reps:
        print(f"\n## Part F: the cell n = {args.cell_n}, ε = {args.cell_eps}\n", flush=True)
        cell = cell_study(args.cell_n, args.cell_eps, args.cell_reps, args.strata_reps,
                          args.seed + 3)
        if "plain" in cell:
            pl = cell["plain"]
            print(f"plain MC ({int(pl['reps'])} reps): MSE/V_np {pl['mse']:.3g} ± {pl['se']:.2g} "
                  f"(s.e. of the mean; sd of e²/V_np {pl['sd']:.3g}); median {pl['median']:.3g}, "
                  f"5 % trimmed {pl['trimmed5']:.3g}, top 5 % of reps carry "
                  f"{100 * pl['top5_share']:.0f} % of Σe²; Laplace part {pl['laplace part']:.3g}; "
                  f"bias {pl['bias']:.1e}")
            for key, v in pl.items():
                if key.startswith(("P(mean", "5-95")):
                    print(f"bootstrap {key}: {v}")
            print("variance-step grid index t: counts", cell["t counts"])
            print("mean exact P(t):", [round(x, 4) for x in cell["t prob (mean exact)"]])
        if "stratified" in cell:
            st = cell["stratified"]
            print(f"stratified over t ({args.strata_reps} reps per t): MSE/V_np "
                  f"{st['mse']:.3g} ± {st['se']:.2g}")
        report["cell"] = cell
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
