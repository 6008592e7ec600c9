"""``method="auto"`` against every fixed method and the current default (issue 35):
Monte-Carlo MSE on the seeds' ε mixes and data designs, pandas engine.

Designs (every ε rounded down onto ``EpsGrid(ratio=1.01)``, as the seed-000 scripts do):

* mean, seed 001 Table II (``repro_seed001``): n = 1,000, ε = exp(U[a, b]) for the "low"
  and "high" profiles, one ε draw each; values Beta(2, 3) - 0.5 i.i.d., fresh every trial;
  target the population mean (-0.1); range [-0.5, 0.5];
* mean, seed 000 (``repro_seed000_correlated.draw``): n = 10,000, x ~ U[0, 1]; the
  correlated designs "uc" (ε by the value's bin) and "sorted" (the most private rows hold
  the smallest values), data fixed, target the empirical mean; and the weakly-correlated
  "W" design (the "sorted" draw with x re-permuted every trial, spec BENCH-M-W);
* histogram, seed 000: the W stand-in SYN-5 (``repro_seed000_frequency.STANDINS``, x
  re-permuted every trial) and the correlated "uc"/"sorted" draws for k = 5 and the C
  stand-in UC (k = 12, n = 50,000); target the empirical frequencies; error = the mean over
  bins of the squared error;
* random mixes (mean, i.i.d. U[-0.5, 0.5] values): two-group, with public rows, and a small
  wide group.

Every trial is one group of one grouped release (``hdp_spark.pandas.agg(..., by="trial")``),
each method on the same frame with the same ``unsafe_seed``: a method's trials are
independent, the methods are paired on data, and ``auto`` is bit for bit the release of the
method it chose (so its MSE equals that method's estimate exactly, difference SE 0).
MC error: the standard error of the mean of the squared errors. For comparison, the
"exchangeable what-if" column names the candidate a different public prediction would pick
(the variance term of a random assignment of values to rows, ADPM's objective
||w||₂²/4 + 2η², histogram ||w||₂²/4 + 8η²) and the MSE that method measured. Verdicts:
"within MC error" = MSE(auto) <= MSE(best fixed) + 2·SE(best fixed); "beats default" =
MSE(default) - MSE(auto) > 2·SE of the paired difference.

Run: .venv/bin/python benchmarks/bench_auto.py [--smoke] [--json out.json] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository (use_repo)
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import add_report_args, fmt, load_average, md_table, write_report
from coverage_mixes import make_mix
from repro_seed000_correlated import GRID
from repro_seed000_correlated import draw as draw_000
from repro_seed000_frequency import STANDINS
from repro_seed001 import BETA23_MU, SAMPLERS, TABLE2_MIXES

from hdp_spark.core.encoding import FIXED_ONE
from hdp_spark.core.histogram.auto import HISTOGRAM_CANDIDATES, candidates, histogram_figures
from hdp_spark.core.levels import levels_numpy
from hdp_spark.core.mean.auto import MEAN_CANDIDATES, LevelTable, mean_figures

MEAN_DEFAULT = "adpm"
HISTOGRAM_DEFAULT = "hpf-a"


@dataclass(frozen=True)
class Design:
    """One ε mix and data design.

    Attributes:
        name: row label.
        kind: "mean" or "histogram".
        n: rows per group.
        trials: groups (releases) per method.
        eps: the ε of the n rows (fixed across trials).
        data: "iid" (fresh values), "perm" (fixed multiset, re-permuted), "fixed".
        x: the values (fixed / permuted designs; iid: unused).
        lower: the public range (mean).
        upper: (see lower).
        k: categories (histogram).
        target: "population" or "empirical".
        sampler: the i.i.d. value sampler's name in ``repro_seed001.SAMPLERS``, or "u01".
        mu: population mean (iid designs).
    """

    name: str
    kind: str
    n: int
    trials: int
    eps: np.ndarray
    data: str
    x: np.ndarray | None = None
    lower: float = 0.0
    upper: float = 1.0
    k: int = 0
    target: str = "empirical"
    sampler: str = ""
    mu: float = 0.0


def designs(scale: float, smoke: bool) -> list[Design]:
    def t(base: int) -> int:
        return 3 if smoke else max(3, round(base * scale))

    def n(base: int) -> int:
        return min(base, 300) if smoke else base

    out = []
    for regime, (a, b) in TABLE2_MIXES.items():
        eps = np.exp(np.random.default_rng(2023).uniform(a, b, n(1000)))
        out.append(Design(f"mean s001 Table II {regime}", "mean", n(1000), t(2000), eps, "iid",
                          lower=-0.5, upper=0.5, target="population", sampler="beta23",
                          mu=BETA23_MU))
    for design in ("uc", "sorted"):
        x, eps = draw_000("M", design, n(10000), 11)
        out.append(Design(f"mean s000 C-{design}", "mean", n(10000), t(300), eps, "fixed", x))
    x, eps = draw_000("M", "sorted", n(10000), 12)
    out.append(Design("mean s000 W (BENCH-M-W)", "mean", n(10000), t(300), eps, "perm", x))
    rng = np.random.default_rng(35)
    mixes = {
        "mean mix two-group (10% at 0.05, rest 2)": np.where(rng.random(n(2000)) < 0.1, 0.05, 2.0),
        "mean mix with public rows (ε 0.1/1/inf)": rng.choice([0.1, 1.0, math.inf], n(2000),
                                                              p=[0.5, 0.3, 0.2]),
        "mean mix small wide (n 200, ε exp U[-5,3])": np.exp(rng.uniform(-5, 3, 200)),
    }
    for name, eps in mixes.items():
        out.append(Design(name, "mean", len(eps), t(1000), eps, "iid", lower=-0.5, upper=0.5,
                          target="population", sampler="uniform", mu=0.0))
    syn = STANDINS["SYN-5"]
    x, eps = syn.draw()
    out.append(Design("histogram s000 W SYN-5", "histogram", n(syn.n), t(150), eps[:n(syn.n)],
                      "perm", x[:n(syn.n)], k=syn.k))
    for design in ("uc", "sorted"):
        x, eps = draw_000("F-5", design, n(10000), 13)
        out.append(Design(f"histogram s000 C-{design} k=5", "histogram", n(10000), t(150), eps,
                          "fixed", x, k=5))
    uc = STANDINS["UC"]
    x, eps = uc.draw()
    out.append(Design("histogram s000 C UC k=12", "histogram", n(uc.n), t(60), eps[:n(uc.n)],
                      "fixed", x[:n(uc.n)], k=uc.k))
    out.extend(issue_52_designs(t, n))
    return out


def issue_52_designs(t: Any, n: Any) -> list[Design]:
    """The kinds of data issue 52 names, none designed for a method: the coverage mixes
    (``coverage_mixes.make_mix``: independent values at 3 levels, comonotone low-ε rows,
    continuous ε with rank correlation 0.5, a small group of 60, 20 % public rows; each as
    a mean of its values and a histogram of its 3 categories) and independent values at
    64 levels with n = 50,000. Data fixed, target the table's own statistic."""
    out = []
    for name in ("independent", "comonotone", "rank-0.5", "small-60", "public-20"):
        mix = make_mix(name, seed=52)
        x = mix.q.astype(np.float64) / FIXED_ONE
        out.append(Design(f"mean issue 52 {name}", "mean", mix.n, t(300), mix.levels,
                          "fixed", x))
        out.append(Design(f"histogram issue 52 {name}", "histogram", mix.n, t(300),
                          mix.levels, "fixed", mix.codes, k=3))
    rng = np.random.default_rng(5264)
    size = n(50_000)
    eps = 0.05 * 100.0 ** (rng.integers(0, 64, size) / 63)  # 64 levels, 0.05 to 5
    out.append(Design("mean issue 52 independent, 64 levels", "mean", size, t(300), eps,
                      "fixed", rng.beta(2.0, 5.0, size)))
    return out


def frame(d: Design, rng: np.random.Generator) -> tuple[Any, np.ndarray]:
    """The release input (trial, eps, x) and the per-trial target (mean: (T,); histogram:
    (T, k))."""
    import pandas as pd

    n, trials = d.n, d.trials
    if d.data == "iid":
        x = (SAMPLERS[d.sampler](rng, n * trials)).reshape(trials, n)
    elif d.data == "perm":
        assert d.x is not None
        x = np.stack([rng.permutation(d.x) for _ in range(trials)])
    else:
        assert d.x is not None
        x = np.tile(d.x, (trials, 1))
    if d.kind == "mean":
        target = (np.full(trials, d.mu) if d.target == "population" else x.mean(axis=1))
    else:
        target = np.stack([np.bincount(row, minlength=d.k) / n for row in x])
    df = pd.DataFrame({"trial": np.repeat(np.arange(trials), n), "eps": np.tile(d.eps, trials),
                       "x": x.reshape(-1)})
    return df, target


def run_design(d: Design, seed: int) -> dict[str, Any]:
    import hdp_spark.pandas as hpd

    df, target = frame(d, np.random.default_rng(seed))
    keys = list(range(d.trials))
    methods = (*(MEAN_CANDIDATES if d.kind == "mean" else HISTOGRAM_CANDIDATES), "auto")
    errors: dict[str, np.ndarray] = {}
    chosen: dict[str, int] = {}
    for method in methods:
        if d.kind == "mean":
            spec = hpd.hdp_mean("x", eps="eps", lower=d.lower, upper=d.upper, method=method,  # type: ignore[arg-type]
                                eps_grid=GRID)
            out = hpd.agg(df, spec, by="trial", keys=keys, unsafe_seed=f"auto/{d.name}")
            errors[method] = (out["x_mean"].to_numpy(float) - target) ** 2
            used = out["x_mean_method"]
        else:
            spec = hpd.hdp_histogram("x", eps="eps", categories=list(range(d.k)), other=None,  # type: ignore[arg-type]
                                     method=method, eps_grid=GRID)
            out = hpd.agg(df, spec, by="trial", keys=keys, unsafe_seed=f"auto/{d.name}")
            freq = np.array([[b["frequency"] for b in row] for row in out["x_histogram"]])
            errors[method] = ((freq - target) ** 2).mean(axis=1)
            used = out["x_histogram_method"]
        if method == "auto":
            chosen = {str(k): int(v) for k, v in used.value_counts().items()}
    return {"errors": errors, "chosen": chosen}


def exchangeable_choice(d: Design) -> str:
    """The candidate with the least ||w||₂²/4 + 2η² (histogram: + 8η²) on the design's ε
    histogram: what a prediction with the variance term of exchangeable data would pick."""
    v, m = np.unique(levels_numpy(d.eps, GRID), return_counts=True)
    t = LevelTable.single([float(x) for x in v], [int(c) for c in m])
    if d.kind == "mean":
        figs, names, c = mean_figures(t, 0.05), MEAN_CANDIDATES, 2.0
    else:
        figs, names, c = histogram_figures(t, d.k, 0.05), candidates(d.k), 8.0
    pred = [0.25 if bool(f.trivial[0]) else float(f.l2[0] / 4 + c * f.eta[0] ** 2)
            for f in figs]
    return names[int(np.argmin(pred))]


def summarize(d: Design, res: dict[str, Any]) -> dict[str, Any]:
    errors = res["errors"]
    trials = d.trials
    mse = {m: float(e.mean()) for m, e in errors.items()}
    se = {m: float(e.std(ddof=1) / math.sqrt(trials)) for m, e in errors.items()}
    fixed = [m for m in errors if m != "auto"]
    best = min(fixed, key=lambda m: mse[m])
    default = MEAN_DEFAULT if d.kind == "mean" else HISTOGRAM_DEFAULT
    diff = errors[default] - errors["auto"]
    diff_se = float(diff.std(ddof=1) / math.sqrt(trials))
    within = mse["auto"] <= mse[best] + 2 * se[best]
    beats_default = float(diff.mean()) > 2 * diff_se
    return {
        "n": d.n, "trials": trials, "target": d.target, "data": d.data,
        "mse": mse, "se": se, "best": best, "default": default,
        "chosen": res["chosen"], "within_mc_of_best": within,
        "beats_default": beats_default, "default_minus_auto": float(diff.mean()),
        "default_minus_auto_se": diff_se,
        "auto_over_best": mse["auto"] / mse[best] if mse[best] > 0 else math.nan,
        "exchangeable_choice": exchangeable_choice(d),
    }


def _e(x: float) -> str:
    return f"{x:.3g}"


def targets(results: dict[str, dict[str, Any]]) -> str:
    """Issue 52's targets over every design: auto <= 2x the best fixed method on each,
    geometric mean <= 1.25x, and <= 1.2x the default where the default is the best; the
    default's own figures beside them."""
    ratio = {"auto": [], "default": []}
    where_default_best = []
    for r in results.values():
        best = r["mse"][r["best"]]
        if best <= 0:
            continue
        ratio["auto"].append(r["mse"]["auto"] / best)
        ratio["default"].append(r["mse"][r["default"]] / best)
        if r["best"] == r["default"]:
            where_default_best.append(r["mse"]["auto"] / r["mse"][r["default"]])
    rows = []
    for who, qs in ratio.items():
        if not qs:
            continue
        geo = math.exp(sum(math.log(q) for q in qs) / len(qs))
        rows.append([who, f"{sum(q <= 2 for q in qs)} of {len(qs)}", fmt(max(qs), 3),
                     fmt(geo, 3)])
    text = md_table(["method", "designs within 2× of the best (target: all)",
                     "worst ratio to the best", "geometric mean (target ≤ 1.25)"], rows)
    if where_default_best:
        text += (f"\n\nWhere the default is the best fixed method ({len(where_default_best)} "
                 f"designs), auto / default is at most {fmt(max(where_default_best), 3)} "
                 "(target ≤ 1.2).")
    return "Issue 52's targets:\n\n" + text


def markdown(results: dict[str, dict[str, Any]], seconds: float) -> str:
    rows = []
    for name, r in results.items():
        mse, se = r["mse"], r["se"]
        chosen = ", ".join(f"{k} ×{v}" for k, v in sorted(r["chosen"].items(),
                                                          key=lambda kv: -kv[1]))
        rows.append([
            name, f"{r['n']:,} × {r['trials']}",
            f"{r['best']} {_e(mse[r['best']])} ± {_e(se[r['best']])}",
            f"{r['default']} {_e(mse[r['default']])} ± {_e(se[r['default']])}",
            f"{_e(mse['auto'])} ± {_e(se['auto'])}", chosen,
            fmt(r["auto_over_best"], 3),
            "yes" if r["within_mc_of_best"] else "**no**",
            f"{r['exchangeable_choice']} {_e(mse[r['exchangeable_choice']])}",
            ("= default" if r["default"] in r["chosen"] and len(r["chosen"]) == 1 else
             "yes" if r["beats_default"] else "**no**"),
        ])
    table = md_table(["design", "n × trials", "best fixed: MSE ± SE", "default: MSE ± SE",
                      "auto: MSE ± SE", "auto chose", "auto / best",
                      "auto within MC error of best", "exchangeable what-if",
                      "auto beats the default"], rows)
    full = []
    for name, r in results.items():
        full.append([name, *(f"{_e(r['mse'][m])}" for m in r["mse"])])
    mean_rows = [row for row, r in zip(full, results.values(), strict=True)
                 if r["default"] == MEAN_DEFAULT]
    hist_rows = [row for row, r in zip(full, results.values(), strict=True)
                 if r["default"] == HISTOGRAM_DEFAULT]
    parts = [table]
    if mean_rows:
        parts.append("Every method's MSE (mean designs):\n\n" + md_table(
            ["design", *MEAN_CANDIDATES, "auto"], mean_rows))
    if hist_rows:
        parts.append("Every method's MSE per bin (histogram designs):\n\n" + md_table(
            ["design", *HISTOGRAM_CANDIDATES, "auto"], hist_rows))
    parts.append(targets(results))
    parts.append(f"{seconds:.0f} s; load average at end {load_average()}.")
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the trials")
    parser.add_argument("--only", default="", help="comma-separated substrings of designs")
    add_report_args(parser)
    args = parser.parse_args()
    logging.getLogger("hdp_spark").setLevel(logging.ERROR)  # the seeded key's warning
    start = time.time()
    results: dict[str, dict[str, Any]] = {}
    wanted = [w for w in args.only.split(",") if w]
    for i, d in enumerate(designs(args.scale, args.smoke)):
        if wanted and not any(w in d.name for w in wanted):
            continue
        t0 = time.time()
        results[d.name] = summarize(d, run_design(d, seed=1000 + i))
        r = results[d.name]
        print(f"{d.name}: best {r['best']} {_e(r['mse'][r['best']])}, auto "
              f"{_e(r['mse']['auto'])} {r['chosen']} ({time.time() - t0:.0f} s)", flush=True)
    write_report(args.json, name="auto", figures=results,
                 markdown=markdown(results, time.time() - start),
                 meta={"scale": args.scale, "smoke": args.smoke})


if __name__ == "__main__":
    main()
