"""Accuracy under a privacy unit on a skewed events table: hdp_spark against PipelineDP
(issue 50).

The table: --persons persons whose row counts are heavy-tailed (most have 1-20 rows, a few
have thousands), each row in one of --keys public countries with an amount in [0, 500] and
a category; each person's ε is 0.5, 1 or 2 (per person, constant over their rows), and the
heavy persons' amounts run high (values follow the person, not ε).

* hdp_spark (pandas engine): ``agg(hdp_mean, hdp_histogram, by="country", keys=...,
  privacy_unit="user_id", max_groups=G, max_rows=R)``, each person at their own ε.
* PipelineDP 0.3.1 (local backend, Laplace, public partitions): the bounded mean and the
  per-(country, category) counts normalized per country, with the same G and R, every
  person at the smallest ε (0.5) — what a single-ε library can offer; PipelineDP's total
  ε = 0.5 is split by its accountant between the mean and the counts, as ours splits each
  person's ε between the weight and the two statistics.

Errors, over countries × repeats, against the table's own values (the plain mean of the
rows of each country, and its category shares): RMSE with its Monte Carlo standard error.

Run: benchmarks/.venv-anchors/bin/python benchmarks/anchors/unit_accuracy.py
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import use_repo

use_repo()

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

CATS = ["a", "b", "c"]


def table(persons: int, keys: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    counts = np.minimum(rng.pareto(1.1, persons).astype(np.int64) + 1, 5000)
    heavy = counts > np.quantile(counts, 0.99)
    uid = np.repeat(np.arange(persons), counts)
    eps_person = rng.choice([0.5, 1.0, 2.0], persons)
    n = len(uid)
    base = np.where(heavy[uid], 400.0, 150.0)
    return pd.DataFrame({
        "user_id": uid,
        "country": np.array([f"k{j}" for j in range(keys)])[rng.integers(0, keys, n)],
        "amount": np.clip(base + rng.normal(0, 80, n), 0, 500),
        "category": np.where(heavy[uid], "c", rng.choice(["a", "b"], n)),
        "eps": eps_person[uid],
    })


def truth(df: pd.DataFrame, keys: list[str]) -> tuple[pd.Series, pd.DataFrame]:
    """The table's own values: each country's mean over its rows, and its rows' shares."""
    mean = df.groupby("country")["amount"].mean().reindex(keys)
    shares = (pd.crosstab(df["country"], df["category"], normalize="index")
              .reindex(index=keys, columns=CATS, fill_value=0.0))
    return mean, shares


def person_truth(df: pd.DataFrame, keys: list[str]) -> tuple[pd.Series, pd.DataFrame]:
    """The person-level values: each person counts once per country (the mean of their
    rows' mean, the average of their category shares)."""
    per = df.groupby(["country", "user_id"])["amount"].mean()
    mean = per.groupby(level=0).mean().reindex(keys)
    mix = (pd.crosstab([df["country"], df["user_id"]], df["category"], normalize="index")
           .reindex(columns=CATS, fill_value=0.0))
    shares = mix.groupby(level=0).mean().reindex(index=keys, fill_value=0.0)
    return mean, shares


def ours(df: pd.DataFrame, keys: list[str], g: int, r: int, seed: int
         ) -> tuple[np.ndarray, np.ndarray]:
    import hdp_spark.pandas as hpd

    out = hpd.agg(df, hpd.hdp_mean("amount", eps="eps", lower=0, upper=500),
                  hpd.hdp_histogram("category", eps="eps", categories=CATS, other=None),
                  by="country", keys=keys, privacy_unit="user_id", max_groups=g,
                  max_rows=r, unsafe_seed=f"unit-acc-{seed}")
    shares = np.array([[b["frequency"] for b in bins] for bins in out["category_histogram"]])
    return out["amount_mean"].to_numpy(), shares


def pipeline(df: pd.DataFrame, keys: list[str], g: int, r: int, eps: float
             ) -> tuple[np.ndarray, np.ndarray]:
    import pipeline_dp

    rows = list(zip(df["user_id"].tolist(), df["country"].tolist(), df["amount"].tolist(),
                    df["category"].tolist(), strict=True))
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=0.0)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    mean_params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE, metrics=[pipeline_dp.Metrics.MEAN],
        max_partitions_contributed=g, max_contributions_per_partition=r,
        min_value=0.0, max_value=500.0)
    mean_ext = pipeline_dp.DataExtractors(privacy_id_extractor=lambda t: t[0],
                                          partition_extractor=lambda t: t[1],
                                          value_extractor=lambda t: t[2])
    count_params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE, metrics=[pipeline_dp.Metrics.COUNT],
        max_partitions_contributed=g, max_contributions_per_partition=r)
    count_ext = pipeline_dp.DataExtractors(privacy_id_extractor=lambda t: t[0],
                                           partition_extractor=lambda t: (t[1], t[3]),
                                           value_extractor=lambda t: 0)
    cells = [(k, c) for k in keys for c in CATS]
    means = engine.aggregate(rows, mean_params, mean_ext, public_partitions=keys)
    counts = engine.aggregate(rows, count_params, count_ext, public_partitions=cells)
    accountant.compute_budgets()
    got_mean = dict(means)
    got_count = dict(counts)
    mean = np.array([float(got_mean[k].mean) for k in keys])
    raw = np.array([[max(float(got_count[(k, c)].count), 0.0) for c in CATS] for k in keys])
    total = raw.sum(axis=1, keepdims=True)
    shares = np.divide(raw, total, out=np.full_like(raw, 1 / len(CATS)), where=total > 0)
    return mean, shares


def rmse(errors: list[np.ndarray]) -> tuple[float, float]:
    sq = np.concatenate([np.ravel(e) ** 2 for e in errors])
    m = float(sq.mean())
    se = float(sq.std(ddof=1) / math.sqrt(len(sq)))
    return math.sqrt(m), se / (2 * math.sqrt(m)) if m > 0 else 0.0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--persons", type=int, default=20_000)
    p.add_argument("--keys", type=int, default=10)
    p.add_argument("--groups", type=int, default=3)
    p.add_argument("--rows", type=int, default=10)
    p.add_argument("--repeats", type=int, default=30)
    a = p.parse_args()
    df = table(a.persons, a.keys, 0)
    keys = [f"k{j}" for j in range(a.keys)]
    truths = {"rows": truth(df, keys), "persons": person_truth(df, keys)}
    errs: dict[str, dict[str, list[np.ndarray]]] = {
        f"{lib} vs {t}": {"mean": [], "shares": []}
        for lib in ("hdp_spark", "PipelineDP") for t in truths}
    spent = {"hdp_spark": 0.0, "PipelineDP": 0.0}
    for i in range(a.repeats):
        t = time.perf_counter()
        got = {}
        got["hdp_spark"] = ours(df, keys, a.groups, a.rows, i)
        spent["hdp_spark"] += time.perf_counter() - t
        t = time.perf_counter()
        got["PipelineDP"] = pipeline(df, keys, a.groups, a.rows, 0.5)
        spent["PipelineDP"] += time.perf_counter() - t
        for lib, (m, s) in got.items():
            for name, (true_mean, true_shares) in truths.items():
                errs[f"{lib} vs {name}"]["mean"].append(m - true_mean.to_numpy())
                errs[f"{lib} vs {name}"]["shares"].append(s - true_shares.to_numpy())
    print(f"rows {len(df)}, persons {a.persons}, max rows of one person "
          f"{int(df.groupby('user_id').size().max())}, keys {a.keys}, G {a.groups}, "
          f"R {a.rows}, repeats {a.repeats}")
    print("| library vs truth | mean RMSE (±MC se) | share RMSE, points (±MC se) | "
          "s per release |")
    print("|---|---|---|---|")
    for label, e in errs.items():
        mr, ms = rmse(e["mean"])
        sr, ss = rmse(e["shares"])
        lib = label.split(" vs ")[0]
        print(f"| {label} | {mr:.2f} (±{ms:.2f}) | {100 * sr:.2f} (±{100 * ss:.2f}) | "
              f"{spent[lib] / a.repeats:.2f} |")


if __name__ == "__main__":
    main()
