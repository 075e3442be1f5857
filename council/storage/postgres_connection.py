"""The PostgreSQL connection adapter: psycopg 3 connections as the statement modules run them.

:class:`PostgresConnection` is a :class:`council.storage.connection.Connection` over a psycopg
connection (:class:`PooledConnection`: reads outside a transaction, each on a pooled one). Its
:class:`Statements` give psycopg each statement as the dialect words it
(council.storage.dialect: ``?`` parameters as ``%s``, converted once per statement text), the
values as the SQLite store keeps them (lists and dicts as JSON text, booleans as 0/1). Also here:
the cursor every connection uses (a text holding U+0000, which PostgreSQL cannot store, sent again
with U+FFFD in its place) and the pipelined transaction (BEGIN, the statements and COMMIT in one
round trip).

psycopg is imported only when a PostgreSQL store is used (council.storage.postgres).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from council._util.logs import get_logger
from council.errors import PrerequisiteError
from council.storage.dialect import POSTGRES

log = get_logger("council.storage")


def psycopg_module() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise PrerequisiteError(
            "COUNCIL_DATABASE_URL names PostgreSQL but psycopg is not installed "
            "(pip install 'council-orchestrator[postgres]')"
        ) from None
    return psycopg


_PLAIN = frozenset({str, int, float, type(None)})


def stored_value(value: Any) -> Any:
    # What the SQLite store keeps for these types: lists and dicts as JSON text, booleans as 0/1.
    if type(value) in _PLAIN:  # most values: nothing to do (checked first, for speed)
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=repr, ensure_ascii=False)
    return value


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _nul_refused(exc: Exception) -> bool:
    # psycopg's own words, said before the statement is sent (no SQLSTATE: the server never saw it).
    return getattr(exc, "sqlstate", None) is None and "NUL (0x00)" in str(exc)


def _without_nul(params: Any) -> Any:
    def clean(value: Any) -> Any:
        return value.replace("\x00", "\ufffd") if isinstance(value, str) else value

    if isinstance(params, Mapping):
        return {key: clean(value) for key, value in params.items()}
    return [clean(value) for value in params]


@functools.cache
def text_cursor() -> type:
    """The cursor of every pooled connection: a statement whose values hold U+0000, which
    psycopg refuses before sending it, is sent again with U+FFFD in its place (a warning said).
    Nothing is looked at unless psycopg refused something: no work added to other statements."""
    psycopg = psycopg_module()

    def told() -> None:
        log.warning("a text holding U+0000, which PostgreSQL cannot store, was given to it with U+FFFD instead")

    class _TextCopy:
        def __init__(self, copy: Any) -> None:
            self._copy = copy

        def write_row(self, row: Sequence[Any]) -> None:
            try:
                self._copy.write_row(row)  # a row refused whole: nothing of it in the buffer
            except psycopg.DataError as exc:
                if not _nul_refused(exc):
                    raise
                told()
                self._copy.write_row(_without_nul(row))

        def __getattr__(self, name: str) -> Any:
            return getattr(self._copy, name)

    class _TextCursor(psycopg.Cursor):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            try:
                return super().execute(query, params, **kwargs)
            except psycopg.DataError as exc:
                if params is None or not _nul_refused(exc):
                    raise
            told()
            return super().execute(query, _without_nul(params), **kwargs)

        def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
            rows = params_seq if isinstance(params_seq, Sequence) else list(params_seq)
            at = 0

            def counted() -> Iterator[Any]:
                # psycopg takes a row and sends it before it takes the next: the rows before
                # the one it refused (``at``) went, the rest go again.
                nonlocal at
                for row in rows:
                    yield row
                    at += 1

            try:
                return super().executemany(query, counted(), **kwargs)
            except psycopg.DataError as exc:
                if not _nul_refused(exc):
                    raise
            told()
            return super().executemany(query, [_without_nul(row) for row in rows[at:]], **kwargs)

        @contextmanager
        def copy(self, statement: Any, params: Any = None, **kwargs: Any) -> Iterator[Any]:
            with super().copy(statement, params, **kwargs) as copy:
                yield _TextCopy(copy)

    return _TextCursor


@contextmanager
def pipelined_transaction(conn: Any) -> Iterator[None]:
    """BEGIN, the block's statements and COMMIT in one pipeline, synced once on the way out.
    (psycopg's ``transaction()`` in a pipeline opens two pipelines of its own and syncs each
    as it leaves: three round trips where one does, each a wait for the interpreter lock on a
    busy server.) A statement refused, or an error in the block, leaves the transaction
    aborted or open: it is rolled back before the error goes on. A savepoint inside (a
    nested ``conn.transaction()``) still works: the connection is no longer idle once BEGIN
    is queued."""
    from psycopg.pq import TransactionStatus

    try:
        with conn.pipeline():
            conn.execute("BEGIN", prepare=False)  # nothing to gain from a prepared BEGIN or COMMIT
            yield
            conn.execute("COMMIT", prepare=False)
    except BaseException:
        if not conn.closed and conn.info.transaction_status != TransactionStatus.IDLE:
            try:
                conn.rollback()
            except psycopg_module().Error:  # a broken connection: the pool discards it, the server rolls back
                pass
        raise


class Statements:
    """A psycopg connection running the statement modules' statements (``execute``,
    ``executemany``; ``?`` parameters, as the dialect gives them to psycopg), so
    council.storage.judgments writes and reads both backends with one set of statements. (A row
    or value the database refuses becomes council's ``StoreRefused`` where the store hands out
    the connection, ``PostgresStore.connection``: in a pipeline it is known only at the sync.)"""

    dialect = POSTGRES

    def __init__(self, conn: Any) -> None:
        self.raw = conn

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return self.raw.info.transaction_status != TransactionStatus.IDLE

    def execute(self, sql: str, params: Sequence[Any] = (), *, dicts: bool = False) -> Any:
        statement = POSTGRES.statement(sql)
        return self._run(lambda cur: cur.execute(statement, [stored_value(v) for v in params]), dicts)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        statement = POSTGRES.statement(sql)
        values = [[stored_value(v) for v in r] for r in rows]
        if len(values) == 1:  # one row: no pipeline to open and sync
            return self._run(lambda cur: cur.execute(statement, values[0]))
        return self._run(lambda cur: cur.executemany(statement, values))

    def _run(self, action: Any, dicts: bool = False) -> Any:
        from psycopg.rows import dict_row, tuple_row

        cur = self.raw.cursor(row_factory=dict_row if dicts else tuple_row)
        action(cur)
        return cur


class PostgresConnection:
    """A psycopg connection as a :class:`council.storage.connection.Connection`, which the statement
    modules run on (SQLite's is sqlite-utils' ``Database``)."""

    def __init__(self, conn: Any) -> None:
        self.conn = Statements(conn)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(sql, params)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return self.conn.execute(sql, params, dicts=True).fetchall()

    def pipeline(self) -> Any:
        """The block's statements sent without waiting for each one's result; a read inside, or
        the block's end, collects them (a statement's count is known from then on)."""
        return self.conn.raw.pipeline()


class FetchedRows(list):  # type: ignore[type-arg]
    """Rows already fetched (the connection went back to the pool), read as a cursor is."""

    def fetchall(self) -> list[Any]:
        return list(self)

    def fetchone(self) -> Any:
        return self[0] if self else None


class PooledConnection:
    """Reads outside a transaction, each on a connection from the pool."""

    def __init__(self, store: Any) -> None:  # a PostgresStore: its pooled connection()
        self.store = store

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self.store.connection() as conn:
            return PostgresConnection(conn).query(sql, params)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> FetchedRows:
        with self.store.connection() as conn:
            cur = PostgresConnection(conn).execute(sql, params)
            return FetchedRows(cur.fetchall() if cur.description else [])

    @property
    def conn(self) -> PooledConnection:
        return self  # reads through ``db.conn.execute`` too, each on a pooled connection
