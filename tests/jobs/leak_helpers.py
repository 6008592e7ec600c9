"""Helpers of the publication tests: collect everything a job publishes, compare runs, and
reproduce the hashes the old (unkeyed) scheme published.

The comparator's rule: a published *feature* (a file's name, bytes, a JSON field, a parquet
statistic, a token of a report line or of an INFO+ log record) that is the same in every run
on the table but different on the neighbouring table is a deterministic function of private
data. Features equal in all runs are public facts; features that differ between runs on the
same table are fresh (noise, random ids, clocks).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from hdp_spark.core.ledger import idempotency_key

Features = dict[tuple[str, ...], Any]

_MISSING = "<absent>"
_DURATION = re.compile(r"\b\d+\.\d+ s\b")
_TOKEN = re.compile(r"[\s|,;:()\[\]`=]+")


def _flatten(prefix: tuple[str, ...], value: Any, out: Features) -> None:
    if isinstance(value, dict):
        out[prefix] = ("dict", tuple(sorted(value)))
        for k, v in value.items():
            _flatten((*prefix, str(k)), v, out)
    elif isinstance(value, list):
        out[prefix] = ("list", len(value))
        for i, v in enumerate(value):
            _flatten((*prefix, str(i)), v, out)
    else:
        out[prefix] = value


def _text_features(prefix: tuple[str, ...], lines: Sequence[str], out: Features) -> None:
    """One feature per line and per token of a line (so a random token in a line cannot
    hide a deterministic one)."""
    out[(*prefix, "#lines")] = len(lines)
    for i, line in enumerate(lines):
        out[(*prefix, str(i))] = line
        for j, tok in enumerate(t for t in _TOKEN.split(line) if t):
            out[(*prefix, str(i), str(j))] = tok


def _parquet_features(prefix: tuple[str, ...], path: Path, out: Features) -> None:
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    out[(*prefix, "schema")] = str(pq.read_schema(path))
    kv = meta.metadata or {}
    out[(*prefix, "kv", "#keys")] = tuple(sorted(k.decode() for k in kv))
    for k, v in kv.items():
        out[(*prefix, "kv", k.decode())] = v.decode(errors="replace")
    out[(*prefix, "num_rows")] = meta.num_rows
    out[(*prefix, "created_by")] = meta.created_by
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        for c in range(rg.num_columns):
            col = rg.column(c)
            key = (*prefix, "rg", str(g), col.path_in_schema)
            out[(*key, "num_values")] = col.num_values
            stats = col.statistics
            if stats is None:
                out[(*key, "stats")] = None
                continue
            out[(*key, "null_count")] = stats.null_count
            out[(*key, "distinct_count")] = stats.distinct_count
            if stats.has_min_max:
                out[(*key, "min")] = repr(stats.min)
                out[(*key, "max")] = repr(stats.max)


def collect(out: Path, records: Iterable[logging.LogRecord], commit_ids: Iterable[str]) -> Features:
    """Everything published by a run: every file under ``out`` (names, bytes, parsed
    contents) and every INFO+ log record.

    Features are keyed by path with the run's commit ids replaced by ``<commit>`` (so that
    files of different runs line up); the raw names are features of their own.
    """
    ids = sorted(set(commit_ids), key=len, reverse=True)

    def norm(text: str) -> str:
        for c in ids:
            text = text.replace(c, "<commit>")
        return text

    feats: Features = {}
    files = sorted(p for p in out.rglob("*"))
    feats[("names",)] = tuple(str(p.relative_to(out)) for p in files)
    for i, p in enumerate(files):
        feats[("name", str(i))] = str(p.relative_to(out))
        if not p.is_file():
            continue
        rel = norm(str(p.relative_to(out)))
        data = p.read_bytes()
        feats[("file", rel, "bytes")] = hashlib.sha256(data).hexdigest()
        feats[("file", rel, "size")] = len(data)
        if p.suffix == ".json":
            _flatten(("file", rel, "json"), json.loads(data), feats)
        elif p.suffix == ".parquet":
            _parquet_features(("file", rel, "parquet"), p, feats)
        elif p.suffix in (".md", ".txt"):
            _text_features(("file", rel, "text"), data.decode().splitlines(), feats)
    logs = [
        f"{r.name} {r.levelname} " + _DURATION.sub("<wall-clock> s", r.getMessage())
        for r in records if r.levelno >= logging.INFO
    ]
    _text_features(("log",), logs, feats)
    return feats



def fresh_job_run(root: Path, job: Any, frame: pd.DataFrame, caplog: Any) -> Features:
    """Run ``job`` on ``frame`` (written to ``root/table.csv``) from a clean slate — no
    outputs, quality files, witness or SQLite ledger of an earlier run under ``root`` —
    with INFO logs captured; every release must commit. Returns what the run published
    (:func:`collect` of ``root/out`` and the captured records)."""
    import shutil

    from kinds_helpers import write_csv

    from hdp_spark.jobs import run_job

    for sub in ("out", "quality", "witness"):
        shutil.rmtree(root / sub, ignore_errors=True)
    for name in ("ledger.sqlite", "ledger.sqlite-wal", "ledger.sqlite-shm"):
        (root / name).unlink(missing_ok=True)
    write_csv(frame, root / "table.csv")
    caplog.clear()
    with caplog.at_level(logging.INFO):
        result = run_job(job)
    assert all(r.status == "committed" for r in result.releases)
    return collect(root / "out", list(caplog.records),
                   [r.record.commit_id for r in result.releases])

def deterministic_in_private_data(
    table_runs: Sequence[Mapping[tuple[str, ...], Any]],
    neighbour_runs: Sequence[Mapping[tuple[str, ...], Any]],
) -> dict[tuple[str, ...], tuple[Any, Any]]:
    """Features equal in every run on the table and in every run on the neighbour, with
    different values on the two tables.

    A deterministic function of the data is constant over the runs on each table; a feature
    that merely happened to coincide (a noisy value rounding alike, a compressed size) does
    not survive more runs.

    Returns:
        ``{feature: (value on the table, value on the neighbour)}``.
    """
    keys: set[tuple[str, ...]] = set().union(*table_runs, *neighbour_runs)
    found = {}
    for k in keys:
        t = [run.get(k, _MISSING) for run in table_runs]
        n = [run.get(k, _MISSING) for run in neighbour_runs]
        if all(v == t[0] for v in t) and all(v == n[0] for v in n) and t[0] != n[0]:
            found[k] = (t[0], n[0])
    return found


SPACING_S = 1.1
"""Least time between the end of one run on a table and the start of the next run on the
same table, once extra runs are added: every clock reading of the later run is then in a
later whole second than every reading of the earlier runs on that table, so a timestamp of
second resolution cannot stay constant over that table's runs (two runs within one clock
second would pass for a function of the data)."""


def runs_until_settled(
    on_table: Callable[[], Mapping[tuple[str, ...], Any]],
    on_neighbour: Callable[[], Mapping[tuple[str, ...], Any]],
    extra_rounds: int = 10,
    spacing_s: float = SPACING_S,
) -> tuple[list[Mapping[tuple[str, ...], Any]], list[Mapping[tuple[str, ...], Any]],
           dict[tuple[str, ...], tuple[Any, Any]]]:
    """Two runs on the table, one on the neighbour; while anything looks determined by the
    data, one more run on the neighbour, then (if still) one more on the table, and so on,
    at most ``extra_rounds`` more on each: a function of the data stays constant over the
    runs on each table, a coincidence of fresh values does not. Coincidences are common for
    coarse features of DP values: the leading digit group of a noisy mean ("93" of 93,894,
    noise scale ~800) can stay on one side of a boundary over a few runs and the neighbour's
    shifted mean on the other; each extra pair of runs multiplies that chance by about 1/3,
    so ten rounds make a false alarm rare while any deterministic feature stays flagged
    however many runs are added. (Five rounds left the all-kinds test a false alarm in
    about 1 of 300 executions, replayed on recorded runs; the rounds past the fifth run only
    while something still looks determined, so a passing test rarely pays for them.)

    Checking after each single run gives the same verdict as adding the runs in pairs (one
    on each table, then checking): :func:`deterministic_in_private_data` only shrinks as
    runs are added (a feature that varies on one table, or is equal on both, stays so), so
    an empty result after a single run stays empty after its pair, and the most runs made
    (``2 + extra_rounds`` on the table, ``1 + extra_rounds`` on the neighbour) are the same.
    The neighbour goes first: a coincidence has the table's two equal values, more often a
    likely value than the neighbour's one draw, so a new neighbour run clears it more
    often. An extra run starts ``spacing_s`` (:data:`SPACING_S`) after the last run on its
    table ended: the other table's run in between usually takes longer, so nobody waits.

    Returns:
        The features of the runs on the table and on the neighbour, and what is still
        determined by the data over all of them (``{}`` when nothing is).
    """
    runs = [on_table(), on_table()]
    ended = {"table": time.monotonic()}
    others = [on_neighbour()]
    ended["neighbour"] = time.monotonic()
    found = deterministic_in_private_data(runs, others)
    steps = [("neighbour", on_neighbour, others), ("table", on_table, runs)] * extra_rounds
    for side, run, into in steps:
        if not found:
            break
        time.sleep(max(0.0, ended[side] + spacing_s - time.monotonic()))
        into.append(run())
        ended[side] = time.monotonic()
        found = deterministic_in_private_data(runs, others)
    return runs, others, found


def assert_no_deterministic_leak(
    on_table: Callable[[], Mapping[tuple[str, ...], Any]],
    on_neighbour: Callable[[], Mapping[tuple[str, ...], Any]],
) -> tuple[list[Mapping[tuple[str, ...], Any]], list[Mapping[tuple[str, ...], Any]]]:
    """:func:`runs_until_settled`, asserting that nothing is determined by the data.

    Returns:
        The features of the runs on the table and on the neighbour (which of the two was
        run last is not fixed).
    """
    runs, others, found = runs_until_settled(on_table, on_neighbour)
    assert found == {}, f"published features determined by private data: {found}"
    return runs, others


def text_lines(feats: Mapping[tuple[str, ...], Any], rel: str) -> str:
    """The text of the published file ``rel`` (``.md`` / ``.txt``) as collected in ``feats``."""
    n = feats[("file", rel, "text", "#lines")]
    return "\n".join(feats[("file", rel, "text", str(i))] for i in range(n))


class LogCapture(logging.Handler):
    """Every record at INFO+ while :meth:`at_level` is active, as ``caplog`` collects them,
    for fixtures wider than one test (``caplog`` is per test)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def clear(self) -> None:
        self.records = []

    @contextmanager
    def at_level(self, level: int) -> Iterator[None]:
        root = logging.getLogger()
        before = root.level
        self.setLevel(level)
        root.addHandler(self)
        root.setLevel(level)
        try:
            yield
        finally:
            root.removeHandler(self)
            root.setLevel(before)


# -- the old, unkeyed scheme (reproduced to show the tests can fail) ----------------------


def old_file_fingerprint(path: Path, data: bytes, extra: object) -> str:
    """The fingerprint the old code published (``values.json["input_fingerprint"]``)."""
    digest = hashlib.sha256(data).hexdigest()
    payload = json.dumps({"mode": "content", "files": [[path.name, digest]], "extra": extra},
                         sort_keys=True, default=str)
    return "files-content:" + hashlib.sha256(payload.encode()).hexdigest()


def old_pandas_content_hash(df: pd.DataFrame) -> str:
    """The old unkeyed table hash (pandas engine)."""
    import numpy as np

    h = pd.util.hash_pandas_object(df, index=False).to_numpy(np.uint64)
    total = int(h.astype(object).sum()) if len(h) else 0
    xor = int(np.bitwise_xor.reduce(h)) if len(h) else 0
    payload = f"{len(df)}:{total}:{xor}:{list(df.columns)}".encode()
    return hashlib.sha256(payload).hexdigest()


def old_hashes(
    path: Path, data: bytes, df: pd.DataFrame, extra: object, job: str,
    definitions: Mapping[str, Mapping[str, Any]],
) -> list[str]:
    """Every hex string the old scheme derived from an input: the file's SHA-256, the
    fingerprint, the table hash, and each release's idempotency key (whose first 16 digits
    were the published commit id)."""
    fps = [old_file_fingerprint(path, data, extra), "table:" + old_pandas_content_hash(df)]
    out = [hashlib.sha256(data).hexdigest(), *(f.split(":", 1)[1] for f in fps)]
    for fp in fps:
        out += [idempotency_key(job, rid, fp, d) for rid, d in definitions.items()]
    return out


HEX_WINDOW = 12
_HEX = re.compile(rb"[0-9a-fA-F]{%d,}" % HEX_WINDOW)


def published_hex_windows(out: Path, log_text: str) -> set[str]:
    """Every 12-hex-digit window of every hex run in the published files (bytes and names)
    and in the log text, lower-cased."""
    blobs = [log_text.encode()]
    for p in sorted(out.rglob("*")):
        blobs.append(str(p.relative_to(out)).encode())
        if p.is_file():
            blobs.append(p.read_bytes())
    windows: set[str] = set()
    for blob in blobs:
        for m in _HEX.finditer(blob):
            run = m.group().decode().lower()
            windows.update(run[i:i + HEX_WINDOW] for i in range(len(run) - HEX_WINDOW + 1))
    return windows


def published_bytes(out: Path, log_text: str) -> bytes:
    """All published bytes (names, file contents, log text) concatenated."""
    parts = [log_text.encode()]
    for p in sorted(out.rglob("*")):
        parts.append(str(p.relative_to(out)).encode())
        if p.is_file():
            parts.append(p.read_bytes())
    return b"\x00".join(parts)
