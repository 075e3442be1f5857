"""Benchmark: ``council batch`` on generated pairs against the mock LLM server at a fixed latency.

    python benchmarks/bench_batch.py                       # 2,000 pairs, swap, 1 vote, 50 ms, 64 calls in flight
    python benchmarks/bench_batch.py --pairs 500 --votes 3 --adaptive --concurrency 16
    python benchmarks/bench_batch.py --transport litellm --pairs 500
    python benchmarks/bench_batch.py --judges 2 --pairs 1000  # a panel: two judges, each pair by both

Runs the batch through the library (``council.judging.batch.run_batch``, the call ``council
batch`` makes) in a fresh COUNCIL_HOME; with ``--adaptive`` once with adaptive voting off and
once on. The judge (``openai/mock-alpha`` with an ``api_base``, reached through ``--transport``;
with ``--judges N``, N such models) allows ``--concurrency`` calls in flight and as many items
run at once, so the models' call limits are what binds. For each run it prints the calls made
and saved, the wall time, the latency bound ``calls × latency ÷ (concurrency × judges)``, the
share of it achieved (bound ÷ wall; goal ≥ 0.7 for the default run) and the client's CPU time
per call, which is what limits a small machine: one event loop saturates near 1000 ÷ (CPU ms
per call) calls per second. A warm-up batch of 8 pairs opens
the connections (and imports LiteLLM on that transport) first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

from bench_common import TRANSPORTS  # also puts the package and tests/ on sys.path
from bench_common import process_cpu as cpu_of

GOAL = 0.7


def pairs(n: int, *, labelled: bool = False) -> str:
    """``n`` pairwise items as a batch file; ``labelled``: each with a label (A, or B every third)."""
    lines = []
    for i in range(n):
        item = {
            "id": f"pair-{i}",
            "prompt": f"Question {i}: explain one consequence of topic {i % 37}.",
            "a": f"Answer A to question {i}, with a concrete example and a caveat ({i * 7 % 11}).",
            "b": f"Answer B to question {i}, shorter ({i * 3 % 5}).",
        }
        if labelled:
            item["label"] = "A" if i % 3 else "B"
        lines.append(json.dumps(item))
    return "\n".join(lines) + "\n"


JUDGE_NAMES = ("alpha", "beta", "gamma", "delta")

#: A judge's price and reply bound, so that a spend cap can bound its calls (never reached here).
PRICED = {"input_cost_per_token": 1e-9, "output_cost_per_token": 1e-9, "max_tokens": 512}


async def one_run(
    base_url: str,
    content: str,
    votes: int,
    adaptive: bool,
    concurrency: int,
    transport: str,
    store_url: str | None = None,
    max_cost: float | None = None,
    judges: int = 1,
) -> dict[str, float]:
    """One batch in a fresh store: a SQLite file in a temporary directory, or ``store_url``
    (a fresh PostgreSQL database); under a spend cap of ``max_cost`` dollars if given (the judge
    then has a price, and every call reserves its worst case in the store's ledger)."""
    from council.config import load_config
    from council.judging.batch import BatchSettings, content_digest, default_batch_id, parse_batch, run_batch
    from council.judging.engine import make_judges
    from council.storage import SQLiteStore

    names = JUDGE_NAMES[:judges]
    model = {
        "api_base": base_url,
        "transport": transport,
        "max_concurrency": concurrency,
        "timeout": 30,
        "retries": 1,
        **(PRICED if max_cost is not None else {}),
    }
    config = {
        "councils": {"default": {"members": names}},
        "models": {name: {"model": f"openai/mock-{name}", **model} for name in names},
    }
    clients = make_judges(load_config(config), names)
    items = parse_batch(content, "bench.jsonl")
    settings = BatchSettings(judges=[f"{n}=openai/mock-{n}" for n in names], votes=votes, adaptive=adaptive)
    batch_id = default_batch_id(content, settings)
    with tempfile.TemporaryDirectory() as home:
        if store_url is None:
            store = SQLiteStore.open(Path(home) / "council.db")
        else:
            from council.storage import location, open_location

            store = open_location(location.parse(store_url))
        cpu0 = time.process_time()
        summary = await run_batch(
            items,
            settings=settings,
            judges=clients,
            batch_id=batch_id,
            source="bench.jsonl",
            content_sha256=content_digest(content),
            concurrency=concurrency,
            store=store,
            max_cost=max_cost,
        )
        cpu = time.process_time() - cpu0
        store.close()
    for client in clients:
        await client.aclose()
    if summary.failed or summary.missing:
        raise SystemExit(f"the batch did not finish cleanly: {summary.failed} failed, {summary.missing} missing")
    return {"calls": summary.calls, "saved": summary.calls_saved, "wall": summary.wall_time_s, "cpu": cpu}


def process_cpu(pid: int) -> float | None:
    """User + system CPU seconds of another process (Linux /proc), or None elsewhere."""
    try:
        return cpu_of(pid)
    except OSError:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--votes", type=int, default=1)
    parser.add_argument("--adaptive", action="store_true", help="run twice: adaptive voting off, then on")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per mock call")
    parser.add_argument("--concurrency", type=int, default=64, help="calls in flight (and items in flight)")
    parser.add_argument("--transport", choices=TRANSPORTS, default="native")
    parser.add_argument("--judges", type=int, default=1, choices=range(1, len(JUDGE_NAMES) + 1),
                        help="judges on the panel, each judging every pair")  # fmt: skip
    args = parser.parse_args()
    print("$ python " + shlex.join(["benchmarks/bench_batch.py", *sys.argv[1:]]))

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from mock_server import start_mock_server

    content = pairs(args.pairs)
    with start_mock_server(latency=args.latency) as server:
        # Warm-up: connections, caches (and LiteLLM's import on that transport).
        common = {"concurrency": args.concurrency, "transport": args.transport, "judges": args.judges}
        asyncio.run(one_run(server.base_url, pairs(8), args.votes, False, **common))
        print(
            f"{args.pairs} pairs, {args.judges} judge{'s' if args.judges > 1 else ''}, votes {args.votes}, swap on, "
            f"latency {args.latency * 1000:g} ms, "
            f"{args.concurrency} calls in flight, transport {args.transport}, {os.cpu_count()} cores"
        )
        header = f"{'adaptive':>8} {'calls':>6} {'saved':>6} {'wall s':>7} {'bound s':>8} {'bound/wall':>10}"
        header += f" {'cpu ms/call':>11} {'server cpu':>10} {'cpu-bound est.':>14}"
        print(header)
        shares = []
        for adaptive in (False, True) if args.adaptive else (False,):
            server_cpu0 = process_cpu(server.process.pid)
            r = asyncio.run(one_run(server.base_url, content, args.votes, adaptive, **common))
            server_cpu1 = process_cpu(server.process.pid)
            bound = r["calls"] * args.latency / (args.concurrency * args.judges)  # each judge's own limit
            shares.append(bound / r["wall"])
            client_ms = 1000 * r["cpu"] / r["calls"]
            server_ms = None if server_cpu0 is None or server_cpu1 is None else (
                1000 * (server_cpu1 - server_cpu0) / r["calls"]
            )
            # On an idle machine with a core each, the busier of the two processes sets the pace.
            floor = max(client_ms, server_ms or 0.0) * r["calls"] / 1000
            estimate = bound / max(bound, floor)
            print(
                f"{'on' if adaptive else 'off':>8} {r['calls']:>6.0f} {r['saved']:>6.0f} {r['wall']:>7.2f} "
                f"{bound:>8.2f} {bound / r['wall']:>10.2f} {client_ms:>11.2f} "
                f"{'-' if server_ms is None else f'{server_ms:.2f}':>10} {estimate:>14.2f}"
            )
    print(
        "cpu ms/call: this process (the client); server cpu: the mock server's, per call; cpu-bound est.: the "
        "share of the bound reachable when each process has a core of its own (bound ÷ max(bound, busier CPU))"
    )
    ok = shares[0] >= GOAL
    print(f"goal: at least {GOAL} of the latency bound (adaptive off): {'PASS' if ok else 'MISS'} ({shares[0]:.2f})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
