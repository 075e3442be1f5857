"""The store's shape: one set of operations over a dialect, no import circle, council's own errors."""

from __future__ import annotations

import ast
import inspect
import sqlite3
from pathlib import Path

import pytest

import council.storage

STORAGE = Path(council.storage.__file__).parent


def _imports_within_storage() -> dict[str, set[str]]:
    """Each storage module's imports of the others, those made only for type checkers included."""
    modules = {path.stem for path in STORAGE.glob("*.py")} - {"__init__"}
    graph: dict[str, set[str]] = {}
    for name in modules:
        found: set[str] = set()
        for node in ast.walk(ast.parse((STORAGE / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "council.storage":
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("council.storage."):
                found.add(node.module.split(".")[2])
        graph[name] = found & modules
    return graph


def test_no_module_of_storage_imports_one_that_imports_it_back():
    graph = _imports_within_storage()
    circles = []

    def visit(name: str, path: list[str]) -> None:
        for dep in sorted(graph[name]):
            if dep in path:
                circles.append([*path[path.index(dep) :], dep])
            elif not circles:
                visit(dep, [*path, dep])

    for name in sorted(graph):
        visit(name, [name])
    assert circles == []


def test_neither_backend_runs_a_method_of_the_other():
    from council.storage.postgres import PostgresStore
    from council.storage.sqlite_store import SQLiteStore

    for store, other in ((PostgresStore, "council.storage.sqlite_store"), (SQLiteStore, "council.storage.postgres")):
        borrowed = [
            name for name, value in inspect.getmembers(store) if inspect.isfunction(value) and value.__module__ == other
        ]
        assert borrowed == [], f"{store.__name__} runs {other}'s {borrowed}"


def test_a_row_postgresql_refuses_is_councils_error_not_sqlites(postgres_url):
    from council.errors import StoreRefused
    from council.storage.postgres import PostgresStore

    store = PostgresStore.open(postgres_url)
    try:
        store.swap_setting("k", "v")
        with pytest.raises(StoreRefused) as raised, store.immediate() as db:
            db.execute("INSERT INTO settings (key, value) VALUES (?, ?)", ["k", "again"])
        assert not isinstance(raised.value, sqlite3.Error)
    finally:
        store.close()
