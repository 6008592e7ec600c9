"""Where a job run reports which stage it is in: nowhere by default, a progress bar on a
terminal (the command line's choice, :func:`terminal_progress`).

The runner announces its top-level stages (load, validate, fingerprint, allocation, one per
release, report) to a :class:`Progress`; the stage timings themselves are DEBUG log lines
(:class:`~hdp_spark.jobs.release_run.Timer`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

__all__ = ["Progress", "TerminalProgress", "terminal_progress", "writing_above"]


class Progress:
    """Receives the stages of a run; this base class shows nothing.

    Privacy:
        Stage names are public (the job file's release ids); nothing else is passed.
    """

    def begin(self, stages: int) -> None:
        """The run starts ``stages`` top-level stages."""

    def stage(self, name: str) -> None:
        """Stage ``name`` begins (the previous one is done)."""

    def end(self) -> None:
        """The run is over (done or failed)."""


class TerminalProgress(Progress):
    """A tqdm bar on ``file``: the stage's name and how many stages are done, no timings
    (a release's run time may depend on private data beyond n: partition selection). The
    bar is cleared when the run ends, leaving the command's own summary.

    Privacy:
        Shows public stage names and counts only.
    """

    def __init__(self, file: TextIO) -> None:
        self.file = file
        self._bar: Any = None
        self._stages = 0

    def begin(self, stages: int) -> None:
        from tqdm import tqdm

        self._bar = tqdm(total=stages, file=self.file, leave=False, dynamic_ncols=True,
                         bar_format="{desc} |{bar}| {n_fmt}/{total_fmt}", desc="starting")

    def stage(self, name: str) -> None:
        if self._bar is None:
            return
        self._bar.n = self._stages  # the stages done so far
        self._bar.set_description_str(name)  # drawn now, with the new stage's name
        self._stages += 1

    def end(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def terminal_progress(file: TextIO | None = None) -> Progress:
    """A :class:`TerminalProgress` when ``file`` (default stderr) is a terminal, otherwise a
    silent :class:`Progress` (a log file or a pipe gets no bar).

    Privacy:
        As :class:`TerminalProgress`.
    """
    out = sys.stderr if file is None else file
    isatty = getattr(out, "isatty", None)
    if callable(isatty) and isatty():
        return TerminalProgress(out)
    return Progress()


@contextmanager
def writing_above(file: TextIO) -> Iterator[None]:
    """Write to ``file`` above an open progress bar (cleared, then drawn again); a plain
    write when tqdm was never imported.

    Privacy:
        Writes what the caller writes.
    """
    tqdm_module = sys.modules.get("tqdm")
    if tqdm_module is None:
        yield
        return
    with tqdm_module.tqdm.external_write_mode(file=file):
        yield
