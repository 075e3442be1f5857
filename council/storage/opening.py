"""Opening council.db on a machine that may refuse: checks made before anything is written.

* A file that is not a SQLite database (corrupt, or something else) and a SQLite database
  of another program (tables, but no council migrations) are refused in one line and left
  exactly as they were: council never migrates a database it did not create.
* The schema version (``PRAGMA user_version``: the number of migrations applied) is stored
  on every open that migrates; a database from a newer council (a higher version, or
  migrations this version does not know) is refused, naming both versions, before an older
  council could misread or rewrite it.
* A database on a read-only file system, or one we may read but not write, is opened read-
  only: read-only commands work; the first write is one line (``EnvironmentFailure``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from council.errors import EnvironmentFailure
from council.storage.migrations import migrations
from council.storage.sqlite import Database

MIGRATIONS_TABLE = "_sqlite_migrations"


def known_migrations() -> tuple[str, ...]:
    """Every migration this version knows, in order (asked when used: all are registered)."""
    return tuple(m.name for m in migrations.pending(Database(memory=True)))


def schema_version() -> int:
    """This version's schema version: the number of migrations it knows."""
    return len(known_migrations())


def not_council(path: Path, why: str) -> EnvironmentFailure:
    return EnvironmentFailure(
        f"{path} is not a council database ({why}); it was left as it is: move it away, or set COUNCIL_HOME"
    )


def connect_checked(
    path: Path, connect: Callable[..., sqlite3.Connection], *, read_only: bool
) -> tuple[sqlite3.Connection, EnvironmentFailure | None]:
    """A connection to ``path`` that :func:`check_database` accepted, and, when it is read-
    only (asked for, or a full disk: reads still work then), the error any write will raise.

    Read-only: a WAL database whose directory is read-only cannot be opened with ``mode=ro``
    once its -shm file is gone; ``immutable=1`` then reads it as it is (safe: nobody can
    write on a read-only file system)."""
    uri = f"file:{quote(str(path.absolute()))}"
    attempts = [{"path": f"{uri}?mode=ro", "uri": True}, {"path": f"{uri}?immutable=1", "uri": True}]
    for attempt in attempts if read_only else [{"path": path}]:
        conn = None
        try:
            conn = connect(**attempt)
            check_database(conn, path)
            return conn, write_refused(sqlite3.OperationalError("readonly"), path) if read_only else None
        except sqlite3.OperationalError as exc:
            if conn is not None:
                conn.close()
            if not read_only:
                refused = write_refused(exc, path)
                if refused is None:
                    raise
                try:
                    return connect_checked(path, connect, read_only=True)[0], refused
                except EnvironmentFailure:
                    raise refused from None
            last = exc
        except sqlite3.DatabaseError as exc:  # not a database at all
            if conn is not None:
                conn.close()
            raise not_council(path, str(exc)) from None
        except BaseException:
            if conn is not None:
                conn.close()
            raise
    raise EnvironmentFailure(f"cannot open the database {path} read-only: {last}")


def check_database(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a file that is not council's database, or that a newer council wrote."""
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        applied = (
            [r[0] for r in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE} WHERE migration_set = 'council'")]
            if MIGRATIONS_TABLE in tables
            else []
        )
    except sqlite3.DatabaseError as exc:
        raise not_council(path, str(exc)) from None
    own = tables - {MIGRATIONS_TABLE}
    if own and not applied:
        listed = ", ".join(sorted(own)[:5]) + (", …" if len(own) > 5 else "")
        raise not_council(path, f"it holds other tables: {listed}")
    known = known_migrations()
    unknown = [name for name in applied if name not in known]
    if version > len(known) or unknown:
        theirs = max(version, len(applied))
        raise EnvironmentFailure(
            f"{path} has schema version {theirs}, written by a newer council; this council reads schema "
            f"version {len(known)} and older: upgrade council to use this database"
        )


def set_schema_version(conn: sqlite3.Connection) -> None:
    version = schema_version()
    if conn.execute("PRAGMA user_version").fetchone()[0] != version:
        conn.execute(f"PRAGMA user_version = {version}")


def write_refused(exc: sqlite3.OperationalError, path: Path | None) -> EnvironmentFailure | None:
    """The one line for a write the machine refused (read-only, disk full), or None."""
    message = str(exc).lower()
    where = f"the database {path}" if path is not None else "the database"
    if "readonly" in message or "read-only" in message:
        return EnvironmentFailure(f"cannot write to {where}: it is read-only (nothing was changed)")
    if "disk is full" in message:
        return EnvironmentFailure(f"cannot write to {where}: the disk is full (nothing was changed)")
    if "disk i/o error" in message:
        return EnvironmentFailure(f"cannot write to {where}: disk I/O error (is the disk full or failing?)")
    return None
