"""sqlite-utils, imported without pandas and numpy, its Database without plugins.

sqlite-utils imports pandas and numpy when they are installed, only to map their scalar types
to column types on insert. council never inserts either, and the two cost ~0.3 s of every
command's start-up, so they are hidden while sqlite-utils is imported (an ``ImportError``
for sqlite-utils, as if they were not installed); any later import of them works as usual.
Every council module imports sqlite-utils from here.
"""

from __future__ import annotations

import sys
from typing import Any

_hidden = [name for name in ("pandas", "numpy") if name not in sys.modules]
for _name in _hidden:
    sys.modules[_name] = None  # type: ignore[assignment]  # makes `import _name` raise ImportError
try:
    import sqlite_utils
    from sqlite_utils.migrations import Migrations
finally:
    for _name in _hidden:
        if sys.modules.get(_name, ...) is None:
            del sys.modules[_name]



class Database(sqlite_utils.Database):
    """sqlite-utils' Database, running no sqlite-utils plugins on council's connections: they
    are council's own, and finding plugins reads every installed package's entry points
    (10-20 ms of every command's start)."""

    def __init__(self, *args: Any, execute_plugins: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, execute_plugins=execute_plugins, **kwargs)


__all__ = ["Database", "Migrations"]
