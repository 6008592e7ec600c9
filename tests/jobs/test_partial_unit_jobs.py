"""Partial-DP kinds in a job whose user ids repeat (issue 50): a kind with
``privacy_unit = "<the job's user id>"`` and ``max_rows`` counts each user with all their
rows (at most ``max_rows``, else none), so the job accepts repeated ids and the ledger
charges each user the kind's per-person ε once, whatever their rows; the plan predicts the
same charges; without the unit (or with another column as the unit) repeated ids are
refused, naming the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from kinds_helpers import charges_of, people_frame, small_job, write_csv

from hdp_spark.errors import JobError
from hdp_spark.jobs import load_job, run_job
from hdp_spark.jobs.planning import plan_budget


def _release(unit: str | None = '"user_id"', max_rows: int = 3) -> str:
    lines = ["", "[[releases]]", 'id = "profiles"', "", "  [[releases.aggregators]]",
             '  kind = "heavy_hitters"', '  cols = ["sex", "region", "occupation"]',
             '  domains.sex = ["F", "M"]', '  domains.region = ["north", "south"]',
             '  domains.occupation = ["manual", "professional"]', "  eps0 = 2.0"]
    if unit is not None:
        lines += [f"  privacy_unit = {unit}", f"  max_rows = {max_rows}"]
    return "\n".join(lines) + "\n"


def _repeated(seed: int = 3) -> pd.DataFrame:
    """people_frame with each user on 1-5 rows (some above max_rows = 3)."""
    base = people_frame(n=300, seed=seed)
    base["household"] = base["user_id"] % 50
    rng = np.random.default_rng(seed)
    return base.loc[base.index.repeat(rng.integers(1, 6, len(base)))].reset_index(drop=True)


def _job(tmp: Path, frame: pd.DataFrame, release: str, **kw: Any) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    return small_job(tmp, write_csv(frame, tmp / "table.csv"), release, **kw)


def test_each_user_is_charged_once_the_kind_s_per_person_eps(tmp_path: Path) -> None:
    frame = _repeated()
    assert frame["user_id"].duplicated().any()
    run_job(_job(tmp_path / "rep", frame, _release()))
    charged = charges_of(tmp_path / "rep" / "ledger.sqlite", "profiles")
    # the same kind on one row per user: its per-user charge
    once = frame.drop_duplicates("user_id")
    run_job(_job(tmp_path / "one", once, _release()))
    single = charges_of(tmp_path / "one" / "ledger.sqlite", "profiles")
    assert set(single.values()) == {next(iter(single.values()))}  # one figure per user
    assert charged == single  # every user once, however many rows (more than R included)


def test_plan_predicts_the_run_s_charges(tmp_path: Path) -> None:
    job = load_job(_job(tmp_path, _repeated(seed=4), _release()))
    plan = plan_budget(job)
    sim = plan.selected.simulation.releases[0]
    predicted = {u: int(sim.charges[row]) for u, row in
                 zip(plan.user_ids, plan.user_rows, strict=True) if sim.charges[row]}
    run_job(job)
    assert predicted == charges_of(tmp_path / "ledger.sqlite", "profiles")


@pytest.mark.parametrize("unit", [None, '"household"'])
def test_repeated_ids_without_the_user_as_unit_are_refused(tmp_path: Path,
                                                           unit: str | None) -> None:
    path = _job(tmp_path, _repeated(), _release(unit=unit))
    with pytest.raises(JobError) as err:
        run_job(path)
    text = str(err.value)
    assert "must be unique (one row per user)" in text
    assert 'a partial-DP kind with `privacy_unit = "user_id"`' in text
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.parquet"))


def test_spark_charges_the_same(tmp_path: Path, spark: Any) -> None:
    del spark  # the job's engine uses the shared session
    frame = _repeated(seed=5)
    run_job(_job(tmp_path / "pd", frame, _release()))
    run_job(_job(tmp_path / "sp", frame, _release(), engine="spark"))
    assert (charges_of(tmp_path / "pd" / "ledger.sqlite", "profiles")
            == charges_of(tmp_path / "sp" / "ledger.sqlite", "profiles"))


_KINDS = {"heavy_hitters": [], "attribute_histograms": [], "marginals": ["  k = 2"],
          "mwem": ["  k = 2", "  rounds = 3"]}


def _kind_release(kind: str, unit: bool = True) -> str:
    lines = ["", "[[releases]]", 'id = "profiles"', "", "  [[releases.aggregators]]",
             f'  kind = "{kind}"', '  cols = ["sex", "region", "occupation"]',
             '  domains.sex = ["F", "M"]', '  domains.region = ["north", "south"]',
             '  domains.occupation = ["manual", "professional"]', "  eps0 = 2.0",
             *_KINDS[kind]]
    if unit:
        lines += ['  privacy_unit = "user_id"', "  max_rows = 3"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("kind", list(_KINDS))
def test_no_row_count_is_published_under_the_unit(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A person's number of rows is private under the unit: the output has no ``_n``
    (the marginals' and MWEM's reports hold a noisy estimate), the INFO log names no row
    count, and the ledger charges what the plan predicts (MWEM: the bound over every T,
    its T following the noisy n)."""
    import logging

    frame = _repeated(5)
    job = _job(tmp_path, frame, _kind_release(kind), seed=None, budget="default = 100.0")
    plan = plan_budget(load_job(job))
    with caplog.at_level(logging.INFO, logger="hdp_spark"):
        row = run_job(job).values("profiles")[0]
    assert f"{kind}_records" in row
    assert f"{kind}_n" not in row
    words = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)
    assert str(len(frame)) not in words.replace(",", "").split()
    sim = plan.selected.simulation.releases[0]
    predicted = {u: int(sim.charges[r]) for u, r in
                 zip(plan.user_ids, plan.user_rows, strict=True) if sim.charges[r]}
    assert charges_of(tmp_path / "ledger.sqlite", "profiles") == predicted
    assert len(predicted) == frame["user_id"].nunique()  # everybody read: not vacuous


def test_without_the_unit_n_is_still_published(tmp_path: Path) -> None:
    frame = _repeated(5).drop_duplicates("user_id")
    job = _job(tmp_path, frame, _kind_release("marginals", unit=False),
               budget="default = 100.0")
    row = run_job(job).values("profiles")[0]
    assert row["marginals_n"] == len(frame)


@pytest.mark.parametrize("kind", ["marginals", "mwem", "heavy_hitters"])
def test_a_person_s_number_of_rows_is_not_published(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A counted user's rows replaced by more rows (still at most R): nothing the job
    publishes (values, report, manifests, file names, INFO logs) is determined by the
    change except DP values."""
    from leak_helpers import Features, assert_no_deterministic_leak, fresh_job_run

    table = _repeated(6)
    sizes = table.groupby("user_id").size()
    person = int(sizes[sizes == 1].index[0])
    row = table[table["user_id"] == person]
    neighbour = pd.concat([table, row, row], ignore_index=True)  # 1 row -> 3 rows
    root = tmp_path / "run"
    root.mkdir()
    job = _job(root, table, _kind_release(kind), seed=None, budget="default = 100.0")

    def run(frame: pd.DataFrame) -> Features:
        return fresh_job_run(root, job, frame, caplog)

    _runs, others = assert_no_deterministic_leak(lambda: run(table), lambda: run(neighbour))
    assert any(f"{kind}_records" in k for k in others[0])  # the DP values were compared
