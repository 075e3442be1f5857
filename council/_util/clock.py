"""Time as council stores and filters it: UTC ISO-8601 text, one parser for every ``--since``.

Stored timestamps are ``datetime.isoformat(timespec="microseconds")`` in UTC
(``2026-11-23T09:41:00.000000+00:00``), so text comparison in SQL orders them correctly.
Every date a user gives (``--since`` on any command, ``?since=`` on the server) goes
through :func:`parse_since`, so one value means the same instant everywhere.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime

from council.errors import InputError

_now_ns = time.time_ns
# The last second written and its text up to the seconds: a busy server stamps every call and
# event, and formatting only the microseconds is a fraction of ``datetime.now(UTC).isoformat()``
# (benchmarks/bench_serve_sessions.py).
_second: tuple[int, str] = (-1, "")


def utc_now() -> str:
    """Now, as stored: ``datetime.now(UTC).isoformat(timespec="microseconds")``'s form."""
    global _second
    second, micros = divmod(_now_ns() // 1000, 1_000_000)
    cached = _second  # one read: another thread may replace it, never half of it
    if cached[0] != second:
        cached = _second = (second, datetime.fromtimestamp(second, UTC).isoformat()[:19])
    return f"{cached[1]}.{micros:06d}+00:00"


def to_utc_iso(value: datetime) -> str:
    """``value`` as stored: UTC, microseconds (a naive value is taken to be UTC). A ``ValueError``
    for a time whose UTC falls outside the calendar (``9999-12-31T23:59:59-23:59``)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC).isoformat(timespec="microseconds")
    except OverflowError:
        raise ValueError(f"{value.isoformat()} is outside the years 1 to 9999 in UTC") from None


def parse_since(value: str, *, option: str = "--since") -> str:
    """A user's date or date-time as the stored form of that instant.

    ``2026-11-23`` is midnight UTC of that day; ``2026-11-23T11:41:00+02:00`` is
    converted to UTC; a date-time without a zone is UTC. Anything else is an
    ``InputError`` naming ``option``: a filter that cannot be read must never
    silently match nothing.
    """
    text = value.strip()
    try:
        if len(text) == 10:
            parsed = datetime.combine(date.fromisoformat(text), datetime.min.time())
        else:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise InputError(
            f"{option}: {value[:60]!r} is not a date (YYYY-MM-DD) or an ISO-8601 date-time "
            "(YYYY-MM-DDTHH:MM[:SS][+HH:MM])"
        ) from None
    try:
        return to_utc_iso(parsed)
    except ValueError as exc:
        raise InputError(f"{option}: {exc}") from None
