"""Partition selection with per-row ε (issue 22): which groups are released and how accurate
their means are, against the public-keys release and homogeneous Laplace thresholding at ε_min.

An ACCURACY benchmark on the pandas engine (no timing is asserted or reported as a target).

Setting (defaults; every trial draws a new table):

* G = 2,000 groups with a long tail of sizes: n_g = ⌊5001^U⌋, U ~ U[0, 1), i.e. a truncated
  Zipf law P(n) ∝ 1/n on 1..5,000 (half the groups hold fewer than ~71 rows, a quarter fewer
  than ~8; about 1.2M rows per table).
* ε_i: the ε mix of the design note "DP partition selection with per-row ε" (§6),
  LogU[0.05, 5], discretised to 64 log-spaced public levels (so ε_min = 0.05); ε is
  independent of the value (the weakly correlated "W" setting of seed 000).
* Values: group g has a centre μ_g ~ U[0.1, 0.9]; x̄_i ~ Beta(4μ_g, 4(1 − μ_g)) and
  x_i = lower + (upper − lower)·x̄_i with [lower, upper] = [0, 100], so errors read as
  percent of the range. The target of every method is the group's exact mean of x.
* Privacy: one person, one row, one group; the library's neighbour notion (replacement,
  u = 2 groups touched); δ = 1e-6, selection share f = 0.5 (the note's §6 setting), caps
  c = 1 and c = 2.

Methods:

(a) ``select_keys``: ``hpd.agg(df, hdp_mean(...), by="g", keys=hpd.select_keys(delta=δ,
    c=c, share=f))``, the library's release: a group is released iff Σ κ_i + discrete
    Laplace(u/f) ≥ T ≈ c + (u/f)·ln(1/(2δ)), κ_i = min(ε_i, c), and its mean is
    ½ + Ñ/W̃ with the other (1 − f)·κ_i. Each row is charged (κ_i, δ).
(b) public keys: the same table released with ``keys=`` the true key list (the key set is
    then a public input, for free), the same ε column and the full ε_i, with HPM-A (the
    note's reference) and ADPM (the library's default ``method``) in one call.
(c) homogeneous baseline at ε_min (implemented here, not a library mechanism): everyone is
    treated as ε_min, as a homogeneous library must. Selection is the Laplace thresholding
    of Wilson et al., "Differentially Private SQL with Bounded User Contribution" (PoPETs
    2020) (the DP query engine's τ-thresholding of the noisy count of users per
    partition), analysed as "Laplace thresholding" in Desfontaines et al., "Differentially
    private partition selection" (PoPETs 2022), §3. Derivation for one group per person:
    the group's count n (one row per person) gets Laplace noise of scale b = u/(f·ε_min)
    (a replacement moves one person between two groups, changing two counts by 1: L1
    sensitivity u = 2, so the selection costs f·ε_min); a group holding only the changed
    person (n = 1, present on one side only) must be released with probability ≤ δ:
    P[1 + Lap(b) ≥ τ] = ½·exp(−(τ − 1)/b) ≤ δ  ⟺  τ = 1 + b·ln(1/(2δ)) (Wilson et al.'s
    τ = 1 − (C_u/ε)·ln(2 − 2(1 − δ)^{1/C_u}) with one partition per user, C_u = 1, under
    add/remove, b = 1/ε). At ε_min = 0.05, f = 0.5, δ = 1e-6: b = 80, τ ≈ 1,050.8 rows.
    Mean of a released group with the other (1 − f)·ε_min, the same ratio structure as (a)
    with every weight equal: Ñ = Σ(x̄_i − ½) + Lap(u/(2(1 − f)·ε_min)) and
    μ̂ = clip(½ + Ñ/ñ, 0, 1), ñ ≥ τ the selection's noisy count (post-processing). Total
    (ε_min, δ) per person: the same budget split as (a) with every κ_i = ε_min.
    Continuous numpy Laplace noise (a simulation baseline, not a release).

Reported per size bucket: the share of groups released (ours at c = 1, 2 and the ε_min
baseline), the RMSE of the released means, and ours against the public-keys release on the
SAME released groups (paired ratios); the group size at which the release probability is
50% (n₅₀), measured (interpolated in log size) and predicted (T/E[κ], the note's rule);
the measured release count against its exact expectation given each group's Σ k_i (a check
of the library's threshold). The design note predicts 1.0–1.55× the public-keys RMSE for
groups of 300–5,000 rows and n₅₀ of about 66–96 rows (c = 2 .. 1) against about 1,051 at
ε_min. The noise of (a) and (b) comes from ``unsafe_seed`` (reproducible figures; this is a
benchmark, not a release).

Run: .venv/bin/python benchmarks/bench_selection.py [--trials 20] [--groups 2000] [--smoke]
     [--json out.json] [--plots DIR]   (writes plots/selection_release_rmse.png)
"""

from __future__ import annotations

import argparse
import itertools
import logging
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
import pandas as pd  # noqa: E402

import hdp_spark.pandas as hpd  # noqa: E402
from hdp_spark.core.mean.spec import MeanMethod  # noqa: E402

BUCKETS: list[tuple[int, int]] = [
    (1, 10),
    (10, 30),
    (30, 100),
    (100, 300),
    (300, 1000),
    (1000, 5001),
]
# the design note's §6 predictions (δ = 1e-6, f = 0.5, u = 2, ε ~ LogU[0.05, 5])
NOTE_N50: dict[float, int] = {1.0: 96, 2.0: 66}
NOTE_N50_EPS_MIN = 1051
NOTE_RATIO = (1.0, 1.55)
NOTE_RATIO_BUCKETS = ((300, 1000), (1000, 5001))
PUBLIC: tuple[MeanMethod, ...] = ("hpm-a", "adpm")


def bucket_label(lo: int, hi: int) -> str:
    return f"{lo:,}–{hi - 1:,}"


def eps_levels(lo: float, hi: float, count: int) -> np.ndarray:
    """``count`` log-spaced public ε levels on [lo, hi] (6 significant digits)."""
    raw = lo * (hi / lo) ** (np.arange(count) / (count - 1))
    return np.array([float(f"{v:.6g}") for v in raw])


def draw_table(
    rng: np.random.Generator,
    groups: int,
    max_size: int,
    levels: np.ndarray,
    lower: float,
    upper: float,
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """One synthetic table: (rows g, eps, x), the group sizes and the exact group means."""
    sizes = np.floor((max_size + 1) ** rng.random(groups)).astype(np.int64)
    sizes = np.clip(sizes, 1, max_size)
    g = np.repeat(np.arange(groups), sizes)
    centre = rng.uniform(0.1, 0.9, groups)[g]
    unit = rng.beta(4 * centre, 4 * (1 - centre))
    x = lower + (upper - lower) * unit
    eps = levels[rng.integers(0, len(levels), g.size)]
    truth = np.bincount(g, weights=x, minlength=groups) / sizes
    return pd.DataFrame({"g": g, "eps": eps, "x": x}), sizes, truth


def release_ours(
    df: pd.DataFrame, groups: int, selection: Any, lower: float, upper: float, seed: str
) -> np.ndarray:
    """The library's selection release: the estimate per group, NaN when not released."""
    spec = hpd.hdp_mean("x", eps="eps", lower=lower, upper=upper, alias="m")
    out = hpd.agg(df, spec, by="g", keys=selection, unsafe_seed=seed)
    est = np.full(groups, np.nan)
    est[out["g"].to_numpy(dtype=np.int64)] = out["m"].to_numpy(dtype=float)
    return est


def release_public(
    df: pd.DataFrame, groups: int, lower: float, upper: float, seed: str
) -> dict[str, np.ndarray]:
    """The public-keys release (the true key list), HPM-A and ADPM in one call."""
    specs = [
        hpd.hdp_mean("x", eps="eps", lower=lower, upper=upper, method=m, alias=m) for m in PUBLIC
    ]
    out = hpd.agg(df, *specs, by="g", keys=list(range(groups)), unsafe_seed=seed)
    idx = out["g"].to_numpy(dtype=np.int64)
    res: dict[str, np.ndarray] = {}
    for m in PUBLIC:
        est = np.full(groups, np.nan)
        est[idx] = out[m].to_numpy(dtype=float)
        res[m] = est
    return res


def homogeneous_threshold(eps_min: float, delta: float, share: float, touched: int) -> float:
    """τ = 1 + b·ln(1/(2δ)), b = u/(f·ε_min): Laplace thresholding at ε_min (docstring)."""
    return 1.0 + touched / (share * eps_min) * math.log(1.0 / (2.0 * delta))


def release_homogeneous(
    rng: np.random.Generator,
    df: pd.DataFrame,
    sizes: np.ndarray,
    eps_min: float,
    delta: float,
    share: float,
    touched: int,
    lower: float,
    upper: float,
) -> np.ndarray:
    """Baseline (c): Laplace thresholding and the ratio mean, everyone at ε_min."""
    groups = sizes.size
    b_sel = touched / (share * eps_min)
    tau = homogeneous_threshold(eps_min, delta, share, touched)
    noisy_n = sizes + rng.laplace(0.0, b_sel, groups)
    released = noisy_n >= tau
    unit = (df["x"].to_numpy() - lower) / (upper - lower)
    centred = np.bincount(df["g"].to_numpy(), weights=unit - 0.5, minlength=groups)
    b_mean = touched / (2.0 * (1.0 - share) * eps_min)
    noisy_sum = centred + rng.laplace(0.0, b_mean, groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = np.clip(0.5 + noisy_sum / noisy_n, 0.0, 1.0)
    return np.where(released, lower + (upper - lower) * mu, np.nan)


def group_units(df: pd.DataFrame, groups: int, selection: Any) -> np.ndarray:
    """W_g = Σ k_i, k_i = ⌊min(ε_i, c)/γ⌋ from the library's exact per-level rule."""
    levels, inverse = np.unique(df["eps"].to_numpy(), return_inverse=True)
    k = np.array([selection.units(float(v)) for v in levels], dtype=np.int64)[inverse]
    return np.bincount(df["g"].to_numpy(), weights=k, minlength=groups)


def release_probability(weight: np.ndarray, selection: Any) -> np.ndarray:
    """P[W + Z >= T] for the two-sided geometric Z of the selection (exact, per group)."""
    t = selection.selection_scale
    q = math.exp(-t.denominator / t.numerator)
    m = selection.threshold - weight  # release iff Z >= m
    upper_tail = np.power(q, np.maximum(m, 1)) / (1 + q)  # P[Z >= m], m >= 1
    lower_tail = 1 - np.power(q, np.maximum(1 - m, 1)) / (1 + q)  # P[Z >= m], m <= 0
    out: np.ndarray = np.where(m >= 1, upper_tail, lower_tail)
    return out


def expected_kappa(levels: np.ndarray, selection: Any) -> float:
    """E[κ] of a row under the uniform level mix, with the library's rounding."""
    return float(np.mean([selection.charge(float(v)) for v in levels]))


def n50(sizes: np.ndarray, released: np.ndarray, bins: int = 60) -> float | None:
    """The size where the binned release rate first reaches ½ (log-linear interpolation)."""
    edges = np.unique(np.round(np.geomspace(1, sizes.max() + 1, bins + 1)).astype(np.int64))
    prev: tuple[float, float] | None = None
    for lo, hi in itertools.pairwise(edges):
        sel = (sizes >= lo) & (sizes < hi)
        if sel.sum() < 20:
            continue
        rate = float(released[sel].mean())
        centre = math.sqrt(lo * (hi - 1)) if hi - 1 > lo else float(lo)
        if rate >= 0.5:
            if prev is None:
                return centre
            (c0, r0) = prev
            frac = (0.5 - r0) / (rate - r0) if rate > r0 else 1.0
            return float(math.exp(math.log(c0) + frac * (math.log(centre) - math.log(c0))))
        prev = (centre, rate)
    return None


def rmse(err: np.ndarray) -> float | None:
    return float(np.sqrt(np.mean(err**2))) if err.size else None


def fine_bins(size: np.ndarray, count: int = 24) -> tuple[np.ndarray, np.ndarray]:
    """Log-spaced size bins (edges, geometric centres) of the plot and the ratio curve."""
    edges = np.unique(np.round(np.geomspace(1, size.max() + 1, count + 1)).astype(np.int64))
    return edges, np.sqrt(edges[:-1] * np.maximum(edges[1:] - 1, edges[:-1]))


def ratio_curve(data: dict[str, np.ndarray], name: str) -> list[dict[str, Any]]:
    """RMSE(ours)/RMSE(public HPM-A) on the same released groups, per fine size bin."""
    size, truth = data["size"], data["truth"]
    edges, centres = fine_bins(size)
    curve = []
    for (a, b), centre in zip(itertools.pairwise(edges), centres, strict=True):
        sel = (size >= a) & (size < b) & ~np.isnan(data[name])
        ours = rmse(data[name][sel] - truth[sel]) if sel.sum() >= 30 else None
        pub = rmse(data["hpm-a"][sel] - truth[sel]) if sel.sum() >= 30 else None
        ratio = None if ours is None or not pub else ours / pub
        curve.append({"size": float(centre), "samples": int(sel.sum()), "ratio": num(ratio)})
    return curve


def jackknife_ratio(ours: np.ndarray, public: np.ndarray, trial: np.ndarray) -> float | None:
    """Jackknife standard error (over tables) of RMSE(ours)/RMSE(public) on paired samples."""
    ids = np.unique(trial)
    if ids.size < 3:
        return None
    sq_o, sq_p = ours**2, public**2
    parts = []
    for t in ids:
        rest = trial != t
        if not rest.any():
            return None
        parts.append(math.sqrt(sq_o[rest].mean() / sq_p[rest].mean()))
    arr = np.array(parts)
    return float(math.sqrt((ids.size - 1) / ids.size * ((arr - arr.mean()) ** 2).sum()))


def num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--groups", type=int, default=2000)
    parser.add_argument("--max-size", type=int, default=5000)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--caps", default="1,2", help="the c values of select_keys")
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--share", type=float, default=0.5, help="f, the selection share")
    parser.add_argument("--eps-min", type=float, default=0.05)
    parser.add_argument("--eps-max", type=float, default=5.0)
    parser.add_argument("--levels", type=int, default=64)
    parser.add_argument("--seed", type=int, default=2200)
    add_report_args(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.groups, args.trials, args.levels = 80, 2, 16
    caps = [float(c) for c in args.caps.split(",")]
    # every release below runs with `unsafe_seed` (reproducible figures): the library warns
    # once per release on logger "hdp_spark"; said once here instead
    print("noise of the library's releases from `unsafe_seed` (a benchmark, not a release)")
    logging.getLogger("hdp_spark").setLevel(logging.ERROR)
    lower, upper = 0.0, 100.0
    touched = 2  # the library's default neighbour notion: replacement
    load_start = load_average()
    start = time.perf_counter()
    levels = eps_levels(args.eps_min, args.eps_max, args.levels)
    eps_min = float(levels.min())
    selections = {c: hpd.select_keys(delta=args.delta, c=c, share=args.share) for c in caps}
    rng = np.random.default_rng(args.seed)
    cols: dict[str, list[np.ndarray]] = {}

    def keep(name: str, arr: np.ndarray) -> None:
        cols.setdefault(name, []).append(arr)

    seconds: dict[str, float] = {"ours": 0.0, "public": 0.0}
    for trial in range(args.trials):
        df, sizes, truth = draw_table(rng, args.groups, args.max_size, levels, lower, upper)
        keep("size", sizes)
        keep("trial", np.full(sizes.size, trial))
        keep("truth", truth)
        for c, sel in selections.items():
            t0 = time.perf_counter()
            keep(
                f"ours{c:g}",
                release_ours(
                    df,
                    args.groups,
                    sel,
                    lower,
                    upper,
                    f"bench-selection/{args.seed}/{trial}/c{c:g}",
                ),
            )
            seconds["ours"] += time.perf_counter() - t0
            keep(f"p_exact{c:g}", release_probability(group_units(df, args.groups, sel), sel))
        t0 = time.perf_counter()
        for m, est in release_public(
            df, args.groups, lower, upper, f"bench-selection/{args.seed}/{trial}/public"
        ).items():
            keep(m, est)
        seconds["public"] += time.perf_counter() - t0
        keep(
            "eps_min",
            release_homogeneous(
                rng, df, sizes, eps_min, args.delta, args.share, touched, lower, upper
            ),
        )
        print(
            f"trial {trial + 1}/{args.trials} done at {time.perf_counter() - start:.0f} s",
            flush=True,
        )
    data = {k: np.concatenate(v) for k, v in cols.items()}
    figures = summarise(data, args, caps, selections, levels, eps_min, touched)
    figures["seconds"] = {**seconds, "total": time.perf_counter() - start}
    figures["load_start"] = load_start
    figures["load_end"] = load_average()
    plots = make_plots(args.plots, data, caps, figures)
    write_report(
        args.json, name="selection", figures=figures, markdown=render(figures), plots=plots
    )


def summarise(
    data: dict[str, np.ndarray],
    args: argparse.Namespace,
    caps: list[float],
    selections: dict[float, Any],
    levels: np.ndarray,
    eps_min: float,
    touched: int,
) -> dict[str, Any]:
    size, truth = data["size"], data["truth"]
    methods = [f"ours{c:g}" for c in caps]
    buckets: list[dict[str, Any]] = []
    for lo, hi in BUCKETS:
        inb = (size >= lo) & (size < hi)
        row: dict[str, Any] = {
            "bucket": bucket_label(lo, hi),
            "lo": lo,
            "hi": hi,
            "samples": int(inb.sum()),
        }
        base = inb & ~np.isnan(data["eps_min"])
        row["released_eps_min"] = num(float(base.sum() / max(inb.sum(), 1)))
        row["rmse_eps_min"] = num(rmse(data["eps_min"][base] - truth[base]))
        for m in PUBLIC:
            row[f"rmse_{m}"] = num(rmse(data[m][inb] - truth[inb]))
        for c, name in zip(caps, methods, strict=True):
            rel = inb & ~np.isnan(data[name])
            row[f"released_{name}"] = num(float(rel.sum() / max(inb.sum(), 1)))
            row[f"expected_{name}"] = num(
                float(data[f"p_exact{c:g}"][inb].mean()) if inb.any() else None
            )
            ours = rmse(data[name][rel] - truth[rel])
            row[f"rmse_{name}"] = num(ours)
            # selection bias: mean error towards the midpoint (> 0: pulled towards ½)
            towards = (data[name][rel] - truth[rel]) * np.sign(50.0 - truth[rel])
            row[f"bias_mid_{name}"] = num(float(towards.mean()) if towards.size else None)
            for m in PUBLIC:
                paired = rmse(data[m][rel] - truth[rel])
                row[f"rmse_{m}_on_{name}"] = num(paired)
                row[f"ratio_{name}_{m}"] = num(
                    ours / paired if ours is not None and paired else None
                )
                row[f"ratio_se_{name}_{m}"] = num(
                    jackknife_ratio(
                        data[name][rel] - truth[rel], data[m][rel] - truth[rel], data["trial"][rel]
                    )
                    if rel.sum() >= 3
                    else None
                )
        buckets.append(row)
    selection_fig: dict[str, Any] = {}
    for c, name in zip(caps, methods, strict=True):
        sel = selections[c]
        released = ~np.isnan(data[name])
        p = data[f"p_exact{c:g}"]
        expected, var = float(p.sum()), float((p * (1 - p)).sum())
        kappa = expected_kappa(levels, sel)
        t_kappa = float(sel.threshold * sel.gamma)
        selection_fig[name] = {
            "c": c,
            "threshold_kappa": t_kappa,
            "mean_kappa": kappa,
            "n50_predicted": t_kappa / kappa,
            "n50_note": NOTE_N50.get(c),
            "n50_measured": num(n50(size, released)),
            "released_share": float(released.mean()),
            "rows_share": float(size[released].sum() / size.sum()),
            "released": int(released.sum()),
            "released_expected": expected,
            "z": (float(released.sum()) - expected) / math.sqrt(var) if var > 0 else 0.0,
            "ratio_curve": ratio_curve(data, name),
        }
    base_rel = ~np.isnan(data["eps_min"])
    tau = homogeneous_threshold(eps_min, args.delta, args.share, touched)
    selection_fig["eps_min"] = {
        "eps_min": eps_min,
        "threshold_rows": tau,
        "n50_predicted": tau,
        "n50_note": NOTE_N50_EPS_MIN,
        "n50_measured": num(n50(size, base_rel)),
        "released_share": float(base_rel.mean()),
        "rows_share": float(size[base_rel].sum() / size.sum()),
    }
    return {
        "setting": {
            "groups": args.groups,
            "trials": args.trials,
            "max_size": args.max_size,
            "rows_per_table": float(size.sum() / args.trials),
            "delta": args.delta,
            "share": args.share,
            "caps": caps,
            "eps_levels": int(levels.size),
            "eps_min": eps_min,
            "eps_max": float(levels.max()),
            "touched": touched,
            "seed": args.seed,
            "lower": 0.0,
            "upper": 100.0,
        },
        "buckets": buckets,
        "selection": selection_fig,
    }


def ratio_cell(b: dict[str, Any], name: str, method: str) -> str:
    ratio, se = b[f"ratio_{name}_{method}"], b[f"ratio_se_{name}_{method}"]
    if ratio is None:
        return "—"
    return fmt(ratio, 3) if se is None else f"{fmt(ratio, 3)} ± {fmt(se, 2)}"


def render(fig: dict[str, Any]) -> str:
    s = fig["setting"]
    caps = s["caps"]
    names = [f"ours{c:g}" for c in caps]
    out = [
        f"{s['trials']} tables × {s['groups']:,} groups, sizes ⌊5001^U⌋ (P(n) ∝ 1/n on "
        f"1..{s['max_size']:,}; {s['rows_per_table']:,.0f} rows per table on average), ε "
        f"uniform over {s['eps_levels']} log-spaced levels on [{s['eps_min']:g}, "
        f"{s['eps_max']:g}], values in [0, 100] (RMSE = % of the range), replacement "
        f"(u = {s['touched']}), δ = {s['delta']:g}, selection share f = {s['share']:g}. "
        "Ours = `select_keys(delta, c, share)`; public = `keys=` the true key list, full ε_i; "
        "ε_min = Laplace thresholding (Wilson et al.) and the ratio mean, everyone at ε_min.",
        "",
        "**Release.** Share of groups released per size bucket (ours: measured / exact "
        "expectation from each group's Σ k_i):",
        "",
    ]
    rows = []
    for b in fig["buckets"]:
        row = [b["bucket"], f"{b['samples']:,}"]
        for name in names:
            row.append(f"{fmt(b[f'released_{name}'])} / {fmt(b[f'expected_{name}'])}")
        row.append(fmt(b["released_eps_min"]))
        rows.append(row)
    sel = fig["selection"]
    for label, key in (("all groups", "released_share"), ("rows covered", "rows_share")):
        rows.append(
            [f"**{label}**", "", *[fmt(sel[n][key]) for n in names], fmt(sel["eps_min"][key])]
        )
    rows.append(
        [
            "**n₅₀ measured**",
            "",
            *[fmt(sel[n]["n50_measured"]) for n in names],
            fmt(sel["eps_min"]["n50_measured"]),
        ]
    )
    rows.append(
        [
            "**n₅₀ = T/E[κ]**",
            "",
            *[fmt(sel[n]["n50_predicted"]) for n in names],
            fmt(sel["eps_min"]["n50_predicted"]),
        ]
    )
    rows.append(
        [
            "**n₅₀ note**",
            "",
            *[str(sel[n]["n50_note"]) for n in names],
            str(sel["eps_min"]["n50_note"]),
        ]
    )
    out.append(
        md_table(
            [
                "group size",
                "samples",
                *[f"ours c = {c:g}" for c in caps],
                f"ε_min = {s['eps_min']:g}",
            ],
            rows,
        )
    )
    out.append("")
    checks = "; ".join(
        f"c = {sel[n]['c']:g}: {sel[n]['released']:,} released, expected "
        f"{sel[n]['released_expected']:,.1f} (z = {sel[n]['z']:+.2f})"
        for n in names
    )
    out.append(f"Threshold check (measured release count against its exact expectation): {checks}.")
    out.append("")
    for c, name in zip(caps, names, strict=True):
        out.append(
            f"**RMSE, c = {c:g}** (ours on its released groups; public on the same "
            "groups, paired; ε_min on its own released groups; ratios ± jackknife "
            "standard error over tables):"
        )
        out.append("")
        rows = []
        for b in fig["buckets"]:
            rows.append(
                [
                    b["bucket"],
                    fmt(b[f"rmse_{name}"]),
                    fmt(b[f"rmse_hpm-a_on_{name}"]),
                    fmt(b[f"rmse_adpm_on_{name}"]),
                    fmt(b["rmse_eps_min"]),
                    ratio_cell(b, name, "hpm-a"),
                    ratio_cell(b, name, "adpm"),
                    fmt(b[f"bias_mid_{name}"]),
                ]
            )
        out.append(
            md_table(
                [
                    "group size",
                    "ours",
                    "public HPM-A",
                    "public ADPM",
                    "ε_min thresholding",
                    "ours / HPM-A",
                    "ours / ADPM",
                    "ours: bias towards ½",
                ],
                rows,
            )
        )
        out.append("")
    lo, hi = NOTE_RATIO
    verdict = []
    for name in names:
        ratios = [
            b[f"ratio_{name}_hpm-a"]
            for b in fig["buckets"]
            if (b["lo"], b["hi"]) in NOTE_RATIO_BUCKETS
        ]
        got = [r for r in ratios if r is not None]
        inside = bool(got) and all(lo <= r <= hi for r in got)
        verdict.append(
            f"c = {sel[name]['c']:g}: "
            + ", ".join(fmt(r) for r in got)
            + (" (inside)" if inside else " (outside)")
        )
    out.append(f"Prediction 1.0–1.55× public HPM-A for 300–5,000 rows: {'; '.join(verdict)}.")
    fine = []
    for name in names:
        pts = [p for p in sel[name]["ratio_curve"] if p["ratio"] is not None]
        span = [p for p in pts if 300 <= p["size"] <= 5000]
        cells = ", ".join(f"{p['size']:,.0f}: {p['ratio']:.2f}" for p in span)
        fine.append(f"c = {sel[name]['c']:g}: {cells}")
    out.append(
        "Per finer size bin (geometric bin centre: ratio to public HPM-A, paired): "
        + "; ".join(fine)
        + "."
    )
    sec = fig["seconds"]
    out.append(
        f"Wall time {sec['total']:.0f} s (selection releases {sec['ours']:.0f} s, public "
        f"{sec['public']:.0f} s); load average {fig['load_start']} → {fig['load_end']}. "
        "Plot: `plots/selection_release_rmse.png`."
    )
    return "\n".join(out)


def make_plots(
    arg: Path | None, data: dict[str, np.ndarray], caps: list[float], fig: dict[str, Any]
) -> list[Path]:
    plt = pyplot()
    if plt is None:
        return []
    path = plots_dir(arg) / "selection_release_rmse.png"
    size, truth = data["size"], data["truth"]
    edges, centres = fine_bins(size)
    names = [f"ours{c:g}" for c in caps]
    series = [(f"select_keys c = {c:g}", n) for c, n in zip(caps, names, strict=True)]
    series.append((f"ε_min = {fig['setting']['eps_min']:g} thresholding", "eps_min"))
    fig_, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.2))
    for label, name in series:
        rel = ~np.isnan(data[name])
        rate = [
            rel[(size >= a) & (size < b)].mean() if ((size >= a) & (size < b)).any() else np.nan
            for a, b in itertools.pairwise(edges)
        ]
        line = ax1.plot(centres, rate, marker=".", label=label)[0]
        note = fig["selection"][name]["n50_note"]
        if note is not None:
            ax1.axvline(note, color=line.get_color(), ls=":", lw=1)
    ax1.axhline(0.5, color="grey", lw=0.5)
    ax1.set_xscale("log")
    ax1.set_xlabel("group size (rows)")
    ax1.set_ylabel("share of groups released")
    ax1.set_title("Release (dotted: the note's n₅₀)")
    ax1.legend(fontsize=8)
    for label, name in [*series, ("public keys, HPM-A", "hpm-a"), ("public keys, ADPM", "adpm")]:
        vals = []
        for a, b in itertools.pairwise(edges):
            sel = (size >= a) & (size < b) & ~np.isnan(data[name])
            vals.append(rmse(data[name][sel] - truth[sel]) if sel.sum() >= 30 else None)
        ys = [np.nan if v is None else v for v in vals]
        style = "--" if name in PUBLIC else "-"
        ax2.plot(centres, ys, style, marker=".", label=label)
    ax2.set_xscale("log")
    if ax2.has_data() and any(np.isfinite(ln.get_ydata()).any() for ln in ax2.get_lines()):
        ax2.set_yscale("log")
    ax2.set_xlabel("group size (rows)")
    ax2.set_ylabel("RMSE of the mean (% of range)")
    ax2.set_title("Accuracy of released means")
    ax2.legend(fontsize=8)
    for label, name in series[:-1]:
        curve = fig["selection"][name]["ratio_curve"]
        ax3.plot(
            [p["size"] for p in curve],
            [np.nan if p["ratio"] is None else p["ratio"] for p in curve],
            marker=".",
            label=label,
        )
    lo, hi = NOTE_RATIO
    ax3.fill_between(
        [300, 5000],
        lo,
        hi,
        color="grey",
        alpha=0.2,
        label=f"note: {lo:g}–{hi:g}× for 300–5,000 rows",
    )
    ax3.axhline(1.0, color="grey", lw=0.5)
    ax3.set_xscale("log")
    ax3.set_xlabel("group size (rows)")
    ax3.set_ylabel("RMSE ratio, same released groups")
    ax3.set_title("select_keys / public keys (HPM-A)")
    ax3.legend(fontsize=8)
    s = fig["setting"]
    fig_.suptitle(
        f"Partition selection: {s['groups']:,} groups × {s['trials']} tables, "
        f"ε ~ LogU[{s['eps_min']:g}, {s['eps_max']:g}], δ = {s['delta']:g}, "
        f"f = {s['share']:g}"
    )
    fig_.tight_layout()
    fig_.savefig(path, dpi=110)
    plt.close(fig_)
    return [path]


if __name__ == "__main__":
    main()
