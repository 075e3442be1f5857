"""Persistence: council.db (SQLite, WAL) behind one Store class."""

from council.storage.store import Store, council_home, utc_now

__all__ = ["Store", "council_home", "utc_now"]
