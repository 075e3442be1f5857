"""Benchmark: the judging engine's own CPU per judge call, without HTTP (and a whole batch's).

    python benchmarks/bench_judge_cpu.py                  # 800 pairs (1,600 calls), 32 pairs at once, best of 5
    python benchmarks/bench_judge_cpu.py --pairs 200 --repeat 3
    python benchmarks/bench_judge_cpu.py --batch          # and the whole batch, its SQLite store included
    python benchmarks/bench_judge_cpu.py --batch --latency 0.05   # replies spread as over sockets

``council.judging.compare`` (one judge, swap on, one vote) over the pairs of
``benchmarks/bench_batch.py``, through a real ``ModelClient`` whose backend answers each request
with the reply the fake responder (the mock server's) gives it, computed in an untimed first
run and then looked up: what is timed is council's work around a call (the prompt, the request,
the retry policy, the call log, validating the reply, reading and combining the passes, the
outcome), not the HTTP exchange (``benchmarks/bench_bare_client.py``) or the database write. It
prints the CPU per call, best of ``--repeat``, against the 0.3 ms that the whole of council's
own work per call should stay under (issue 30), with the load average, since the machine may
be shared.

``--batch`` also times, interleaved with the engine, what ``council batch`` does on its own
around the same calls: ``council.judging.batch.run_batch`` (64 items in flight, as in
benchmarks/bench_bare_client.py) over the same backend, on a fresh SQLite store each time: the
queue, the worker, the call log's group commits, the judgments' rows and their commits, the
summary. No mock server shares the machine with it, and the replies come in fewer turns of the
event loop than over sockets (so the batch commits less often): this is council's work around
the calls, without what benchmarks/bench_bare_client.py's "own CPU" (council's CPU beside the mock
less the bare client's) also counts (docs/benchmark-history.md, section 46). ``--latency`` spreads the
replies as a server's would come (each after 0.5-1.5 times it): a few a turn, the turns'
own costs (the loop's, the commits') counted as over sockets; the engine's figure then holds
the timers' too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

from bench_batch import pairs  # also puts the package and tests/ on sys.path
from bench_common import add_collector_option, apply_collector, loadavg

GOAL_OWN_CPU_MS = 0.3
MODEL = "openai/mock-alpha"


class Replayed:
    """A backend answering like the mock server, each distinct request's reply made once."""

    batched = False

    def __init__(self, latency: float = 0.0) -> None:
        import random

        from council.testing.replies import FakeResponder

        self.responder = FakeResponder()
        self.kept: dict[tuple[str, int | None], str] = {}
        self.latency = latency
        self.rng = random.Random(0)

    async def generate(self, request: Any) -> Any:
        from council.providers.base import ChatResponse

        # A turn of the event loop, as a reply arriving would take; with a latency, each reply
        # after 0.5-1.5 times it (seeded), so they come a few per turn as over sockets.
        await asyncio.sleep(self.rng.uniform(0.5, 1.5) * self.latency if self.latency else 0)
        key = (request.messages[-1]["content"], request.seed)
        text = self.kept.get(key)
        if text is None:
            text = self.kept[key] = self.responder.reply(
                "mock-alpha", request.messages, json_schema=request.json_schema, schema_name=request.schema_name,
                seed=request.seed,
            )  # fmt: skip
        return ChatResponse(text=text, prompt_tokens=1000, completion_tokens=300)

    async def aclose(self) -> None:
        pass


async def timed(items: list[dict[str, Any]], judge: Any, at_once: int) -> float:
    """CPU seconds for judging every item (``at_once`` comparisons in flight)."""
    from council.accounting.usage import CallLog
    from council.judging.engine import compare

    gate = asyncio.Semaphore(at_once)

    async def one(item: dict[str, Any]) -> None:
        async with gate:
            outcome = await compare(item["prompt"], item["a"], item["b"], judges=[judge], store=None,
                                    keep_text=True, sink=CallLog())  # fmt: skip
            if not outcome.success:
                raise SystemExit(f"a comparison failed: {outcome.error}")

    cpu0 = time.process_time()
    await asyncio.gather(*(one(item) for item in items))
    return time.process_time() - cpu0


async def batch_timed(content: str, judge: Any, concurrency: int) -> float:
    """CPU seconds of ``run_batch`` over the pairs in ``content`` on a fresh SQLite store (from the
    call to its return: the enqueue, the judging and the summary; the store's opening and closing
    are not counted)."""
    import tempfile
    from pathlib import Path

    from council.judging.batch import BatchSettings, content_digest, default_batch_id, parse_batch, run_batch
    from council.storage import SQLiteStore

    items = parse_batch(content, "bench.jsonl")
    settings = BatchSettings(judges=[f"judge={MODEL}"], votes=1, adaptive=False)
    with tempfile.TemporaryDirectory() as home:
        store = SQLiteStore.open(Path(home) / "council.db")
        try:
            cpu0 = time.process_time()
            summary = await run_batch(
                items, settings=settings, judges=[judge], batch_id=default_batch_id(content, settings),
                source="bench.jsonl", content_sha256=content_digest(content), concurrency=concurrency, store=store,
            )  # fmt: skip
            cpu = time.process_time() - cpu0
        finally:
            store.close()
    if summary.failed or summary.missing:
        raise SystemExit(f"the batch did not finish cleanly: {summary.failed} failed, {summary.missing} missing")
    return cpu


def main() -> int:
    import json

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=800)
    parser.add_argument("--at-once", type=int, default=32, help="comparisons in flight")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs (the best is reported)")
    parser.add_argument("--batch", action="store_true", help="also the whole batch on a SQLite store (interleaved)")
    parser.add_argument("--concurrency", type=int, default=64, help="--batch: items in flight")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds a reply takes (0: at once)")
    add_collector_option(parser)
    args = parser.parse_args()
    apply_collector(args)
    print("$ python " + " ".join(["benchmarks/bench_judge_cpu.py", *sys.argv[1:]]))
    print(f"load average before: {loadavg()} on {os.cpu_count()} cores")

    from council.config import load_config
    from council.judging.engine import make_judges

    config = {
        "councils": {"default": {"members": ["judge"]}},
        "models": {"judge": {"model": MODEL, "api_base": "http://127.0.0.1:9", "max_concurrency": 64, "retries": 1}},
    }
    backend = Replayed(args.latency)

    def judge() -> Any:  # one per event loop: a client's semaphore belongs to the loop it was made on
        [client] = make_judges(load_config(config), [])
        client.api = backend
        return client

    content = pairs(args.pairs)
    items = [json.loads(line) for line in content.splitlines()]
    asyncio.run(timed(items, judge(), args.at_once))  # untimed: the replies are made here
    runs, batches = [], []
    for _ in range(args.repeat):
        runs.append(asyncio.run(timed(items, judge(), args.at_once)))
        if args.batch:
            batches.append(asyncio.run(batch_timed(content, judge(), args.concurrency)))
    calls = 2 * len(items)
    spread = f"replies after 0.5-1.5 × {args.latency * 1000:g} ms" if args.latency else "replies at once"
    print(f"{args.pairs} pairs, swap on, 1 vote: {calls} judge calls, {args.at_once} comparisons in flight, {spread}")
    per_call = [1000 * cpu / calls for cpu in runs]
    best = min(per_call)
    print(f"engine CPU per call: {best:.3f} ms (best of {args.repeat}: {' / '.join(f'{x:.3f}' for x in per_call)})")
    if args.batch:
        whole = [1000 * cpu / calls for cpu in batches]
        print(
            f"the whole batch ({args.concurrency} in flight, SQLite) CPU per call: {min(whole):.3f} ms "
            f"(best of {args.repeat}: {' / '.join(f'{x:.3f}' for x in whole)}); "
            f"the batch's own beyond the engine {min(whole) - best:.3f} ms"
        )
    print(f"load average after: {loadavg()}")
    share = best / GOAL_OWN_CPU_MS
    print(f"the engine's part of the {GOAL_OWN_CPU_MS} ms goal for council's own CPU per call: {share:.2f}")
    if args.batch:
        print(f"the whole batch's part of it (no HTTP): {min(whole) / GOAL_OWN_CPU_MS:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
