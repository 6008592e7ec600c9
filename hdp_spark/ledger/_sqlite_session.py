"""One release of a SQLite ledger inside ``BEGIN IMMEDIATE`` (its write lock): read the
spend, then commit the record and its charges in the same transaction
(:meth:`hdp_spark.ledger.sqlite.SqliteLedger.session`)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from hdp_spark.errors import LedgerConflictError, LedgerError
from hdp_spark.ledger import _sqlite_store as store
from hdp_spark.ledger._columnar import charge_arrays, intern
from hdp_spark.ledger._sqlite_errors import translate, translated
from hdp_spark.ledger._sqlite_store import State
from hdp_spark.ledger.base import CommitRecord, FrameIO

if TYPE_CHECKING:
    from hdp_spark.ledger.sqlite import SqliteLedger

__all__ = ["SqliteSession"]

log = logging.getLogger("hdp_spark.ledger")


class SqliteSession:
    """One release inside ``BEGIN IMMEDIATE`` (see :meth:`SqliteLedger.session`)."""

    def __init__(
        self, conn: sqlite3.Connection, io: FrameIO, ledger: SqliteLedger, compact_every: int
    ) -> None:
        self._c = conn
        self._io = io
        self._path = ledger.path
        self._where = str(ledger.path)
        self._sealer = ledger._sealer
        self._ledger_id = ledger.ledger_id
        self._compact_every = compact_every
        self._store: store.Store | None = None
        self._keys: dict[str, tuple[int, str]] | None = None
        self.state: State | None = None
        self.done = False

    def _key_map(self) -> dict[str, tuple[int, str]]:
        if self._keys is None:
            with translated(self._path, "reading it"):
                self._keys = store.key_map(self._c, self._sealer, self._where)
        return self._keys

    def find(self, key: str) -> CommitRecord | None:
        found = self._key_map().get(key)
        if found is None:
            return None
        with translated(self._path, "reading it"):
            return store.record_at(self._c, self._sealer, self._where, found[0])

    def _loaded(self) -> store.Store:
        if self._store is None:  # under the write lock: nobody changes it meanwhile
            assert self.state is not None
            with translated(self._path, "reading it"):
                self._store = store.Store.load(self._c, self._sealer, self._where, self.state)
        return self._store

    def spent(self) -> Any:
        return self._io.from_arrow(self._loaded().spent_table())

    def commit(
        self,
        record: CommitRecord,
        charges: Any,
        before_commit: Callable[[], None] | None = None,
    ) -> None:
        """Record ``record`` and its charges in this transaction, then ``COMMIT``.

        Vectorized: the charges are interned against the user dictionary (Arrow hash
        lookup), sorted by user number and written as a few sealed blobs; the totals are
        updated as one numpy array; the state is sealed again. Only ``COMMIT`` makes any of
        it visible.
        """
        if self.done:
            msg = "a ledger session commits at most once."
            raise LedgerError(msg)
        users, units = charge_arrays(self._io.to_arrow(charges))
        loaded = self._loaded()
        numbers, new = intern(loaded.users, users)
        order = np.argsort(numbers, kind="stable")
        numbers, units = numbers[order], units[order]
        c = self._c
        conflict = f"release `{record.release_id}` was committed by another run first."
        if record.key in self._key_map():
            raise LedgerConflictError(conflict)
        try:
            seq = store.insert_commit(c, self._sealer, record)
        except sqlite3.IntegrityError as exc:
            raise LedgerConflictError(conflict) from exc
        except sqlite3.Error as exc:
            raise translate(exc, self._path, "committing", 0.0) from exc
        totals_seq = loaded.state.totals_seq
        with translated(self._path, "committing"):
            if len(new):
                store.write_users(c, self._sealer, len(loaded.users), new)
            if numbers.size:
                store.write_charges(c, self._sealer, seq, numbers, units)
                deltas, rows = loaded.deltas + 1, loaded.delta_rows + int(numbers.size)
                size = len(loaded.users) + len(new)
                if rows >= size or deltas >= self._compact_every:
                    totals = np.zeros(size, dtype=np.int64)
                    totals[: len(loaded.totals)] = loaded.totals
                    totals[numbers] += units
                    if int(totals[numbers].min()) < 0:
                        msg = "a ledger total overflowed 64 bits; nothing was committed."
                        raise LedgerError(msg)
                    store.write_totals(c, self._sealer, totals, seq)
                    totals_seq = seq
            store.write_state(c, self._sealer, self._ledger_id, totals_seq)
        if before_commit is not None:
            before_commit()
        with translated(self._path, "committing"):
            c.execute("COMMIT")
        self.done = True
        log.debug("ledger commit %s: %d user(s) charged", record.commit_id, int(numbers.size))
