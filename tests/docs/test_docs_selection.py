"""The partition-selection snippet of docs/overview.md (moved there from the README) runs as
printed (on a synthetic merchant table) and releases what it says: the large merchants,
sorted, with the mode and the charge."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import hdp_spark.pandas as hpd

ROOT = Path(__file__).resolve().parents[2]


def test_docs_selection_snippet_runs() -> None:
    text = (ROOT / "docs" / "overview.md").read_text()
    section = text.split("## Private group keys (partition selection)", 1)[1].split("\n## ")[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    rng = np.random.default_rng(1)
    merchant = np.repeat(["zeta", "alpha", "tiny"], [4000, 2500, 3])
    table = pd.DataFrame({"merchant": merchant,
                          "eps": rng.uniform(0.05, 5, len(merchant)),
                          "spend": rng.uniform(0, 500, len(merchant))})
    scope: dict[str, Any] = {"hpd": hpd, "table": table}
    out = eval(compile(code.strip(), "docs/overview.md", "eval"), scope)
    assert list(out["merchant"]) == ["alpha", "zeta"]
    assert set(out["spend_mean_privacy"]) == {"partition_selection"}
    assert set(out["spend_mean_delta"]) == {1e-7}
    assert set(out["spend_mean_eps_cap"]) == {1.0}
    assert "(partition_selection.md)" in section
    assert (ROOT / "docs" / "partition_selection.md").exists()
