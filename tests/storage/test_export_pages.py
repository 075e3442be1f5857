"""Exports read the store a page at a time, on every backend: the sessions, the bias records and
the judged pairs. The same rows in the same order whatever the page size, and never more than a
page of them in memory (PostgreSQL's driver fetched a whole result before: 386 MB for 300,000
bias records)."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fake_judges import fake_client
from test_storage_contract import record

from council.judging.batch import BatchSettings, content_digest, parse_batch, run_batch
from council.storage import pages

FIELDS = ("session_id", "reviewer_id", "model_id", "position", "score_value", "timestamp")


def stamp(i: int) -> str:
    """Rows come in twos with the same time: the pages must break ties by id."""
    return f"2026-01-{1 + (i - i % 2) // 2 % 28:02d}T00:00:{(i - i % 2) % 60:02d}.000000+00:00"


def fill_sessions(store: Any, n: int, size: int = 0) -> None:
    for i in reversed(range(n)):  # written newest first: the export's order is not the insertion's
        store.begin_session(f"s-{i % 7}-{i:04d}", council="c", question=f"Question {i}? " + "x" * size,
                            created_at=stamp(i))  # fmt: skip


def fill_bias_records(store: Any, n: int) -> None:
    rows = [record(f"s{i // 9}", f"r{i % 3}", f"m{i % 4}", i % 3, 1 + i % 10) for i in range(n)]
    for i, row in enumerate(rows):
        row["timestamp"] = stamp(i)
    store.insert_bias_records(rows)


async def fill_judged_pairs(store: Any, n: int) -> None:
    lines = [{"id": f"p{i}", "prompt": f"Q{i}?", "a": f"A {i}, in detail.", "b": f"B{i}.",
              "model_a": f"fake/m{i % 3}", "model_b": f"fake/m{1 + i % 3}"} for i in range(n)]  # fmt: skip
    lines.append({"id": "graded", "prompt": "Q?", "response": "graded"})  # a grade: not a judged pair
    text = "".join(json.dumps(line) + "\n" for line in lines)
    summary = await run_batch(parse_batch(text, "p.jsonl"), settings=BatchSettings(judges=["fake/j"]),
                              judges=[fake_client()], store=store, keep_text=False, batch_id="pairs",
                              source="p.jsonl", content_sha256=content_digest(text))  # fmt: skip
    assert summary.finished == n + 1


def exports(store: Any) -> dict[str, Callable[..., Iterator[Any]]]:
    return {
        "sessions": store.iter_sessions,
        "bias records": lambda since=None: store.bias_record_rows(FIELDS, since=since),
        "judged pairs": store.judged_pairs,
    }


async def test_exports_give_the_same_rows_in_the_same_order_in_pages_of_any_size(store_backend, monkeypatch):
    fill_sessions(store_backend, 23)
    fill_bias_records(store_backend, 23)
    await fill_judged_pairs(store_backend, 23)
    since = stamp(8)
    whole = {name: list(read()) for name, read in exports(store_backend).items()}
    after = {name: list(read(since=since)) for name, read in exports(store_backend).items()}
    sessions = whole["sessions"]
    assert [s["id"] for s in sessions] == sorted((s["id"] for s in sessions), key=lambda i: (stamp(int(i[-4:])), i))
    assert [r[:2] for r in whole["bias records"]] == [(f"s{i // 9}", f"r{i % 3}") for i in range(23)]  # as inserted
    assert len(whole["judged pairs"]) == 23 and [p["created_at"] for p in whole["judged pairs"]] == sorted(
        p["created_at"] for p in whole["judged pairs"]
    )
    assert len(after["sessions"]) == len(after["bias records"]) == 23 - 8
    for size in (1, 2, 5, 22, 23):
        monkeypatch.setattr(pages, "ROWS_PAGE", size)
        monkeypatch.setattr(pages, "SESSIONS_PAGE", size)
        for name, read in exports(store_backend).items():
            assert not isinstance(read(), list), name  # read as it goes, not all at once
            assert list(read()) == whole[name], (name, size)
            assert list(read(since=since)) == after[name], (name, size)


def held_while_reading(read: Callable[[], Iterator[Any]]) -> tuple[int, int]:
    """(peak bytes while each row is let go once read, bytes the rows take all together)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        for _ in read():
            pass
        streaming = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        rows = list(read())
        together = tracemalloc.get_traced_memory()[0] - before
        del rows
    finally:
        tracemalloc.stop()
    return streaming, together


@pytest.mark.parametrize("name", ["sessions", "bias records", "judged pairs"])
async def test_an_export_holds_a_page_of_rows_at_a_time(store_backend, monkeypatch, name):
    if name == "sessions":
        fill_sessions(store_backend, 200, size=2_000)
    elif name == "bias records":
        fill_bias_records(store_backend, 800)
    else:
        await fill_judged_pairs(store_backend, 200)
    monkeypatch.setattr(pages, "ROWS_PAGE", 20)
    monkeypatch.setattr(pages, "SESSIONS_PAGE", 10)
    streaming, together = held_while_reading(exports(store_backend)[name])
    assert together > 0 and streaming < together / 3, (streaming, together)


def test_sessions_begun_while_the_pages_are_read_are_read_once_or_not_at_all(store_backend, monkeypatch):
    """Each page starts after the last row read: a row written behind it is not read, one ahead
    of it is read once, and no row is read twice."""
    monkeypatch.setattr(pages, "SESSIONS_PAGE", 2)
    fill_sessions(store_backend, 6)
    reading = store_backend.iter_sessions()
    seen = [next(reading)["id"] for _ in range(3)]  # two pages asked for, the second half read
    last = store_backend.get_session(seen[-1])["created_at"]
    store_backend.begin_session("a-behind", council="c", created_at=stamp(0))
    store_backend.begin_session("z-same-time-after", council="c", created_at=last)
    store_backend.begin_session("z-ahead", council="c", created_at="2027-01-01T00:00:00.000000+00:00")
    seen += [row["id"] for row in reading]
    assert len(seen) == len(set(seen)) == 6 + 2
    assert "a-behind" not in seen and seen[-1] == "z-ahead" and "z-same-time-after" in seen


async def test_rows_without_a_time_are_read_first_and_never_skipped(store_backend, monkeypatch):
    """council always stamps its rows, but a store may hold rows written otherwise: a keyset on
    the time alone would skip those past the first page (NULL is never after anything)."""
    monkeypatch.setattr(pages, "SESSIONS_PAGE", 2)
    monkeypatch.setattr(pages, "ROWS_PAGE", 2)
    fill_sessions(store_backend, 5)
    await fill_judged_pairs(store_backend, 5)
    untimed = ["s-1-0001", "s-4-0004", "s-3-0003"]
    pairs = [p["run_id"] for p in store_backend.judged_pairs()]
    with store_backend.immediate() as db:
        for sid in untimed:
            db.execute("UPDATE sessions SET created_at = NULL WHERE id = ?", [sid])
        for run_id in pairs[1:4]:
            db.execute("UPDATE judgment_runs SET created_at = NULL WHERE id = ?", [run_id])
    sessions = [s["id"] for s in store_backend.iter_sessions()]
    assert sessions == sorted(untimed) + ["s-0-0000", "s-2-0002"]
    assert [p["run_id"] for p in store_backend.judged_pairs()] == sorted(pairs[1:4]) + [pairs[0], pairs[4]]
