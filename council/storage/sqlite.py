"""sqlite-utils, imported without pandas and numpy, its Database without plugins.

sqlite-utils imports pandas and numpy when they are installed, only to map their scalar types
to column types on insert. council never inserts either, and the two are slow to import, a cost
in every command's start-up (``benchmarks/bench_startup.py``), so they are refused to
sqlite-utils' import (an ``ImportError`` in the importing thread, as if they were not
installed: :mod:`council._util.refused_imports`); another thread's import of them, and any
later one, works as usual.
Its pattern for ``CREATE VIRTUAL TABLE`` is compiled at its first use instead of at import
(:class:`DeferredPattern`). Every council module imports sqlite-utils from here.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from council._util.refused_imports import refused

_re_compile = re.compile


class DeferredPattern:
    """A regular expression compiled when first used. sqlite-utils compiles its pattern for a
    virtual table's schema at import: case-insensitive over ``\\u0080-\\uffff``, it is slow
    to compile, a cost in every command's start-up (``benchmarks/bench_startup.py``), and council
    reads no virtual table's schema."""

    def __init__(self, pattern: str, flags: int) -> None:
        self._source, self._flags = pattern, flags
        self._compiled: re.Pattern[str] | None = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            with self._lock:
                if self._compiled is None:
                    self._compiled = _re_compile(self._source, self._flags)
        return getattr(self._compiled, name)


def _compile_deferring(pattern: Any, flags: int = 0) -> Any:
    if isinstance(pattern, str) and "CREATE\\s+VIRTUAL\\s+TABLE" in pattern:
        return DeferredPattern(pattern, flags)
    return _re_compile(pattern, flags)


re.compile = _compile_deferring  # type: ignore[assignment]  # for the import only: any caller's other patterns as ever
try:
    with refused("pandas", "numpy", why="sqlite-utils' import (council.storage.sqlite)"):
        import sqlite_utils
        from sqlite_utils.migrations import Migrations
finally:
    re.compile = _re_compile


class Database(sqlite_utils.Database):
    """sqlite-utils' Database, running no sqlite-utils plugins on council's connections: they
    are council's own, and finding plugins reads every installed package's entry points, a cost
    in every command's start (``benchmarks/bench_startup.py``)."""

    def __init__(self, *args: Any, execute_plugins: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, execute_plugins=execute_plugins, **kwargs)


__all__ = ["Database", "Migrations"]
