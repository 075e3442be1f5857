"""The end of a batch: its summary and results file are read from the store a page of items at a
time, in one pass, so what they hold in memory does not grow with the batch."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from batch_files import pair, write_jsonl
from fake_judges import fake_client

from council.judging.batch import (
    BatchSettings,
    BatchSummary,
    content_digest,
    parse_batch,
    run_batch,
    summarize_batch,
)
from council.storage import SQLiteStore, judgments


def mixed_items(n: int) -> list[dict]:
    """Labelled and unlabelled pairs, and graded responses with and without a gold score."""
    rows = []
    for i in range(n):
        if i % 4 == 3:
            grade = {"id": f"grade-{i}", "prompt": f"Question {i}?", "response": f"Response {i} " + "detail " * (i % 5)}
            rows.append(grade | ({"gold_score": 1 + i % 5} if i % 8 == 3 else {}))
        else:
            rows.append(pair(i, **({"label": "ABT"[i % 3].replace("T", "TIE")} if i % 2 else {})))
    return rows


async def judge(tmp_path, n: int, batch_id: str, store: SQLiteStore, **options: Any) -> BatchSummary:
    """``mixed_items(n)`` judged as batch ``batch_id`` by a fake judge (``options``: run_batch's)."""
    text = write_jsonl(tmp_path / "items.jsonl", mixed_items(n)).read_text()
    options.setdefault("judges", [fake_client("fake/j")])
    return await run_batch(
        parse_batch(text, "items.jsonl"), settings=BatchSettings(judges=["fake/j"]), batch_id=batch_id,
        source="items.jsonl", content_sha256=content_digest(text), store=store, **options,
    )  # fmt: skip


async def judged_store(tmp_path, n: int) -> tuple[SQLiteStore, int]:
    """A batch of ``n`` items judged into COUNCIL_HOME's store (where the CLI reads it)."""
    store = SQLiteStore.open(Path(os.environ["COUNCIL_HOME"]) / "council.db")
    assert (await judge(tmp_path, n, "end", store)).finished == n
    return store, n


def end_of(store: SQLiteStore, n: int, output) -> tuple[dict, str]:
    summary = summarize_batch(store, "end", source="items.jsonl", items=n, skipped=0, judged=n, output=output)
    return summary.model_dump(exclude={"output"}), output.read_text()


async def test_pages_of_any_size_give_the_same_rows_summary_and_results(tmp_path, council_home, monkeypatch):
    store, n = await judged_store(tmp_path, 23)
    whole = list(store.batch_rows("end"))  # one page: the batch is smaller than BATCH_PAGE
    assert [r["item_id"] for r in whole] == [r["id"] for r in mixed_items(n)]
    assert sum(1 for r in whole if r.get("passes")) == 6  # the labelled pairs (items 1, 5, 9, ...), 2 passes each
    assert all(len(r["passes"]) == 2 for r in whole if r.get("passes"))
    reference = end_of(store, n, tmp_path / "one-page.jsonl")
    assert reference[0]["labels"]["labelled"] == 6 and reference[0]["gold_scores"]["scored"] == 3
    for page in (1, 2, 5, 22, 23):
        monkeypatch.setattr(judgments, "BATCH_PAGE", page)
        assert list(store.batch_rows("end")) == whole, page
        assert end_of(store, n, tmp_path / f"page-{page}.jsonl") == reference, page


async def test_the_end_of_a_batch_holds_a_page_of_results_not_all_of_them(tmp_path, council_home, monkeypatch):
    store, n = await judged_store(tmp_path, 80)
    monkeypatch.setattr(judgments, "BATCH_PAGE", 8)
    end_of(store, n, tmp_path / "warm-up.jsonl")  # imports and caches: not what is measured
    tracemalloc.start()
    try:
        every_row = list(store.batch_rows("end"))
        all_at_once = tracemalloc.get_traced_memory()[0]
        del every_row
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        summarize_batch(store, "end", source="items.jsonl", items=n, skipped=0, judged=n, output=tmp_path / "r.jsonl")
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    # Ten pages: what the summary and the results file hold at once is far below every row.
    assert peak < all_at_once / 3, (peak, all_at_once)
    lines = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == [r["id"] for r in mixed_items(n)]
    stored = "".join(r[0] for r in store.db.execute("SELECT result FROM judgment_runs").fetchall())
    written = (tmp_path / "r.jsonl").read_text()
    for key in ('"run_id"', '"elapsed_ms"', '"evaluation_time_ms"'):  # nested too: each judge's result
        assert key in stored and key not in written, key


@pytest.mark.parametrize("page", [1, 3])
async def test_batch_results_read_in_pages_writes_the_file_the_batch_wrote(tmp_path, council_home, monkeypatch, page):
    from conftest import invoke_cli

    store, n = await judged_store(tmp_path, 10)
    end_of(store, n, tmp_path / "run.jsonl")
    store.close()
    monkeypatch.setattr(judgments, "BATCH_PAGE", page)
    result = invoke_cli("batch", "results", "end", "--output", str(tmp_path / "cli.jsonl"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "cli.jsonl").read_text() == (tmp_path / "run.jsonl").read_text()
    assert "wrote 10 results" in result.stderr


async def test_a_results_file_that_cannot_be_written_loses_no_judged_item(tmp_path, council_home):
    from council.errors import UsageError

    store = SQLiteStore.open(tmp_path / "council.db")
    judges = [fake_client("fake/j")]
    (tmp_path / "taken").write_text("a file where the results' directory should be")
    with pytest.raises(UsageError, match="every judged item is stored: rerun with --resume to write them"):
        await judge(tmp_path, 6, "w", store, judges=judges, output=tmp_path / "taken" / "results.jsonl")
    assert set(store.batch_item_status("w").values()) == {"ok"} and len(store.batch_item_status("w")) == 6
    calls = len(judges[0].api.history)
    again = await judge(tmp_path, 6, "w", store, judges=judges, output=tmp_path / "results.jsonl", resume=True)
    assert again.judged_this_run == 0 and len(judges[0].api.history) == calls  # nothing judged twice
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 6 and again.output is not None


async def test_the_summary_tells_how_far_it_has_read_and_the_cli_shows_it_on_a_terminal(
    tmp_path, council_home, monkeypatch
):
    import io

    from rich.console import Console

    from council.cli.batch import BatchProgress
    from council.judging import batch

    monkeypatch.setattr(batch, "SUMMARY_EVERY", 5)
    progress = BatchProgress("told", 23)
    progress.err = Console(file=io.StringIO(), force_terminal=True, color_system=None, highlight=False, width=80)
    read = []

    def on_summary(n):
        read.append(n)
        progress.on_summary(n)
        assert progress._progress.tasks[0].description == "summarising"
        assert progress._progress.tasks[0].completed == n and progress._progress.tasks[0].total == 23

    summary = await judge(
        tmp_path, 23, "told", SQLiteStore.open(tmp_path / "c.db"),
        on_start=progress.on_start, on_item=progress.on_item, on_summary=on_summary,
    )  # fmt: skip
    progress.stop()
    assert summary.finished == 23 and read == [5, 10, 15, 20, 23]
    shown = progress.err.file.getvalue()
    assert "batch told: 23 items; judging 23" in shown and "judging" in shown and "summarising" in shown
    quiet = BatchProgress("told", 23, quiet=True)
    quiet.on_summary(5)  # nothing shown, nothing started
    assert quiet._progress is None
