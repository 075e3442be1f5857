"""``council store copy --to URL``: every row of one store into another, resumably.

Tables are copied parents first, each in primary-key order, a chunk per transaction, with
``ON CONFLICT DO NOTHING``: a copy that stops (Ctrl-C, a lost connection) is run again and
skips what is already there; a row is never written twice and never changed. Integer ids
are kept (calls, bias records and judgment passes keep their order), and PostgreSQL's
identity counters are moved past them so new rows get new ids. Leases, rate budgets and the
migrations' own table are the target's, not copied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from council.errors import UsageError

# (table, primary key), parents before children.
TABLES: list[tuple[str, tuple[str, ...]]] = [
    ("sessions", ("id",)),
    ("answers", ("session_id", "member")),
    ("reviews", ("session_id", "reviewer")),
    ("bias_records", ("id",)),
    ("bias_records_invalid", ("id",)),
    ("calls", ("id",)),
    ("judgment_runs", ("id",)),
    ("judgments", ("id",)),
    ("batches", ("id",)),
    ("batch_items", ("batch_id", "item_id")),
    ("batch_queue", ("batch_id", "item_id")),
    ("calibration_maps", ("name",)),
    ("round_answers", ("session_id", "round", "member")),
    ("round_reviews", ("session_id", "round", "reviewer")),
    ("reviewer_agreement", ("session_id", "reviewer", "other")),
]
_IDENTITIES = ("bias_records", "calls", "judgments")
CHUNK = 1000


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass
class TableCopy:
    table: str
    source_rows: int
    copied: int

    @property
    def already_there(self) -> int:
        return self.source_rows - self.copied


class _Side:
    """One store's raw rows (SQLite or PostgreSQL), for copying only."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.postgres = getattr(store, "kind", "sqlite") == "postgresql"
        self.mark = "%s" if self.postgres else "?"

    @property
    def name(self) -> str:
        return self.store.url if self.postgres else str(self.store.path)

    def _run(self, sql: str, params: Sequence[Any] = (), *, many: Sequence[Sequence[Any]] | None = None) -> Any:
        if self.postgres:
            from psycopg.rows import tuple_row

            with self.store.connection() as conn:
                cur = conn.cursor(row_factory=tuple_row)
                if many is not None:
                    with conn.transaction():
                        cur.executemany(sql, many)
                    return cur.rowcount
                return cur.execute(sql, list(params)).fetchall()
        conn = self.store.db.conn
        if many is not None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                before = conn.total_changes
                conn.executemany(sql, many)
                changed = conn.total_changes - before
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return changed
        return conn.execute(sql, list(params)).fetchall()

    def columns(self, table: str) -> list[str]:
        if self.postgres:
            rows = self._run(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = %s ORDER BY ordinal_position",
                [table],
            )
            return [r[0] for r in rows]
        return [r[1] for r in self._run(f"PRAGMA table_info({_quote(table)})")]

    def count(self, table: str) -> int:
        return int(self._run(f"SELECT count(*) FROM {_quote(table)}")[0][0])

    def chunks(self, table: str, columns: list[str], key: tuple[str, ...]) -> Iterator[list[tuple[Any, ...]]]:
        """Every row in primary-key order (keyset pages: constant cost per page)."""
        names = ", ".join(map(_quote, columns))
        keys = ", ".join(map(_quote, key))
        at = [columns.index(k) for k in key]
        after: list[Any] | None = None
        while True:
            where = ""
            if after is not None:
                where = f" WHERE ({keys}) > ({', '.join(self.mark for _ in key)})"
            rows = self._run(f"SELECT {names} FROM {_quote(table)}{where} ORDER BY {keys} LIMIT {CHUNK}", after or [])
            if not rows:
                return
            yield [tuple(r) for r in rows]
            after = [rows[-1][i] for i in at]

    def insert(self, table: str, columns: list[str], key: tuple[str, ...], rows: list[tuple[Any, ...]]) -> int:
        sql = (
            f"INSERT INTO {_quote(table)} ({', '.join(map(_quote, columns))}) "
            f"VALUES ({', '.join(self.mark for _ in columns)}) ON CONFLICT ({', '.join(map(_quote, key))}) DO NOTHING"
        )
        return int(self._run(sql, many=rows))

    def rebuild_bias_summaries(self) -> None:
        """The report's summaries computed again from every record (the copy wrote plain rows)."""
        from council.storage.bias_summaries import rebuild_statements

        if self.postgres:
            with self.store.connection() as conn, conn.transaction():
                for statement in rebuild_statements(postgres=True):
                    conn.execute(statement)
            return
        conn = self.store.db.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in rebuild_statements(postgres=False):
                conn.execute(statement)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def advance_identities(self) -> None:
        if not self.postgres:
            return  # SQLite's next rowid is always past the largest one
        for table in _IDENTITIES:
            self._run(
                f"SELECT setval(pg_get_serial_sequence(%s, 'id'), "
                f"coalesce((SELECT max(id) FROM {_quote(table)}), 0) + 1, false)",
                [table],
            )


def copy_store(source: Any, target: Any, *, progress: Callable[[TableCopy], None] | None = None) -> list[TableCopy]:
    """Copy every table of ``source`` into ``target`` (both open stores); per-table counts."""
    src, dst = _Side(source), _Side(target)
    if src.postgres == dst.postgres and src.name == dst.name:
        raise UsageError("the target is the store being copied; give another --to")
    done = []
    for table, key in TABLES:
        wanted = set(dst.columns(table))
        columns = [c for c in src.columns(table) if c in wanted]
        missing = sorted(set(src.columns(table)) - wanted)
        if missing:
            raise UsageError(f"the target's {table} table has no column {missing[0]!r} (is it an older council?)")
        copied = 0
        for rows in src.chunks(table, columns, key):
            copied += dst.insert(table, columns, key, rows)
        result = TableCopy(table, src.count(table), copied)
        done.append(result)
        if progress is not None:
            progress(result)
    dst.advance_identities()
    dst.rebuild_bias_summaries()
    return done
