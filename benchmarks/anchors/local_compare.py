"""hdp_spark (pandas engine) against the local anchors, OpenDP (Polars) and diffprivlib.

Same data as the Spark comparison (``anchors/data.py``: seed 001 §4.3's ε mixes, Beta(2, 3)
values on [-0.5, 0.5], ``key = id % groups``), built with numpy. What a homogeneous library
can do: its DP mean at ε_min = min_i ε_i.

* OpenDP 0.16: ``Context.compositor`` over a Polars LazyFrame, ``pl.col("x").dp.mean(bounds)``;
  the margin declares the lengths public (``invariant="lengths"``, and ``by=["key"]`` when
  grouped), the same public information as hdp_spark's model (n and each group's size are
  public), so only the sum is noised. With public lengths, one row's replacement is a
  symmetric distance of 2, so the privacy unit is ``unit_of(contributions=2)`` (replace-one,
  like hdp_spark). Beware: ``contributions=1`` with public lengths is accepted and calibrates
  the sum's noise to ~0 (no add/remove neighbour keeps the length), i.e. no privacy at all.
* diffprivlib 0.6.6: ``tools.mean(x, epsilon, bounds)``; grouped through pandas
  ``groupby().apply`` (disjoint groups: parallel composition).
* hdp_spark: ``hdp_spark.pandas.agg`` with ADPM at each row's ε, rounded down onto the same
  public grid as the Spark comparison (ratio 1.1), and ``method="uniform"`` (our own ε_min
  baseline, to separate "heterogeneous weights" from "mechanism").

Errors against the population mean μ = -0.1 over groups × repeats (independent samples);
also against each group's empirical mean. Time: medians of interleaved runs.

Run: benchmarks/.venv-anchors/bin/python benchmarks/anchors/local_compare.py
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    add_report_args,
    fmt,
    interleaved_runs,
    load_average,
    md_table,
    median,
    use_repo,
    write_report,
)

use_repo()

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from anchors.data import LOWER, MU, UPPER, frame_numpy, mse_summary  # noqa: E402

GRID_RATIO = 1.1


def opendp_cases(pdf: pd.DataFrame, eps_min: float, groups: int) -> dict[str, Any]:
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    lf = pl.LazyFrame({"x": pdf["x"].to_numpy(), "key": pdf["key"].to_numpy()})
    rows = len(pdf)
    size = int(pdf["key"].value_counts().max())

    def run_global() -> float:
        ctx = dp.Context.compositor(
            data=lf,
            privacy_unit=dp.unit_of(contributions=2),
            privacy_loss=dp.loss_of(epsilon=eps_min),
            split_evenly_over=1,
            margins=[dp.polars.Margin(max_length=rows, invariant="lengths")],
        )
        query = ctx.query().select(pl.col("x").fill_null(0.0).dp.mean((LOWER, UPPER)))
        return float(query.release().collect()["x"][0])

    def run_grouped() -> dict[Any, float]:
        ctx = dp.Context.compositor(
            data=lf,
            privacy_unit=dp.unit_of(contributions=2),
            privacy_loss=dp.loss_of(epsilon=eps_min),
            split_evenly_over=1,
            margins=[
                dp.polars.Margin(
                    by=["key"], max_length=size, max_groups=groups, invariant="lengths"
                )
            ],
        )
        query = ctx.query().group_by("key").agg(pl.col("x").fill_null(0.0).dp.mean((LOWER, UPPER)))
        out = query.release().collect()
        return dict(zip(out["key"].to_list(), out["x"].to_list(), strict=True))

    return {"global": run_global, "grouped": run_grouped}


def diffprivlib_cases(pdf: pd.DataFrame, eps_min: float) -> dict[str, Any]:
    import diffprivlib as dpl

    def mean(x: Any) -> float:
        return float(dpl.tools.mean(np.asarray(x), epsilon=eps_min, bounds=(LOWER, UPPER)))

    def run_grouped() -> dict[Any, float]:
        return pdf.groupby("key")["x"].apply(mean).to_dict()

    return {"global": lambda: mean(pdf["x"]), "grouped": run_grouped}


def hdp_cases(pdf: pd.DataFrame, groups: int, method: str) -> dict[str, Any]:
    import hdp_spark.pandas as hpd

    spec = hpd.hdp_mean(
        "x",
        eps="eps",
        lower=LOWER,
        upper=UPPER,
        method=method,
        clip_output=False,
        eps_grid=hpd.EpsGrid(ratio=GRID_RATIO, lowest=1e-3, highest=1e3),
    )
    keys = list(range(groups))

    def run_grouped() -> dict[Any, float]:
        out = hpd.agg(pdf, spec, by="key", keys=keys)
        return dict(zip(out["key"].tolist(), out["x_mean"].tolist(), strict=True))

    return {"global": lambda: float(hpd.agg(pdf, spec)["x_mean"].iloc[0]), "grouped": run_grouped}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--mixes", default="high,low")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--warmup", type=int, default=1)
    add_report_args(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.rows, args.groups, args.repeats, args.mixes, args.warmup = 4000, 20, 1, "high", 0
    warnings.filterwarnings("ignore")  # diffprivlib / polars chatter
    load_start = load_average()
    versions: dict[str, str] = {}
    from importlib.metadata import PackageNotFoundError, version

    for pkg in ("opendp", "polars", "diffprivlib"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = "missing"
    figures: dict[str, Any] = {
        "rows": args.rows,
        "groups": args.groups,
        "repeats": args.repeats,
        "grid_ratio": GRID_RATIO,
    }
    for mix in args.mixes.split(","):
        cols = frame_numpy(args.rows, args.groups, mix, args.seed)
        pdf = pd.DataFrame(cols)
        eps_min = float(pdf["eps"].min())
        truth_global = float(pdf["x"].mean())
        truth_groups = pdf.groupby("key")["x"].mean().to_dict()
        keys = list(range(args.groups))
        impls: dict[str, dict[str, Any]] = {
            "native": {
                "global": lambda pdf=pdf: float(pdf["x"].clip(LOWER, UPPER).mean()),
                "grouped": lambda pdf=pdf: (
                    pdf["x"].clip(LOWER, UPPER).groupby(pdf["key"]).mean().to_dict()
                ),
            },
            "hdp": hdp_cases(pdf, args.groups, "adpm"),
            "hdp_uniform": hdp_cases(pdf, args.groups, "uniform"),
        }
        if versions["opendp"] != "missing" and versions["polars"] != "missing":
            impls["opendp"] = opendp_cases(pdf, eps_min, args.groups)
        if versions["diffprivlib"] != "missing":
            impls["diffprivlib"] = diffprivlib_cases(pdf, eps_min)
        out: dict[str, Any] = {"eps_min": eps_min}
        for shape in ("global", "grouped"):
            cases = {name: impl[shape] for name, impl in impls.items()}
            times, values = interleaved_runs(cases, repeats=args.repeats, warmup=args.warmup)
            fig: dict[str, Any] = {}
            for name in cases:
                fig[f"{name}_s"] = median(times[name])
                if name == "native":
                    continue
                if shape == "global":
                    est = np.array(values[name], dtype=float)
                    emp = est - truth_global
                else:
                    est = np.concatenate([np.array([v[k] for k in keys]) for v in values[name]])
                    emp = np.concatenate(
                        [np.array([v[k] - truth_groups[k] for k in keys]) for v in values[name]]
                    )
                fig[f"{name}_mse_population"] = mse_summary(est - MU)
                fig[f"{name}_mse_population_clipped"] = mse_summary(np.clip(est, LOWER, UPPER) - MU)
                fig[f"{name}_mse_empirical"] = mse_summary(emp)
            h = fig["hdp_mse_population"]["mse"]
            for name in cases:
                if name in ("native", "hdp"):
                    continue
                fig[f"{name}_over_hdp_time"] = fig[f"{name}_s"] / fig["hdp_s"]
                fig[f"{name}_over_hdp_mse"] = fig[f"{name}_mse_population"]["mse"] / h
            fig["hdp_over_native_time"] = fig["hdp_s"] / fig["native_s"]
            out[shape] = fig
            print(
                mix, shape, {k: round(v, 4) for k, v in fig.items() if k.endswith("_s")}, flush=True
            )
        figures[mix] = out
    figures["load_start"] = load_start
    figures["load_end"] = load_average()
    figures["versions"] = versions
    write_report(
        args.json,
        name="anchors-local",
        figures=figures,
        markdown=render(figures),
        meta={"versions": versions},
    )


def render(fig: dict[str, Any]) -> str:
    v = fig["versions"]
    lines = [
        f"OpenDP {v['opendp']} (Polars {v['polars']}), diffprivlib {v['diffprivlib']}, "
        f"hdp_spark pandas engine; {fig['rows']:,} rows, {fig['groups']:,} public groups "
        f"({fig['rows'] // fig['groups']:,} rows each), medians of {fig['repeats']} interleaved "
        f"runs. Anchors at ε_min; hdp ADPM at each row's ε (grid ratio {fig['grid_ratio']}). "
        "MSE against μ = −0.1 over groups × repeats (global: repeats on one dataset); "
        "ratio = anchor MSE / hdp ADPM MSE.",
        "",
    ]
    rows = []
    for mix in ("high", "low"):
        if mix not in fig:
            continue
        for shape in ("global", "grouped"):
            f = fig[mix][shape]
            for name in ("hdp", "hdp_uniform", "opendp", "diffprivlib"):
                if f"{name}_s" not in f:
                    continue
                m = f[f"{name}_mse_population"]
                rows.append(
                    [
                        mix,
                        shape,
                        name,
                        fmt(f[f"{name}_s"]),
                        fmt(f[f"{name}_s"] / f["native_s"]),
                        "1" if name == "hdp" else fmt(f[f"{name}_over_hdp_time"]),
                        f"{fmt(m['mse'])} ± {fmt(m['mse_se'])}",
                        fmt(f[f"{name}_mse_population_clipped"]["mse"]),
                        "1" if name == "hdp" else fmt(f[f"{name}_over_hdp_mse"]),
                    ]
                )
    lines.append(
        md_table(
            [
                "ε mix",
                "shape",
                "method",
                "time s",
                "× native pandas",
                "time / hdp",
                "MSE (pop.)",
                "MSE clipped",
                "MSE / hdp",
            ],
            rows,
        )
    )
    lines.append("")
    lines.append(f"Load average at start {fig['load_start']}, at end {fig['load_end']}.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
