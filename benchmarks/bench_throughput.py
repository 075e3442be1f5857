"""Benchmark: many concurrent sessions through one Council, against the per-model call limit.

    python benchmarks/bench_throughput.py                  # 200 sessions, 3 members, limit 8, 50 ms per call
    python benchmarks/bench_throughput.py --sessions 50 --limit 4 --latency 0.1

All sessions start at once through ONE ``Council``, so they share each model's
``max_concurrency`` (``--limit``) and queue for it. The mock LLM server
(``scripts/mock_llm_server.py``, real HTTP on 127.0.0.1, its own process) answers every call
after ``--latency`` seconds. Members are ``openai/mock-mN`` models with an ``api_base``, reached
through ``--transport`` (native by default, or litellm); m0 is also the chairman. Sessions write
to a real council.db (temporary COUNCIL_HOME).

The bound: a model holding ``limit`` calls in flight completes at most limit ÷ latency calls
per second, so the council completes at most ``limit × models ÷ latency`` calls/s, and only
if every model is busy all the time. Each session makes 2 calls per member (answer and review)
plus the synthesis on the chairman, so the chairman carries 3 calls of every 2 × members + 1:
the tighter bound is ``limit ÷ latency × total calls ÷ chairman's calls``. Both are printed,
with the achieved rate's ratio to each. Two things the bounds leave out are printed too: the
time a call really holds its model's slot (latency plus the client's work on it, from the call
log), and the client's CPU per call: one event loop saturates near 1000 ÷ (CPU ms per call)
calls/s, which can bind before the limits do (LiteLLM costs several ms of CPU per call). The
call log also shows the most calls each model had in flight (never more than ``--limit``).
``--limit`` sessions run at once as a warm-up (opening the connections; LiteLLM imported on that
transport) before timing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sqlite3
import sys
import time
from collections import Counter, defaultdict
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

from bench_common import TRANSPORTS, council_config, prepare  # also puts the package and tests/ on sys.path


async def run_all(base_url: str, args: argparse.Namespace) -> dict[str, Any]:
    from council import Council
    from council.errors import CouncilError

    outcomes: Counter[str] = Counter()
    config = council_config(base_url, args.members, transport=args.transport, max_concurrency=args.limit, retries=1)
    async with Council.from_config(config) as council:
        await asyncio.gather(*(council.run(f"Warm-up {i}", seed=i) for i in range(args.limit)))
        db_path = str(Path(os.environ["COUNCIL_HOME"]) / "council.db")
        with closing(sqlite3.connect(db_path)) as db:
            warm_ids = {row[0] for row in db.execute("select id from sessions")}

        async def one(i: int) -> None:
            try:
                result = await council.run(f"Question {i}: why does topic {i % 37} matter?", seed=i)
            except CouncilError:
                outcomes["failed"] += 1
                return
            outcomes[result.status] += 1

        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(args.sessions)))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"outcomes": outcomes, "wall": wall, "cpu": cpu, "db": db_path, "warm": warm_ids}


def call_log(db_path: str, skip: set[str]) -> tuple[int, dict[str, int], float]:
    """From the call log (every attempt, failed sessions' too): the number of calls; per model, the
    most calls whose [start, start + latency] overlap; and the mean time a call held its model's
    slot (the mock's latency plus the client's work on the call)."""
    edges: dict[str, list[tuple[float, int]]] = defaultdict(list)
    held: list[float] = []
    with closing(sqlite3.connect(db_path)) as db:
        for session_id, member, started, latency_ms in db.execute(
            "select session_id, member, started_at, latency_ms from calls"
        ):
            if session_id in skip:
                continue
            start = datetime.fromisoformat(started).timestamp()
            held.append(latency_ms)
            edges[member] += [(start, 1), (start + latency_ms / 1000, -1)]
    peaks = {}
    for member, points in edges.items():
        level = peak = 0
        for _, step in sorted(points, key=lambda p: (p[0], p[1])):  # an end before a start at a tie
            level += step
            peak = max(peak, level)
        peaks[member] = peak
    return len(held), dict(sorted(peaks.items())), sum(held) / len(held)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200, help="sessions started at once")
    parser.add_argument("--members", type=int, default=3, help="members (= models) of the council")
    parser.add_argument("--limit", type=int, default=8, help="max_concurrency of every model")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per mock call")
    parser.add_argument("--transport", choices=TRANSPORTS, default="native", help="how the members are reached")
    args = parser.parse_args()

    home = prepare(  # noqa: F841 (kept until exit)
        __file__,
        f"{args.sessions} sessions at once through one Council, {args.members} members (models), "
        f"limit {args.limit} calls in flight per model, latency {args.latency * 1000:g} ms; "
        f"{args.limit} warm-up sessions first; transport {args.transport}; {os.cpu_count()} cores",
        litellm=args.transport == "litellm",
    )
    from bench_critical_path import FullCollections
    from mock_server import start_mock_server
    full_gc = FullCollections()
    with start_mock_server(latency=args.latency) as server:
        gc.callbacks.append(full_gc)
        r = asyncio.run(run_all(server.base_url, args))
    calls, peaks, held_ms = call_log(r["db"], r["warm"])
    wall = r["wall"]
    rate = calls / wall
    per_model = args.limit / args.latency
    simple = per_model * args.members
    tight = per_model * (2 * args.members + 1) / 3
    outcomes = r["outcomes"]
    print()
    print(
        f"sessions: {outcomes['complete']} complete, {outcomes['partial']} partial, {outcomes['failed']} failed "
        f"(of {args.sessions})"
    )
    print(f"calls: {calls} in {wall:.2f} s wall = {rate:.1f} calls/s ({args.sessions / wall:.1f} sessions/s)")
    print(
        f"bound, every model busy: limit × models ÷ latency = {args.limit} × {args.members} ÷ {args.latency:g} "
        f"= {simple:.1f} calls/s; achieved/bound = {rate / simple:.3f}"
    )
    print(
        f"bound, chairman-limited: limit ÷ latency × (2 × members + 1) ÷ 3 = {tight:.1f} calls/s "
        f"(the chairman model makes 3 of every {2 * args.members + 1} calls); achieved/bound = {rate / tight:.3f}"
    )
    print(
        f"a call held its model's slot {held_ms:.1f} ms on average (call log; latency {args.latency * 1000:g} ms): "
        f"the chairman-limited bound at that slot time is {tight * args.latency * 1000 / held_ms:.1f} calls/s"
    )
    cpu_ms = 1000 * r["cpu"] / calls
    print(
        f"client CPU: {cpu_ms:.2f} ms/call, busy {100 * r['cpu'] / wall:.0f} % of the wall time "
        f"(one event loop saturates near {1000 / cpu_ms:.0f} calls/s at that cost)"
    )
    print(f"full garbage collections: {full_gc.count} ({full_gc.seconds * 1000:.0f} ms, warm-up included)")
    over = {m: p for m, p in peaks.items() if p > args.limit}
    print(
        "most calls in flight per model (call log): "
        + ", ".join(f"{m} {p}" for m, p in peaks.items())
        + (f"  OVER THE LIMIT: {over}" if over else f"  (limit {args.limit} respected)")
    )
    failed = outcomes["failed"] + outcomes["partial"]
    print(
        f"goal: every session complete and no model over its limit: "
        f"{'PASS' if not failed and not over else 'MISS'}; throughput is reported against the bounds, no pass mark"
    )
    return 0 if not failed and not over else 1


if __name__ == "__main__":
    sys.exit(main())
