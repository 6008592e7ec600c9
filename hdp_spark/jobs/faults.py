"""Fault injection for the crash-consistency tests: ``HDP_FAULT_AT=<stage>`` kills the run.

Set ``HDP_FAULT_AT`` to a stage name (or ``<release id>:<stage>``) and the runner kills its
own process with SIGKILL when it reaches that stage, exactly like ``kill -9`` from outside:
no ``finally`` block, no flush, no cleanup runs. Unset (the default), this is a no-op.
"""

from __future__ import annotations

import os
import signal

__all__ = ["ENV", "STAGES", "fault_point"]

ENV = "HDP_FAULT_AT"

STAGES: tuple[str, ...] = (
    "loaded",           # input read and fingerprinted
    "validated",        # schema and input checks passed
    "locked",           # ledger lock taken (per release)
    "budgets_checked",  # remaining budgets read, ε capped
    "computed",         # release computed (noise drawn), nothing written
    "charged",          # ledger rows written, commit point not yet reached
    "committed",        # ledger commit done, witness not yet advanced, no output written
    "witnessed",        # rollback witness advanced (if any), outputs not yet written
    "staged",           # outputs written to the staging directory, not yet published
    "published",        # outputs renamed into place, manifest not yet updated
    "reported",         # manifest and report written
)
"""Stages in run order; the per-release ones repeat for every release."""


def fault_point(stage: str, release_id: str | None = None) -> None:
    """Kill this process (SIGKILL) if ``HDP_FAULT_AT`` names ``stage`` (test hook)."""
    target = os.environ.get(ENV)
    if not target:
        return
    if target == stage or (release_id is not None and target == f"{release_id}:{stage}"):
        if hasattr(signal, "SIGKILL"):
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(137)
