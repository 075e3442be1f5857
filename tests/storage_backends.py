"""The storage backends a test run has, for the contract tests (tests/storage/test_storage_contract.py).

A backend is a name and a factory: ``factory(tmp_path, request)`` returns a fresh, empty store
that implements ``council.storage.Store`` (or calls ``pytest.skip`` when its server is absent:
locally only, in CI a missing PostgreSQL fails). Registering one is one line:
``register_backend("name", factory)`` below.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from council.storage import SQLiteStore, Store

BackendFactory = Callable[[Path, Any], Store]
BACKENDS: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    BACKENDS[name] = factory


def _postgres(tmp: Path, request: Any) -> Store:
    from council.storage.postgres import PostgresStore

    # postgres_url (tests/conftest.py): a fresh database on a real server, dropped after the test.
    return PostgresStore.open(request.getfixturevalue("postgres_url"))


register_backend("sqlite", lambda tmp, request: SQLiteStore.open(tmp / "contract.db"))
register_backend("postgresql", _postgres)
