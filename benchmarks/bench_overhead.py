"""Benchmark: client CPU per LLM call, layer by layer: raw HTTP, the native transport, council.

    python benchmarks/bench_overhead.py                    # 1,000 calls per layer, in blocks of 50
    python benchmarks/bench_overhead.py --calls 200 --members 5 --litellm

The mock LLM server (``scripts/mock_llm_server.py``, real HTTP on 127.0.0.1) runs in its own
process with zero latency, so its CPU is not counted; ``time.process_time()`` counts every
thread of this process. Calls are made one after another. The layers, on the same request (a
member's answer prompt):

- (a) raw HTTP: the chat-completion body posted with one keep-alive ``aiohttp.ClientSession``,
  JSON decoded: the floor (the HTTP client the native transport stands on);
- (b) the native transport: ``OpenAICompatibleAPI.generate`` (body, POST, reply and usage
  parsing, cost lookup);
- (c) council, one call: ``ModelClient.complete`` over (b) (semaphore, retry loop, deadline,
  call-log record);
- (d) council, whole sessions: ``Council.run`` of ``--members`` members with the store on; CPU per
  call = session CPU ÷ calls. This adds review prompts and JSON-schema output (larger requests
  and replies), validation, consensus, bias records and the council.db write;
- (e) with ``--litellm``: ``litellm.acompletion`` with the arguments ``LiteLLMAPI`` passes, for
  comparison (imported before timing).

Ours = (c) − (a): everything council adds to a call beyond the raw HTTP client. Goal: ≤ 0.5 ms
per call (SPEC target ≤ 2 ms). The layers take turns in blocks of ``--block`` calls, so whatever
drifts during the run (other processes on the 2 cores, the CPU clock, heap growth) affects each
layer alike; the paired differences per round are printed too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

from bench_common import council_config, prepare  # also puts the package and tests/ on sys.path

One = Callable[[], Awaitable[int]]

GOAL_MS, SPEC_MS = 0.5, 2.0
WARMUP = 20
QUESTION = "Why is the sky blue? Answer in two sentences."


class Layer:
    """One way of making a call, opened once; ``one()`` makes some calls and returns how many."""

    def __init__(self, name: str, one: One) -> None:
        self.name, self.one = name, one
        self.cpu, self.calls, self.blocks = 0.0, 0, []  # blocks: ms/call of each timed block

    async def block(self, calls: int) -> None:
        cpu0, done = time.process_time(), 0
        while done < calls:
            done += await self.one()
        # Inside the timed window: background work of these calls (LiteLLM's logging tasks and
        # threads) finishes here instead of being billed to the next layer's block. Idle is free.
        await asyncio.sleep(0.05)
        cpu = time.process_time() - cpu0
        self.cpu, self.calls = self.cpu + cpu, self.calls + done
        self.blocks.append(1000 * cpu / done)

    @property
    def ms_per_call(self) -> float:
        return 1000 * self.cpu / self.calls


async def raw_http(stack: AsyncExitStack, base_url: str, messages: list[dict[str, str]]) -> One:
    import aiohttp

    body = {"model": "mock-m0", "messages": messages}
    http = await stack.enter_async_context(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)))
    url, headers = base_url + "/chat/completions", {"authorization": "Bearer unused"}

    async def one() -> int:
        async with http.post(url, json=body, headers=headers) as response:
            response.raise_for_status()
            await response.json()
        return 1

    return one


async def native_api(stack: AsyncExitStack, base_url: str, messages: list[dict[str, str]]) -> One:
    from council.config.endpoints import native_endpoint
    from council.providers.base import ChatRequest
    from council.providers.openai_compatible import OpenAICompatibleAPI

    api = OpenAICompatibleAPI("openai/mock-m0", native_endpoint("openai/mock-m0", base_url), api_key="unused")
    stack.push_async_callback(api.aclose)
    request = ChatRequest(messages=messages)

    async def one() -> int:
        await api.generate(request)
        return 1

    return one


async def litellm_direct(stack: AsyncExitStack, base_url: str, messages: list[dict[str, str]]) -> One:
    from council.providers.litellm_api import import_litellm

    litellm = import_litellm()
    # The arguments LiteLLMAPI.generate passes for an OpenAI-compatible server.
    kwargs = {"model": "openai/mock-m0", "messages": messages, "api_base": base_url, "api_key": "unused",
              "timeout": 30.0, "num_retries": 0, "max_retries": 0}  # fmt: skip

    async def one() -> int:
        await litellm.acompletion(**kwargs)
        return 1

    return one


async def model_client(stack: AsyncExitStack, base_url: str, messages: list[dict[str, str]]) -> One:
    from council import Council
    from council.providers.base import ChatRequest

    config = council_config(base_url, 1, max_concurrency=1)
    council = await stack.enter_async_context(Council.from_config(config, store=False))
    client = council.clients["m0"]
    log: list[Any] = []

    async def one() -> int:
        await client.complete(ChatRequest(messages=messages, **client.defaults()), stage="answer", sink=log.append)
        log.clear()
        return 1

    return one


async def sessions(stack: AsyncExitStack, base_url: str, members: int) -> One:
    from council import Council

    config = council_config(base_url, members, max_concurrency=members)
    council = await stack.enter_async_context(Council.from_config(config))
    seq = iter(range(10**9))

    async def one() -> int:
        i = next(seq)
        result = await council.run(f"Question {i}: {QUESTION}", seed=i)
        if result.status != "complete":
            raise SystemExit(f"a session is {result.status}: {result.partial_reasons}")
        return result.usage.calls

    return one


async def measure(base_url: str, calls: int, block: int, members: int, litellm: bool) -> list[Layer]:
    from council.session import prompts

    messages = prompts.member_messages(QUESTION)
    async with AsyncExitStack() as stack:
        layers = [
            Layer("(a) raw HTTP (aiohttp)", await raw_http(stack, base_url, messages)),
            Layer("(b) native OpenAICompatibleAPI", await native_api(stack, base_url, messages)),
            Layer("(c) council ModelClient.complete", await model_client(stack, base_url, messages)),
            Layer(f"(d) council sessions ({members} members)", await sessions(stack, base_url, members)),
        ]
        if litellm:
            layers.append(Layer("(e) LiteLLM acompletion", await litellm_direct(stack, base_url, messages)))
        for layer in layers:
            for _ in range(WARMUP):
                await layer.one()
        # Interleaved blocks: drift (other processes, the CPU clock, heap growth) hits every layer
        # alike; the order rotates each round, so no layer always follows the same one.
        turn = 0
        while any(layer.calls < calls for layer in layers):
            for layer in layers[turn % len(layers) :] + layers[: turn % len(layers)]:
                if layer.calls < calls:
                    await layer.block(min(block, calls - layer.calls))
            turn += 1
    return layers


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="timed calls per layer")
    parser.add_argument("--block", type=int, default=50, help="calls per timed block (layers take turns)")
    parser.add_argument("--members", type=int, default=3, help="members of the sessions in layer (d)")
    parser.add_argument("--litellm", action="store_true", help="add layer (e), LiteLLM, for comparison")
    args = parser.parse_args()

    home = prepare(  # noqa: F841 (kept until exit)
        __file__,
        f"{args.calls} timed calls per layer in blocks of {args.block}, layers interleaved, after {WARMUP} warm-up "
        f"calls each; sessions of {args.members} members; mock server at zero latency in its own process; "
        f"CPU = time.process_time() of this process (all threads); {os.cpu_count()} cores",
        litellm=args.litellm,
    )
    from mock_server import start_mock_server

    with start_mock_server(latency=0) as server:
        layers = asyncio.run(measure(server.base_url, args.calls, args.block, args.members, args.litellm))
    a, b, c, d = layers[:4]

    print()
    print(f"{'layer':<36} {'CPU ms/call':>11} {'blocks: min':>12} {'median':>7} {'max':>7}")
    for layer in layers:
        blocks = sorted(layer.blocks)
        print(
            f"{layer.name:<36} {layer.ms_per_call:>11.3f} {blocks[0]:>12.3f} "
            f"{statistics.median(blocks):>7.3f} {blocks[-1]:>7.3f}"
        )
    ours = c.ms_per_call - a.ms_per_call
    # Paired by round: block i of (a) and block i of (c) ran in the same round, under like conditions.
    paired = sorted(y - x for x, y in zip(a.blocks, c.blocks, strict=False))
    print()
    print(f"native transport (b) − (a): {b.ms_per_call - a.ms_per_call:7.3f} ms/call")
    print(f"client layer     (c) − (b): {c.ms_per_call - b.ms_per_call:7.3f} ms/call")
    print(
        f"ours             (c) − (a): {ours:7.3f} ms/call (per pair of blocks: median "
        f"{statistics.median(paired):.3f}, range {paired[0]:.3f} to {paired[-1]:.3f})"
    )
    print(
        f"ours + session   (d) − (a): {d.ms_per_call - a.ms_per_call:7.3f} ms/call "
        "(review requests and replies are larger; includes prompts, validation, consensus and the db write)"
    )
    if args.litellm:
        e = layers[4]
        print(f"LiteLLM          (e) − (a): {e.ms_per_call - a.ms_per_call:7.3f} ms/call (for comparison)")
    ok = ours <= GOAL_MS
    print(
        f"goal ours ≤ {GOAL_MS:g} ms/call beyond the raw HTTP client: {'PASS' if ok else 'MISS'} ({ours:.3f}); "
        f"SPEC target ≤ {SPEC_MS:g} ms: {'PASS' if ours <= SPEC_MS else 'MISS'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
