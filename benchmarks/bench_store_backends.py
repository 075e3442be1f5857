"""Benchmark: the same council sessions written to SQLite and to PostgreSQL, CPU per session.

    python benchmarks/bench_store_backends.py                 # 60 sessions per backend, 3 runs each
    python benchmarks/bench_store_backends.py --sessions 200

Sessions run through the library (``council.Council``, 3 in-process ``fake/...`` members, 7
calls per session: 3 answers, 3 reviews, 1 synthesis), one after another, so the store is the
only thing that differs. The PostgreSQL server is a throwaway one started with
``scripts/postgres_test_server.sh`` (unix socket, fsync off) unless ``COUNCIL_TEST_POSTGRES_URL``
names one; each backend gets a fresh database. Printed per session: wall time, and this
process's CPU time (the client's share: the server's own CPU is not counted). Goal from the
design: PostgreSQL's CPU per call within 1.2 × SQLite's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

MEMBERS = ["fake/alpha", "fake/beta", "fake/gamma"]
CONFIG = {"councils": {"default": {"members": MEMBERS, "chairman": MEMBERS[0]}}}


def bench(url: str, sessions: int) -> tuple[float, float, int]:
    from council import Council
    from council.storage import open_store

    os.environ["COUNCIL_DATABASE_URL"] = url
    store = open_store()
    council = Council.from_config(CONFIG, store=store)

    async def go() -> None:
        await council.run("warm-up?")
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(sessions):
            await council.run(f"Question {i}?", seed=i)
        timings.extend([time.perf_counter() - t0, time.process_time() - c0])
        await council.aclose()

    timings: list[float] = []
    asyncio.run(go())
    calls = store.count("calls")
    store.close()
    return timings[0] / sessions * 1000, timings[1] / sessions * 1000, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--runs", type=int, default=3, help="runs per backend, interleaved (best is kept)")
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="council-bench-")
    os.environ["COUNCIL_HOME"] = home
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from postgres_server import Server

    server = Server()
    server.start()
    if server.url is None:
        raise SystemExit(f"no PostgreSQL server: {server.problem}")
    try:
        cpu: dict[str, list[float]] = {"sqlite": [], "postgresql": []}
        for run in range(args.runs):
            for name in ("sqlite", "postgresql"):
                url = f"sqlite:///{home}/bench-{run}.db" if name == "sqlite" else server.fresh_database(migrated=False)
                wall, used, calls = bench(url, args.sessions)
                cpu[name].append(used)
                print(
                    f"{name:10s} per session: wall {wall:6.1f} ms, client CPU {used:5.1f} ms ({calls} calls on record)"
                )
        pairs = sorted(p / s for s, p in zip(cpu["sqlite"], cpu["postgresql"], strict=True))
        print(f"side by side (each run's PostgreSQL / SQLite): {' '.join(f'{r:.2f}' for r in pairs)}; "
              f"median {statistics.median(pairs):.2f} x")  # fmt: skip
        lite, pg = min(cpu["sqlite"]), min(cpu["postgresql"])
        print(f"client CPU, best of {args.runs}: PostgreSQL {pg:.1f} ms / SQLite {lite:.1f} ms = {pg / lite:.2f} x "
              "(goal <= 1.2)")  # fmt: skip
    finally:
        server.stop()


if __name__ == "__main__":
    main()
