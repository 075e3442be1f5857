"""Long reads a page at a time: the exports (sessions, bias records) here, the judged pairs and the
end of a batch in :mod:`council.storage.judgments`.

Each page is one statement that starts after the last row of the page before, on the columns the
rows are ordered by (a keyset), so no statement holds a transaction or a pooled connection while
the caller works on the rows, and memory holds one page: PostgreSQL's driver fetches a whole
result at once (386 MB for an export of 300,000 bias records before). The same statements run on
SQLite and PostgreSQL. A row written while the pages are read is read once or not at all."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from council.storage.connection import Backend

Row = TypeVar("Row")

#: Rows a page of small rows (bias records, judged pairs): well under 1 kB each as Python objects.
ROWS_PAGE = 5_000
#: Sessions a page: a session's row carries its whole result (tens of kB with its texts).
SESSIONS_PAGE = 100


def in_pages(
    read: Callable[[str, list[Any]], Iterable[Row]],
    sql: str,
    params: Sequence[Any],
    *,
    order: Sequence[str],
    key: Callable[[Row], Sequence[Any]],
    size: int,
    each_page: Callable[[deque[Row]], None] | None = None,
) -> Iterator[Row]:
    """The rows of ``sql`` ordered by the columns ``order`` (unique together), read ``size`` at a
    time with ``read(statement, params)``; ``key(row)``: the row's values of those columns.

    ``sql`` is a SELECT whose WHERE clause ends the statement: the keyset condition, ORDER BY and
    LIMIT are added to it. ``each_page``: called with each page before its rows are yielded (to
    read what belongs to them in one statement)."""
    after: Sequence[Any] | None = None
    tail = f" ORDER BY {', '.join(order)} LIMIT {int(size)}"
    while True:
        condition, values = ("", []) if after is None else _after(order, after)
        page = deque(read(sql + condition + tail, [*params, *values]))
        if not page:
            return
        full = len(page) == size
        after = key(page[-1])
        if each_page is not None:
            each_page(page)
        while page:
            yield page.popleft()  # let go once yielded: the caller decides what it keeps
        if not full:
            return


def in_time_order(
    read: Callable[[str, list[Any]], Iterable[Row]],
    sql: str,
    params: Sequence[Any],
    *,
    key: Callable[[Row], Sequence[Any]],
    size: int,
) -> Iterator[Row]:
    """:func:`in_pages` by ``created_at``, then ``id`` (``key(row)``: those two values). Rows
    without a time come first, by id, as SQLite sorts NULL: a keyset on the time would skip them
    (NULL is after nothing). council stamps every row it writes; a store may hold others."""
    yield from in_pages(
        read, sql + " AND created_at IS NULL", params, order=("id",), key=lambda row: key(row)[1:], size=size
    )
    yield from in_pages(
        read, sql + " AND created_at IS NOT NULL", params, order=("created_at", "id"), key=key, size=size
    )


def _after(order: Sequence[str], last: Sequence[Any]) -> tuple[str, list[Any]]:
    """The rows after ``last`` in ``order``. The first column alone bounds the range, so that an
    index on it (the second breaking ties) is searched from there, not scanned from the start."""
    if len(order) == 1:
        return f" AND {order[0]} > ?", [last[0]]
    if len(order) == 2:
        first, second = order
        return f" AND {first} >= ? AND ({first} > ? OR {second} > ?)", [last[0], last[0], last[1]]
    raise ValueError(f"a keyset of one or two columns, not {len(order)}")


def iter_sessions(store: Backend, *, since: str | None = None) -> Iterator[dict[str, Any]]:
    """Every session row, oldest first (ties by id), :data:`SESSIONS_PAGE` at a time."""
    from council._util.clock import parse_since

    sql, params = "SELECT * FROM sessions WHERE TRUE", []
    if since:
        sql += " AND created_at >= ?"
        params.append(parse_since(since))
    yield from in_time_order(
        store.db.query, sql, params, key=lambda row: (row["created_at"], row["id"]), size=SESSIONS_PAGE
    )


def bias_record_rows(store: Backend, fields: Sequence[str], *, since: str | None = None) -> Iterator[tuple[Any, ...]]:
    """Every bias record as a tuple of ``fields``, in insertion order, :data:`ROWS_PAGE` at a time."""
    # The id comes last, for the keyset, and is cut from each row.
    sql = f"SELECT {', '.join(_column(f) for f in fields)}, id FROM bias_records WHERE TRUE"
    params: list[Any] = []
    if since:
        sql += " AND timestamp >= ?"
        params.append(since)

    def read(statement: str, values: list[Any]) -> Iterable[tuple[Any, ...]]:
        return store.db.execute(statement, values)

    for row in in_pages(read, sql, params, order=("id",), key=lambda row: row[-1:], size=ROWS_PAGE):
        yield row[:-1]


def _column(name: str) -> str:
    if not name.isidentifier():
        raise ValueError(f"not a column name: {name!r}")
    return name
