"""sqlite-utils as council imports it (council.storage.sqlite): the same behaviour, less start-up."""

from __future__ import annotations

import re
import subprocess
import sys

import sqlite_utils.db
from slow_import import slowed

from council.storage.sqlite import Database


def test_the_virtual_table_pattern_is_compiled_at_first_use_and_matches_as_sqlite_utils_s():
    code = slowed("sqlite_utils") + (  # its code runs 0.5 s after the import begins
        "import re; import council.storage.sqlite; import sqlite_utils.db as d\n"
        "print(type(d._virtual_table_using_re).__name__, re.compile.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["DeferredPattern", "re"]  # not compiled at import; re.compile is the standard one again
    db = Database(memory=True)
    db.execute("CREATE VIRTUAL TABLE docs USING fts5 (body)")
    db.execute('CREATE VIRTUAL TABLE IF NOT EXISTS "ÄÖ t" USING FTS4 (body)')
    db["plain"].insert({"x": 1})
    assert db["docs"].virtual_table_using == "FTS5"
    assert db["ÄÖ t"].virtual_table_using == "FTS4"  # IGNORECASE and the non-ASCII names, as compiled
    assert db["plain"].virtual_table_using is None
    assert isinstance(re.compile("x"), re.Pattern)
    assert sqlite_utils.db._virtual_table_using_re.match("create virtual table x using rtree").group("using") == "rtree"


def test_another_thread_imports_numpy_while_sqlite_utils_is_imported_without_it():
    """numpy and pandas are kept from sqlite-utils' import in the importing thread only: a thread
    importing numpy meanwhile (a session's agreement test beside its calls, a leaderboard in a
    server) gets it, rather than the ImportError sqlite-utils is meant to see."""
    code = slowed("sqlite_utils") + (  # its code runs 0.5 s after the import begins
        "first = threading.Thread(target=lambda: __import__('council.storage.sqlite'))\n"
        "first.start()\n"
        "started.wait(10)\n"
        "try:\n"
        "    import numpy\n"
        "    print('numpy', numpy.__name__)\n"
        "except ImportError as exc:\n"
        "    print('refused', exc)\n"
        "first.join()\n"
        "import sqlite_utils.db as d\n"
        "print('sqlite-utils has numpy:', d.np is not None)\n"  # it was loaded by then: no cost to use it
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["numpy numpy", "sqlite-utils has numpy: True"]
    alone = "import sys, council.storage.sqlite, sqlite_utils.db as d; print(d.np, d.pd, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", alone], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["None", "None", "False"], out.stderr[-2000:]
