"""Who is running what, so that a crash never leaves work ``running`` forever.

Each process that writes sessions or calls holds a lease in the database's lock
directory (``council.db-locks/``): a file ``owner-<id>.lock`` with an exclusive
``flock``. The kernel releases the lock when the process ends, however it ends
(``kill -9`` included), so another process can tell a live owner (the lock is held)
from a dead one (the lock can be taken, or the file is gone) without trusting pids,
which are reused and differ between containers sharing a volume. Rows record the
lease id with the pid and host, for people.

A batch is shared by its workers through the queue (council.storage.queue), not a lock.

On systems without ``fcntl`` nothing is ever taken to be dead (orphans are not
recovered, but live work is never marked interrupted).
"""

from __future__ import annotations

import atexit
import os
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]


def lock_dir(database: Path) -> Path:
    return database.with_name(database.name + "-locks")


def _try_lock(fd: int) -> bool:
    if fcntl is None:  # pragma: no cover
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _make_dir(directory: Path) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)


@dataclass
class Lease:
    """This process's lease on one lock directory (held until the process ends)."""

    id: str
    pid: int
    host: str
    path: Path
    fd: int

    def release(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
            os.close(self.fd)
        except OSError:
            pass


_leases: dict[tuple[int, Path], Lease] = {}


def process_lease(directory: Path) -> Lease:
    """This process's lease in ``directory``, taken on first use."""
    key = (os.getpid(), directory)
    lease = _leases.get(key)
    if lease is not None:
        return lease
    _make_dir(directory)
    owner = uuid.uuid4().hex
    # Locked under a temporary name, then renamed: a file named owner-*.lock is always
    # locked while its owner lives, so a checker can never take a live owner's lock.
    tmp = directory / f".owner-{owner}.tmp"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
    path = directory / f"owner-{owner}.lock"
    os.replace(tmp, path)
    lease = Lease(id=owner, pid=os.getpid(), host=socket.gethostname(), path=path, fd=fd)
    _leases[key] = lease
    atexit.register(lease.release)
    return lease


def own_lease_ids() -> set[str]:
    pid = os.getpid()
    return {lease.id for (p, _), lease in _leases.items() if p == pid}


def dead_owners(directory: Path, owners: Iterable[str]) -> list[str]:
    """Those of ``owners`` whose process has ended (their lease files are removed)."""
    if fcntl is None:  # pragma: no cover
        return []
    mine = own_lease_ids()
    dead = []
    for owner in set(owners) - mine:
        path = directory / f"owner-{owner}.lock"
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            dead.append(owner)  # the file exists for as long as its owner lives
            continue
        try:
            if _try_lock(fd):
                dead.append(owner)
                path.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return sorted(dead)
