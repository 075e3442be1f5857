"""Benchmark: the judging engine's own CPU per judge call, without HTTP or a store.

    python scripts/bench_judge_cpu.py                  # 800 pairs (1,600 calls), 32 pairs at once, best of 5
    python scripts/bench_judge_cpu.py --pairs 200 --repeat 3

``council.judging.compare`` (one judge, swap on, one vote) over the pairs of
``scripts/bench_batch.py``, through a real ``ModelClient`` whose backend answers each request
with the reply the fake responder (the mock server's) gives it, computed in an untimed first
run and then looked up: what is timed is council's work around a call (the prompt, the request,
the retry policy, the call log, validating the reply, reading and combining the passes, the
outcome), not the HTTP exchange (``scripts/bench_bare_client.py``) or the database write. It
prints the CPU per call, best of ``--repeat``, against the 0.3 ms that the whole of council's
own work per call should stay under (issue 30), with the load average, since the machine may
be shared.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

from bench_batch import pairs  # also puts the package and tests/ on sys.path

GOAL_OWN_CPU_MS = 0.3
MODEL = "openai/mock-alpha"


class Replayed:
    """A backend answering like the mock server, each distinct request's reply made once."""

    batched = False

    def __init__(self) -> None:
        from council.testing.replies import FakeResponder

        self.responder = FakeResponder()
        self.kept: dict[tuple[str, int | None], str] = {}

    async def generate(self, request: Any) -> Any:
        from council.providers.base import ChatResponse

        await asyncio.sleep(0)  # a turn of the event loop, as a reply arriving would take
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
    from council.judging.engine import compare
    from council.usage import CallLog

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


def main() -> int:
    import json

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=800)
    parser.add_argument("--at-once", type=int, default=32, help="comparisons in flight")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs (the best is reported)")
    args = parser.parse_args()
    print("$ python " + " ".join(["scripts/bench_judge_cpu.py", *sys.argv[1:]]))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")

    from council.config import load_config
    from council.judging.engine import make_judges

    config = {
        "councils": {"default": {"members": ["judge"]}},
        "models": {"judge": {"model": MODEL, "api_base": "http://127.0.0.1:9", "max_concurrency": 64, "retries": 1}},
    }
    [judge] = make_judges(load_config(config), [])
    judge.api = Replayed()
    items = [json.loads(line) for line in pairs(args.pairs).splitlines()]
    asyncio.run(timed(items, judge, args.at_once))  # untimed: the replies are made here
    runs = [asyncio.run(timed(items, judge, args.at_once)) for _ in range(args.repeat)]
    calls = 2 * len(items)
    per_call = [1000 * cpu / calls for cpu in runs]
    best = min(per_call)
    print(f"{args.pairs} pairs, swap on, 1 vote: {calls} judge calls, {args.at_once} comparisons in flight")
    print(f"engine CPU per call: {best:.3f} ms (best of {args.repeat}: {' / '.join(f'{x:.3f}' for x in per_call)})")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    share = best / GOAL_OWN_CPU_MS
    print(f"the engine's part of the {GOAL_OWN_CPU_MS} ms goal for council's own CPU per call: {share:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
