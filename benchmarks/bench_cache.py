"""Benchmark: client CPU per call answered from the call cache (the hit path).

    python benchmarks/bench_cache.py                 # 5,000 hits per layer, in blocks of 250
    python benchmarks/bench_cache.py --calls 1000

A judge's pairwise request (system prompt, both responses, the pass's JSON schema; ~10 KB) and
its valid JSON reply (~1 KB) are kept in a council.db cache (SQLite, WAL), then asked again and
again. The layers, each on the same request:

- (a) ``ModelClient.complete`` hit, no call log: the key (SHA-256 of the whole request), the
  store lookup, the entry decoded and checked, the caller's acceptance test (non-empty text);
- (b) (a) recording the call in an in-memory call log (a ``CallRecord`` with ``cached: true``);
- (c) ``asking.ask_valid`` hit: (b) with the judge's schema validation, as a judging pass runs it
  (the acceptance test validates, then the reply is parsed and validated for the caller);
- (d) (c) with the call log journalled to the store (one ``BEGIN IMMEDIATE`` write per call, as
  a judging run or session does for every call).

CPU = ``time.process_time()`` of this process. Goal: the hit path, (b), ≤ 0.2 ms per call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from bench_common import prepare  # also puts the package on sys.path

GOAL_MS = 0.2


def build() -> tuple[object, object, object, object]:
    from council.accounting.call_cache import CallCache
    from council.config import ModelSpec, ResolvedModel
    from council.judging.engine import GENERAL_CRITERIA
    from council.judging.prompts import pairwise_messages
    from council.judging.rubrics import load_bias_checklist
    from council.judging.running import schema_of
    from council.judging.schemas import Scale, pairwise_pass_model
    from council.providers.base import ChatRequest
    from council.providers.client import ModelClient
    from council.providers.fake import FakeAPI, FakeResponder
    from council.storage import StoreReplies, open_store

    store = open_store()
    scale: Scale = (1, 5)
    model = pairwise_pass_model(GENERAL_CRITERIA, scale, True)
    schema = schema_of(model)
    messages = pairwise_messages(
        "Explain why the sky is blue to a curious ten-year-old. " * 3,
        "Sunlight is made of many colours; air scatters blue light the most (Rayleigh scattering). " * 6,
        "Because the ocean reflects onto the sky, which is a common myth that is not right. " * 6,
        GENERAL_CRITERIA,
        scale=scale,
        allow_tie=True,
        bias_checklist=load_bias_checklist(),
        schema=schema,
    )
    spec = ModelSpec(model="fake/judge", max_tokens=800)
    client = ModelClient(ResolvedModel(id="judge", spec=spec), FakeAPI(spec.model, responder=FakeResponder()))
    client.cache = CallCache(StoreReplies(store))
    request = ChatRequest(messages=messages, json_schema=schema, schema_name="pairwise_pass", seed=0, max_tokens=800)
    return store, client, request, model


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--block", type=int, default=250)
    args = parser.parse_args()
    home = prepare(__file__, __doc__.split("\n\n")[2].replace("\n", " "), litellm=False)  # noqa: F841
    from council.accounting.usage import CallLog
    from council.judging.prompts import retry_message
    from council.providers.asking import ask_valid

    store, client, request, model = build()
    first = await client.complete(request, stage="compare")  # made once, kept
    request_bytes = len(json.dumps(request.model_dump(mode="json")))
    log, journal_log = CallLog(), CallLog(store.journal("bench"))

    async def ask(sink: CallLog) -> None:
        reply = await ask_valid(
            client, request.messages, model, schema=request.json_schema, schema_name="pairwise_pass",
            retry_message=retry_message, stage="compare", seed=0, max_attempts=1, sink=sink,
        )  # fmt: skip
        assert reply.parsed is not None

    layers: dict[str, Callable[[], Awaitable[object]]] = {
        "(a) ModelClient.complete hit, no log": lambda: client.complete(request, stage="compare"),
        "(b) hit + call-log record": lambda: client.complete(request, stage="compare", sink=log),
        "(c) ask_valid hit (schema validation)": lambda: ask(log),
        "(d) (c) + call log written to the store": lambda: ask(journal_log),
    }
    for one in layers.values():  # warm-up
        for _ in range(20):
            await one()
    blocks: dict[str, list[float]] = {name: [] for name in layers}
    for _ in range(max(1, args.calls // args.block)):
        for name, one in layers.items():  # layers take turns, so drift hits each alike
            cpu0 = time.process_time()
            for _ in range(args.block):
                await one()
            blocks[name].append(1000 * (time.process_time() - cpu0) / args.block)
    assert len(client.api.history) == 1, "every timed call was a hit"
    print(f"request {request_bytes} bytes, reply {len(first.text)} bytes; {args.calls} hits per layer")
    print(f"\n{'layer':42} {'CPU ms/call':>12} {'blocks: min':>12} {'median':>7} {'max':>7}")
    for name, values in blocks.items():
        mean = statistics.fmean(values)
        print(f"{name:42} {mean:12.3f} {min(values):12.3f} {statistics.median(values):7.3f} {max(values):7.3f}")
    hit = statistics.fmean(blocks["(b) hit + call-log record"])
    verdict = "PASS" if hit <= GOAL_MS else "FAIL"
    print(f"\ngoal: the hit path (b) <= {GOAL_MS} ms/call: {verdict} ({hit:.3f})")
    store.close()
    sys.exit(0 if verdict == "PASS" else 1)


if __name__ == "__main__":
    asyncio.run(main())
