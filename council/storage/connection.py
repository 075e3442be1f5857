"""What the statement modules run on: a connection, and the store's transactions around it.

The statement modules (judgments, queue, budgets, call_cache, pages, provider_batches,
comparisons, bias_sums, events, ownership) are functions over a :class:`Backend`: they import
no store, so no store imports them back (one direction: a store binds their functions as its
operations, council.storage.sql_store). Their statements take ``?`` parameters and the words
both databases take; what differs is the backend's :class:`~council.storage.dialect.Dialect`.

The connection of each backend:

- SQLite: :class:`council.storage.sqlite.Database` (sqlite-utils' Database; ``conn``: Python's
  sqlite3 connection);
- PostgreSQL: the adapter in council.storage.postgres over a psycopg connection, which gives the
  dialect's statements to psycopg and raises council's errors (``StoreRefused``).

A third database is a dialect and an adapter that gives these calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from council.storage.dialect import Dialect

__all__ = ["Backend", "Connection", "Rows", "Statements"]


class Rows(Protocol):
    """A statement's result: its rows (tuples) and how many it changed."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Statements(Protocol):
    """Statements run as they are given: one, or one for each row of parameters."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Rows: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]], /) -> Any: ...


class Connection(Protocol):
    """A connection as the statement modules use it: ``execute`` (rows as tuples), ``query``
    (rows as dicts) and ``conn``, the statements run as they are given (bulk writes)."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Rows: ...

    def query(self, sql: str, params: Sequence[Any] = ..., /) -> Iterable[dict[str, Any]]: ...

    @property
    def conn(self) -> Statements: ...


class Backend(Protocol):
    """What a statement module asks of the store it runs on."""

    dialect: Dialect
    #: Whether operations may run on several threads at once (council.storage.protocol.Store).
    threadsafe: bool
    #: Records without a score were loaded (from files): the bias sums read them too.
    _unscored: bool

    @property
    def db(self) -> Connection:
        """Reads outside a write transaction (inside one: the transaction's connection)."""

    def immediate(self) -> AbstractContextManager[Any]:
        """A write transaction (its lock taken up front on SQLite); its connection is given."""

    def clock(self) -> float:
        """Now, in epoch seconds, on the clock every process sharing the store reads."""

    def _owner(self) -> dict[str, Any]:
        """This process's lease (``owner``, ``owner_pid``, ``owner_host``), for rows of unfinished work."""

    def calls_to_record(self, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The call-log rows of ``rows`` not already on record."""

    def write_calls(self, rows: Sequence[dict[str, Any]]) -> None:
        """Write call-log rows inside the caller's transaction."""

    def claim_items(
        self, worker: str, *, batch_id: str | None = None, limit: int = 1, lease_seconds: float
    ) -> list[dict[str, Any]]:
        """Claim queued items for ``worker`` (council.storage.queue)."""

    def claim_within(
        self, db: Any, worker: str, *, batch_id: str | None = None, limit: int = 1, lease_seconds: float
    ) -> list[dict[str, Any]]:
        """``claim_items`` inside the caller's write transaction (``db``)."""
