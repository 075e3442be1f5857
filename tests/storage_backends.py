"""The storage backends a test run has, for the contract tests (tests/storage/test_storage_contract.py).

A backend is a name and a factory: ``factory(tmp_path)`` returns a fresh, empty store that
implements ``council.storage.Store`` (or calls ``pytest.skip`` when its server is absent).
Registering one is one line: ``register_backend("name", factory)`` below.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from council.storage import SQLiteStore, Store

BackendFactory = Callable[[Path], Store]
BACKENDS: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    BACKENDS[name] = factory


register_backend("sqlite", lambda tmp: SQLiteStore.open(tmp / "contract.db"))
