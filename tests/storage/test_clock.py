"""Stored timestamps (council._util.clock.utc_now): UTC ISO-8601 text, microseconds, in time's order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from council._util import clock
from council._util.clock import to_utc_iso, utc_now

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _expected(ns: int) -> str:
    return (EPOCH + timedelta(microseconds=ns // 1000)).isoformat(timespec="microseconds")


def test_now_is_the_stored_form_of_this_instant():
    before = datetime.now(UTC)
    text = utc_now()
    after = datetime.now(UTC)
    parsed = datetime.fromisoformat(text)
    assert parsed.utcoffset() == timedelta(0)
    assert text == to_utc_iso(parsed)  # the form every stored timestamp has
    assert before - timedelta(microseconds=1) <= parsed <= after + timedelta(microseconds=1)


@pytest.mark.parametrize(
    "instants",
    [
        [1_700_000_000_999_999_000, 1_700_000_001_000_000_500, 1_700_000_001_000_001_999],  # over a second
        [1_735_689_599_999_999_999, 1_735_689_600_000_000_000],  # over a year: 2024 → 2025
        [1_709_164_800_000_000_001, 1_709_164_799_000_000_000],  # a clock set back: 29 February 2024
    ],
)
def test_each_instant_is_written_whole_whatever_came_before(monkeypatch, instants):
    """The date and time of day are kept from one call to the next while the second is the same:
    a call in another second, later or earlier (a clock set back), never gets the last one's."""
    ticks = iter(instants)
    monkeypatch.setattr(clock, "_now_ns", lambda: next(ticks))
    assert [utc_now() for _ in instants] == [_expected(ns) for ns in instants]


def test_text_order_is_time_order_within_a_run():
    stamps = [utc_now() for _ in range(2000)]
    assert stamps == sorted(stamps)
