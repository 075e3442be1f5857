"""Benchmark: several processes writing council sessions to ONE council.db at the same time.

    python benchmarks/bench_writers.py                          # 8 processes × 25 sessions
    python benchmarks/bench_writers.py --processes 4 --sessions 100

Each process is a fresh interpreter (multiprocessing "spawn") that imports council and runs
one warm-up session without a database, then waits at a barrier. Released together, they
all open the same not-yet-existing database (so creating and migrating it is part of the
race), then run their sessions one after another through the library: ``council.Council``
with in-process ``fake/...`` models, so there is no network and the database is the only
thing the processes share. Every session is written as the library always writes it: a
``running`` row, then everything else in one ``BEGIN IMMEDIATE`` transaction (WAL, busy
timeout). Each worker times its write transactions: the wait for the write lock, and how
long it held it.

Each worker reports what every session produced (answers, reviews, bias records, calls)
and every exception it saw; the parent then counts the rows of those sessions with plain
sqlite3:
- **lost**: rows a reported session should have and the database lacks;
- **duplicates**: rows beyond what a session reported, and a second bias record per
  (session, reviewer, answered model). Rows of sessions that raised are counted apart.
The goal is 0 lost, 0 duplicates and 0 "database is locked" errors; exit code 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shlex
import sqlite3
import statistics
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MEMBERS = ["fake/alpha", "fake/beta", "fake/gamma+flaky"]  # flaky: one re-requested review per session
CONFIG = {"councils": {"default": {"members": MEMBERS, "chairman": MEMBERS[0]}}}
TABLES = ("answers", "reviews", "bias_records", "calls")


def worker_main(db: str, sessions: int, tag: int, out: str, barrier: Any) -> None:
    import asyncio
    import logging

    import structlog

    # Unconfigured structlog prints every level to stdout; keep the benchmark's output readable.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    from council import Council
    from council.storage import SQLiteStore

    report: dict = {"pid": os.getpid(), "sessions": [], "errors": [], "waits": [], "holds": []}
    begin = SQLiteStore.immediate

    @contextmanager
    def timed(self: SQLiteStore) -> Iterator[Any]:
        # Entering runs BEGIN IMMEDIATE: the time to get in is the wait for the write lock.
        t0 = time.perf_counter()
        with begin(self) as db:
            t1 = time.perf_counter()
            yield db
        report["waits"].append(t1 - t0)
        report["holds"].append(time.perf_counter() - t1)

    SQLiteStore.immediate = timed  # type: ignore[method-assign]

    async def warm_up() -> None:
        # One session without a store: first-call costs (schemas, lazy imports) are paid
        # before the barrier, so the timed part is the sessions and their writes.
        council = Council.from_config(CONFIG, store=False)
        await council.run("warm-up", seed=0)
        await council.aclose()

    asyncio.run(warm_up())
    barrier.wait(timeout=120)
    report["t0"] = time.time()

    async def run(council: Council) -> None:
        for i in range(sessions):
            try:
                r = await council.run(f"Writer {tag}, question {i}: why is the sky blue?", seed=i)
            except Exception as exc:  # counted, and the worker goes on: the benchmark reports them all
                report["errors"].append(f"{type(exc).__name__}: {exc}")
                continue
            report["sessions"].append(
                {
                    "id": r.session_id,
                    "status": r.status,
                    "answers": len(r.answers),
                    "reviews": len(r.reviews),
                    "bias_records": sum(len(v.scores) for v in r.reviews if v.valid),
                    "calls": r.usage.calls,
                }
            )
        await council.aclose()

    try:
        store = SQLiteStore.open(db)
        council = Council.from_config(CONFIG, store=store)
        report["opened"] = time.time()
        asyncio.run(run(council))
        store.close()
    except Exception as exc:
        report["errors"].append(f"{type(exc).__name__}: {exc}")
        report["traceback"] = traceback.format_exc()
    report["t1"] = time.time()
    Path(out).write_text(json.dumps(report))


def audit(db: Path, reported: list[dict]) -> dict:
    """Rows per table for the reported sessions: expected (from the results) vs found."""
    conn = sqlite3.connect(db)
    ids = {s["id"] for s in reported}
    per_table = {"sessions": Counter(dict(conn.execute("select id, count(*) from sessions group by id")))}
    for table in TABLES:
        sql = f"select session_id, count(*) from {table} group by session_id"
        per_table[table] = Counter(dict(conn.execute(sql)))
    rows: dict[str, dict[str, int]] = {}
    other = 0  # rows of sessions no worker reported (a run that raised): counted apart
    for table, counts in per_table.items():
        found = Counter({sid: n for sid, n in counts.items() if sid in ids})
        other += sum(counts.values()) - sum(found.values())
        expected = Counter({s["id"]: 1 if table == "sessions" else s[table] for s in reported})
        rows[table] = {
            "expected": sum(expected.values()),
            "found": sum(found.values()),
            "lost": sum((expected - found).values()),
            "duplicates": sum((found - expected).values()),
        }
    rows["bias_records"]["duplicates"] += conn.execute(
        "select coalesce(sum(n - 1), 0) from (select count(*) as n from bias_records"
        " group by session_id, reviewer_id, model_id having n > 1)"
    ).fetchone()[0]
    statuses = Counter(dict(conn.execute("select status, count(*) from sessions group by status")))
    result = {
        "tables": rows,
        "other_rows": other,
        "statuses": statuses,
        "integrity": conn.execute("PRAGMA integrity_check").fetchone()[0],
        "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
    }
    conn.close()
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--processes", type=int, default=8, help="writer processes, one database")
    p.add_argument("--sessions", type=int, default=25, help="sessions per process (run one after another)")
    args = p.parse_args()
    print("$ " + shlex.join(["python", "benchmarks/bench_writers.py", *sys.argv[1:]]))
    from council.storage.sqlite_store import BUSY_TIMEOUT_S

    print(
        f"{args.processes} processes × {args.sessions} sessions, one fresh council.db "
        f"(WAL, busy timeout {BUSY_TIMEOUT_S:g} s), "
        f"members {' '.join(MEMBERS)} (in-process fakes), {os.cpu_count()} CPUs"
    )

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "council.db"
        ctx = multiprocessing.get_context("spawn")  # fresh interpreters, as separate CLI runs would be
        barrier = ctx.Barrier(args.processes + 1)
        outs = [Path(tmp) / f"worker-{w}.json" for w in range(args.processes)]
        procs = [
            ctx.Process(target=worker_main, args=(str(db), args.sessions, w, str(outs[w]), barrier))
            for w in range(args.processes)
        ]
        for proc in procs:
            proc.start()
        barrier.wait(timeout=120)  # every worker has imported council and warmed up
        t0 = time.perf_counter()
        for proc in procs:
            proc.join()
        wall = time.perf_counter() - t0
        reports = [json.loads(out.read_text()) for out in outs if out.exists()]
        crashed = sum(proc.exitcode != 0 for proc in procs)
        reported = [s for r in reports for s in r["sessions"]]
        errors = [e for r in reports for e in r["errors"]]
        result = audit(db, reported)

    locked = sum("database is locked" in e for e in errors)
    tables = result["tables"]
    lost = sum(t["lost"] for t in tables.values())
    dupes = sum(t["duplicates"] for t in tables.values())
    attempted = args.processes * args.sessions
    statuses = ", ".join(f"{n} {st}" for st, n in sorted(result["statuses"].items()))
    print(f"sessions written: {len(reported)} of {attempted} (in the database: {statuses or 'none'})")
    print(f"{'table':<13} {'expected':>9} {'found':>9} {'lost':>6} {'duplicates':>11}")
    for name, t in tables.items():
        print(f"{name:<13} {t['expected']:>9} {t['found']:>9} {t['lost']:>6} {t['duplicates']:>11}")
    print(f"rows lost: {lost} (goal 0); duplicates: {dupes} (goal 0)")
    print(f"wall time {wall:.2f} s (release to last process done), {len(reported) / wall:.1f} sessions/s")
    opened = [r["opened"] - r["t0"] for r in reports if "opened" in r]
    if opened:
        print(f"opening the fresh database (create, WAL, migrate; racing): slowest process {max(opened):.2f} s")
    waits = [w * 1000 for r in reports for w in r["waits"]]
    holds = [h * 1000 for r in reports for h in r["holds"]]
    if len(waits) >= 2:
        print(
            f"write transactions: {len(waits)}; wait for the write lock ms: median {statistics.median(waits):.1f}, "
            f"p99 {statistics.quantiles(waits, n=100)[98]:.1f}, max {max(waits):.1f}; "
            f"held ms: median {statistics.median(holds):.1f}, max {max(holds):.1f}"
        )
    print(
        f'"database is locked" errors: {locked} (goal 0); other errors: {len(errors) - locked}; '
        f"crashed workers: {crashed}"
    )
    for e in sorted(set(errors))[:5]:
        print(f"  {e}")
    for r in reports:
        if "traceback" in r:
            print(r["traceback"])
            break
    if result["other_rows"]:
        print(f"rows of sessions that raised (not in the table above): {result['other_rows']}")
    print(f"integrity_check: {result['integrity']}; journal_mode: {result['journal_mode']}")
    ok = (
        not lost
        and not dupes
        and not errors
        and not crashed
        and len(reported) == attempted
        and result["statuses"] == {"complete": attempted}
        and result["integrity"] == "ok"
        and result["journal_mode"] == "wal"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
