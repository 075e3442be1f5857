"""Writing the files users name (``-o FILE``): whole or not at all, and one line when it fails.

Every command's ``-o`` (through ``council.cli.common``) and the batch results file go
through :func:`open_output`. A regular file is written beside itself under a temporary name
and renamed over the target only when the writing succeeded, so a failure (a full disk, an
interrupted command) leaves the old file as it was (it keeps its mode; a new file gets the
usual one). Devices and pipes (``/dev/stdout``, ``/dev/full``) are written in place: renaming
over them would replace the device. A file that cannot be written is a ``UsageError`` naming
it (one line, exit 2); a SQLite database and its ``-wal``, ``-shm`` and ``-journal`` files
(council's store, wherever ``COUNCIL_DATABASE_URL`` puts it), a directory and a file the
command reads (under any name, through any link) are never a target: :func:`check_output`,
which a command that reads files calls with them before it starts work.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from council.errors import UsageError


def check_output(path: str | None, inputs: Iterable[str | Path] = ()) -> None:
    """A one-line ``UsageError`` for a target that must not be written: an empty name, a
    directory, a SQLite database (council's store), or one of ``inputs`` (the files the command
    reads, also through a link)."""
    if path is None or path == "-":
        return
    if not path.strip():
        raise UsageError("the output file name is empty")
    if os.path.isdir(path):
        raise UsageError(f"cannot write {path}: it is a directory")
    if _is_a_database(Path(path)):
        raise UsageError(f"refusing to write {path}: it is a SQLite database or one of its files (council's store?)")
    for source in inputs:
        with suppress(OSError):
            if os.path.samefile(path, source):
                raise UsageError(f"refusing to write {path}: the command reads it (name another output file)")


@contextmanager
def open_output(path: str | None, *, make_parents: bool = False) -> Iterator[IO[str]]:
    """The text file ``path`` names (stdout for none or '-'), written whole or not at all.
    ``make_parents``: create its directory first (the batch results file)."""
    check_output(path)
    if path is None or path == "-":
        yield sys.stdout
        return
    target = Path(path)
    try:
        if make_parents:
            target.parent.mkdir(parents=True, exist_ok=True)
        mode = target.stat().st_mode if target.exists() else None
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    if mode is not None and not stat.S_ISREG(mode):
        try:
            with open(target, "w", encoding="utf-8", newline="") as fh:
                yield fh
        except OSError as exc:
            raise _cannot_write(path, exc) if _writing_failed(exc) else exc from None
        return
    try:
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            yield fh
        os.chmod(temporary, stat.S_IMODE(mode) if mode is not None else 0o666 & ~_umask())
        os.replace(temporary, target)
    except BaseException as exc:
        with suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError) and _writing_failed(exc):
            raise _cannot_write(path, exc) from None
        raise


#: How a SQLite database, its write-ahead log and its rollback journal begin.
_SQLITE_HEADERS = (b"SQLite format 3\x00", b"\x37\x7f\x06\x82", b"\x37\x7f\x06\x83", bytes.fromhex("d9d505f920a163d7"))
_SIDE_FILES = ("-wal", "-shm", "-journal")


def _is_a_database(target: Path) -> bool:
    """Whether ``target`` (through any link) is a SQLite database, or the ``-wal``, ``-shm`` or
    ``-journal`` file beside one (there or not yet): council's store wherever
    ``COUNCIL_DATABASE_URL`` puts it, found by what the file is rather than by configuration."""
    real = os.path.realpath(target)
    beside = [real[: -len(suffix)] for suffix in _SIDE_FILES if real.endswith(suffix)]
    return any(_begins_like_sqlite(name) for name in (real, *beside))


def _begins_like_sqlite(name: str) -> bool:
    try:
        if not stat.S_ISREG(os.stat(name).st_mode):  # a pipe or a device is never opened to be read
            return False
        with open(name, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return False
    return head.startswith(_SQLITE_HEADERS)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _writing_failed(exc: OSError) -> bool:
    # Failures of the file being written (a full or read-only disk), not of what the command reads.
    return exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO)


def _cannot_write(path: str, exc: OSError) -> Exception:
    return UsageError(f"cannot write {path}: {exc.strerror or exc}")
