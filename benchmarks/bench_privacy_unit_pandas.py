"""Speed of a pandas release under a privacy unit against the same release without it and
pandas' own floor (issue 50; the Spark counterpart is ``bench_privacy_unit.py``).

Two tables, each in memory, every case once after a warm-up, then --repeats rounds of every
case in turn (the median of each case's wall time):

* ``skewed``: --rows rows, --persons persons drawn as floor(persons * u^3) (a few persons
  with many rows, most with few), --keys public groups, G 3, R 10 — the Spark benchmark's
  table;
* ``anchor``: --anchor-persons persons with 2 rows each in one of 10 groups, G 1, R 2 —
  the PipelineDP anchor's table (``anchors/unit_speed.py``).

Cases per table:

  floor    pandas' own per-person-then-per-group mean: groupby([person, group]) sum and
           count, then groupby(group) mean
  rows     hpd.agg(df, <specs>, by=group, keys=KEYS)   (one row = one person)
  unit     the same with privacy_unit="person", max_groups=G, max_rows=R

Prints one line per case and the ratios unit/rows and unit/floor. ``--smoke`` runs tiny
tables once (the test suite's check that the script runs).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Callable
from typing import Any


def _cases(hpd: Any, df: Any, specs: list[Any], keys: list[int], g: int, r: int
           ) -> dict[str, Callable[[], object]]:
    return {
        "floor": lambda: df.groupby(["person", "grp"])["amount"].agg(["sum", "count"])
        .groupby("grp")["sum"].mean(),
        "rows": lambda: hpd.agg(df, *specs, by="grp", keys=keys),
        "unit": lambda: hpd.agg(df, *specs, by="grp", keys=keys, privacy_unit="person",
                                max_groups=g, max_rows=r),
    }


def _run(name: str, cases: dict[str, Callable[[], object]], repeats: int, warm: bool) -> None:
    times: dict[str, list[float]] = {k: [] for k in cases}
    if warm:
        for fn in cases.values():
            fn()
    for _ in range(repeats):
        for case, fn in cases.items():
            t = time.perf_counter()
            fn()
            times[case].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    for case, value in med.items():
        print(f"{name:7s} {case:6s} {value:8.3f} s")
    print(f"{name:7s} unit/rows  {med['unit'] / med['rows']:.2f}x")
    print(f"{name:7s} unit/floor {med['unit'] / med['floor']:.2f}x")


def main() -> None:
    import numpy as np
    import pandas as pd

    import hdp_spark.pandas as hpd

    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--persons", type=int, default=100_000)
    p.add_argument("--keys", type=int, default=100)
    p.add_argument("--anchor-persons", type=int, default=500_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--smoke", action="store_true")
    a = p.parse_args()
    if a.smoke:
        a.rows, a.persons, a.keys, a.anchor_persons, a.repeats = 2_000, 200, 5, 500, 1
    logging.getLogger("hdp_spark").setLevel(logging.ERROR)
    rng = np.random.default_rng(1)
    skewed = pd.DataFrame({
        "person": np.floor(a.persons * rng.random(a.rows) ** 3).astype(np.int64),
        "grp": rng.integers(0, a.keys, a.rows),
        "amount": rng.random(a.rows) * 500,
        "cat": rng.integers(0, 4, a.rows),
        "eps": rng.choice([0.5, 1.0, 2.0], a.rows),
    })
    specs = [hpd.hdp_mean("amount", eps="eps", lower=0, upper=500),
             hpd.hdp_histogram("cat", eps="eps", categories=[0, 1, 2, 3], other=None)]
    _run("skewed", _cases(hpd, skewed, specs, list(range(a.keys)), 3, 10), a.repeats,
         not a.smoke)
    person = np.repeat(np.arange(a.anchor_persons, dtype=np.int64), 2)
    anchor = pd.DataFrame({"person": person, "grp": person % 10,
                           "amount": rng.random(len(person)) * 500, "eps": 1.0})
    mean = [hpd.hdp_mean("amount", eps="eps", lower=0, upper=500)]
    _run("anchor", _cases(hpd, anchor, mean, list(range(10)), 1, 2), a.repeats, not a.smoke)


if __name__ == "__main__":
    main()
