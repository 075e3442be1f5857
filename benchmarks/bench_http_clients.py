"""Benchmark: which async HTTP client the native transport should stand on.

    python benchmarks/bench_http_clients.py                    # 1,000 calls at once, 3 rounds, then 300 one by one
    python benchmarks/bench_http_clients.py --concurrent 2000 --rounds 2

The same chat-completion request (a member's answer prompt, JSON body) is posted to the mock
LLM server (``scripts/mock_llm_server.py``, real HTTP on 127.0.0.1, its own process, zero
latency) by each client, and the JSON reply decoded:

- ``aiohttp``: one ``ClientSession`` over a ``TCPConnector(limit=0)`` (no pool cap: the caller
  limits concurrency), ``json=`` body, ``await response.json()``;
- ``httpx``: one ``AsyncClient`` with no connection cap, ``json=`` body, ``response.json()``;
- ``openai``: the SDK's ``AsyncOpenAI(max_retries=0)`` over its default httpx client with no
  connection cap, ``chat.completions.create`` (pydantic reply objects).

Two measurements per client, in rounds that rotate the order of the clients:

- burst: ``--concurrent`` calls started at once (connections opened in the first round, reused
  after: keep-alive), wall time and CPU of this process per call (``time.process_time``);
- serial: ``--serial`` calls one after another, CPU per call (the cost on an idle loop).

The mock server's CPU is not counted (it runs in its own process), but it shares the cores,
so the burst wall time is mostly the server's; the CPU per call is what separates the clients.
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

from bench_common import ROOT  # noqa: F401 (puts the package and tests/ on sys.path)

Post = Callable[[], Awaitable[None]]
QUESTION = "Why is the sky blue? Answer in two sentences."


async def aiohttp_client(stack: AsyncExitStack, base_url: str, body: dict[str, Any]) -> Post:
    import aiohttp

    session = await stack.enter_async_context(
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), headers={"authorization": "Bearer unused"})
    )
    url = base_url + "/chat/completions"

    async def post() -> None:
        async with session.post(url, json=body) as response:
            response.raise_for_status()
            await response.json()

    return post


async def httpx_client(stack: AsyncExitStack, base_url: str, body: dict[str, Any]) -> Post:
    import httpx

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    http = await stack.enter_async_context(
        httpx.AsyncClient(base_url=base_url, headers={"authorization": "Bearer unused"}, limits=limits, timeout=60)
    )

    async def post() -> None:
        response = await http.post("/chat/completions", json=body)
        response.raise_for_status()
        response.json()

    return post


async def openai_client(stack: AsyncExitStack, base_url: str, body: dict[str, Any]) -> Post:
    import httpx
    import openai

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    http = openai.DefaultAsyncHttpxClient(limits=limits, timeout=60)
    client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, http_client=http)
    stack.push_async_callback(client.close)

    async def post() -> None:
        await client.chat.completions.create(**body)

    return post


CLIENTS = {"aiohttp": aiohttp_client, "httpx": httpx_client, "openai": openai_client}


async def burst(post: Post, n: int) -> tuple[float, float]:
    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(post() for _ in range(n)))
    return time.perf_counter() - t0, time.process_time() - cpu0


async def serial(post: Post, n: int) -> float:
    cpu0 = time.process_time()
    for _ in range(n):
        await post()
    return time.process_time() - cpu0


async def measure(base_url: str, args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    from council.session import prompts

    body = {"model": "mock-alpha", "messages": prompts.member_messages(QUESTION)}
    names = [n for n in CLIENTS if n in args.clients]
    out: dict[str, dict[str, list[float]]] = {n: {"wall": [], "cpu": [], "serial": []} for n in names}
    async with AsyncExitStack() as stack:
        posts = {n: await CLIENTS[n](stack, base_url, body) for n in names}
        for n in names:  # warm-up: open the connections the bursts will reuse
            await burst(posts[n], args.concurrent)
        for r in range(args.rounds):
            for n in names[r % len(names) :] + names[: r % len(names)]:
                wall, cpu = await burst(posts[n], args.concurrent)
                out[n]["wall"].append(wall)
                out[n]["cpu"].append(1000 * cpu / args.concurrent)
                out[n]["serial"].append(1000 * await serial(posts[n], args.serial) / args.serial)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--concurrent", type=int, default=1000, help="calls started at once per burst")
    parser.add_argument("--serial", type=int, default=300, help="calls one after another per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated subset of " + ",".join(CLIENTS))
    args = parser.parse_args()
    print("$ python benchmarks/bench_http_clients.py " + " ".join(sys.argv[1:]))
    print(
        f"{args.concurrent} calls at once per burst (after one warm-up burst), {args.serial} serial calls per round, "
        f"{args.rounds} rounds, clients rotated; mock server at zero latency in its own process; "
        f"{os.cpu_count()} cores; CPU = time.process_time() of this process"
    )
    from mock_server import start_mock_server

    with start_mock_server(latency=0) as server:
        results = asyncio.run(measure(server.base_url, args))
    print()
    print(f"{'client':<8} {'burst wall s':>12} {'calls/s':>8} {'burst CPU ms/call':>18} {'serial CPU ms/call':>19}")
    for name, r in results.items():
        wall = statistics.median(r["wall"])
        print(
            f"{name:<8} {wall:>12.2f} {args.concurrent / wall:>8.0f} {statistics.median(r['cpu']):>18.3f} "
            f"{statistics.median(r['serial']):>19.3f}"
        )
    print("(medians over the rounds)")
    if "aiohttp" in results:
        base = statistics.median(results["aiohttp"]["cpu"])
        for name, r in results.items():
            if name != "aiohttp":
                print(f"burst CPU per call, {name} ÷ aiohttp: {statistics.median(r['cpu']) / base:.1f} ×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
