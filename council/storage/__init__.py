"""council's data: the Store protocol, its SQLite and PostgreSQL backends, migrations and ownership.

Every SQL statement, row shape and connection lives in this package; the rest of
council calls the named operations of :class:`Store`. Its modules:

- the face: ``protocol`` (the ``Store`` protocol), ``data`` (the plain data crossing it),
  ``cost`` (the spend-cap ledger, the cache's replies and the rounds' journal over ``Store``),
  ``location`` (which store ``COUNCIL_DATABASE_URL`` names), ``copying`` (``council store copy``);
- one store over a dialect: ``sql_store`` (``SQLStore``: every operation both databases run,
  each statement written once), ``dialect`` (what differs between the databases),
  ``connection`` (what the statement modules run on);
- the backends: ``sqlite_store`` with ``sqlite`` (the one import of sqlite-utils),
  ``opening``, ``migrations``, ``checkpoints``, ``second_reader``; ``postgres`` with
  ``postgres_connection`` (its connection adapter), ``postgres_schema`` and ``postgres_comparisons``;
- the statement modules (functions over a ``connection.Backend``): ``judgments``, ``queue``,
  ``budgets``, ``call_cache``, ``provider_batches``, ``pages``, ``events``, ``comparisons``,
  ``bias_sums``, ``bias_summaries``, ``bias_summary_rows``, ``bias_rows``, ``rate_limits``,
  ``ownership``, ``calibration_maps``, ``reviewer_agreement``;
- shared machinery: ``group_commit`` (the call log's and events' group commit), ``retries``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from council.storage.copying import TableCopy
from council.storage.cost import StoreBatchJournal, StoreLedger, StoreReplies, batch_key
from council.storage.data import BiasQuery, BiasSums, ComparisonData
from council.storage.judgments import JudgmentSave
from council.storage.location import StoreLocation
from council.storage.protocol import Store
from council.storage.sqlite_store import SQLiteStore

__all__ = [
    "BiasQuery",
    "BiasSums",
    "ComparisonData",
    "JudgmentSave",
    "SQLiteStore",
    "Store",
    "StoreBatchJournal",
    "StoreLedger",
    "StoreReplies",
    "batch_key",
    "memory_store",
    "copy_into",
    "open_location",
    "open_store",
    "using_store",
]


def open_store(path: Path | str | None = None) -> Store:
    """The database at ``path``, else the store ``COUNCIL_DATABASE_URL`` names (a SQLite file
    or PostgreSQL; council.storage.location), else ``$COUNCIL_HOME/council.db``."""
    if path is not None:
        return SQLiteStore.open(path)
    from council.storage.location import configured

    return open_location(configured())


def open_location(location: StoreLocation) -> Store:
    """The store at a parsed location; psycopg is imported only for PostgreSQL."""
    if location.kind == "postgresql":
        from council.storage.postgres import PostgresStore

        return PostgresStore.open(location.url or "")
    return SQLiteStore.open(location.path)


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


def copy_into(
    to_url: str, from_url: str | None = None, *, progress: Callable[[TableCopy], None] | None = None
) -> tuple[list[TableCopy], str, str]:
    """``council store copy``: every row of the store ``from_url`` (default: the configured
    one) into the store ``to_url``, resumably (council.storage.copying). Returns the per-table
    counts and the two stores as shown to people (no password)."""
    from council.storage import location
    from council.storage.copying import copy_store

    target_location = location.parse(to_url, source="--to")
    source_location = location.parse(from_url, source="--from") if from_url else location.configured()
    source = open_location(source_location)
    try:
        target = open_location(target_location)
        try:
            return copy_store(source, target, progress=progress), source_location.display, target_location.display
        finally:
            target.close()
    finally:
        source.close()
