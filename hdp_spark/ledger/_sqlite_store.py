"""The value sets of a format-4 SQLite ledger, each row sealed with a keyed MAC.

Every row the ledger relies on carries ``mac`` = :meth:`Sealer.seal` over its value set's
name and every field of the row, its position included:

* ``users(first, n, data, mac)``: ``("users", first, n, data)``;
* ``charges(seq, part, n, data, mac)``: ``("charges", seq, part, n, total, data)`` where
  ``total`` is the commit's number of charges over all its parts (a lost part fails the
  others);
* ``totals(part, n, data, mac)``: ``("totals", totals_seq, part, n, total, data)`` (a part
  of another snapshot, or a lost part, fails);
* ``commits``: ``key_mac`` over ``("commit-key", seq, key, commit_id)`` (read by every
  lookup, without SQLite's index of the key: a damaged index copy of a key cannot hide a
  committed release) and ``mac`` over every column (read with the record);
* ``meta.state``: the row counts of every table and ``totals_seq``, with the ledger id,
  MAC'd as one value (``("state", ...)``): a deleted or added row anywhere changes a count.

Readers check the state first, then the MAC of every row they read, before decoding it;
:func:`verify_all` checks every row, the audit log against the snapshot, and SQLite's full
``integrity_check``. Errors name the value set and never a stored value.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import astuple, dataclass
from dataclasses import fields as dataclass_fields
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from hdp_spark.errors import LedgerDamagedError, LedgerError
from hdp_spark.ledger._columnar import (
    PART_ROWS,
    decode_charges,
    decode_totals,
    decode_users,
    encode_charges,
    encode_totals,
    encode_users,
    ledger_table,
    parts,
)
from hdp_spark.ledger._secret import LedgerKey
from hdp_spark.ledger.base import CommitRecord
from hdp_spark.ledger.integrity import Sealer, VerifyReport, damaged

__all__ = [
    "COLUMNS",
    "State",
    "Store",
    "check_state",
    "insert_commit",
    "key_map",
    "load_charges",
    "load_totals",
    "load_users",
    "meta",
    "record_at",
    "records",
    "seal",
    "seal_all",
    "sealed_key",
    "verify_all",
    "write_charges",
    "write_state",
    "write_totals",
    "write_users",
]

Int64s = npt.NDArray[np.int64]
COLUMNS = (
    "key, job, release_id, fingerprint, committed_at, outcome, users_charged, units_charged, "
    "commit_id"
)


def _mac(sealer: Sealer | None, kind: str, *fields: Any) -> str:
    return "" if sealer is None else sealer.seal(kind, *fields)


@dataclass(frozen=True, slots=True)
class State:
    """Row counts of every table (and sums of their ``n``) and the snapshot's commit."""

    commits: int
    max_seq: int
    user_rows: int
    users: int
    charge_rows: int
    charges: int
    total_rows: int
    totals: int
    totals_seq: int


def _counts(c: sqlite3.Connection, totals_seq: int) -> State:
    one = c.execute("SELECT count(*), COALESCE(max(seq), 0) FROM commits NOT INDEXED").fetchone()
    users = c.execute("SELECT count(*), COALESCE(sum(n), 0) FROM users").fetchone()
    charges = c.execute("SELECT count(*), COALESCE(sum(n), 0) FROM charges NOT INDEXED").fetchone()
    totals = c.execute("SELECT count(*), COALESCE(sum(n), 0) FROM totals").fetchone()
    v = [int(x) if isinstance(x, int) else -1 for x in (*one, *users, *charges, *totals)]
    return State(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], totals_seq)


def write_state(c: sqlite3.Connection, sealer: Sealer, ledger_id: str, totals_seq: int) -> None:
    """Seal the current row counts (call after every write, before ``COMMIT``)."""
    state = _counts(c, totals_seq)
    fields = astuple(state)
    value = json.dumps({"counts": list(fields), "mac": sealer.seal("state", ledger_id, *fields)})
    c.execute("INSERT OR REPLACE INTO meta VALUES ('state', ?)", (value,))
    c.execute("INSERT OR REPLACE INTO meta VALUES ('totals_seq', ?)", (str(totals_seq),))


def check_state(
    c: sqlite3.Connection, sealer: Sealer, where: str, meta: dict[str, str]
) -> State:
    """The sealed state, checked against its MAC, the tables' row counts and ``totals_seq``.

    Raises:
        LedgerDamagedError: the state is missing, malformed, fails its MAC, or a table has
            lost or gained rows.
    """
    try:
        doc = json.loads(meta["state"])
        counts = [int(v) for v in doc["counts"]]
        mac = doc["mac"]
        if len(counts) != len(dataclass_fields(State)) or any(
            not isinstance(v, int) for v in doc["counts"]
        ):
            raise ValueError
        state = State(*counts)
    except (KeyError, ValueError, TypeError) as exc:
        raise damaged(where, "its sealed state (meta `state`) is missing or malformed") from exc
    if not sealer.valid(mac, "state", meta.get("ledger_id", ""), *counts):
        raise damaged(where, "its sealed state (meta `state`) fails its MAC")
    if meta.get("totals_seq") != str(state.totals_seq):
        raise damaged(where, "meta `totals_seq` differs from the sealed state")
    actual = _counts(c, state.totals_seq)
    if actual != state:
        changed = [f.name for f in dataclass_fields(State)
                   if getattr(actual, f.name) != getattr(state, f.name)]
        raise damaged(where, f"rows were lost or added ({', '.join(changed)} differ from "
                      "the sealed state)")
    return state


# -- users --------------------------------------------------------------------------------
def write_users(c: sqlite3.Connection, sealer: Sealer | None, first: int, new: pa.Array) -> None:
    """Append the users ``new`` (numbered from ``first``) as sealed parts."""
    rows = []
    for _part, start, stop in parts(len(new)):
        data = encode_users(new.slice(start, stop - start))
        rows.append((first + start, stop - start, data,
                     _mac(sealer, "users", first + start, stop - start, data)))
    c.executemany("INSERT INTO users (first, n, data, mac) VALUES (?, ?, ?, ?)", rows)


def load_users(c: sqlite3.Connection, sealer: Sealer, where: str) -> pa.ChunkedArray:
    """The user dictionary (user ids in number order), every part checked before decoding.

    One chunk per part, never concatenated (at 10M users a copy of ~200 MB)."""
    rows = c.execute("SELECT first, n, data, mac FROM users").fetchall()
    for first, n, data, mac in rows:
        if not sealer.valid(mac, "users", first, n, data):
            raise damaged(where, "a part of the user dictionary fails its MAC")
    arrays, count = [], 0
    for first, n, data, _unused in sorted(rows, key=lambda r: int(r[0])):
        if int(first) != count:
            raise damaged(where, "the user dictionary has a gap")
        arrays.append(decode_users(bytes(data), int(n)))
        count += int(n)
    return pa.chunked_array(arrays, pa.string())


# -- charges (the audit log) --------------------------------------------------------------
def write_charges(
    c: sqlite3.Connection, sealer: Sealer | None, seq: int, numbers: Int64s, units: Int64s
) -> None:
    """The audit log of commit ``seq`` (``numbers`` increasing) as sealed parts."""
    total = int(numbers.size)
    rows = []
    for part, start, stop in parts(total):
        data = encode_charges(numbers[start:stop], units[start:stop])
        rows.append((seq, part, stop - start, data,
                     _mac(sealer, "charges", seq, part, stop - start, total, data)))
    c.executemany("INSERT INTO charges (seq, part, n, data, mac) VALUES (?, ?, ?, ?, ?)", rows)


def _grouped_charges(
    c: sqlite3.Connection, sealer: Sealer, where: str, condition: str, args: tuple[Any, ...]
) -> dict[int, list[tuple[int, int, bytes]]]:
    """The audit-log parts selected by ``condition``, checked, as ``{seq: [(part, n, data)]}``.

    Read without SQLite's index of ``(seq, part)`` (a damaged index copy cannot hide a
    part); a commit's parts are checked together (their MACs hold the commit's total).
    """
    groups: dict[Any, list[tuple[Any, ...]]] = {}
    for row in c.execute(
        f"SELECT seq, part, n, data, mac FROM charges NOT INDEXED WHERE {condition}", args
    ):
        groups.setdefault(row[0], []).append(row)
    out: dict[int, list[tuple[int, int, bytes]]] = {}
    for seq, rows in groups.items():
        if not all(isinstance(r[2], int) for r in rows):
            raise damaged(where, "a part of the audit log fails its MAC")
        total = sum(int(r[2]) for r in rows)
        for s, part, n, data, mac in rows:
            if not sealer.valid(mac, "charges", s, part, n, total, data):
                raise damaged(where, "a part of the audit log fails its MAC")
        ordered = sorted((int(r[1]), int(r[2]), bytes(r[3])) for r in rows)
        if [p for p, _n, _d in ordered] != list(range(len(ordered))):
            raise damaged(where, "the audit log of a commit lacks a part")
        out[int(seq)] = ordered
    return out


def load_charges(
    c: sqlite3.Connection, sealer: Sealer, where: str, condition: str, args: tuple[Any, ...],
    users: int,
) -> Iterable[tuple[int, Int64s, Int64s]]:
    """``(seq, user numbers, units)`` of every commit selected by ``condition``, in seq order."""
    for seq, rows in sorted(_grouped_charges(c, sealer, where, condition, args).items()):
        numbers, units = [], []
        for _part, n, data in rows:
            nums, amounts = decode_charges(data, n)
            numbers.append(nums)
            units.append(amounts)
        all_numbers, all_units = np.concatenate(numbers), np.concatenate(units)
        if all_numbers.size and (int(all_numbers.min()) < 0 or int(all_numbers.max()) >= users):
            raise damaged(where, "the audit log names a user outside the user dictionary")
        if all_units.size and int(all_units.min()) <= 0:
            raise damaged(where, "the audit log holds a charge that is not positive")
        yield seq, all_numbers, all_units


# -- totals (the snapshot) ----------------------------------------------------------------
def write_totals(
    c: sqlite3.Connection, sealer: Sealer | None, totals: Int64s, seq: int
) -> None:
    """Replace the totals snapshot by ``totals`` (the spend after commit ``seq``)."""
    c.execute("DELETE FROM totals")
    rows = []
    for part, start, stop in parts(len(totals)):
        data = encode_totals(totals[start:stop])
        rows.append((part, stop - start, data,
                     _mac(sealer, "totals", seq, part, stop - start, len(totals), data)))
    c.executemany("INSERT INTO totals (part, n, data, mac) VALUES (?, ?, ?, ?)", rows)
    c.execute("INSERT OR REPLACE INTO meta VALUES ('totals_seq', ?)", (str(seq),))


def load_totals(
    c: sqlite3.Connection, sealer: Sealer, where: str, state: State, users: int
) -> Int64s:
    """The totals snapshot as of ``state.totals_seq``, every part checked before decoding
    (``users`` long: users added after the snapshot have 0)."""
    rows = c.execute("SELECT part, n, data, mac FROM totals").fetchall()
    for part, n, data, mac in rows:
        if not sealer.valid(mac, "totals", state.totals_seq, part, n, state.totals, data):
            raise damaged(where, "a part of the totals snapshot fails its MAC")
    if state.totals > users:
        raise damaged(where, "the totals snapshot does not match the user dictionary")
    totals = np.zeros(users, dtype=np.int64)
    at = 0
    for part, n, data, _unused in sorted(rows, key=lambda r: int(r[0])):
        if int(part) * PART_ROWS != at:
            raise damaged(where, "the totals snapshot lacks a part")
        totals[at:at + int(n)] = decode_totals(bytes(data), int(n))
        at += int(n)
    if at != state.totals:
        raise damaged(where, "the totals snapshot lacks a part")
    return totals


# -- commits ------------------------------------------------------------------------------
def insert_commit(c: sqlite3.Connection, sealer: Sealer, record: CommitRecord) -> int:
    """Insert ``record`` with its MACs; returns its ``seq``.

    Raises:
        sqlite3.IntegrityError: the key is committed already (the caller's conflict).
    """
    cursor = c.execute(
        f"INSERT INTO commits ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (record.key, record.job, record.release_id, record.fingerprint, record.committed_at,
         record.outcome, record.users_charged, record.units_charged, record.commit_id),
    )
    seq = int(cursor.lastrowid or 0)
    _seal_commit(c, sealer, seq, record)
    return seq


def _record_fields(record: CommitRecord) -> tuple[Any, ...]:
    return (record.key, record.job, record.release_id, record.fingerprint,
            record.committed_at, record.outcome, record.users_charged, record.units_charged,
            record.commit_id)


def _seal_commit(c: sqlite3.Connection, sealer: Sealer, seq: int, record: CommitRecord) -> None:
    c.execute(
        "UPDATE commits SET key_mac = ?, mac = ? WHERE seq = ?",
        (sealer.seal("commit-key", seq, record.key, record.commit_id),
         sealer.seal("commit", seq, *_record_fields(record)), seq),
    )


def key_map(c: sqlite3.Connection, sealer: Sealer, where: str) -> dict[str, tuple[int, str]]:
    """``{idempotency key: (seq, commit id)}`` of every commit, each checked by its MAC.

    Scans the table itself (``NOT INDEXED``), never the index copy of the keys.
    """
    out: dict[str, tuple[int, str]] = {}
    for seq, key, commit_id, mac in c.execute(
        "SELECT seq, key, commit_id, key_mac FROM commits NOT INDEXED"
    ):
        if not sealer.valid(mac, "commit-key", seq, key, commit_id):
            raise damaged(where, "a commit record's key fails its MAC")
        out[str(key)] = (int(seq), str(commit_id))
    return out


def _checked_record(row: tuple[Any, ...], sealer: Sealer, where: str) -> CommitRecord:
    seq, *fields, mac = row
    if not sealer.valid(mac, "commit", seq, *fields):
        raise damaged(where, "a commit record fails its MAC")
    return CommitRecord(
        str(fields[0]), str(fields[1]), str(fields[2]), str(fields[3]), str(fields[4]),
        str(fields[5]), int(fields[6]), int(fields[7]), str(fields[8]),
    )


def record_at(c: sqlite3.Connection, sealer: Sealer, where: str, seq: int) -> CommitRecord:
    """The commit record ``seq``, checked by its MAC."""
    row = c.execute(f"SELECT seq, {COLUMNS}, mac FROM commits WHERE seq = ?", (seq,)).fetchone()
    if row is None:
        raise damaged(where, "a commit record named by its key is missing")
    return _checked_record(tuple(row), sealer, where)


def records(
    c: sqlite3.Connection, sealer: Sealer, where: str, job: str | None
) -> list[CommitRecord]:
    """Every commit record (of ``job``), oldest first, each checked by its MAC."""
    rows = c.execute(f"SELECT seq, {COLUMNS}, mac FROM commits NOT INDEXED").fetchall()
    checked = sorted((int(r[0]), _checked_record(tuple(r), sealer, where)) for r in rows)
    return [r for _seq, r in checked if job is None or r.job == job]


# -- the spend, the meta table --------------------------------------------------------
class Store:
    """The spend of a sealed ledger as arrays: user dictionary, totals, and the state of
    the snapshot (which commit it includes, how much audit log came after it)."""

    def __init__(
        self, users: pa.ChunkedArray, totals: npt.NDArray[np.int64], state: State, deltas: int,
        delta_rows: int,
    ) -> None:
        self.users = users
        self.totals = totals
        self.state = state
        self.deltas = deltas
        self.delta_rows = delta_rows

    @classmethod
    def load(cls, c: sqlite3.Connection, sealer: Sealer, where: str, state: State) -> Store:
        """Read the dictionary, the snapshot and the audit log after it (one transaction;
        ``state`` checked already), checking every part's MAC before decoding it."""
        users = load_users(c, sealer, where)
        totals = load_totals(c, sealer, where, state, len(users))
        deltas, rows = 0, 0
        for _seq, numbers, units in load_charges(
            c, sealer, where, "seq > ?", (state.totals_seq,), len(users)
        ):
            totals[numbers] += units  # a user appears once per commit
            deltas, rows = deltas + 1, rows + int(numbers.size)
        if totals.size and int(totals.min()) < 0:
            raise damaged(where, "a total overflows")
        return cls(users, totals, state, deltas, rows)

    def spent_table(self) -> pa.Table:
        """Users with a positive spend, as a ledger frame (Arrow)."""
        keep = self.totals > 0
        if keep.all():
            return ledger_table(self.users, self.totals)
        return ledger_table(self.users.filter(pa.array(keep)), self.totals[keep])



def meta(c: sqlite3.Connection) -> dict[str, str]:
    """The ``meta`` table as a dict."""
    return {str(k): str(v) for k, v in c.execute("SELECT name, value FROM meta")}


def sealed_key(meta: dict[str, str], path: object) -> LedgerKey:
    """The MAC key of a sealed ledger; a lost secret, id or state is damage."""
    missing = sorted({"mac_secret", "ledger_id", "totals_seq", "state"} - set(meta))
    if missing:
        raise damaged(str(path), f"its meta table lacks {', '.join(missing)} (a sealed ledger "
                      "never loses its secret, id or state)")
    return LedgerKey(meta["mac_secret"], str(path))



# -- upgrade and full verification --------------------------------------------------------
def seal_all(c: sqlite3.Connection, sealer: Sealer, ledger_id: str) -> None:
    """Seal every row of a ledger upgraded from a format without MACs (in the caller's
    transaction), after decoding each blob (a part that does not decode is damage)."""
    for seq, *fields in c.execute(f"SELECT seq, {COLUMNS} FROM commits").fetchall():
        record = CommitRecord(
            str(fields[0]), str(fields[1]), str(fields[2]), str(fields[3]), str(fields[4]),
            str(fields[5]), int(fields[6]), int(fields[7]), str(fields[8]),
        )
        _seal_commit(c, sealer, int(seq), record)
    for first, n, data in c.execute("SELECT first, n, data FROM users").fetchall():
        decode_users(bytes(data), int(n))
        c.execute("UPDATE users SET mac = ? WHERE first = ?",
                  (sealer.seal("users", first, n, data), first))
    totals_n = c.execute("SELECT COALESCE(sum(n), 0) FROM totals").fetchone()[0]
    row = c.execute("SELECT value FROM meta WHERE name = 'totals_seq'").fetchone()
    totals_seq = int(row[0]) if row else 0
    for part, n, data in c.execute("SELECT part, n, data FROM totals").fetchall():
        decode_totals(bytes(data), int(n))
        c.execute("UPDATE totals SET mac = ? WHERE part = ?",
                  (sealer.seal("totals", totals_seq, part, n, int(totals_n), data), part))
    sums = dict(c.execute("SELECT seq, sum(n) FROM charges GROUP BY seq").fetchall())
    for seq, part, n, data in c.execute("SELECT seq, part, n, data FROM charges").fetchall():
        decode_charges(bytes(data), int(n))
        c.execute("UPDATE charges SET mac = ? WHERE seq = ? AND part = ?",
                  (sealer.seal("charges", seq, part, n, int(sums[seq]), data), seq, part))
    write_state(c, sealer, ledger_id, totals_seq)


def seal(c: sqlite3.Connection, path: str) -> None:
    """Seal every row (a new ledger, or one just upgraded) and check the audit log against
    the snapshot, in the caller's transaction."""
    values = meta(c)
    key = LedgerKey(values["mac_secret"], path)
    try:
        seal_all(c, key.sealer(), values["ledger_id"])
    except (ValueError, TypeError, KeyError, LedgerError) as exc:
        if isinstance(exc, LedgerDamagedError):
            raise
        # a row of the old format that is not what that format wrote (it had no checksums)
        raise damaged(path, "a row of its older format cannot be read (while sealing it)") from exc
    verify_all(c, key.sealer(), path, meta(c), lambda: None)


def verify_all(
    c: sqlite3.Connection, sealer: Sealer, where: str, meta: dict[str, str],
    integrity: Callable[[], None],
) -> VerifyReport:
    """Check every row of the ledger, the audit log against the snapshot, and the file.

    Args:
        integrity: runs SQLite's full ``integrity_check`` (raises on failure).

    Raises:
        LedgerDamagedError: anything fails.
    """
    integrity()
    state = check_state(c, sealer, where, meta)
    recs = records(c, sealer, where, None)
    keys = key_map(c, sealer, where)
    if len(keys) != len(recs) or {k for k in keys} != {r.key for r in recs}:
        raise damaged(where, "the commit records' keys disagree with their MACs")
    users = load_users(c, sealer, where)
    totals = load_totals(c, sealer, where, state, len(users))
    audit = np.zeros(len(users), dtype=np.int64)
    seqs = {s for s, _cid in keys.values()}
    charges = 0
    for seq, numbers, units in load_charges(c, sealer, where, "1", (), len(users)):
        if seq not in seqs:
            raise damaged(where, "the audit log holds charges of no commit record")
        if seq <= state.totals_seq:
            audit[numbers] += units
        charges += int(numbers.size)
    if not np.array_equal(audit, totals):
        raise damaged(where, "the totals snapshot differs from the sum of the audit log")
    rows = state.commits * 2 + state.user_rows + state.charge_rows + state.total_rows + 1
    return VerifyReport(where, "sqlite", state.commits, len(users), charges, rows)
