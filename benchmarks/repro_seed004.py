"""Seed 004 (Ghazi, Kumar, Manurangsi & Steinke, partial DP): the sample-complexity
separation of Table 1 for k-way marginals (average / RMS error), on synthetic data.

The paper has no experiments; Table 1 states n = O(√(|𝒬|k/d)/(ε₀α)) under ε₀-∇₀CDP
against n = O(√|𝒬|/(εα)) under standard ε-zCDP, i.e. the error at a given n is √(k/d)
times smaller with the same parameter value. We measure the RMS error of the released
marginals (fractions) against n through the library's own release path
(``hdp_marginals`` + ``marginals`` on pandas), for:

* **partial ε₀** -- ``hdp_marginals(eps0=ε)``: per attribute ε, per person ε·√(d/k);
* **standard ε** -- the same mechanism with ``eps0 = ε·√(k/d)``, so that its *per-person*
  guarantee is ε (the standard-DP projection mechanism at ε);

each with the projected answers (the mechanism) and the raw noisy ones. At the same
per-person ε the two are the same mechanism by construction (Theorem 11: the partial
guarantee comes for free), so the separation is between "ε per attribute" and "ε per
person": the ratio of the raw errors is √(d/k), and projection narrows it at small n.

Run: .venv/bin/python benchmarks/repro_seed004.py [--smoke] [--json out.json]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import add_report_args, fmt, md_table, plots_dir, pyplot, use_repo, write_report

use_repo()

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import hdp_spark.pandas as hpd  # noqa: E402


def _data(n: int, d: int, rng: np.random.Generator) -> pd.DataFrame:
    """Correlated binary attributes: a latent bit copied with flip probability 0.2."""
    z = rng.integers(0, 2, n)
    cols = {f"a{j}": np.where(rng.random(n) < 0.2, 1 - z, z) for j in range(d)}
    return pd.DataFrame(cols)


def _truth(df: pd.DataFrame, table: pd.DataFrame) -> np.ndarray:
    out = []
    n = len(df)
    for row in table.itertuples(index=False):
        names = row.marginal.split(",")
        mask = np.ones(n, dtype=bool)
        for c in names:
            mask &= df[c].to_numpy() == getattr(row, c)
        out.append(mask.sum() / n)
    return np.array(out)


def run(ns: list[int], d: int, k: int, eps: float, reps: int) -> dict[str, Any]:
    cols = [f"a{j}" for j in range(d)]
    domains = {c: [0, 1] for c in cols}
    other = {c: 0 for c in cols}
    specs = {
        "partial": hpd.hdp_marginals(cols, domains=domains, eps0=eps, k=k, other=other),
        "standard": hpd.hdp_marginals(cols, domains=domains, eps0=eps * math.sqrt(k / d), k=k,
                                      other=other),
    }
    rng = np.random.default_rng(2026)
    curves: dict[str, list[float]] = {f"{s} {v}": [] for s in specs for v in ("projected", "raw")}
    for n in ns:
        acc: dict[str, list[float]] = {key: [] for key in curves}
        for _ in range(reps):
            df = _data(n, d, rng)
            for name, spec in specs.items():
                out = hpd.marginals(df, spec)
                truth = _truth(df, out.table)
                proj = out.table["projected_fraction"].to_numpy()
                raw = out.table["noisy_count"].to_numpy() / n
                acc[f"{name} projected"].append(float(np.sqrt(np.mean((proj - truth) ** 2))))
                acc[f"{name} raw"].append(float(np.sqrt(np.mean((raw - truth) ** 2))))
        for key in curves:
            curves[key].append(float(np.mean(acc[key])))
    reports = {name: spec.budget for name, spec in specs.items()}
    return {
        "ns": ns, "d": d, "k": k, "eps": eps, "reps": reps, "curves": curves,
        "eps_attribute": {s: b.eps_attribute for s, b in reports.items()},
        "eps_person": {s: b.eps_person for s, b in reports.items()},
        "sigma_count": {s: math.sqrt(float(b.sigma2)) for s, b in reports.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_report_args(parser)
    args = parser.parse_args()
    if args.smoke:
        ns, d, k, reps = [200, 800], 6, 2, 1
    else:
        ns, d, k, reps = [100, 300, 1000, 3000, 10000], 10, 2, 4
    start = time.monotonic()
    res = run(ns, d, k, 1.0, reps)
    res["seconds"] = time.monotonic() - start
    curves = res["curves"]
    rows = [[n, *(fmt(curves[key][i]) for key in curves),
             fmt(curves["standard raw"][i] / curves["partial raw"][i], 3)]
            for i, n in enumerate(ns)]
    md = (
        f"## Seed 004, Table 1 (k-way marginals): RMS error vs n, d = {d}, k = {k}, "
        f"eps = 1, {reps} reps\n\n"
        f"partial: eps0 = 1 per attribute (per person {fmt(res['eps_person']['partial'], 3)}); "
        f"standard: per person eps = {fmt(res['eps_person']['standard'], 3)} "
        f"(per attribute {fmt(res['eps_attribute']['standard'], 3)}). "
        f"Predicted raw ratio sqrt(d/k) = {fmt(math.sqrt(d / k), 3)}.\n\n"
        + md_table(["n", *curves, "std/partial raw"], rows)
    )
    plots = []
    plt = pyplot()
    if plt is not None:
        fig, ax = plt.subplots(figsize=(6, 4))
        for key, ys in curves.items():
            ax.loglog(ns, ys, "o-" if "projected" in key else "x--", label=key)
        ax.set_xlabel("n (persons)")
        ax.set_ylabel("RMS error of the marginals (fractions)")
        ax.set_title(f"Seed 004 Table 1: {k}-way marginals, d = {d}, eps = 1")
        ax.legend()
        fig.tight_layout()
        path = plots_dir(args.plots) / "seed004_table1_marginals.png"
        fig.savefig(path, dpi=120)
        plots.append(path)
    write_report(args.json, name="repro_seed004", figures=res, markdown=md, plots=plots)


if __name__ == "__main__":
    main()
