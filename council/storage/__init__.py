"""council's data: the Store protocol, its SQLite backend, migrations and ownership.

Every SQL statement, row shape and connection lives in this package; the rest of
council calls the named operations of :class:`Store`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from council.storage.cost import StoreBatchJournal, StoreLedger, StoreReplies, batch_key
from council.storage.data import BiasQuery, BiasSums, ComparisonData
from council.storage.protocol import Store
from council.storage.sqlite_store import SQLiteStore

__all__ = [
    "BiasQuery",
    "BiasSums",
    "ComparisonData",
    "SQLiteStore",
    "Store",
    "StoreBatchJournal",
    "StoreLedger",
    "StoreReplies",
    "batch_key",
    "memory_store",
    "open_store",
    "using_store",
]


def open_store(path: Path | str | None = None) -> Store:
    """The store of this installation (``$COUNCIL_HOME/council.db``), or the database at ``path``."""
    return SQLiteStore.open(path)


def memory_store() -> Store:
    """A temporary store in memory (records loaded from files; tests)."""
    return SQLiteStore.memory()


@contextmanager
def using_store(store: Store | bool | None) -> Iterator[Store | None]:
    """The one ownership rule: ``True`` opens the default store for the block and closes it
    after; a store passed in is used as is and left open (its opener closes it); ``None`` or
    ``False``: no store."""
    if store is True:
        opened = open_store()
        try:
            yield opened
        finally:
            opened.close()
        return
    yield store or None
