"""The shared-rpm part of benchmarks/bench_scaleout.py: 4 `council serve` processes share one
model's rpm budget through one store (PostgreSQL, then one SQLite file).

    python benchmarks/bench_scaleout.py --part rpm                         # rpm 600, 75 s, 60-s windows
    python benchmarks/bench_scaleout.py --part rpm --rpm 120 --seconds 25 --window 15 --backends sqlite

A council of three members on the mock LLM server (a fixed latency per call), one of which
(``lim``) has ``rpm`` and ``max_concurrency`` = the burst; the other two have no limit. Each of
``--servers`` `council serve` processes (one store, ``COUNCIL_DATABASE_URL``) is driven by
``--clients`` concurrent sessions in a loop for ``--seconds``, so together they ask ``lim`` for
far more than its rpm. The mock logs when each request arrived: the most ``lim`` calls in any
``--window`` seconds must be at most ``rpm × window / 60 + burst`` (docs/methods.md, "Shared
rate budget"), whichever server sent them; the figure is printed next to that bound, with
how many calls each server made (each server drew from the one budget) and the load average.
The same count is made over the calls' ``started_at`` in the store (when each server sent
the call, after its wait): the budget's promise is about those; a call's arrival at the mock
may come later by the time a loaded machine takes to send it, which can crowd a window.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("--part rpm")
    group.add_argument("--rpm", type=int, default=600, help="the shared budget of the limited model")
    group.add_argument("--burst", type=int, default=4, help="its max_concurrency (the GCRA burst)")
    group.add_argument("--seconds", type=float, default=75.0, help="how long the servers are driven")
    group.add_argument("--window", type=float, default=60.0, help="the window the budget is checked over")
    group.add_argument("--servers", type=int, default=4)
    group.add_argument("--clients", type=int, default=8, help="sessions in flight per server")
    group.add_argument("--rpm-latency", type=float, default=0.05, help="seconds per mock call")
    group.add_argument("--backends", default="postgresql,sqlite")


def config(path: Path, mock_url: str, rpm: int, burst: int) -> Path:
    common = f'api_base = "{mock_url}"\nretries = 0\ntimeout = 600\n'
    path.write_text(
        '[councils.default]\nmembers = ["lim", "f1", "f2"]\nchairman = "f1"\n\n'
        f'[models.lim]\nmodel = "openai/mock-limited"\n{common}rpm = {rpm}\nmax_concurrency = {burst}\n\n'
        f'[models.f1]\nmodel = "openai/mock-f1"\n{common}max_concurrency = 64\n\n'
        f'[models.f2]\nmodel = "openai/mock-f2"\n{common}max_concurrency = 64\n'
    )
    return path


async def drive(bases: list[str], clients: int, seconds: float) -> dict[str, int]:
    """Sessions in a loop, ``clients`` at a time per server, until ``seconds`` have passed."""
    import httpx

    deadline = time.monotonic() + seconds
    done = dict.fromkeys(bases, 0)
    body = {"model": "default", "messages": [{"role": "user", "content": "Why is the sky blue?"}]}

    async def loop(client: httpx.AsyncClient, base: str) -> None:
        while time.monotonic() < deadline:
            response = await client.post(base + "/v1/chat/completions", json=body)
            response.raise_for_status()
            done[base] += 1

    async with httpx.AsyncClient(timeout=httpx.Timeout(600)) as client:
        await asyncio.gather(*(loop(client, base) for base in bases for _ in range(clients)))
    return done


def one_backend(backend: str, args: argparse.Namespace, server) -> None:
    from mock_server import start_mock_server
    from serve_helpers import council_serve

    from council.methods.gcra import most_in_window

    with tempfile.TemporaryDirectory(prefix="council-rpm-") as tmp_name, ExitStack() as stack:
        tmp = Path(tmp_name)
        url = f"sqlite:///{tmp}/council.db"
        if backend == "postgresql":
            url = server.fresh_database(migrated=True)
            stack.callback(server.drop_database, url)
        mock = stack.enter_context(start_mock_server(latency=args.rpm_latency, log_requests=tmp / "requests.jsonl"))
        cfg = config(tmp / "council.toml", mock.base_url, args.rpm, args.burst)
        env = {"COUNCIL_DATABASE_URL": url, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        bases = []
        for i in range(args.servers):
            home = tmp / f"home{i}"
            home.mkdir()
            bases.append(stack.enter_context(council_serve(cfg, home, "--quiet", env=env)).base)
        load_before = os.getloadavg()
        sessions = asyncio.run(drive(bases, args.clients, args.seconds))
        load = os.getloadavg()
        starts = sorted(e["time"] for e in mock.logged_requests() if e["model"] == "mock-limited")
        sent = sent_times(url)
    most = most_in_window(starts, [1.0] * len(starts), args.window)
    most_sent = most_in_window(sent, [1.0] * len(sent), args.window)
    bound = args.rpm * args.window / 60 + args.burst
    span = starts[-1] - starts[0] if len(starts) > 1 else 0.0
    rate = (len(starts) - 1) / span * 60 if span else 0.0
    print(
        f"{backend}: {args.servers} servers, {sum(sessions.values())} sessions "
        f"({', '.join(str(n) for n in sessions.values())} per server), {len(starts)} calls of the limited model "
        f"in {span:.1f} s = {rate:.1f} a minute; most in any {args.window:g} s window: {most:.0f} "
        f"(bound rpm x window/60 + burst = {bound:.0f}: {'held' if most <= bound else 'EXCEEDED'}); "
        f"by the calls' started_at in the store: {len(sent)} calls, most in any window {most_sent:.0f} "
        f"({'held' if most_sent <= bound else 'EXCEEDED'}); "
        f"load average {load_before[0]:.2f} before, {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} after"
    )


def sent_times(url: str) -> list[float]:
    """When the servers sent the limited model's calls (``calls.started_at``), epoch seconds."""
    from datetime import datetime

    os.environ["COUNCIL_DATABASE_URL"] = url
    from council.storage import open_store

    store = open_store()
    try:
        rows = store.db.execute("SELECT started_at FROM calls WHERE member = 'lim'").fetchall()
    finally:
        store.close()
        del os.environ["COUNCIL_DATABASE_URL"]
    return sorted(datetime.fromisoformat(row[0]).timestamp() for row in rows)


def run(args: argparse.Namespace) -> None:
    from postgres_server import Server

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    print(
        f"rpm {args.rpm}, burst {args.burst}, {args.servers} servers x {args.clients} sessions in flight, "
        f"{args.seconds:g} s, mock latency {args.rpm_latency}s, {os.cpu_count()} CPU cores"
    )
    server = Server()
    if "postgresql" in backends:
        server.start()
        if server.url is None:
            raise SystemExit(f"no PostgreSQL server: {server.problem}")
    try:
        for backend in backends:
            one_backend(backend, args, server)
    finally:
        if "postgresql" in backends:
            server.stop()
