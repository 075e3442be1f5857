"""What differs between the databases council stores in, stated once.

Every statement in council.storage is written once, in SQL that SQLite (3.35 or later:
``ON CONFLICT … DO NOTHING``, ``RETURNING``) and PostgreSQL both take, with ``?`` for each
parameter. A dialect says the little that differs: how a statement's parameters are marked
(the PostgreSQL driver takes ``%s``: each statement text is converted once, then cached), an
``AVG`` that stays a float, a substring test, the temporary tables (untyped and kept with the
connection on SQLite, typed and dropped with the transaction on PostgreSQL), and the
scratch table of records loaded from files. A third database is one more dialect here and one
connection adapter (council.storage.connection).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

__all__ = ["POSTGRES", "SQLITE", "Dialect", "PostgresDialect", "SQLiteDialect"]


class Dialect:
    """SQLite's words; a subclass states where another database's differ."""

    name = "sqlite"
    #: The schema of the connection's own (temporary) tables.
    temp_schema = "temp"
    #: Records without a score, loaded from files beside the scored ones (council.storage.bias_sums).
    unscored_table = "temp.bias_unscored"

    def statement(self, sql: str) -> str:
        """``sql`` (``?`` parameters) as the driver takes it."""
        return sql

    def float_avg(self, expression: str) -> str:
        """The mean of ``expression`` as a float (never an exact numeric)."""
        return f"AVG({expression})"

    def contains(self, text: str, part: str) -> str:
        """True where ``part`` occurs in ``text`` (literally: no pattern)."""
        return f"instr({text}, {part}) > 0"

    def temp_table(self, name: str, columns: Mapping[str, str], key: Sequence[str]) -> str:
        """A table of the connection's own named ``name`` (no schema), its ``columns`` typed
        where the database wants types, with primary key ``key``."""
        return f"CREATE TABLE {self.temp_schema}.{name} ({', '.join(columns)}, PRIMARY KEY ({', '.join(key)}))"


class SQLiteDialect(Dialect):
    """SQLite (Python's sqlite3 module): the words the statements are written in."""


class PostgresDialect(Dialect):
    """PostgreSQL through psycopg 3."""

    name = "postgresql"
    temp_schema = "pg_temp"
    unscored_table = "bias_unscored"  # a table of the store, created when records are loaded from files

    @functools.lru_cache(maxsize=1024)  # noqa: B019 - one dialect object for the process, kept for good
    def statement(self, sql: str) -> str:
        # council's statements hold no "?" or "%" inside a string literal.
        return sql.replace("%", "%%").replace("?", "%s")

    def float_avg(self, expression: str) -> str:
        return f"AVG(({expression})::float8)"  # AVG of integers is numeric (Decimal) here

    def contains(self, text: str, part: str) -> str:
        return f"strpos({text}, {part}) > 0"

    def temp_table(self, name: str, columns: Mapping[str, str], key: Sequence[str]) -> str:
        typed = ", ".join(f"{column} {kind}" for column, kind in columns.items())
        return f"CREATE TEMP TABLE {name} ({typed}, PRIMARY KEY ({', '.join(key)})) ON COMMIT DROP"


SQLITE = SQLiteDialect()
POSTGRES = PostgresDialect()
