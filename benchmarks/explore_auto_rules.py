"""Issue 52's research step: can a private look at the data pick the mean's method, never
far from the best? A numpy simulation of the candidates (their weights from the library's
own solvers, :func:`hdp_spark.core.mean.auto.mean_phi`) and of two kinds of adaptive rule,
on mixes of ε and values of the kinds the issue names. Results: ``benchmarks/log/auto_pilot.md``.

Model (unit range, values in [0, 1], the target the table's own mean): a candidate with
weights w (per ε level) and noise parameter η releases Σ_l w_l·S_l + Laplace(η), S_l the
level's sum. Rules:

* ``pilot-<s>``: spend the share s of every row's ε on per-bucket noisy means (buckets:
  adjacent ε levels merged into at most 10 of about equal Σ m·ε, public facts only; within a
  bucket weights ∝ ε and noise Laplace(1/(s·Σ ε)), so row i spends s·ε_i), predict each
  candidate's MSE as max(b̂² - Var b̂, 0) + σ²·Σ m(w - 1/n)² + 2(η/(1 - s))² with
  b̂ = Σ_b (W_b - n_b/n)·μ̂_b and σ² = 1/12, then release the least on the (1 - s) share.
  Each row spends s·ε_i + (1 - s)·ε_i = ε_i (sequential composition).
* ``eb-<c>``: no split: per-bucket noisy means at the full ε (same weights and noise, each
  row spends ε_i), each shrunk towards the precision-weighted mean of the buckets by the
  positive-part factor max(0, 1 - c·v_b/r_b²) (r_b the bucket's residual, v_b its noise
  variance), released as Σ_b (n_b/n)·μ̃_b. A soft threshold at about √c noise SDs.

Run: .venv/bin/python benchmarks/explore_auto_rules.py [--trials 300] [--delta]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from repro_seed000_correlated import draw as draw_000

from hdp_spark.core.levels import EpsGrid, levels_numpy
from hdp_spark.core.mean.auto import MEAN_CANDIDATES, LevelTable, mean_phi

GRID = EpsGrid(ratio=1.1, lowest=0.01, highest=100.0)
SIGMA2 = 1 / 12
Gen = Callable[[np.random.Generator], np.ndarray]
Weights = dict[str, tuple[np.ndarray, float] | None]


def candidate_weights(levels: np.ndarray, counts: np.ndarray) -> Weights:
    """Per candidate: (w per level, η), or None where the release is the midpoint."""
    t = LevelTable.single([float(v) for v in levels], [int(c) for c in counts])
    fin = np.isfinite(levels) & (levels > 0)
    out: Weights = {}
    for c in MEAN_CANDIDATES:
        phi = mean_phi(c, t, 0.05)[0][: len(levels)]
        total = float((counts * phi).sum())
        if total <= 0:
            out[c] = None
            continue
        w = phi / total
        eta = float(np.max(np.where(fin & (w > 0), w / np.where(fin, levels, 1.0), 0.0)))
        out[c] = None if c == "adpm" and float(
            (counts * w * w).sum()) / 4 + 2 * eta**2 > 0.25 else (w, eta)
    return out


def buckets(levels: np.ndarray, counts: np.ndarray, most: int = 10) -> np.ndarray:
    """Bucket of each level: adjacent finite levels, <= ``most`` buckets of about equal
    Σ m·ε; the public levels one bucket of their own."""
    fin = np.isfinite(levels)
    out = np.full(len(levels), -1)
    idx = np.flatnonzero(fin)
    if len(idx) <= most:
        out[idx] = np.arange(len(idx))
    else:
        info = counts[idx] * levels[idx]
        cum = np.cumsum(info)
        raw = np.minimum((cum - info / 2) / cum[-1] * most, most - 1).astype(int)
        out[idx] = np.unique(raw, return_inverse=True)[1]
    out[~fin] = out.max() + 1
    return out


def bucket_means(levels: np.ndarray, counts: np.ndarray, sums: np.ndarray, b: np.ndarray,
                 share: float, rng: np.random.Generator
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per bucket: noisy ε-weighted mean (share ``share`` of each row's ε), its noise
    variance (0: public, exact) and rows."""
    k = int(b.max()) + 1
    mu, var, rows = np.zeros(k), np.zeros(k), np.zeros(k)
    for j in range(k):
        sel = b == j
        lv, m, s = levels[sel], counts[sel], sums[sel]
        rows[j] = m.sum()
        if np.isinf(lv).all():
            mu[j] = s.sum() / m.sum()
            continue
        e = share * float((m * lv).sum())
        if e <= 0:  # only ε = 0 rows: nothing is learnt (an uninformative mean)
            mu[j], var[j] = 0.5, 1e12
            continue
        mu[j] = float((lv * s).sum()) * share / e + rng.laplace(0, 1 / e)
        var[j] = 2 / e**2
    return mu, var, rows


def release(w_eta: tuple[np.ndarray, float] | None, sums: np.ndarray, scale: float,
            rng: np.random.Generator) -> float:
    if w_eta is None:
        return 0.5
    w, eta = w_eta
    return float(w @ sums) + (rng.laplace(0, eta * scale) if eta > 0 else 0.0)


def pilot_rule(share: float) -> Callable[..., float]:
    def run(levels: np.ndarray, counts: np.ndarray, sums: np.ndarray, b: np.ndarray,
            weights: Weights, rng: np.random.Generator) -> float:
        n = counts.sum()
        mu, var, rows = bucket_means(levels, counts, sums, b, share, rng)
        mu = np.clip(mu, 0, 1)
        best, choice = math.inf, MEAN_CANDIDATES[0]
        for c in MEAN_CANDIDATES:
            we = weights[c]
            if we is None:
                pred = (0.5 - float(rows @ mu) / n) ** 2
            else:
                w, eta = we
                d = np.bincount(b, weights=counts * w, minlength=len(mu)) - rows / n
                bias = float(d @ mu)
                pred = (max(bias**2 - float(d * d @ var), 0.0)
                        + SIGMA2 * float((counts * (w - 1 / n) ** 2).sum())
                        + 2 * (eta / (1 - share)) ** 2)
            if pred < best:
                best, choice = pred, c
        return release(weights[choice], sums, 1 / (1 - share), rng)
    return run


def eb_rule(c: float, line: bool = False) -> Callable[..., float]:
    def run(levels: np.ndarray, counts: np.ndarray, sums: np.ndarray, b: np.ndarray,
            weights: Weights, rng: np.random.Generator) -> float:
        mu, var, rows = bucket_means(levels, counts, sums, b, 1.0, rng)
        noisy = var > 0
        if noisy.sum() <= 1:
            return float(rows @ np.clip(mu, 0, 1)) / rows.sum()
        prec = np.where(noisy, 1 / np.where(noisy, var, 1.0), 0.0)
        centre: float | np.ndarray = float(prec @ mu) / prec.sum()
        if line and noisy.sum() >= 4:  # a weighted line in log ε through the noisy buckets
            fin = np.isfinite(levels) & (levels > 0)
            lv = np.where(fin, levels, 1.0)
            at = np.bincount(b, weights=counts * np.log(lv) * fin, minlength=len(mu)) / (
                np.maximum(np.bincount(b, weights=counts * fin, minlength=len(mu)), 1))
            design = np.stack([np.ones(len(mu)), at], axis=1)
            coef = np.linalg.lstsq(design * np.sqrt(prec)[:, None], mu * np.sqrt(prec),
                                   rcond=None)[0]
            centre = np.where(noisy, design @ coef, float(prec @ mu) / prec.sum())
        r2 = (mu - centre) ** 2
        keep = np.where(noisy, np.maximum(0.0, 1 - c * var / np.maximum(r2, 1e-300)), 1.0)
        return float(rows @ np.clip(centre + keep * (mu - centre), 0, 1)) / rows.sum()
    return run


def mixes(n: int = 2000) -> dict[str, tuple[np.ndarray, Gen]]:
    """The kinds of data the issue names (values on [0, 1])."""
    third = np.repeat([0.05, 0.5, 5.0], [n // 3, n // 3, n - 2 * (n // 3)])
    wide = np.exp(np.random.default_rng(1).uniform(math.log(0.05), math.log(5), 50_000))

    def copula(size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        z = np.random.default_rng(seed).multivariate_normal(
            [0, 0], [[1, 0.5], [0.5, 1]], size)
        eps = np.exp(math.log(0.05) + sps.norm.cdf(z[:, 0]) * math.log(100))
        return eps, sps.beta.ppf(sps.norm.cdf(z[:, 1]), 2, 5)

    rank_eps, rank_x = copula(3000, 2)
    small_eps, small_x = copula(60, 3)
    public = np.where(np.arange(n) < n // 5, np.inf, third)
    two = np.where(np.arange(n) < n // 10, 0.05, 2.0)
    comonotone = np.where(third == 0.05, 0.0, 1.0)
    return {
        "independent, 3 levels": (third, lambda r: r.beta(2, 5, n)),
        "independent, continuous, n 50k": (wide, lambda r: r.beta(2, 5, 50_000)),
        "comonotone low-ε rows": (third, lambda r: comonotone),
        "rank correlation 0.5": (rank_eps, lambda r: rank_x),
        "small group, n 60": (small_eps, lambda r: small_x),
        "20 % public rows": (public, lambda r: np.where(np.isinf(public), 1.0,
                                                         r.beta(2, 5, n))),
        "two groups (10 % at 0.05)": (two, lambda r: r.uniform(0, 1, n)),
    }


def developer_mixes() -> dict[str, tuple[np.ndarray, Gen]]:
    """The mean designs of ``bench_auto.py`` (values rescaled to [0, 1] where needed)."""
    out: dict[str, tuple[np.ndarray, Gen]] = {}
    for regime, (a, b) in {"low": (-3.0, -2.0), "high": (-4.0, 2.0)}.items():
        eps = np.exp(np.random.default_rng(2023).uniform(a, b, 1000))
        out[f"seed 001 Table II {regime}"] = (eps, lambda r: r.beta(2, 3, 1000))
    for design in ("uc", "sorted"):
        x, eps = draw_000("M", design, 10_000, 11)
        out[f"seed 000 C-{design}"] = (eps, lambda r, x=x: x)
    x, eps = draw_000("M", "sorted", 10_000, 12)
    out["seed 000 W"] = (eps, lambda r, x=x: r.permutation(x))
    rng = np.random.default_rng(35)
    two = np.where(rng.random(2000) < 0.1, 0.05, 2.0)
    public = rng.choice([0.1, 1.0, math.inf], 2000, p=[0.5, 0.3, 0.2])
    wide = np.exp(rng.uniform(-5, 3, 200))
    out["two-group"] = (two, lambda r: r.uniform(0, 1, 2000))
    out["public rows"] = (public, lambda r: r.uniform(0, 1, 2000))
    out["small wide"] = (wide, lambda r: r.uniform(0, 1, 200))
    return out


def evaluate(eps: np.ndarray, gen: Gen, rules: dict[str, Callable[..., float]],
             trials: int, seed: int) -> dict[str, float]:
    """MSE of every candidate and rule on ``trials`` draws of the values."""
    rng = np.random.default_rng(seed)
    levels, inv, counts = np.unique(levels_numpy(eps, GRID), return_inverse=True,
                                    return_counts=True)
    weights = candidate_weights(levels, counts)
    b = buckets(levels, counts)
    sq: dict[str, list[float]] = {k: [] for k in (*MEAN_CANDIDATES, *rules)}
    for _ in range(trials):
        x = gen(rng)
        sums = np.bincount(inv, weights=x, minlength=len(levels))
        for c in MEAN_CANDIDATES:
            sq[c].append((release(weights[c], sums, 1.0, rng) - x.mean()) ** 2)
        for name, rule in rules.items():
            sq[name].append((rule(levels, counts, sums, b, weights, rng) - x.mean()) ** 2)
    return {k: float(np.mean(v)) for k, v in sq.items()}


def minimax_lower_bound(pi: float, b: float, a: float, steps: int = 3000,
                        at_zero: float | None = None) -> float:
    """A lower bound on inf_T sup_δ R(T, δ)/R*(δ) in the one-bucket problem that decides
    between the candidates: the low-ε bucket (share π of the rows) has mean δ away from
    the rest, it is observed as y = δ + Laplace(b) (its whole budget), the rest is known
    up to the risk a; R(T, δ) = a + E(T(y) - π·δ)², and R*(δ) = a + π²·min(δ², 2b²) is the
    better of ignoring the bucket and using it unbiasedly. For any prior λ on a grid of δ,
    sup_δ R/R* >= Σ_j λ_j R(T, δ_j)/R*_j >= the Bayes risk of the weights λ_j/R*_j (the
    posterior mean is its minimizer); the prior is improved by exponentiated-gradient
    steps (the Bayes risk is concave in λ). Discretization: y on a grid of b/100.

    ``at_zero`` = ρ adds the issue's third target as a constraint: at δ = 0 (values
    independent of ε, where ignoring the bucket, the default, is the best) the rule's
    ratio is at most ρ. For every μ >= 0 and every rule meeting it,
    sup_δ R/R* >= Σ_j λ_j R_j/R*_j + μ·(R_0/R*_0 - ρ), whose minimum over all rules is
    again a Bayes risk (the weight μ/R*_0 added at δ = 0) minus μ·ρ; the bound is the
    best over a grid of μ."""
    d = np.linspace(-0.7, 0.7, 141)
    zero = int(np.argmin(np.abs(d)))
    y = np.linspace(-2, 2, 4001)
    lik = np.exp(-np.abs(y[None, :] - d[:, None]) / b)
    lik /= lik.sum(axis=1, keepdims=True)
    ideal = a + pi**2 * np.minimum(d**2, 2 * b * b)
    best = 0.0
    for mu in ([0.0] if at_zero is None else [0.0, *np.geomspace(0.01, 100, 25)]):
        lam = np.full(len(d), 1 / len(d))
        for _ in range(steps if at_zero is None else steps // 5):
            w = lam / ideal
            w[zero] += mu / ideal[zero]
            m0 = w @ lik
            m1 = (w * pi * d) @ lik
            m2 = (w * (pi * d) ** 2) @ lik
            rule = m1 / np.maximum(m0, 1e-300)
            bayes = float(w.sum() * a + (m2 - m1 * rule).sum())
            best = max(best, bayes - mu * (at_zero or 0.0))
            ratio = (a + ((rule[None, :] - (pi * d)[:, None]) ** 2 * lik).sum(axis=1)) / ideal
            lam = lam * np.exp(0.5 * (ratio - ratio.max()))
            lam /= lam.sum()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--designs", choices=("issue", "developers"), default="issue")
    parser.add_argument("--bound", nargs=3, type=float, metavar=("PI", "B", "A"),
                        help="print minimax_lower_bound(PI, B, A) and stop")
    parser.add_argument("--at-zero", type=float, metavar="RHO",
                        help="with --bound: the rule's ratio at δ = 0 is at most RHO")
    args = parser.parse_args()
    if args.bound:
        print(f"lower bound {minimax_lower_bound(*args.bound, at_zero=args.at_zero):.2f}")
        return
    rules = {"pilot-0.05": pilot_rule(0.05), "pilot-0.15": pilot_rule(0.15),
             "eb-2": eb_rule(2.0), "eb-4": eb_rule(4.0), "eb-4-line": eb_rule(4.0, True)}
    shown = ("adpm", "hpm-a", "hpm-cp", "hpm-we", *rules)
    print("| mix | best fixed | " + " | ".join(shown) + " |")
    print("|---|---|" + "---|" * len(shown))
    worst = dict.fromkeys(shown, 0.0)
    logs = dict.fromkeys(shown, 0.0)
    all_mixes = mixes() if args.designs == "issue" else developer_mixes()
    for i, (name, (eps, gen)) in enumerate(all_mixes.items()):
        mse = evaluate(eps, gen, rules, args.trials, seed=7 + i)
        best = min(MEAN_CANDIDATES, key=lambda c: mse[c])
        ratios = {k: mse[k] / mse[best] for k in shown}
        for k, q in ratios.items():
            worst[k] = max(worst[k], q)
            logs[k] += math.log(q)
        print(f"| {name} | {best} {mse[best]:.2e} | "
              + " | ".join(f"{ratios[k]:.2f}" for k in shown) + " |", flush=True)
    print("| worst | | " + " | ".join(f"{worst[k]:.2f}" for k in shown) + " |")
    print("| geometric mean | | " + " | ".join(
        f"{math.exp(logs[k] / len(all_mixes)):.2f}" for k in shown) + " |")


if __name__ == "__main__":
    main()
