"""sqlite-utils as council imports it (council.storage.sqlite): the same behaviour, less start-up."""

from __future__ import annotations

import re
import subprocess
import sys

import sqlite_utils.db

from council.storage.sqlite import Database


def test_the_virtual_table_pattern_is_compiled_at_first_use_and_matches_as_sqlite_utils_s():
    code = (
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
