"""Job kinds ``marginals`` (projection mechanism) and ``mwem`` (issue 19): both engines, the
ledger charges each person the (ε, δ) conversion of the per-person ρ at the kind's δ
(recomputed here from the paper's formulas, not read from the release), bad parameters are
refused when the job loads. The publication (neighbour) test covers them through the
all-kinds sample job (``test_publication_kinds.py``)."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kinds_helpers import charges_of, people_frame, small_job, write_csv

from hdp_spark.core.ledger import ceil_units
from hdp_spark.core.partial import accounting
from hdp_spark.core.partial.mwem import eps_round
from hdp_spark.errors import BudgetExceededError, JobError
from hdp_spark.jobs import load_job, run_job

_DOMAINS = """  domains.sex = ["F", "M"]
  domains.region = ["north", "south"]
  domains.occupation = ["manual", "professional"]
  other = { sex = "F", region = "south", occupation = "manual" }
"""

MARGINALS_RELEASE = f"""
[[releases]]
id = "marg"

  [[releases.aggregators]]
  kind = "marginals"
  cols = ["sex", "region", "occupation"]
{_DOMAINS}  eps0 = 0.5
  k = 2
  delta = 1e-5
"""

MWEM_RELEASE = f"""
[[releases]]
id = "mw"

  [[releases.aggregators]]
  kind = "mwem"
  cols = ["sex", "region", "occupation"]
{_DOMAINS}  eps0 = 0.4
  marginals = [["sex", "region"], ["occupation"]]
  per_round = 2
  rounds = 6
"""


def _marginals_eps(eps0: float, delta: float) -> float:
    """All 2-way marginals of 3 attributes: |W| = 3, max deg = 2, Δ₀² = 4; σ² = Δ₀²/ε₀²
    rounded up to 1/1024; per person ρ = |W|/σ² (Theorem 11 in zCDP form)."""
    sigma2 = Fraction(math.ceil(Fraction(4) / Fraction(eps0) ** 2 * 1024), 1024)
    return accounting.eps_cks20(3 / float(sigma2), delta)


def _mwem_eps(eps0: float, rounds: int, ell: int, delta: float) -> tuple[float, float]:
    """(charged, demand): ρ = (ℓ² + ℓ)·T·ε_T²/2 with the rounded ε_T, and its bound
    (ℓ² + ℓ)ε₀²/4 (§4.2, Theorem 12 with the bounded-range selection)."""
    e_t = float(eps_round(eps0, rounds))
    return (accounting.eps_cks20((ell * ell + ell) * rounds * e_t * e_t / 2, delta),
            accounting.eps_cks20((ell * ell + ell) * eps0 * eps0 / 4, delta))


def _run(engine: Any, root: Path, releases: str) -> Any:
    data = write_csv(people_frame(), root / "p.csv")
    return run_job(small_job(root, data, releases, engine=engine.name), spark=engine.session)


def test_marginals_and_mwem_jobs_charge_the_converted_eps(engine: Any, tmp_path: Path) -> None:
    run = _run(engine, tmp_path, MARGINALS_RELEASE + MWEM_RELEASE)
    assert [r.status for r in run.releases] == ["committed", "committed"]
    ledger = tmp_path / "ledger.sqlite"

    marg = run.values("marg")[0]
    eps = _marginals_eps(0.5, 1e-5)
    assert marg["marginals_eps_person"] == pytest.approx(eps, rel=1e-9)
    assert marg["marginals_delta"] == 1e-5
    assert marg["marginals_rho_person"] == pytest.approx(0.75 * 0.5**2, rel=1e-3)
    charged = charges_of(ledger, "marg")
    assert len(charged) == marg["marginals_n"] == 400
    assert set(charged.values()) == {ceil_units(eps)}
    # the pure-DP reading √(2ρ) would under-charge: the ledger holds the (ε, δ) value
    assert ceil_units(eps) > ceil_units(math.sqrt(2 * marg["marginals_rho_person"]))
    cells = marg["marginals_records"]
    assert len(cells) == 3 * 4  # three 2-way tables of 2 x 2 cells
    assert {c["marginal"] for c in cells} == {"sex,region", "sex,occupation",
                                             "region,occupation"}
    assert all(c["count_ci_low"] <= c["noisy_count"] <= c["count_ci_high"] for c in cells)
    total = {m: sum(c["projected_count"] for c in cells if c["marginal"] == m)
             for m in {c["marginal"] for c in cells}}
    assert all(t == pytest.approx(400) for t in total.values())

    mw = run.values("mw")[0]
    eps_mw, demand = _mwem_eps(0.4, 6, 2, 1e-6)
    assert mw["mwem_eps_person"] == pytest.approx(eps_mw, rel=1e-9)
    assert eps_mw <= demand
    charged = charges_of(ledger, "mw")
    assert set(charged.values()) == {ceil_units(eps_mw)}
    assert len(charged) == 400
    report = json.loads(mw["mwem_report"])
    assert report["rounds"] == 6
    assert len(report["selected"]) == 6
    assert all(len(p) == 2 for p in report["selected"])  # ℓ = 2 attribute-disjoint queries
    fractions = [c["mwem_fraction"] for c in mw["mwem_records"] if c["marginal"] == "occupation"]
    assert len(fractions) == 2
    assert sum(fractions) == pytest.approx(1.0)

    text = run.report.read_text()
    assert "answers of a synthetic table built by MWEM" in text
    assert "the ledger charges this ε" in text


@pytest.mark.spark
def test_marginals_and_mwem_jobs_agree_across_engines(spark: Any, tmp_path: Path) -> None:
    from types import SimpleNamespace

    runs = []
    for name in ("pandas", "spark"):
        root = tmp_path / name
        root.mkdir()
        engine = SimpleNamespace(name=name, session=spark if name == "spark" else None)
        runs.append(_run(engine, root, MARGINALS_RELEASE + MWEM_RELEASE))
    for release in ("marg", "mw"):
        assert runs[0].values(release) == runs[1].values(release), release


def test_persons_without_budget_are_left_out(tmp_path: Path) -> None:
    frame = people_frame()
    frame["budget"] = np.where(frame["user_id"] % 5 == 0, 1.0, 10.0)
    data = write_csv(frame, tmp_path / "p.csv")
    eps = _marginals_eps(0.5, 1e-5)
    assert 1.0 < eps < 10.0
    run = run_job(small_job(tmp_path, data, MARGINALS_RELEASE, budget='column = "budget"'))
    charged = charges_of(tmp_path / "ledger.sqlite", "marg")
    rich = {str(u) for u in frame.loc[frame["budget"] == 10.0, "user_id"]}
    assert set(charged) == rich
    assert run.values("marg")[0]["marginals_n"] == len(rich)
    job = small_job(tmp_path, data, MWEM_RELEASE.replace('"mw"', '"mw2"'),
                    budget='column = "budget"', policy="fail")
    with pytest.raises(BudgetExceededError):
        run_job(job)
    assert charges_of(tmp_path / "ledger.sqlite", "mw2") == {}


@pytest.mark.parametrize(("kind", "old", "new", "match"), [
    ("marginals", "eps0 = 0.5", "eps0 = -1", r"`eps0` must be a positive finite number"),
    ("marginals", "k = 2", "", r"exactly one of `k`.*or `marginals`"),
    ("marginals", "k = 2", 'k = 2\n  marginals = [["sex"]]', r"exactly one of `k`"),
    ("marginals", "k = 2", "k = 4", r"`k` must be an int in \[1, 3\]"),
    ("marginals", "delta = 1e-5", "delta = 1.5", r"`delta` must be in \(0, 1\)"),
    ("marginals", "delta = 1e-5", "beta = 0", r"`beta` must be in \(0, 1\)"),
    ("marginals", "delta = 1e-5", "rounds = 3",
     r"^unknown key `rounds` in .*aggregator #1 \(kind = 'marginals'\); valid keys: "
     r"alias, beta, cols, delta, domains, eps, eps0, k, kind, marginals, max_domain, max_iter, "
     r"max_rows, other, privacy_unit, tol, unit\.$"),
    ("marginals", "delta = 1e-5", "max_domain = 4", r"product of the domain sizes.*8"),
    ("marginals", 'cols = ["sex", "region", "occupation"]', 'cols = "sex"',
     r"`cols` must be a list of column names"),
    ("mwem", "per_round = 2", "per_round = 3", r"no 3 pairwise attribute-disjoint"),
    ("mwem", "rounds = 6", "rounds = 0", r"`rounds` must be an int in \[1, 10000\]"),
    ("mwem", "rounds = 6", "rounds = 6\n  delta = 0", r"`delta` must be in \(0, 1\)"),
    ("mwem", "rounds = 6", "rounds = 6\n  max_tuples = 2", r"more than `max_tuples` = 2"),
    ("mwem", "rounds = 6", "rounds = 6\n  tol = 1e-3",
     r"^unknown key `tol` in .*aggregator #1 \(kind = 'mwem'\)"),
    ("mwem", 'marginals = [["sex", "region"], ["occupation"]]',
     'marginals = [["sex", "income"]]', r"must name distinct columns of `cols`"),
    ("mwem", "eps0 = 0.4", "", r"`eps0` is required"),
    ("mwem", "rounds = 6", "rounds = 6\n  max_rows = 2",
     r"`max_rows` bounds the rows of a person: it needs `privacy_unit`"),
    ("marginals", "delta = 1e-5", 'delta = 1e-5\n  privacy_unit = "user_id"\n  max_rows = 0',
     r"`max_rows` must be a positive int, got 0"),
])
def test_bad_parameters_are_refused_at_load(
    tmp_path: Path, kind: str, old: str, new: str, match: str
) -> None:
    text = MARGINALS_RELEASE if kind == "marginals" else MWEM_RELEASE
    assert old in text
    data = write_csv(people_frame(), tmp_path / "p.csv")
    # a message names its kind before the rule, or (an unknown key) after the key
    pattern = match if match.startswith("^") else rf"{kind}.*{match}"
    with pytest.raises(JobError, match=pattern):
        load_job(small_job(tmp_path, data, text.replace(old, new)))


def test_grouping_and_mixing_are_refused(tmp_path: Path) -> None:
    data = write_csv(people_frame(), tmp_path / "p.csv")
    grouped = MWEM_RELEASE.replace('id = "mw"\n', 'id = "mw"\nby = ["region"]\n'
                                   'keys = ["north"]\n')
    with pytest.raises(JobError, match=r"by.*not allowed with kind 'mwem'"):
        load_job(small_job(tmp_path, data, grouped))
    mixed = MARGINALS_RELEASE + """
  [[releases.aggregators]]
  kind = "mean"
  column = "income"
  lower = 0
  upper = 100000
"""
    with pytest.raises(JobError, match=r"must not mix kinds with one global ε per person"):
        load_job(small_job(tmp_path, data, mixed))
