"""Benchmark: what ``council_run`` through ``council mcp`` adds to the same session run by the library.

    python benchmarks/bench_mcp_overhead.py                     # 3 members, 0.05 s latency, 10 sessions each
    python benchmarks/bench_mcp_overhead.py --members 5 --latency 0.2 --repeats 20

The mock LLM server (real HTTP on 127.0.0.1) answers every call after ``--latency`` seconds.
Library: ``Council.run`` in this process. MCP: the SDK's own client (``mcp.Client``) starts
``council mcp --config FILE`` as a subprocess and calls ``council_run`` over stdio, with a
progress callback (so every progress notification is on the wire). Each side runs one warm-up
session first (imports, HTTP connections). Printed: median and mean wall time per session on
each side, their difference (the MCP layer: JSON-RPC over pipes, input validation, progress
notifications, the text and structured result), and the server process's start-up (client
connect to the first ``list_tools`` reply), which a client pays once per server, not per call.
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

from bench_common import ROOT, council_config, prepare, write_council_toml


async def library(config: dict, repeats: int) -> list[float]:
    from council import Council

    times = []
    async with Council.from_config(config) as council:
        for i in range(repeats + 1):
            t0 = time.perf_counter()
            result = await council.run(f"Question {i}: why is the sky blue?", seed=i)
            if result.status != "complete":
                raise SystemExit(f"library session {i}: {result.status} {result.partial_reasons}")
            if i:
                times.append(time.perf_counter() - t0)
    return times


async def over_mcp(toml: Path, repeats: int) -> tuple[list[float], float, int]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = {
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
        "COUNCIL_HOME": os.environ["COUNCIL_HOME"],
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "council", "mcp", "--config", str(toml)], env=env
    )
    notes = 0

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        nonlocal notes
        notes += 1

    times = []
    t0 = time.perf_counter()
    async with Client(params) as client:
        await client.list_tools()
        startup = time.perf_counter() - t0
        for i in range(repeats + 1):
            t0 = time.perf_counter()
            reply = await client.call_tool(
                "council_run",
                {"question": f"Question {i}: why is the sky blue?", "seed": i},
                progress_callback=on_progress,
            )
            if reply.is_error or (reply.structured_content or {}).get("status") != "complete":
                raise SystemExit(f"MCP session {i}: {reply.content}")
            if i:
                times.append(time.perf_counter() - t0)
    return times, startup, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    home = prepare(__file__, "council_run over MCP (stdio) against Council.run, same mock server", litellm=False)
    from mock_server import start_mock_server

    with start_mock_server(latency=args.latency) as mock:
        config = council_config(mock.base_url, args.members, max_concurrency=args.members)
        with tempfile.TemporaryDirectory() as tmp:
            toml = write_council_toml(Path(tmp) / "council.toml", config)
            lib = asyncio.run(library(config, args.repeats))
            mcp, startup, notes = asyncio.run(over_mcp(toml, args.repeats))
    critical = 3 * args.latency
    print(f"{args.members} members, latency {args.latency:g}s (critical path {critical:.3f}s), ", end="")
    print(f"{args.repeats} sessions each")
    for label, values in (("library Council.run", lib), ("MCP council_run", mcp)):
        median, mean = statistics.median(values) * 1000, statistics.mean(values) * 1000
        print(f"{label:22} median {median:8.1f} ms   mean {mean:8.1f} ms")
    diff = statistics.median(mcp) - statistics.median(lib)
    print(f"MCP overhead per session: {diff * 1000:+.1f} ms (median), {diff / statistics.median(lib) * 100:+.1f} %")
    print(f"progress notifications: {notes / (args.repeats + 1):.1f} per session")
    print(f"server start-up (spawn to first list_tools reply): {startup * 1000:.0f} ms, once per client")
    del home


if __name__ == "__main__":
    main()
