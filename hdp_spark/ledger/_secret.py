"""The ledger's MAC secret: keys every input fingerprint (hence every idempotency key).

An unkeyed hash of the input is a deterministic function of private data: anyone who knows
every other row can enumerate one user's value over its public bounds and match the hash.
So the fingerprint of a job's input is ``HMAC-SHA256(secret, unkeyed digest)`` where the
secret is 32 bytes from the OS CSPRNG (:func:`secrets.token_bytes`), created with the ledger
and stored only inside it. The unkeyed digest lives in process memory only, as HMAC input.

The secret is never written to outputs or logs, never part of a commit record, and not shown
by any ``repr`` or error message.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

from hdp_spark.errors import LedgerDamagedError
from hdp_spark.ledger.integrity import Sealer

__all__ = ["SECRET_BYTES", "LedgerKey", "new_ledger_id", "new_secret_hex"]

SECRET_BYTES = 32
_DOMAIN = b"hdp_spark/ledger-mac/v1\x00"


def new_secret_hex() -> str:
    """A fresh secret (hex) from the OS CSPRNG."""
    return secrets.token_bytes(SECRET_BYTES).hex()


def new_ledger_id() -> str:
    """A fresh public ledger id (16 hex digits from the OS CSPRNG; never derived from data).

    Stored in the ledger when it is created and written into every output made from it, so
    a run can tell that the ledger it opened is not the one its outputs came from (a reset,
    replaced or re-created ledger).
    """
    return secrets.token_hex(8)


class LedgerKey:
    """The MAC key of one ledger (opaque: its bytes are never shown).

    Args:
        hex_secret: the secret as stored in the ledger (64 hex digits).
        where: the ledger's location, for error messages.
    """

    __slots__ = ("_key",)

    def __init__(self, hex_secret: str, where: str) -> None:
        text = hex_secret.strip()
        if len(text) != 2 * SECRET_BYTES or any(c not in "0123456789abcdef" for c in text):
            msg = (
                f"the ledger `{where}` holds a malformed MAC secret (it must be "
                f"{2 * SECRET_BYTES} lowercase hex digits; corrupt ledger)."
            )
            raise LedgerDamagedError(msg)
        self._key = bytes.fromhex(text)

    def mac(self, message: bytes) -> str:
        """``HMAC-SHA256(secret, domain || message)`` as 64 hex digits."""
        return hmac.new(self._key, _DOMAIN + message, hashlib.sha256).hexdigest()

    def sealer(self) -> Sealer:
        """The MAC key of the ledger's value sets, derived from the secret (its own domain:
        a row MAC is never equal to an input fingerprint)."""
        derived = hmac.new(self._key, b"hdp_spark/ledger-seal-key/v1", hashlib.sha256)
        return Sealer(derived.digest())

    def __repr__(self) -> str:
        return "LedgerKey(<secret>)"

    def __reduce__(self) -> str | tuple[Any, ...]:
        msg = "a ledger's MAC key cannot be pickled (it must stay in the ledger)."
        raise TypeError(msg)
