"""sqlite-utils, imported without pandas and numpy.

sqlite-utils imports pandas and numpy when they are installed, only to map their scalar types
to column types on insert. council never inserts either, and the two cost ~0.3 s of every
command's start-up, so they are hidden while sqlite-utils is imported (an ``ImportError``
for sqlite-utils, as if they were not installed); any later import of them works as usual.
Every council module imports sqlite-utils from here.
"""

from __future__ import annotations

import sys

_hidden = [name for name in ("pandas", "numpy") if name not in sys.modules]
for _name in _hidden:
    sys.modules[_name] = None  # type: ignore[assignment]  # makes `import _name` raise ImportError
try:
    from sqlite_utils import Database
    from sqlite_utils.migrations import Migrations
finally:
    for _name in _hidden:
        if sys.modules.get(_name, ...) is None:
            del sys.modules[_name]

__all__ = ["Database", "Migrations"]
