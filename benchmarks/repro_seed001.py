"""Seed 001 (Chaudhuri & Courtade, mean under heterogeneous privacy): Fig. 1(A), Fig. 1(B)
and Table II, our numbers beside the paper's and the spec's.

Two kinds of figures:

* **Exact expectations** from the library's own weights (``hdp_spark.core.mean.mean_weights``
  on the ε histogram): an affine rule Σ w_i x_i + Laplace(η) with Σ w = 1 is unbiased for
  the population mean, so MSE = σ²·Σ_i w_i² + 2η² (range Δ = 1; no output clipping, as in the
  paper). ADPM, PropDPM ("proportional") and UNI ("uniform") come from the library; the
  baselines the library does not ship (LDPE, SM) are computed from spec seed-001 §2.7
  (LDPE with the paper's f-split datasets, review P8; SM exactly over the number of kept rows).
* **Monte-Carlo through the real release path**: T independent trials of n rows are one
  grouped release (``by="trial"``: every group gets its own keyed noise), on pandas and, in
  full mode, on Spark; fresh data every trial; MSE against the population mean with its
  standard error, and z = (MC − exact) / SE.

Run: .venv/bin/python benchmarks/repro_seed001.py [--smoke] [--json out.json] [--no-spark]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    add_report_args,
    fmt,
    load_average,
    md_table,
    plots_dir,
    pyplot,
    use_repo,
    write_report,
)

use_repo()

import numpy as np  # noqa: E402

from hdp_spark.aggregators import hdp_mean  # noqa: E402
from hdp_spark.core.mean.finalize import mean_weights  # noqa: E402

LIB_METHODS = {"ADPM": "adpm", "PropDPM": "proportional", "UNI": "uniform"}

# spec seed-001 §4.1: (MSE - 1/(12n))·n²
FIG1A_SPEC = {
    100: {"ADPM": 128.33, "PropDPM": 128.33, "LDPE": 247.47, "UNI": 200, "SM": 133.07},
    1000: {"ADPM": 131.33, "PropDPM": 131.33, "LDPE": 258.89, "UNI": 200, "SM": 148.39},
    3200: {"ADPM": 138.67, "PropDPM": 138.67, "LDPE": 272.00, "UNI": 200, "SM": 187.25},
    10000: {"ADPM": 176.04, "PropDPM": 161.33, "LDPE": 281.82, "UNI": 200, "SM": 307.49},
    20000: {"ADPM": 187.38, "PropDPM": 194.67, "LDPE": 285.08, "UNI": 200, "SM": 484.34},
}
# spec seed-001 §4.2: E(M)·1e4; LDPE at 0.1 is 6.1202 paper-faithful (review P8; the spec's
# table prints the merged-group 4.5000)
FIG1B_SPEC = {
    0.10: {"ADPM": 4.5000, "PropDPM": 4.5000, "LDPE": 6.1202, "UNI": 4.5, "SM": 4.5000},
    0.15: {"ADPM": 4.1115, "PropDPM": 4.1115, "LDPE": 5.3885, "UNI": 4.5, "SM": 4.8737},
    0.2142857: {"ADPM": 3.9894, "PropDPM": 3.9894, "LDPE": 4.8407, "UNI": 4.5, "SM": 5.2930},
    0.30: {"ADPM": 3.9894, "PropDPM": 4.1016, "LDPE": 4.4795, "UNI": 4.5, "SM": 5.7550},
    0.50: {"ADPM": 3.9894, "PropDPM": 4.6488, "LDPE": 4.1823, "UNI": 4.5, "SM": 6.5182},
    1.0: {"ADPM": 3.9894, "PropDPM": 5.7524, "LDPE": 4.0396, "UNI": 4.5, "SM": 7.4647},
    2.0: {"ADPM": 3.9894, "PropDPM": 6.7665, "LDPE": 4.0020, "UNI": 4.5, "SM": 8.0776},
    math.inf: {"ADPM": 3.9894, "PropDPM": 8.3333, "LDPE": 3.9894, "UNI": 4.5, "SM": 8.3333},
}
# Table II: ln(MSE), paper / spec reproduction (mean over 50 ε draws)
TABLE2_PAPER = {
    "high": {"ADPM": -9.3, "PropDPM": -9.0, "LDPE": -7.2, "SM": -6.5, "UNI": -5.1},
    "low": {"ADPM": -8.1, "PropDPM": -8.1, "LDPE": -1.3, "SM": -7.9, "UNI": -7.1},
}
TABLE2_SPEC = {
    "high": {"ADPM": -9.27, "PropDPM": -9.00, "LDPE": -7.17, "SM": -6.46, "UNI": -5.13},
    "low": {"ADPM": -8.06, "PropDPM": -8.06, "LDPE": -1.37, "SM": -7.95, "UNI": -7.08},
}
TABLE2_MIXES = {"low": (-3.0, -2.0), "high": (-4.0, 2.0)}
BETA23_MU, BETA23_VAR = -0.1, 0.04

METHODS = ("ADPM", "PropDPM", "LDPE", "UNI", "SM")


# ----------------------------------------------------------------------------- exact MSEs
def levels(eps: np.ndarray) -> tuple[list[float], list[int]]:
    v, m = np.unique(np.asarray(eps, dtype=float), return_counts=True)
    return [float(x) for x in v], [int(c) for c in m]


def lib_mse(method: str, v: list[float], m: list[int], sigma2: float, mu: float = 0.0) -> float:
    """Exact MSE of the library's weights for the ε histogram (v, m), range 1, unclipped."""
    spec = hdp_mean("x", eps="eps", lower=-0.5, upper=0.5, method=method, clip_output=False)
    w = mean_weights(spec, v, m)
    if w.trivial:
        return mu**2
    den = w.denominator
    l2 = sum(c * (p / den) ** 2 for p, c in zip(w.numerators, m, strict=True))
    eta = float(w.eta)
    if method == "adpm" and l2 / 4 + 2 * eta**2 > 0.25:
        return mu**2  # the data-independent midpoint fallback (0 on [-0.5, 0.5])
    return sigma2 * l2 + 2 * eta**2


def ldpe_mse(groups: list[tuple[float, int]], sigma2: float) -> float:
    """LDPE (spec §2.7 with review P5/P8): per dataset g of n_g rows at ε_g, the sample mean +
    Laplace(1/(ε_g n_g)), combined with inverse-variance weights under the σ² = 1/4 proxy."""
    vhat = []
    true_var = []
    for e, ng in groups:
        noise = 0.0 if math.isinf(e) else 2.0 / (e * ng) ** 2
        vhat.append(0.25 / ng + noise)
        true_var.append(sigma2 / ng + noise)
    lam = np.array([1 / x for x in vhat])
    lam /= lam.sum()
    return float(np.sum(lam**2 * np.array(true_var)))


def _log_p_keep(eps: np.ndarray, t: float) -> np.ndarray:
    """log((e^ε − 1)/(e^t − 1)) without overflow (review P6)."""

    def log_expm1(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        return np.where(
            x > 30, x + np.log1p(-np.exp(-np.minimum(x, 700))), np.log(np.expm1(np.minimum(x, 30)))
        )

    return log_expm1(eps) - log_expm1(np.array(t))


def poisson_binomial_pmf(p: np.ndarray) -> np.ndarray:
    pmf = np.zeros(len(p) + 1)
    pmf[0] = 1.0
    for k, pk in enumerate(p, start=1):
        pmf[1 : k + 1] = pmf[1 : k + 1] * (1 - pk) + pmf[:k] * pk
        pmf[0] *= 1 - pk
    return pmf


def sm_mse(eps: np.ndarray, sigma2: float, mu: float) -> float:
    """Sampling mechanism (Jorgensen et al.): keep row i w.p. (e^ε_i − 1)/(e^t − 1), t = max ε;
    sample mean of the kept m rows + Laplace(1/(t m)); m = 0 outputs the midpoint 0."""
    eps = np.asarray(eps, dtype=float)
    t = float(eps.max())
    if math.isinf(t):
        npub = int(np.isinf(eps).sum())
        return sigma2 / npub
    p = np.exp(_log_p_keep(eps, t))
    p[eps == t] = 1.0
    certain = int((p >= 1.0).sum())
    pmf = poisson_binomial_pmf(p[p < 1.0])
    m = np.arange(len(pmf)) + certain
    with np.errstate(divide="ignore"):
        per_m = np.where(
            m > 0, sigma2 / np.maximum(m, 1) + 2.0 / (t * np.maximum(m, 1)) ** 2, mu**2
        )
    return float(np.sum(pmf * per_m))


def two_group(n: int, f: float, e1: float, e2: float) -> np.ndarray:
    n1 = round(n * f)
    return np.array([e1] * n1 + [e2] * (n - n1))


def exact_all(
    eps: np.ndarray, sigma2: float, mu: float, ldpe_groups: list[tuple[float, int]]
) -> dict[str, float]:
    v, m = levels(eps)
    out = {name: lib_mse(meth, v, m, sigma2, mu) for name, meth in LIB_METHODS.items()}
    out["LDPE"] = ldpe_mse(ldpe_groups, sigma2)
    out["SM"] = sm_mse(eps, sigma2, mu)
    return out


def fig1a(ns: list[int]) -> dict[int, dict[str, float]]:
    """(MSE − 1/(12n))·n², ε₁ = 0.1, ε₂ = 0.15, f = 0.5, Uniform[−0.5, 0.5] data."""
    out = {}
    for n in ns:
        eps = two_group(n, 0.5, 0.1, 0.15)
        n1 = round(n * 0.5)
        mse = exact_all(eps, 1 / 12, 0.0, [(0.1, n1), (0.15, n - n1)])
        out[n] = {k: (x - 1 / (12 * n)) * n * n for k, x in mse.items()}
    return out


def fig1b(e2s: list[float]) -> dict[float, dict[str, float]]:
    """E(M)·1e4, ε₁ = 0.1, f = 0.7, n = 1000, two-point data on {±0.5} (σ² = 1/4)."""
    out = {}
    for e2 in e2s:
        eps = two_group(1000, 0.7, 0.1, e2)
        mse = exact_all(eps, 0.25, 0.0, [(0.1, 700), (e2, 300)])
        out[e2] = {k: x * 1e4 for k, x in mse.items()}
        # the merged-group LDPE convention (one group per distinct ε), for the P8 note
        v, m = levels(eps)
        out[e2]["LDPE_merged"] = ldpe_mse(list(zip(v, m, strict=True)), 0.25) * 1e4
    return out


def table2(draws: int, seed: int) -> dict[str, dict[str, dict[str, float]]]:
    """ln(MSE), n = 1000, Beta(2, 3) − 0.5 data, ε fixed per draw, mean ± sd over draws."""
    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for regime, (a, b) in TABLE2_MIXES.items():
        vals: dict[str, list[float]] = {k: [] for k in METHODS}
        for _ in range(draws):
            eps = np.exp(rng.uniform(a, b, 1000))
            v, m = levels(eps)
            mse = exact_all(eps, BETA23_VAR, BETA23_MU, list(zip(v, m, strict=True)))
            for k in METHODS:
                vals[k].append(math.log(mse[k]))
        out[regime] = {
            k: {"mean": float(np.mean(x)), "sd": float(np.std(x, ddof=1)) if draws > 1 else 0.0}
            for k, x in vals.items()
        }
    return out


# -------------------------------------------------------------------- Monte-Carlo releases
def mc_pandas(
    eps: np.ndarray,
    sampler: Any,
    method: str,
    trials: int,
    mu: float,
    rng: np.random.Generator,
    chunk: int,
) -> np.ndarray:
    """Errors of `trials` releases, each a group of one grouped pandas release."""
    import pandas as pd

    import hdp_spark.pandas as hpd

    n = len(eps)
    spec = hpd.hdp_mean("x", eps="eps", lower=-0.5, upper=0.5, method=method, clip_output=False)
    errs = []
    done = 0
    while done < trials:
        c = min(chunk, trials - done)
        df = pd.DataFrame(
            {
                "trial": np.repeat(np.arange(c), n),
                "eps": np.tile(eps, c),
                "x": sampler(rng, c * n),
            }
        )
        out = hpd.agg(df, spec, by="trial", keys=list(range(c)))
        errs.append(out["x_mean"].to_numpy(dtype=float) - mu)
        done += c
    return np.concatenate(errs)


def mc_spark(
    spark: Any, eps: np.ndarray, kind: str, method: str, trials: int, mu: float, seed: int
) -> np.ndarray:
    """The same on Spark: T·n rows generated natively, one grouped release over T trials."""
    from pyspark.sql import functions as F

    import hdp_spark.aggregators as hspec  # specs (hs.hdp_mean is a Column)
    import hdp_spark.spark as hs

    n = len(eps)
    v, m = levels(eps)
    pos = F.col("id") % n
    # ε by position: sorted levels with cumulative counts (a few distinct values, or n)
    if len(v) <= 8:
        eps_col = F.lit(v[-1])
        cum = np.cumsum(m)
        for level, upto in reversed(list(zip(v[:-1], cum[:-1], strict=True))):
            eps_col = F.when(pos < int(upto), F.lit(level)).otherwise(eps_col)
        eps_col = eps_col.cast("double")
    else:
        eps_col = F.element_at(F.array(*[F.lit(float(e)) for e in eps]), (pos + 1).cast("int"))
    u = [F.rand(seed * 10 + i) for i in range(4)]
    x = {
        "uniform": u[0] - F.lit(0.5),
        "twopoint": F.when(u[0] < 0.5, F.lit(-0.5)).otherwise(F.lit(0.5)),
        "beta23": F.sort_array(F.array(*u)).getItem(1) - F.lit(0.5),
    }[kind]
    df = spark.range(trials * n).select(
        (F.col("id") / n).cast("long").alias("trial"), eps_col.alias("eps"), x.alias("x")
    )
    spec = hspec.hdp_mean("x", eps="eps", lower=-0.5, upper=0.5, method=method, clip_output=False)
    result = hs.release(df, spec, by="trial", keys=list(range(trials)))
    res = result.results[spec.name]
    return np.array([res[k].estimate for k in res], dtype=float) - mu


SAMPLERS = {
    "uniform": lambda rng, size: rng.uniform(-0.5, 0.5, size),
    "twopoint": lambda rng, size: rng.choice([-0.5, 0.5], size),
    "beta23": lambda rng, size: rng.beta(2.0, 3.0, size) - 0.5,
}


def mc_point(
    label: str,
    eps: np.ndarray,
    kind: str,
    method: str,
    exact: float,
    mu: float,
    trials: int,
    rng: np.random.Generator,
    spark: Any,
    scale: float,
    spark_trials: int = 2000,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    errs = mc_pandas(
        eps, SAMPLERS[kind], method, trials, mu, rng, chunk=max(1, 2_000_000 // len(eps))
    )
    sq = errs**2
    mse, se = float(sq.mean()), float(sq.std(ddof=1) / math.sqrt(sq.size))
    point: dict[str, Any] = {
        "label": label,
        "method": method,
        "trials": trials,
        "exact": exact * scale,
        "pandas": mse * scale,
        "pandas_se": se * scale,
        "pandas_z": (mse - exact) / se,
        "pandas_s": time.perf_counter() - t0,
    }
    if spark is not None:
        t0 = time.perf_counter()
        st = min(trials, spark_trials)
        errs = mc_spark(spark, eps, kind, method, st, mu, seed=int(rng.integers(1 << 30)))
        sq = errs**2
        smse, sse = float(sq.mean()), float(sq.std(ddof=1) / math.sqrt(sq.size))
        point |= {
            "spark": smse * scale,
            "spark_se": sse * scale,
            "spark_z": (smse - exact) / sse,
            "spark_s": time.perf_counter() - t0,
            "spark_trials": st,
        }
    print("MC", label, method, {k: v for k, v in point.items() if isinstance(v, float)}, flush=True)
    return point


# ------------------------------------------------------------------------------- report
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=50, help="ε draws of Table II")
    parser.add_argument("--trials", type=int, default=10000, help="Monte-Carlo trials per point")
    parser.add_argument("--table2-trials", type=int, default=1000)
    parser.add_argument("--spark-trials", type=int, default=2000, help="Monte-Carlo on Spark")
    parser.add_argument("--no-spark", action="store_true", help="Monte-Carlo on pandas only")
    parser.add_argument("--seed", type=int, default=2023)
    add_report_args(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.draws, args.trials, args.table2_trials, args.no_spark = 3, 300, 100, True
    load_start = load_average()
    t0 = time.perf_counter()

    ns_table = sorted(FIG1A_SPEC)
    a = fig1a(ns_table)
    ns_curve = sorted(
        {int(2 * round(x / 2)) for x in np.geomspace(50, 20000, 40 if not args.smoke else 8)}
    )
    a_curve = fig1a(ns_curve)
    e2_table = sorted(FIG1B_SPEC)
    b = fig1b(e2_table)
    e2_curve = list(np.linspace(0.1, 2.0, 96 if not args.smoke else 10))
    b_curve = fig1b(e2_curve)
    t2 = table2(args.draws, args.seed)
    exact_s = time.perf_counter() - t0

    spark = None
    if not args.no_spark:
        from common import spark_session

        spark = spark_session()
    rng = np.random.default_rng(args.seed + 1)

    def point(*a: Any) -> dict[str, Any]:
        return mc_point(*a, spark_trials=args.spark_trials)

    mc: list[dict[str, Any]] = []
    # Fig. 1(A): ADPM at n = 100 and 1000 (exact (MSE − 1/(12n))·n² = 128.33, 131.33)
    for n in (100, 1000):
        eps = two_group(n, 0.5, 0.1, 0.15)
        exact = lib_mse("adpm", *levels(eps), 1 / 12)
        mc.append(
            point(f"Fig1A n={n}", eps, "uniform", "adpm", exact, 0.0, args.trials, rng, spark, 1.0)
        )
    # Fig. 1(B): ε₂ = 0.15 (unsaturated) and 1.0 (saturated), ADPM/PropDPM/UNI, ×1e4
    for e2 in (0.15, 1.0):
        eps = two_group(1000, 0.7, 0.1, e2)
        for name, meth in LIB_METHODS.items():
            exact = lib_mse(meth, *levels(eps), 0.25)
            mc.append(
                point(
                    f"Fig1B ε2={e2} {name}",
                    eps,
                    "twopoint",
                    meth,
                    exact,
                    0.0,
                    args.trials,
                    rng,
                    spark if name == "ADPM" else None,
                    1e4,
                )
            )
    # Table II: one fixed ε draw per regime, ADPM and UNI, n = 1000 distinct ε levels
    draw_rng = np.random.default_rng(args.seed + 2)
    for regime, (lo, hi) in TABLE2_MIXES.items():
        eps = np.exp(draw_rng.uniform(lo, hi, 1000))
        for name in ("ADPM", "UNI"):
            meth = LIB_METHODS[name]
            exact = lib_mse(meth, *levels(eps), BETA23_VAR, BETA23_MU)
            mc.append(
                point(
                    f"TableII {regime} {name}",
                    eps,
                    "beta23",
                    meth,
                    exact,
                    BETA23_MU,
                    args.table2_trials,
                    rng,
                    spark if name == "ADPM" else None,
                    1.0,
                )
            )
    if spark is not None:
        spark.stop()

    figures: dict[str, Any] = {
        "fig1a": {str(n): a[n] for n in ns_table},
        "fig1b": {str(e): b[e] for e in e2_table},
        "table2": t2,
        "table2_draws": args.draws,
        "monte_carlo": mc,
        "exact_seconds": exact_s,
        "load_start": load_start,
        "load_end": load_average(),
    }
    plots = make_plots(args.plots, a_curve, b_curve, t2)
    write_report(
        args.json, name="seed001", figures=figures, markdown=render(figures, args), plots=plots
    )


def _ok(ours: float, ref: float, tol: float) -> str:
    return "✓" if abs(ours - ref) <= tol else "✗"


def render(fig: dict[str, Any], args: Any) -> str:
    out = []
    out.append("#### Fig. 1(A): (MSE − 1/(12n))·n², ε₁ = 0.1, ε₂ = 0.15, f = 0.5, U[−0.5, 0.5]")
    out.append("")
    out.append("Exact expectations (library weights for ADPM/PropDPM/UNI). Each cell: ours / spec.")
    out.append("")
    rows = []
    for n, ref in FIG1A_SPEC.items():
        ours = fig["fig1a"][str(n)]
        rows.append([f"{n:,}"] + [f"{ours[k]:.2f} / {ref[k]:.2f}" for k in METHODS])
    out.append(md_table(["n", *METHODS], rows))
    out.append("")
    out.append("#### Fig. 1(B): E(M)·10⁴, ε₁ = 0.1, f = 0.7, n = 1000, two-point data (p = 1/2)")
    out.append("")
    out.append(
        "Exact expectations; each cell ours / spec. LDPE is paper-faithful (the two f-split "
        "datasets, review P8: 6.1202 at ε₂ = 0.1); the spec table's 4.5000 there is the "
        "merged-group convention, shown in the last column."
    )
    out.append("")
    rows = []
    for e2, ref in FIG1B_SPEC.items():
        ours = fig["fig1b"][str(e2)]
        rows.append(
            [("∞" if math.isinf(e2) else f"{e2:g}")]
            + [f"{ours[k]:.4f} / {ref[k]:.4f}" for k in METHODS]
            + [f"{ours['LDPE_merged']:.4f}"]
        )
    out.append(md_table(["ε₂", *METHODS, "LDPE merged"], rows))
    out.append("")
    out.append(
        "#### Table II: ln(MSE), n = 1000, Beta(2, 3) data, mean ± sd over "
        f"{fig['table2_draws']} ε draws"
    )
    out.append("")
    rows = []
    for k in METHODS:
        row: list[Any] = [k]
        for regime in ("high", "low"):
            t = fig["table2"][regime][k]
            tol = 0.2 if (k == "LDPE" and regime == "low") else 0.15
            row += [
                f"{t['mean']:.2f} ± {t['sd']:.2f}",
                f"{TABLE2_PAPER[regime][k]:.1f}",
                f"{TABLE2_SPEC[regime][k]:.2f}",
                _ok(t["mean"], TABLE2_PAPER[regime][k], tol),
            ]
        rows.append(row)
    out.append(
        md_table(
            [
                "method",
                "ours high",
                "paper high",
                "spec high",
                "±0.15",
                "ours low",
                "paper low",
                "spec low",
                "±0.15 (LDPE ±0.2)",
            ],
            rows,
        )
    )
    out.append("")
    hi = {k: fig["table2"]["high"][k]["mean"] for k in METHODS}
    lo = {k: fig["table2"]["low"][k]["mean"] for k in METHODS}
    order_hi = hi["ADPM"] <= hi["PropDPM"] <= hi["LDPE"] <= hi["SM"] <= hi["UNI"]
    order_lo = (
        lo["ADPM"] <= lo["PropDPM"] + 0.05 and lo["PropDPM"] < lo["SM"] < lo["UNI"] < lo["LDPE"]
    )
    out.append(
        f"Orderings (spec §4.3 acceptance): high ADPM ≤ PropDPM ≤ LDPE ≤ SM ≤ UNI: "
        f"{'✓' if order_hi else '✗'}; low ADPM ≈ PropDPM < SM < UNI ≪ LDPE: "
        f"{'✓' if order_lo else '✗'}. FME is not reproducible from the paper (spec §2.7)."
    )
    out.append("")
    out.append("#### Monte-Carlo through the release path")
    out.append("")
    out.append(
        "Each trial is one group of a grouped release (own keyed noise), fresh data per trial; "
        "MSE against the population mean in the figure's units, ± one standard error; "
        "z = (MC − exact)/SE (|z| ≲ 2 expected)."
    )
    out.append("")
    rows = []
    for p in fig["monte_carlo"]:
        rows.append(
            [
                p["label"],
                p["method"],
                f"{p['trials']:,}",
                fmt(p["exact"]),
                f"{fmt(p['pandas'])} ± {fmt(p['pandas_se'])}",
                f"{p['pandas_z']:+.2f}",
                f"{fmt(p['spark'])} ± {fmt(p['spark_se'])}" if "spark" in p else "—",
                f"{p['spark_z']:+.2f}" if "spark" in p else "—",
            ]
        )
    out.append(
        md_table(["point", "method", "trials", "exact", "pandas MC", "z", "Spark MC", "z"], rows)
    )
    out.append("")
    out.append(
        "Plots: `plots/seed001_fig1a.png`, `plots/seed001_fig1b.png`, `plots/seed001_table2.png`. "
        f"Load average at start {fig['load_start']}, at end {fig['load_end']}."
    )
    return "\n".join(out)


def make_plots(
    arg: Path | None,
    a_curve: dict[int, dict[str, float]],
    b_curve: dict[float, dict[str, float]],
    t2: dict[str, Any],
) -> list[Path]:
    plt = pyplot()
    if plt is None:
        return []
    out_dir = plots_dir(arg)
    paths = []
    ns = sorted(a_curve)
    fig, ax = plt.subplots(figsize=(6, 4))
    for k in ("ADPM", "LDPE", "SM", "UNI", "PropDPM"):
        ax.plot(ns, [a_curve[n][k] for n in ns], label=k, linestyle="--" if k == "PropDPM" else "-")
    ax.set_xscale("log")
    ax.set_xlabel("n")
    ax.set_ylabel("(MSE − 1/(12n))·n²")
    ax.set_title("Seed 001 Fig. 1(A), exact (ε₁=0.1, ε₂=0.15, f=0.5)")
    ax.legend()
    fig.tight_layout()
    paths.append(out_dir / "seed001_fig1a.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    e2s = sorted(b_curve)
    fig, ax = plt.subplots(figsize=(6, 4))
    for k in ("ADPM", "PropDPM", "LDPE", "UNI", "SM"):
        ax.plot(e2s, [b_curve[e][k] for e in e2s], label=k)
    ax.axvline(0.1 + 8 / (1000 * 0.7 * 0.1), color="grey", linestyle="--", label="R·ε₁")
    ax.set_xlabel("ε₂")
    ax.set_ylabel("E(M)·10⁴")
    ax.set_title("Seed 001 Fig. 1(B), exact (ε₁=0.1, f=0.7, n=1000)")
    ax.legend()
    fig.tight_layout()
    paths.append(out_dir / "seed001_fig1b.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    x = np.arange(len(METHODS))
    for i, regime in enumerate(("high", "low")):
        ours = [t2[regime][k]["mean"] for k in METHODS]
        paper = [TABLE2_PAPER[regime][k] for k in METHODS]
        ax.bar(x + (i - 0.5) * 0.4, ours, width=0.4, label=f"ours, {regime} Var(ε)")
        ax.scatter(
            x + (i - 0.5) * 0.4,
            paper,
            color="black",
            marker="_",
            s=300,
            label="paper" if i == 0 else None,
            zorder=3,
        )
    ax.set_xticks(x, METHODS)
    ax.set_ylabel("ln(MSE)")
    ax.set_title("Seed 001 Table II (n = 1000)")
    ax.legend()
    fig.tight_layout()
    paths.append(out_dir / "seed001_table2.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


if __name__ == "__main__":
    main()
