"""Fault injection into a ledger, through the command line (issue 29).

A baseline: one job run (two releases committed and published). Each case copies it,
damages the ledger one way (a file deleted or truncated, 1 or 10 random bytes flipped in a
file or inside one stored value set, one hex digit of a stored key changed; all seeded), and
runs ``hdp-release run`` on a job that re-publishes the two releases and makes a third,
charged one. A case ends as

* ``refused``: exit code 6, one line on stderr, the damaged ledger left byte for byte as it
  was and no new output (nothing computed, nothing charged);
* ``unchanged``: exit code 0 and everything equal to the same run on an undamaged copy
  (same spend, same audit log, the two releases re-published with their commit ids, not
  recomputed); the flip hit bytes nobody reads (free space, padding);
* ``found by verify``: exit code 0, values as above, and ``hdp-release verify`` refuses the
  ledger (damage in what runs do not read: older audit log, SQLite's index copies);

or as a failure: ``silent`` (exit 0 with other values), ``wrong exit`` (any other code),
``traceback`` (an exception escaped the command), ``leak`` (stderr holds a stored key or
the secret). The suite requires zero failures.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import random
import shutil
import sqlite3
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from job_helpers import GLOBAL_RELEASE, RELEASES, write_job

from hdp_spark.cli import main
from hdp_spark.jobs import load_job
from hdp_spark.ledger import open_ledger
from hdp_spark.ledger.io import PandasIO

EXTRA_RELEASE = """
[[releases]]
id = "salary_overall"

  [[releases.aggregators]]
  kind = "mean"
  column = "salary"
  lower = 20000
  upper = 250000
"""

FAILURES = ("silent", "wrong exit", "traceback", "leak")

Damage = Callable[[Path], None]


@dataclass(frozen=True)
class Outcome:
    """One case's end (``kind`` one of the module docstring's words) and its detail."""

    case: str
    kind: str
    detail: str = ""


def _cli(args: list[str]) -> tuple[int | None, str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main([*args, "-q"])
        except BaseException as exc:
            where = traceback.extract_tb(exc.__traceback__)[-3:]
            return None, f"{type(exc).__name__}: {exc} at {traceback.format_list(where)}"
    return code, err.getvalue()


def _job(tmp: Path, backend: str, filename: str = "job.toml", **kwargs: Any) -> Path:
    """A job file whose ledger folds deltas into a snapshot every 2 commits (so that a
    parquet ledger has a snapshot, archived deltas and a current delta)."""
    job = write_job(tmp, filename=filename, backend=backend, **kwargs)
    job.write_text(job.read_text().replace("lock_timeout = 60", "lock_timeout = 60\n"
                                           "compact_every = 2"))
    return job


def _tree_digest(path: Path) -> str:
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        digest.update(str(f.relative_to(path.parent)).encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()


def _values(job: Path) -> dict[str, Any]:
    spec = load_job(job)
    ledger = open_ledger(spec.ledger_backend, spec.ledger.path, create=False)
    frame = ledger.spent(PandasIO())
    spent = dict(zip(frame["user_id"].astype(str), frame["units"].astype(int), strict=True))
    recs = sorted((r.release_id, r.key, r.units_charged, r.users_charged)
                  for r in ledger.records())
    ids = {r.release_id: r.commit_id for r in ledger.records()}
    audit = ledger.audit() if hasattr(ledger, "audit") else None
    return {"spent": spent, "records": recs, "audit": audit, "ids": ids}


class Sweep:
    """A baseline ledger of ``backend`` under ``work`` and the cases run against it."""

    def __init__(self, work: Path, backend: str) -> None:
        self.work = work
        self.backend = backend
        self.base = work / "base"
        self.base.mkdir(parents=True)
        job = _job(self.base, backend, releases=RELEASES)
        code, err = _cli(["run", str(job)])
        assert code == 0, err
        other = _job(self.base, backend, "other.toml", name="t_other", releases=GLOBAL_RELEASE)
        code, err = _cli(["run", str(other)])
        assert code == 0, err
        spec = load_job(job)
        self.ledger_rel = spec.ledger.path.relative_to(self.base)
        if backend == "sqlite":
            conn = sqlite3.connect(spec.ledger.path)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
        self.secrets = self._secrets(spec.ledger.path)
        self.first_ids = {r.release_id: r.commit_id for r in
                          open_ledger(backend, spec.ledger.path).records()}  # type: ignore[arg-type]
        reference = self._copy("reference")
        code, err = _cli(["run", str(reference)])
        assert code == 0, err
        self.reference = _values(reference)
        self.counts: Counter[str] = Counter()
        self.outcomes: list[Outcome] = []
        self._n = 0

    def _secrets(self, path: Path) -> list[str]:
        """Stored keys that must never reach a message: idempotency keys, fingerprints,
        the MAC secret."""
        ledger = open_ledger(self.backend, path)  # type: ignore[arg-type]
        out = [r.key for r in ledger.records()] + [r.fingerprint for r in ledger.records()]
        if self.backend == "sqlite":
            conn = sqlite3.connect(path)
            out += [str(conn.execute(
                "SELECT value FROM meta WHERE name = 'mac_secret'").fetchone()[0])]
            conn.close()
        else:
            out.append((path / "_secret").read_text().strip())
        return out

    @property
    def ledger(self) -> Path:
        """The baseline ledger (file or directory)."""
        return self.base / self.ledger_rel

    def _copy(self, name: str) -> Path:
        case = self.work / name
        shutil.copytree(self.base, case,
                        ignore=shutil.ignore_patterns("*.toml", "quality", "_lock"))
        return _job(case, self.backend, releases=RELEASES + EXTRA_RELEASE)

    def case(self, name: str, damage: Damage) -> Outcome:
        """Copy the baseline, apply ``damage`` to the copy's ledger, run, classify."""
        self._n += 1
        job = self._copy(f"case{self._n}")
        case_dir = job.parent
        ledger = case_dir / self.ledger_rel
        damage(ledger)
        out = case_dir / "out"
        before_out = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
        before = _tree_digest(ledger) if ledger.exists() else ""
        code, err = _cli(["run", str(job)])
        outcome = self._classify(name, job, ledger, code, err, before, before_out)
        self.counts[outcome.kind] += 1
        self.outcomes.append(outcome)
        shutil.rmtree(case_dir, ignore_errors=True)
        return outcome

    def _classify(
        self, name: str, job: Path, ledger: Path, code: int | None, err: str, before: str,
        before_out: list[str],
    ) -> Outcome:
        if code is None:
            return Outcome(name, "traceback", err)
        if any(s and s in err for s in self.secrets) or not all(
            ch.isprintable() or ch == "\n" for ch in err
        ):
            return Outcome(name, "leak", err)
        if code == 6:
            out = job.parent / "out"
            after_out = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
            after = _tree_digest(ledger) if ledger.exists() else ""
            if after != before or after_out != before_out:
                return Outcome(name, "silent", "refused, but the ledger or outputs changed")
            if len(err.strip().splitlines()) != 1:
                return Outcome(name, "wrong exit", f"6 with more than one line: {err}")
            return Outcome(name, "refused")
        if code != 0:
            return Outcome(name, "wrong exit", f"{code}: {err.strip()}")
        try:
            values = _values(job)
        except Exception as exc:
            values = {"error": type(exc).__name__}
        same = all(values.get(k) == self.reference[k] for k in ("spent", "records", "audit"))
        republished = all(values.get("ids", {}).get(r) == cid
                          for r, cid in self.first_ids.items())
        if "error" not in values and not (same and republished):
            return Outcome(name, "silent", "exit 0 with other values")
        vcode, verr = _cli(["verify", str(ledger)])
        if vcode is None:
            return Outcome(name, "traceback", verr)
        if "error" in values and vcode != 6:
            return Outcome(name, "silent", "exit 0, unreadable, and verify passes")
        return Outcome(name, "found by verify" if vcode == 6 else "unchanged")

    def failures(self) -> list[Outcome]:
        """The cases that ended in a failure kind."""
        return [o for o in self.outcomes if o.kind in FAILURES]


# -- damage -------------------------------------------------------------------------------
def flip(rng: random.Random, lo: int, hi: int, count: int) -> Damage:
    """XOR ``count`` random bytes in ``[lo, hi)`` of a file with random non-zero values."""
    positions = [rng.randrange(lo, hi) for _ in range(count)]
    masks = [rng.randrange(1, 256) for _ in range(count)]

    def damage(path: Path) -> None:
        data = bytearray(path.read_bytes())
        for at, mask in zip(positions, masks, strict=True):
            data[at] ^= mask
        path.write_bytes(bytes(data))

    return damage


def hex_digit(rng: random.Random, at: int, length: int) -> Damage:
    """Change one hex digit of the ``length``-digit key stored at byte ``at``."""
    pos = at + rng.randrange(length)
    offset = rng.randrange(1, 16)

    def damage(path: Path) -> None:
        data = bytearray(path.read_bytes())
        digits = "0123456789abcdef"
        old = chr(data[pos])
        data[pos] = ord(digits[(digits.index(old) + offset) % 16]) if old in digits else 0x30
        path.write_bytes(bytes(data))

    return damage


def truncate(fraction: float) -> Damage:
    """Keep the first ``fraction`` of a file."""
    def damage(path: Path) -> None:
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * fraction)])
    return damage


def delete(path: Path) -> None:
    """Delete a file or directory."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()


def occurrences(data: bytes, needle: bytes) -> Iterator[int]:
    """Every offset of ``needle`` in ``data``."""
    at = data.find(needle)
    while at >= 0:
        yield at
        at = data.find(needle, at + 1)


# -- SQLite -------------------------------------------------------------------------------
def sqlite_regions(path: Path) -> dict[str, list[tuple[int, int]]]:
    """Byte ranges ``(start, stop)`` in the file of each stored value set."""
    conn = sqlite3.connect(path)
    values: dict[str, list[bytes]] = {
        "users": [bytes(r[0]) for r in conn.execute("SELECT data FROM users")],
        "charges": [bytes(r[0]) for r in conn.execute("SELECT data FROM charges")],
        "totals": [bytes(r[0]) for r in conn.execute("SELECT data FROM totals")],
    }
    for column in ("key", "commit_id", "fingerprint", "outcome", "key_mac", "mac"):
        values[f"commits.{column}"] = [
            str(r[0]).encode() for r in conn.execute(f"SELECT {column} FROM commits")]
    for name in ("mac_secret", "ledger_id", "state", "totals_seq", "format"):
        values[f"meta.{name}"] = [
            str(r[0]).encode() for r in conn.execute(
                "SELECT value FROM meta WHERE name = ?", (name,))]
    conn.close()
    data = path.read_bytes()
    out: dict[str, list[tuple[int, int]]] = {}
    for kind, items in values.items():
        for item in items:
            needle = item[:48] if len(item) > 48 else item
            for at in occurrences(data, needle):
                stop = min(at + len(item), at + 3000, len(data))  # a blob may overflow
                out.setdefault(kind, []).append((at, stop))
    return out


HEX_KINDS = ("commits.key", "commits.commit_id", "commits.fingerprint", "meta.mac_secret",
             "meta.ledger_id", "commits.key_mac")


def sqlite_cases(sweep: Sweep, per_kind: int, seed: int) -> Iterator[tuple[str, Damage]]:
    """The damage of a SQLite ledger: file deleted or truncated, random flips in the file,
    flips inside each stored value set, a hex digit of each stored key kind (each copy:
    the table's and the index's)."""
    rng = random.Random(seed)
    size = sweep.ledger.stat().st_size
    yield "delete file", delete
    for fraction in (0.0, 0.5, 0.9):
        yield f"truncate {fraction:g}", truncate(fraction)
    for count in (1, 10):
        for i in range(per_kind):
            yield f"file: flip {count} #{i}", flip(rng, 0, size, count)
    regions = sqlite_regions(sweep.ledger)
    for kind, spans in sorted(regions.items()):
        for i in range(per_kind):
            start, stop = spans[i % len(spans)]
            for count in (1, 10):
                yield f"{kind}: flip {count} #{i}", flip(rng, start, stop, count)
        if kind in HEX_KINDS:
            for j, (start, stop) in enumerate(spans):  # every stored copy
                for i in range(max(1, per_kind // 5)):
                    yield f"{kind} copy {j}: hex digit #{i}", hex_digit(rng, start, stop - start)


# -- parquet ------------------------------------------------------------------------------
def parquet_files(root: Path) -> dict[str, Path]:
    """One file of each kind of a parquet ledger (relative kind name -> path)."""
    manifests = sorted((root / "_manifests").iterdir())
    doc = json.loads(manifests[-1].read_text())
    kinds = {"_secret": root / "_secret", "_id": root / "_id", "_head": root / "_head",
             "manifest newest": manifests[-1], "manifest older": manifests[0],
             "commit record": root / doc["commits"][0]["file"]}
    for kind, rel in (("snapshot", doc["snapshot"]), ("delta", (doc["deltas"] or [None])[0]),
                      ("archived delta", (doc.get("archived") or [None])[0])):
        if rel:
            for f in sorted((root / rel).iterdir()):
                kinds.setdefault(f"{kind} {f.suffix or f.name}", f)
    return kinds


def _in_ledger(rel: Path, damage: Damage) -> Damage:
    return lambda root: damage(root / rel)


def _extra_file(rel: Path) -> Damage:
    def damage(root: Path) -> None:
        shutil.copy(root / rel, (root / rel).with_name("part-99999-extra.parquet"))
    return damage


def parquet_cases(sweep: Sweep, per_kind: int, seed: int) -> Iterator[tuple[str, Damage]]:
    """The damage of a parquet ledger: each kind of file deleted, truncated, flipped (1 and
    10 bytes), an extra file in each spend directory, a hex digit of each stored key kind in
    every file that stores it."""
    rng = random.Random(seed)
    root = sweep.ledger
    files = parquet_files(root)
    for kind, path in sorted(files.items()):
        rel = path.relative_to(root)
        size = path.stat().st_size
        yield f"{kind}: delete", _in_ledger(rel, delete)
        yield f"{kind}: truncate", _in_ledger(rel, truncate(0.5))
        for count in (1, 10):
            for i in range(per_kind):
                yield f"{kind}: flip {count} #{i}", _in_ledger(rel, flip(rng, 0, size, count))
        if path.suffix == ".parquet":
            yield f"{kind}: extra file", _extra_file(rel)
    keys: dict[str, list[str]] = {"ledger id": [(root / "_id").read_text().strip()],
                                  "secret": [(root / "_secret").read_text().strip()]}
    ledger = open_ledger("parquet", root)
    for r in ledger.records():
        keys.setdefault("idempotency key", []).append(r.key)
        keys.setdefault("commit id", []).append(r.commit_id)
        keys.setdefault("fingerprint", []).append(r.fingerprint.split(":")[-1])
    for kind, path in sorted(files.items()):
        data = path.read_bytes()
        for key_kind, values in sorted(keys.items()):
            for value in values[:1]:
                for at in list(occurrences(data, value.encode()))[:2]:
                    for i in range(max(1, per_kind // 5)):
                        yield (f"{kind}: {key_kind} hex digit #{i}",
                               _in_ledger(path.relative_to(root),
                                          hex_digit(rng, at, len(value))))


def run_sweep(work: Path, backend: str, per_kind: int, seed: int = 29) -> Sweep:
    """Run every case of ``backend`` with ``per_kind`` positions per kind."""
    sweep = Sweep(work, backend)
    cases = (sqlite_cases if backend == "sqlite" else parquet_cases)(sweep, per_kind, seed)
    for name, damage in cases:
        sweep.case(name, damage)
    return sweep
