"""Writing the files users name (``-o FILE``): whole or not at all, and one line when it fails.

A regular file is written beside itself and renamed over the old one, so a failure (a full
disk, an interrupted write) leaves the earlier file as it was. A path that exists and is not
a regular file (``/dev/stdout``, a FIFO, ``/dev/full``) is written in place: renaming over it
would replace the device. A directory that does not exist is a usage error (exit 2) unless
the caller creates it; a write the machine refuses is an :class:`EnvironmentFailure` (exit 1).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from council.errors import EnvironmentFailure, InputError


def write_output(path: str | Path, chunks: str | Iterable[str], *, make_parents: bool = False) -> None:
    """``chunks`` (text) into ``path``, replacing it atomically when it is a regular file."""
    path = Path(path)
    if isinstance(chunks, str):
        chunks = [chunks]
    if make_parents:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EnvironmentFailure(f"cannot create the directory of {path}: {exc.strerror}") from None
    elif not path.parent.is_dir():
        raise InputError(f"cannot write {path}: the directory {path.parent} does not exist")
    in_place = path.exists() and not path.is_file()
    target = path if in_place else path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(target, "w", encoding="utf-8") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
        if not in_place:
            os.replace(target, path)
    except OSError as exc:
        if not in_place:
            target.unlink(missing_ok=True)
        raise EnvironmentFailure(f"cannot write {path}: {(exc.strerror or str(exc)).lower()}") from None
