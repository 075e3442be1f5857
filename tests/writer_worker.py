"""Worker process for tests/test_concurrent_writers.py: imports council once, then runs
JSON commands read from stdin (one per line) and answers each with one JSON line on stdout.

    python tests/writer_worker.py      # then: {"cmd": "open", "args": {"path": "x.db"}}
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

# flaky: its first review is invalid and re-requested, so each session logs one call more.
CONFIG = {
    "councils": {
        "default": {"members": ["fake/alpha", "fake/beta", "fake/gamma+flaky"], "chairman": "fake/alpha"}
    }
}


def _cmd_open(path: str) -> dict:
    from council.storage import SQLiteStore

    store = SQLiteStore.open(path)
    mode = store.db.journal_mode
    store.close()
    return {"journal_mode": mode}


def _cmd_sessions(path: str, n: int, tag: str) -> dict:
    from council import Council
    from council.storage import SQLiteStore

    store = SQLiteStore.open(path)
    council = Council.from_config(CONFIG, store=store)

    async def go() -> list[dict]:
        done = []
        try:
            for i in range(n):
                t0 = time.time()
                r = await council.run(f"Worker {tag}, question {i}: why is the sky blue?", seed=i)
                done.append(
                    {
                        "id": r.session_id,
                        "status": r.status,
                        "t0": t0,
                        "t1": time.time(),
                        # What the session says it produced; the database must hold exactly this.
                        "answers": len(r.answers),
                        "reviews": len(r.reviews),
                        "bias_records": sum(len(v.scores) for v in r.reviews if v.valid),
                        "calls": r.usage.calls,
                    }
                )
        finally:
            await council.aclose()  # closes HTTP clients; the store is ours
        return done

    try:
        return {"sessions": asyncio.run(go())}
    finally:
        store.close()


def _worker() -> None:
    import logging

    import structlog

    # Unconfigured structlog prints to stdout, which is this worker's reply channel.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    import council  # noqa: F401  (before the first command: the race is about the database, not imports)

    commands = {"open": _cmd_open, "sessions": _cmd_sessions}
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            reply = commands[cmd["cmd"]](**cmd["args"])
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps({"pid": os.getpid(), **reply}), flush=True)


if __name__ == "__main__":
    _worker()
