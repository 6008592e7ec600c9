"""File-system primitives of the commit protocols: atomic writes, exclusive publish, fsync.

All of them rely on POSIX semantics of a local (or POSIX-compliant shared) file system:
``rename`` atomically replaces a file or moves a directory, ``link`` atomically creates a
name that must not exist yet.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import re
import shutil
import socket
import uuid
from pathlib import Path

__all__ = [
    "DISK_FULL_ENV",
    "atomic_write",
    "fault_disk_full",
    "fsync_dir",
    "fsync_tree",
    "host_id",
    "is_orphan",
    "pid_alive",
    "publish_exclusive",
    "remove_orphans",
    "tmp_name",
]

_OWNER = re.compile(r"(\d+)-[0-9a-f]{12}-([0-9a-f]{8})(?:\.[A-Za-z0-9.]*)?$")


DISK_FULL_ENV = "HDP_FAULT_DISK_FULL"
"""Fault hook of the tests: ``HDP_FAULT_DISK_FULL=ledger`` (or ``output``) makes writes there
fail as on a full disk (SQLite through ``max_page_count``: its real "database or disk is
full" error; files with ``ENOSPC``). Unset, this is a no-op."""


def fault_disk_full(where: str) -> None:
    """Raise ``OSError(ENOSPC)`` if the disk-full fault hook names ``where`` (test hook)."""
    if os.environ.get(DISK_FULL_ENV) == where:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def host_id() -> str:
    """This machine's name (recorded in lock files for people; never trusted for ownership)."""
    return socket.gethostname()


@functools.cache
def pid_namespace() -> str:
    """The identity of this process's PID namespace: host name, boot id and the inode of
    ``/proc/self/ns/pid``. Two processes can compare PIDs only when these are equal (two
    containers with the same host name, or ``unshare --pid``, have different namespaces)."""
    parts = [host_id()]
    for probe in ("/proc/sys/kernel/random/boot_id",):
        with contextlib.suppress(OSError):
            parts.append(Path(probe).read_text().strip())
    try:
        parts.append(str(os.stat("/proc/self/ns/pid").st_ino))
    except OSError:
        parts.append("no-pid-namespace-id")
    return "/".join(parts)


def _host_tag() -> str:
    # design-ok: host name, boot id and namespace inode, no data
    return hashlib.sha256(pid_namespace().encode()).hexdigest()[:8]  # design-ok: no data


def tmp_name(prefix: str = "") -> str:
    """A unique name that records its owner: ``<prefix><pid>-<random>-<namespace tag>``."""
    return f"{prefix}{os.getpid()}-{uuid.uuid4().hex[:12]}-{_host_tag()}"


def same_namespace_dead(pid: int, namespace: str) -> bool:
    """True only if process ``pid`` of PID namespace ``namespace`` provably no longer exists:
    the namespace is this process's own and no process has that id. Anything else (another
    host, container or namespace, or a live process) is False: its liveness is unknowable."""
    return namespace == pid_namespace() and pid != os.getpid() and not pid_alive(pid)


def is_orphan(name: str) -> bool:
    """True for a :func:`tmp_name` (optionally + extension) whose process provably died: it
    ran in this PID namespace (same tag) and its PID is gone."""
    m = _OWNER.search(name)
    if m is None or m.group(2) != _host_tag():
        return False
    pid = int(m.group(1))
    return pid != os.getpid() and not pid_alive(pid)


def remove_orphans(directory: Path, keep: set[str] | frozenset[str] = frozenset()) -> int:
    """Delete the entries of ``directory`` left by dead processes of this host (not in
    ``keep``); returns how many were removed."""
    if not directory.is_dir():
        return 0
    removed = 0
    for entry in directory.iterdir():
        if entry.name in keep or not is_orphan(entry.name):
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
        removed += 1
    return removed


def pid_alive(pid: int) -> bool:
    """True when a process with id ``pid`` exists on this host."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fsync_dir(path: Path) -> None:
    """Flush a directory entry (makes a rename or link durable); no-op where unsupported."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: Path) -> None:
    """fsync every file and directory below ``path`` (before publishing it by rename)."""
    for root, _dirs, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(root))


def _write_synced(path: Path, data: bytes, mode: int = 0o666) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically: readers see the old or the new file whole."""
    tmp = path.with_name(tmp_name(f".{path.name}."))
    try:
        _write_synced(tmp, data)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    fsync_dir(path.parent)


def publish_exclusive(path: Path, data: bytes, tmp_dir: Path, mode: int = 0o666) -> bool:
    """Create ``path`` with ``data`` atomically, only if it does not exist yet.

    Written to a temporary file first and published with ``link`` (which fails if the name
    exists), so the file appears complete or not at all and two writers cannot both win.
    ``mode`` is the new file's permission bits (before the umask), e.g. ``0o600`` for a
    secret.

    Returns:
        True if this call created ``path``; False if it already existed.
    """
    tmp_dir.mkdir(parents=True, exist_ok=True)
    tmp = tmp_dir / tmp_name("excl-")
    _write_synced(tmp, data, mode)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    fsync_dir(path.parent)
    return True
