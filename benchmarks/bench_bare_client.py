"""Benchmark: ``council batch`` against a bare aiohttp loop sending the same request bodies.

    python benchmarks/bench_bare_client.py                  # 800 pairs (1,600 judge calls), 64 in flight, 50 ms
    python benchmarks/bench_bare_client.py --pairs 200 --repeat 2
    python benchmarks/bench_bare_client.py --postgres       # council's store on PostgreSQL
    python benchmarks/bench_bare_client.py --max-cost 1000  # council's batch under a spend cap (never reached)

In one run, on one mock LLM server (its own process, real HTTP on 127.0.0.1): the batch through
the library (``council.judging.batch.run_batch``, the call ``council batch`` makes, swap on, one
vote, a fresh store: a SQLite file, or with ``--postgres`` a fresh database on a throwaway
PostgreSQL server from scripts/postgres_test_server.sh), which also records every request body
it sends; then a bare client replaying those bodies: one ``aiohttp.ClientSession``,
``--concurrency`` requests in flight, each reply read and parsed as JSON, nothing else. The
process runs with the garbage collector's thresholds the ``council`` command sets
(``--collector default``: Python's own), both parts alike. Best of ``--repeat`` each, interleaved, so
both see the same machine. It prints council ÷ bare throughput (goal ≥ 0.9) and council's own
CPU per call (its CPU per call minus the bare client's; goal ≤ 0.3 ms), with the load average,
since the machine may be shared: the ratio is what to compare between runs, not the seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

from bench_batch import one_run, pairs, process_cpu  # also puts the package and tests/ on sys.path
from bench_common import add_collector_option, apply_collector, capture_bodies, loadavg, postgres_if

GOAL_RATIO = 0.9
GOAL_OWN_CPU_MS = 0.3


async def bare_timed(url: str, bodies: list[bytes], concurrency: int) -> dict[str, float]:
    """POST every body with ``concurrency`` in flight; read and parse each reply; nothing else."""
    import json

    import aiohttp

    headers = {"content-type": "application/json", "accept": "application/json", "authorization": "Bearer x"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def post(data: bytes) -> None:
            async with session.post(url, data=data, headers=headers) as reply:
                raw = await reply.read()
                if reply.status != 200:
                    raise SystemExit(f"bare client: HTTP {reply.status}: {raw[:200]!r}")
            json.loads(raw)["choices"][0]["message"]["content"]

        async def worker(queue: Any) -> None:
            for data in queue:
                await post(data)

        await asyncio.gather(*(post(data) for data in bodies[:concurrency]))  # open the connections
        queue = iter(bodies)
        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker(queue) for _ in range(concurrency)))
        return {"calls": len(bodies), "wall": time.perf_counter() - t0, "cpu": time.process_time() - cpu0}


def run_all(
    args: Any,
    content: str,
    council: list[dict[str, float]],
    bare: list[dict[str, float]],
    store_url: Any,
) -> None:
    """The council runs and the bare replays, interleaved, on one mock server."""
    from mock_server import start_mock_server

    with start_mock_server(latency=args.latency) as server:
        url = server.base_url + "/chat/completions"
        warm_up = pairs(8)
        asyncio.run(one_run(server.base_url, warm_up, 1, False, args.concurrency, "native", store_url(), args.max_cost))
        bodies = capture_bodies()
        for _ in range(args.repeat):
            del bodies[:]
            s0 = process_cpu(server.process.pid)
            run = one_run(server.base_url, content, 1, False, args.concurrency, "native", store_url(), args.max_cost)
            council.append(asyncio.run(run))
            council[-1]["server"] = (process_cpu(server.process.pid) or 0) - (s0 or 0)
            replay = list(bodies)
            s0 = process_cpu(server.process.pid)
            bare.append(asyncio.run(bare_timed(url, replay, args.concurrency)))
            bare[-1]["server"] = (process_cpu(server.process.pid) or 0) - (s0 or 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=800)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per mock call")
    parser.add_argument("--concurrency", type=int, default=64, help="calls in flight")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each (best is compared)")
    parser.add_argument(
        "--postgres", action="store_true", help="council's store: a fresh PostgreSQL database per run (else SQLite)"
    )
    parser.add_argument("--max-cost", type=float, help="council's batch under this spend cap in dollars (not reached)")
    add_collector_option(parser)
    args = parser.parse_args()
    apply_collector(args)
    print("$ python " + " ".join(["benchmarks/bench_bare_client.py", *sys.argv[1:]]))
    print(f"load average before: {loadavg()} on {os.cpu_count()} cores")

    content = pairs(args.pairs)
    council: list[dict[str, float]] = []
    bare: list[dict[str, float]] = []
    with postgres_if(args.postgres) as database:

        def store_url() -> str | None:
            return None if database is None else database.fresh_database(migrated=False)

        run_all(args, content, council, bare, store_url)
    calls = council[0]["calls"]
    bound = calls * args.latency / args.concurrency
    store = "PostgreSQL" if database is not None else "SQLite"
    print(
        f"{args.pairs} pairs, swap on, 1 vote: {calls:.0f} judge calls, {args.concurrency} in flight, "
        f"mock at {args.latency * 1000:g} ms, council's store {store}"
        f"{f', spend cap ${args.max_cost:g}' if args.max_cost is not None else ''}; latency bound {bound:.2f} s; "
        f"best of {args.repeat}, interleaved; collector thresholds: {args.collector}"
    )
    print(f"{'':8} {'wall s':>7} {'(runs)':>20} {'bound/wall':>10} {'cpu ms/call':>11} {'server ms/call':>14}")
    for name, runs in (("council", council), ("bare", bare)):
        best = min(runs, key=lambda r: r["wall"])
        spread = "/".join(f"{r['wall']:.2f}" for r in runs)
        print(
            f"{name:8} {best['wall']:>7.2f} {spread:>20} {bound / best['wall']:>10.2f} "
            f"{1000 * min(r['cpu'] for r in runs) / calls:>11.3f} {1000 * best['server'] / calls:>14.3f}"
        )
    ratio = min(r["wall"] for r in bare) / min(r["wall"] for r in council)
    own = 1000 * (min(r["cpu"] for r in council) - min(r["cpu"] for r in bare)) / calls
    print(f"load average after: {loadavg()}")
    print(
        f"goal council ≥ {GOAL_RATIO} of the bare client's throughput: {'PASS' if ratio >= GOAL_RATIO else 'MISS'}"
        f" ({ratio:.2f})"
    )
    print(
        f"goal council's own CPU ≤ {GOAL_OWN_CPU_MS} ms per call (its CPU minus the bare client's): "
        f"{'PASS' if own <= GOAL_OWN_CPU_MS else 'MISS'} ({own:.3f} ms)"
    )
    return 0 if ratio >= GOAL_RATIO and own <= GOAL_OWN_CPU_MS else 1


if __name__ == "__main__":
    sys.exit(main())
