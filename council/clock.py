"""Time as council stores and filters it: UTC ISO-8601 text, one parser for every ``--since``.

Stored timestamps are ``datetime.isoformat(timespec="microseconds")`` in UTC
(``2026-11-23T09:41:00.000000+00:00``), so text comparison in SQL orders them correctly.
Every date a user gives (``--since`` on any command, ``?since=`` on the server) goes
through :func:`parse_since`, so one value means the same instant everywhere.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from council.errors import InputError


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def to_utc_iso(value: datetime) -> str:
    """``value`` as stored: UTC, microseconds (a naive value is taken to be UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="microseconds")


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
            f"{option}: {value!r} is not a date (YYYY-MM-DD) or an ISO-8601 date-time (YYYY-MM-DDTHH:MM[:SS][+HH:MM])"
        ) from None
    return to_utc_iso(parsed)
