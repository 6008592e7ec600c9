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

Two more rows of Table 1 (``run_histogram``, ``run_mwem``):

* **histogram / heavy hitters on {0,1}^d**, ℓ∞ error of the frequencies: ε₀-∇₀DP needs
  n = O(log d/(ε₀α)) against O(d/(εα)) for pure ε-DP (O(√d/(εα)) for ½ε²-zCDP). Partial:
  ``hdp_heavy_hitters(eps0=ε)`` through ``heavy_hitters`` (unreleased records count 0).
  Standard at the same parameter ε per person: the Laplace histogram over all 2^d cells
  (L1 sensitivity 2, scale 2/ε; its ℓ∞ error is the largest of 2^d noise magnitudes,
  sampled exactly from the law of the maximum), its Gaussian ½ε²-zCDP counterpart (σ = √2/ε),
  and the Laplace histogram at the partial release's own per-person ε (``eps_person``).
  Predicted ratio standard (pure) / partial: Θ(d/log d), constants not given.
* **k-way marginals by MWEM, max* error** (the largest average error over ℓ
  attribute-disjoint marginals): ε₀-∇₀CDP with ℓ = d/k queries per round needs
  n = O(k^{3/2}·log d/(ε₀α²)) against O(√d·k·log d/(εα²)) for standard ½ε²-zCDP MWEM (ℓ = 1,
  which is ``hdp_mwem(per_round=1)``: per person ρ = ε²/2). At a fixed n the error ratio
  standard / partial is (d/k)^{1/4}.

Run: .venv/bin/python benchmarks/repro_seed004.py [--smoke] [--json out.json]
    [--only marginals,histogram,mwem]
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


# -- Table 1, histogram row ----------------------------------------------------------------------


def _hist_data(n: int, d: int, rng: np.random.Generator, protos: np.ndarray) -> pd.DataFrame:
    """Planted records with geometric weights 0.3·2^-i (12 of them, 60% of the rows), the
    rest uniform over {0,1}^d."""
    weights = 0.3 * 0.5 ** np.arange(len(protos))
    pick = rng.choice(len(protos) + 1, size=n, p=[*weights, 1 - weights.sum()])
    bits = rng.integers(0, 2, (n, d))
    planted = pick < len(protos)
    bits[planted] = protos[pick[planted]]
    return pd.DataFrame(bits, columns=[f"a{j}" for j in range(d)])


def _linf_partial(df: pd.DataFrame, table: pd.DataFrame, cols: list[str]) -> float:
    n = len(df)
    truth = df.groupby(cols).size().to_dict()
    released = {tuple(int(v) for v in r[:len(cols)]): float(r[-1])
                for r in table[[*cols, "noisy_count"]].itertuples(index=False)}
    err = max((abs(c - truth.get(k, 0)) for k, c in released.items()), default=0.0)
    missed = max((c for k, c in truth.items() if k not in released), default=0)
    return max(err, float(missed)) / n


def _max_laplace(cells: int, scale: float, rng: np.random.Generator) -> float:
    """The largest |Lap(scale)| of ``cells`` independent draws, sampled from its exact law
    (|Lap| is exponential: P(max <= t) = (1 - e^{-t/scale})^cells)."""
    u = rng.random()
    return float(-scale * math.log(-math.expm1(math.log(u) / cells)))


def _max_gauss(cells: int, sigma: float, rng: np.random.Generator) -> float:
    """The largest |N(0, sigma²)| of ``cells`` draws: P(max <= t) = (2Φ(t/σ) - 1)^cells."""
    from scipy.stats import norm

    u = rng.random()
    return float(sigma * norm.isf(-math.expm1(math.log(u) / cells) / 2))


def run_histogram(ns: list[int], ds: list[int], eps: float, reps: int) -> dict[str, Any]:
    rng = np.random.default_rng(4004)
    out: dict[str, Any] = {"ns": ns, "ds": ds, "eps": eps, "reps": reps, "curves": {},
                           "eps_person": {}}
    for d in ds:
        cols = [f"a{j}" for j in range(d)]
        spec = hpd.hdp_heavy_hitters(cols, domains={c: [0, 1] for c in cols}, eps0=eps,
                                     other={c: 0 for c in cols})
        eps_person = float(spec.budget.eps_person)
        out["eps_person"][d] = eps_person
        protos = rng.integers(0, 2, (12, d))
        curves: dict[str, list[float]] = {k: [] for k in (
            "partial eps0", "standard pure eps", "standard zCDP eps", "standard pure eps_person")}
        for n in ns:
            acc: dict[str, list[float]] = {k: [] for k in curves}
            for _ in range(reps):
                df = _hist_data(n, d, rng, protos)
                acc["partial eps0"].append(_linf_partial(df, hpd.heavy_hitters(df, spec).table,
                                                         cols))
                cells = 2**d
                acc["standard pure eps"].append(_max_laplace(cells, 2 / eps, rng) / n)
                acc["standard zCDP eps"].append(_max_gauss(cells, math.sqrt(2) / eps, rng) / n)
                acc["standard pure eps_person"].append(
                    _max_laplace(cells, 2 / eps_person, rng) / n)
            for k in curves:
                curves[k].append(float(np.mean(acc[k])))
        out["curves"][d] = curves
    return out


# -- Table 1, MWEM (max*) row --------------------------------------------------------------------


def _matchings(d: int, k: int, workload: list[tuple[int, ...]]) -> list[list[int]]:
    """Index sets of ⌊d/k⌋ pairwise attribute-disjoint marginals of the workload."""
    import itertools

    ell = d // k
    return [list(c) for c in itertools.combinations(range(len(workload)), ell)
            if len({j for i in c for j in workload[i]}) == ell * k]


def run_mwem(ns: list[int], d: int, k: int, eps: float, reps: int) -> dict[str, Any]:
    import itertools

    cols = [f"a{j}" for j in range(d)]
    domains = {c: [0, 1] for c in cols}
    other = {c: 0 for c in cols}
    ell = d // k
    specs = {
        "partial": hpd.hdp_mwem(cols, domains=domains, eps0=eps, k=k, per_round=ell,
                                other=other, max_tuples=10**6),
        "standard": hpd.hdp_mwem(cols, domains=domains, eps0=eps, k=k, per_round=1,
                                 other=other),
    }
    workload = list(itertools.combinations(range(d), k))
    labels = [",".join(cols[j] for j in s) for s in workload]
    matchings = _matchings(d, k, workload)
    rng = np.random.default_rng(4012)
    curves: dict[str, list[float]] = {f"{s} {m}": [] for s in specs for m in ("max*", "max")}
    rounds: dict[str, list[int]] = {s: [] for s in specs}
    for n in ns:
        acc: dict[str, list[float]] = {key: [] for key in curves}
        for _ in range(reps):
            df = _data(n, d, rng)
            for name, spec in specs.items():
                out = hpd.mwem(df, spec)
                err = np.abs(out.table["mwem_fraction"].to_numpy() - _truth(df, out.table))
                per = out.table.assign(err=err).groupby("marginal")["err"].max()
                e = np.array([per[lab] for lab in labels])
                acc[f"{name} max*"].append(float(max(e[m].mean() for m in matchings)))
                acc[f"{name} max"].append(float(err.max()))
            rounds["partial"].append(int(specs["partial"].rounds_for(n)))
            rounds["standard"].append(int(specs["standard"].rounds_for(n)))
        for key in curves:
            curves[key].append(float(np.mean(acc[key])))
    return {"ns": ns, "d": d, "k": k, "ell": ell, "eps": eps, "reps": reps, "curves": curves,
            "rounds": {s: sorted(set(r)) for s, r in rounds.items()},
            "rho_person": {s: spec.rho_person for s, spec in specs.items()},
            "predicted_ratio": (d / k) ** 0.25}


def _plot(args: Any, name: str, title: str, ylabel: str, ns: list[int],
          curves: dict[str, list[float]], *guides: tuple[str, list[float]]) -> Path | None:
    plt = pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for key, ys in curves.items():
        ax.loglog(ns, ys, "o-" if key.startswith("partial") else "x--", label=key)
    for (label, ys), color in zip(guides, ("grey", "black"), strict=False):
        ax.loglog(ns, ys, ":", color=color, label=label)
    ax.set_xlabel("n (persons)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = plots_dir(args.plots) / name
    fig.savefig(path, dpi=120)
    return path


def histogram_section(args: Any) -> tuple[str, dict[str, Any], list[Path]]:
    if args.smoke:
        ns, ds, reps = [1000, 10000], [8], 1
    else:
        ns, ds, reps = [1000, 3000, 10000, 30000, 100000], [16, 32], 3
    res = run_histogram(ns, ds, 1.0, reps)
    parts, plots = [], []
    for d in ds:
        curves = res["curves"][d]
        rows = [[n, *(fmt(curves[key][i]) for key in curves),
                 fmt(curves["standard pure eps"][i] / curves["partial eps0"][i], 3)]
                for i, n in enumerate(ns)]
        parts.append(
            f"d = {d}: partial eps0 = 1 per attribute (per person "
            f"{fmt(res['eps_person'][d], 3)}); predicted ratio Θ(d/ln d), d/ln d = "
            f"{fmt(d / math.log(d), 3)}.\n\n"
            + md_table(["n", *curves, "std pure / partial"], rows))
        first = curves["partial eps0"][-1] * ns[-1]
        path = _plot(args, f"seed004_table1_histogram_d{d}.png",
                     f"Seed 004 Table 1: histogram on {{0,1}}^{d}, eps = 1 (l-inf error)",
                     "l-inf error of the frequencies", ns, curves,
                     ("slope -1 (O(1/(eps n)))", [first / n for n in ns]),
                     ("Table 1 rate: partial x d/ln d (constants 1)",
                      [y * d / math.log(d) for y in curves["partial eps0"]]))
        if path is not None:
            plots.append(path)
    md = (f"## Seed 004, Table 1 (histogram / heavy hitters): l-inf error vs n, eps = 1, "
          f"{reps} reps\n\n" + "\n\n".join(parts))
    return md, res, plots


def mwem_section(args: Any) -> tuple[str, dict[str, Any], list[Path]]:
    if args.smoke:
        ns, d, k, reps = [200, 400], 4, 2, 1
    else:
        ns, d, k, reps = [300, 1000, 3000, 10000], 6, 2, 2
    res = run_mwem(ns, d, k, 1.0, reps)
    curves = res["curves"]
    rows = [[n, *(fmt(curves[key][i]) for key in curves),
             fmt(curves["standard max*"][i] / curves["partial max*"][i], 3)]
            for i, n in enumerate(ns)]
    md = (
        f"## Seed 004, Table 1 (k-way marginals by MWEM, max* error): d = {d}, k = {k}, "
        f"eps = 1, {reps} reps\n\n"
        f"partial: eps0 = 1 per attribute, l = {res['ell']} attribute-disjoint queries per "
        f"round (per person rho = {fmt(res['rho_person']['partial'], 3)}); standard: l = 1, "
        f"per person rho = {fmt(res['rho_person']['standard'], 3)} = eps^2/2. Rounds T "
        f"(corrected Theorem 12 choice): partial {res['rounds']['partial']}, standard "
        f"{res['rounds']['standard']}. Predicted max* ratio (d/k)^(1/4) = "
        f"{fmt(res['predicted_ratio'], 3)}.\n\n"
        + md_table(["n", *curves, "std/partial max*"], rows)
    )
    first = curves["partial max*"][0] * math.sqrt(ns[0])
    path = _plot(args, "seed004_table1_mwem.png",
                 f"Seed 004 Table 1: MWEM, {k}-way marginals, d = {d}, eps = 1",
                 "max* error (fractions)", ns, curves,
                 ("slope -1/2 (O(1/sqrt(eps n)))", [first / math.sqrt(n) for n in ns]),
                 ("Table 1: standard = partial max* x (d/k)^(1/4)",
                  [y * res["predicted_ratio"] for y in curves["partial max*"]]))
    return md, res, [path] if path is not None else []


def marginals_section(args: Any) -> tuple[str, dict[str, Any], list[Path]]:
    if args.smoke:
        ns, d, k, reps = [200, 800], 6, 2, 1
    else:
        ns, d, k, reps = [100, 300, 1000, 3000, 10000], 10, 2, 4
    res = run(ns, d, k, 1.0, reps)
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
    return md, res, plots


SECTIONS = {"marginals": marginals_section, "histogram": histogram_section,
            "mwem": mwem_section}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_report_args(parser)
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help="comma-separated rows of Table 1: " + ", ".join(SECTIONS))
    args = parser.parse_args()
    chosen = [s for s in args.only.split(",") if s]
    bad = [s for s in chosen if s not in SECTIONS]
    if bad:
        parser.error(f"--only: unknown rows {bad}; choose from {', '.join(SECTIONS)}")
    texts, figures, plots = [], {}, []
    for name in chosen:
        start = time.monotonic()
        md, res, pngs = SECTIONS[name](args)
        res["seconds"] = time.monotonic() - start
        texts.append(md + f"\n\n({name}: {res['seconds']:.0f} s)")
        figures[name] = res
        plots += pngs
    write_report(args.json, name="repro_seed004", figures=figures, markdown="\n\n".join(texts),
                 plots=plots)


if __name__ == "__main__":
    main()
