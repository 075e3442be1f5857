"""Benchmark: the end of a ``council batch`` (its summary and results file) against reading its rows.

    python benchmarks/bench_batch_summary.py                  # 5,000 labelled pairs, best of 3
    python benchmarks/bench_batch_summary.py --items 20000 --repeat 5

Judges ``--items`` labelled pairs through the library (``run_batch``, the call ``council batch``
makes) against the mock LLM server with no latency, into a fresh SQLite store. Then, on that
store, it times what a batch does once its items are judged: the summary of every recorded item
and the results file (``--output``), and beside it two bounds: a bare ``sqlite3`` read of the
same rows (the item rows joined with their runs, and the labelled pairs' passes), and that read
with each stored result decoded and encoded again by the standard library (``json``), the least
work a results file takes. It prints the ratios to both (goal ≤ 1.5 × the second; best of
``--repeat`` each, alternating) and the peak of Python's memory during the summary
(``tracemalloc``, a separate run): a summary that holds every item's result at once grows with
the batch, one that reads them in pages does not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sqlite3
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from bench_batch import pairs  # also puts the package and tests/ on sys.path
from bench_common import loadavg

GOAL = 1.5
BARE_ROWS = """
    SELECT bi.item_id, bi.position, bi.mode, bi.status, bi.run_id, bi.metadata, bi.label, bi.gold_score,
           r.error, r.winner, r.unstable, r.flagged, r.calls, r.calls_saved, r.prompt_tokens,
           r.completion_tokens, r.cost_usd, r.elapsed_ms, r.result
    FROM batch_items bi JOIN judgment_runs r ON r.id = bi.run_id
    WHERE bi.batch_id = ? ORDER BY bi.position
"""
BARE_PASSES = """
    SELECT bi.item_id, j.judge, j.vote, j.shown_first, j.valid, j.winner
    FROM batch_items bi JOIN judgments j ON j.run_id = bi.run_id
    WHERE bi.batch_id = ? AND bi.status = 'ok' AND bi.label IS NOT NULL AND j.kind = 'pairwise'
    ORDER BY bi.position, j.id
"""


async def judge_all(base_url: str, content: str, path: Path) -> tuple[str, int]:
    from council.config import load_config
    from council.judging.batch import BatchSettings, content_digest, default_batch_id, parse_batch, run_batch
    from council.judging.engine import make_judges
    from council.storage import SQLiteStore

    config = {
        "councils": {"default": {"members": ["judge"]}},
        "models": {"judge": {"model": "openai/mock-alpha", "api_base": base_url, "max_concurrency": 64}},
    }
    judges = make_judges(load_config(config), [])
    items = parse_batch(content, "bench.jsonl")
    settings = BatchSettings(judges=["judge=openai/mock-alpha"])
    batch_id = default_batch_id(content, settings)
    store = SQLiteStore.open(path)
    summary = await run_batch(
        items, settings=settings, judges=judges, batch_id=batch_id, source="bench.jsonl",
        content_sha256=content_digest(content), concurrency=64, store=store,
    )  # fmt: skip
    store.close()
    for judge in judges:
        await judge.aclose()
    if summary.finished != len(items):
        raise SystemExit(f"the batch did not finish: {summary.finished} of {len(items)}")
    return batch_id, len(items)


def council_end(path: Path, batch_id: str, items: int, output: Path) -> float:
    """What ``run_batch`` does after its items: the summary and the results file."""
    from council.judging import batch
    from council.storage import SQLiteStore

    store = SQLiteStore.open(path)
    t0 = time.perf_counter()
    if hasattr(batch, "summarize_batch"):
        summary = batch.summarize_batch(
            store, batch_id, source="bench.jsonl", items=items, skipped=0, judged=items, output=output
        )
    else:  # the revision before summarize_batch: every row read into one list
        rows = store.batch_rows(batch_id)
        summary = batch.summarize(rows, batch_id=batch_id, source="bench.jsonl", items=items, skipped=0, judged=items)
        batch.write_results(rows, output)
    elapsed = time.perf_counter() - t0
    store.close()
    assert summary.finished == items and summary.labels is not None, summary
    return elapsed


def bare_read(path: Path, batch_id: str, *, rewrite: bool = False) -> float:
    """The rows read with nothing decoded; with ``rewrite``, each result decoded and encoded again."""
    conn = sqlite3.connect(path)
    t0 = time.perf_counter()
    rows = conn.execute(BARE_ROWS, [batch_id]).fetchall()
    passes = conn.execute(BARE_PASSES, [batch_id]).fetchall()
    if rewrite:
        for row in rows:
            json.dumps(json.loads(row[-1]), ensure_ascii=False)
    elapsed = time.perf_counter() - t0
    conn.close()
    assert rows and passes
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("$ python " + shlex.join(["benchmarks/bench_batch_summary.py", *sys.argv[1:]]))
    print(f"load average before: {loadavg()}")
    from mock_server import start_mock_server

    with tempfile.TemporaryDirectory() as home:
        os.environ["COUNCIL_HOME"] = home
        path = Path(home) / "council.db"
        t0 = time.perf_counter()
        with start_mock_server(latency=0.0) as server:
            batch_id, items = asyncio.run(judge_all(server.base_url, pairs(args.items, labelled=True), path))
        judged_in = time.perf_counter() - t0
        print(f"{items} labelled pairs judged in {judged_in:.1f} s; store {path.stat().st_size / 1e6:.1f} MB")
        output = Path(home) / "results.jsonl"
        council, bare, rewrite = [], [], []
        bare_read(path, batch_id)  # warm the file's pages once
        for _ in range(args.repeat):
            bare.append(bare_read(path, batch_id))
            rewrite.append(bare_read(path, batch_id, rewrite=True))
            council.append(council_end(path, batch_id, items, output))
        tracemalloc.start()
        council_end(path, batch_id, items, output)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    best = {
        "summary + results file": min(council),
        "bare read of the same rows": min(bare),
        "the read + json decode, encode": min(rewrite),
    }
    ratio = min(council) / min(rewrite)
    print(f"{'':<34}{'best s':>8}{'per item µs':>13}{'council ×':>11}")
    for what, seconds in best.items():
        print(f"{what:<34}{seconds:>8.3f}{seconds / items * 1e6:>13.1f}{min(council) / seconds:>11.2f}")
    print(f"peak of Python's memory during the summary: {peak / 1e6:.1f} MB ({peak / items / 1e3:.2f} kB per item)")
    print(f"load average after: {loadavg()}")
    print(f"goal summary ≤ {GOAL} × the read + json: {'PASS' if ratio <= GOAL else 'MISS'} ({ratio:.2f} ×)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
