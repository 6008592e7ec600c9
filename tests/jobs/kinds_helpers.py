"""Helpers of the all-kinds job tests (issue 16): sample jobs moved under a tmp dir, small
synthetic tables, per-release charges read from the SQLite ledger's audit log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from job_helpers import REPO

ALL_KINDS = REPO / "jobs" / "sample_all_kinds.toml"
USER_LEVEL = REPO / "jobs" / "sample_user_level.toml"
PEOPLE = REPO / "data" / "people.csv"
EVENTS = REPO / "data" / "events.csv"


def sample_jobs(root: Path, engine: str = "pandas", seed: str | None = "kinds",
                people: Path = PEOPLE, events: Path = EVENTS) -> tuple[Path, Path]:
    """Both sample jobs with their paths under ``root`` (one shared SQLite ledger)."""
    ledger = root / "ledger" / "people.sqlite"
    paths = []
    for src, data, schema, out in (
        (ALL_KINDS, people, "people.yaml", "all"), (USER_LEVEL, events, "events.yaml", "user"),
    ):
        text = src.read_text()
        for old, new in (
            (f'path = "../data/{"people.csv" if out == "all" else "events.csv"}"',
             f'path = "{data}"'),
            (f'schema = "../schemas/{schema}"', f'schema = "{REPO / "schemas" / schema}"'),
            ('path = "../out/ledger/people.sqlite"', f'path = "{ledger}"'),
            ('witness = "../out/witness/people.json"',
             f'witness = "{root / "witness" / "people.json"}"'),
            (f'path = "../out/sample_{"all_kinds" if out == "all" else "user_level"}"',
             f'path = "{root / ("out_" + out)}"'),
            ('engine = "pandas"', f'engine = "{engine}"'),
        ):
            assert old in text, old
            text = text.replace(old, new)
        if seed:
            text = text.replace("[job]\n", f'[job]\nunsafe_seed = "{seed}"\n', 1)
        path = root / f"{out}.toml"
        path.write_text(text)
        paths.append(path)
    return paths[0], paths[1]


def charges_of(ledger: Path, release_id: str, job: str | None = None) -> dict[str, int]:
    """``{user id: units}`` the release was charged (SQLite audit log)."""
    from hdp_spark.ledger import SqliteLedger

    book = SqliteLedger(ledger)
    found: dict[str, int] = {}
    for r in book.records(job):
        if r.release_id == release_id:
            found.update(book.charges(r.key))
    return found


def people_frame(n: int = 400, seed: int = 7) -> pd.DataFrame:
    """A small one-row-per-person table (sex, region, occupation, income, eps)."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "user_id": np.arange(1, n + 1),
        "sex": rng.choice(["F", "M"], n),
        "region": rng.choice(["north", "south"], n, p=[0.7, 0.3]),
        "occupation": np.where(rng.random(n) < 0.7, "professional", "manual"),
        "income": rng.normal(50000, 10000, n).round(0),
        "eps": rng.choice([0.5, 1.0], n),
        "report": rng.normal(5, 3, n),
        "ldp_eps": 1.0,
    })


def events_frame(users: int = 300, seed: int = 8) -> pd.DataFrame:
    """A small user-level table: several rows per user, ε constant within a user."""
    rng = np.random.default_rng(seed)
    k = 1 + rng.poisson(3, users)
    idx = np.repeat(np.arange(users), k)
    eps = rng.choice([0.5, 1.0, 2.0], users)
    region = rng.choice(["north", "south"], users)
    return pd.DataFrame({
        "user_id": idx + 1, "region": region[idx],
        "clicked": (rng.random(idx.size) < 0.2).astype(int), "eps": eps[idx],
    })


def small_job(root: Path, data: Path, releases: str, *, budget: str = "default = 10.0",
              policy: str = "cap", engine: str = "pandas", seed: str | None = "small",
              name: str = "kinds_small", extra_input: str = "") -> Path:
    """A job file on ``data`` (no schema) with the given releases."""
    text = "\n".join([
        "[job]", f'name = "{name}"', f'engine = "{engine}"',
        *([f'unsafe_seed = "{seed}"'] if seed else []), "",
        "[input]", f'path = "{data}"', 'user_id = "user_id"', 'eps = "eps"',
        'types = { eps = "double" }', extra_input, "",
        "[budget]", budget, f'policy = "{policy}"', "",
        "[ledger]", f'path = "{root / "ledger.sqlite"}"', "lock_timeout = 60", "",
        "[output]", f'path = "{root / "out"}"', "report = true", "",
        releases,
    ])
    path = root / "job.toml"
    path.write_text(text)
    return path


def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_csv(path, index=False)
    return path


HH_RELEASE = """
[[releases]]
id = "profiles"

  [[releases.aggregators]]
  kind = "heavy_hitters"
  cols = ["sex", "region", "occupation"]
  domains.sex = ["F", "M"]
  domains.region = ["north", "south"]
  domains.occupation = ["manual", "professional"]
  eps0 = 2.0
"""

USER_MEAN_RELEASE = """
[[releases]]
id = "ctr"
by = ["region"]
keys = ["north", "south"]

  [[releases.aggregators]]
  kind = "user_mean"
  column = "clicked"
  lower = 0
  upper = 1
"""

MEAN_RELEASE = """
[[releases]]
id = "income"

  [[releases.aggregators]]
  kind = "mean"
  column = "income"
  lower = 0
  upper = 100000
"""

LDP_RELEASE = """
[[releases]]
id = "ldp"

  [[releases.aggregators]]
  kind = "ldp_mean"
  column = "report"
  eps = "ldp_eps"
  mechanism = "laplace"
  lower = 0
  upper = 10
  already_randomized = true
"""


def outcome_rows(run: Any, release_id: str) -> list[dict[str, Any]]:
    """The committed rows of one release of a JobRun."""
    rows: list[dict[str, Any]] = run.values(release_id)
    return rows
