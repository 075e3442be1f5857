"""Benchmark: one ``council serve`` process under many concurrent sessions, against the critical path.

    python benchmarks/bench_serve_sessions.py                    # 200 sessions, 5 members, 250 ms per call
    python benchmarks/bench_serve_sessions.py --sessions 50 --rounds 5
    python benchmarks/bench_serve_sessions.py --workers 2        # council serve --workers 2: two processes, one port
    python benchmarks/bench_serve_sessions.py --postgres         # the store on PostgreSQL
    python benchmarks/bench_serve_sessions.py --rpm 1000000      # each call reserves its turn in the store's rpm budget
    python benchmarks/bench_serve_sessions.py --baseline ../old  # in turn with an earlier checkout's council serve

The mock LLM server (``scripts/mock_llm_server.py``, its own process) answers every call after
``--latency`` seconds. ``council serve`` runs as a real process on a temporary COUNCIL_HOME
(SQLite, the default settings; with ``--postgres`` a fresh database on a throwaway PostgreSQL
server from scripts/postgres_test_server.sh, or on COUNCIL_TEST_POSTGRES_URL's) with one
council of ``--members`` models ``openai/mock-mN`` (m0 is also the chairman); each model allows
every session's calls in flight, so no limit binds and each session's critical path is 3 ×
latency (answers, reviews, synthesis).

A round starts ``--sessions`` chat completions at once (``POST /v1/chat/completions``, model =
the council, one session each, not streamed) from this process's aiohttp client, and times each
from its request to its whole reply. Per round it prints p50 / p99 / max latency and their ratio
to the critical path, the round's wall time, and the CPU per model call of the server, of the
mock, of this client and of PostgreSQL's processes when it is a throwaway one (user + system
from /proc, over the round; the server's is the sum of its processes with ``--workers N``;
every session complete, so 2 × members + 1 calls each). A first round of ``--warm-up``
sessions opens the connections. The best round (lowest p99) is the figure; the load average is
printed before and after.

In turn with each round of council serve, a round runs on the floor (:data:`FLOOR`, skipped
with ``--no-floor``): a server on council serve's HTTP stack that posts, for each request, the
request bodies one council session sent (captured from a session run in this process first) to
the same mock, and does nothing else. It prints council ÷ the floor, and says so when the floor
itself misses the goal.

Goal: p99 ≤ 1.3 × the critical path. The sessions start together, so each stage's replies reach
the server together and queue for its one event loop. Two estimates are printed beside the
measured p99, neither a bound: CP + the server's CPU for the round (with ``--workers N`` shared
by N event loops, on at most as many cores as the machine has), as if none of that CPU ran while
sessions waited for replies, with the CPU per call the goal would need by that estimate; and CP
+ every process's CPU for the round spread over the machine's cores. Some of the CPU does run
during the waits, so the measured p99 falls below both.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench_common import (  # also puts the package and tests/ on sys.path
    council_config,
    database_cpu,
    postgres_if,
    process_cpu,
    session_bodies,
    write_council_toml,
)

GOAL = 1.3
LISTENING = re.compile(r"council serve: http://(?P<host>[^\s/]+):(?P<port>\d+)/v1")


def tree_cpu_seconds(pid: int) -> float:
    """CPU of a process and of its live children (``council serve --workers N``: the supervisor
    and its N server processes)."""
    total = process_cpu(pid)
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                total += process_cpu(int(child))
            except FileNotFoundError:  # ended since it was listed
                pass
    return total


def uptime() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


#: The least a server making a session's calls takes here: the floor council serve is measured
#: against. The same server stack as council serve (uvicorn, starlette), one route for
#: ``POST /v1/chat/completions``; for each request, the request bodies one council session sent
#: (as council encoded them, read from a JSON file: the mock does the same work for them) are
#: posted to the same mock from one aiohttp session, each stage's in parallel, the stages in turn,
#: each reply read and parsed with ``json`` (the chairman's streamed, as council serve's is); the
#: reply says the session is complete. Nothing else: no prompts, no checks, no storage, no
#: statistics. argv: the bodies' file. It announces its port as council serve does.
FLOOR = """
import asyncio, contextlib, json, socket, sys
import aiohttp, uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

spec = json.load(open(sys.argv[1]))
url, stages = spec["url"], [[body.encode() for body in stage] for stage in spec["stages"]]
headers = {"content-type": "application/json", "authorization": "Bearer x"}
http = None

async def post(body):
    async with http.post(url, data=body, headers=headers) as reply:
        reply.raise_for_status()
        if not reply.content_type.startswith("text/event-stream"):
            return json.loads(await reply.read())["choices"][0]["message"]["content"]
        pieces = []
        async for line in reply.content:
            data = line.strip()
            if data.startswith(b"data:") and (data := data[5:].strip()) != b"[DONE]":
                choices = json.loads(data).get("choices")
                if choices:
                    pieces.append(choices[0].get("delta", {}).get("content") or "")
        return "".join(pieces)

async def chat(request):
    (await request.json())["messages"][-1]["content"]  # read as a server reads it; the bodies are fixed
    for stage in stages:
        texts = await asyncio.gather(*(post(body) for body in stage))
    return JSONResponse({"choices": [{"message": {"role": "assistant", "content": texts[-1]}}],
                         "council": {"status": "complete"}})

async def health(request):
    return JSONResponse({"status": "ok"})

@contextlib.asynccontextmanager
async def lifespan(app):
    global http
    http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    yield
    await http.close()

app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/health", health)],
                lifespan=lifespan)
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sys.stderr.write(f"council serve: http://127.0.0.1:{sock.getsockname()[1]}/v1\\n")
sys.stderr.flush()
uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(sockets=[sock])
"""


class Serve:
    """``council serve --config FILE --port 0`` as a process (or, with ``floor``, the bodies' file,
    :data:`FLOOR`); ``base`` once it answers."""

    def __init__(
        self,
        config: Path,
        home: str,
        workers: int = 1,
        database_url: str | None = None,
        floor: Path | None = None,
        max_sessions: int | None = None,
        tree: Path | None = None,
    ) -> None:
        env = {**os.environ, "COUNCIL_HOME": home}
        if tree is not None:  # ``python -m council`` imports the package from its working directory
            env["PYTHONPATH"] = str(tree)
        env.pop("COUNCIL_CONFIG", None)
        env.pop("COUNCIL_DATABASE_URL", None)
        if database_url is not None:
            env["COUNCIL_DATABASE_URL"] = database_url
        if floor is not None:
            command = [sys.executable, "-c", FLOOR, str(floor)]
        else:
            command = [sys.executable, "-m", "council", "serve", "--config", str(config), "--port", "0"]
            command += ["--workers", str(workers)]
            if max_sessions is not None:  # a round is never refused
                command += ["--max-sessions", str(max_sessions)]
        self.proc = subprocess.Popen(
            command,
            env=env,
            cwd=tree,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        announced = threading.Event()

        def drain() -> None:
            assert self.proc.stderr is not None
            for line in iter(self.proc.stderr.readline, ""):
                self.lines.append(line)
                if LISTENING.search(line):
                    announced.set()
            announced.set()

        threading.Thread(target=drain, daemon=True).start()
        match = LISTENING.search("".join(self.lines)) if announced.wait(60) else None
        if match is None:
            self.stop()
            raise SystemExit(f"council serve did not start: {''.join(self.lines)[-1000:]}")
        self.base = f"http://127.0.0.1:{match['port']}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def wait_healthy(http: Any, base: str) -> None:
    import aiohttp

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            async with http.get(base + "/health") as reply:
                if reply.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.05)
    raise SystemExit(f"council serve did not answer on {base}")


async def one_round(http: Any, base: str, n: int, tag: str, members: int) -> dict[str, Any]:
    """``n`` sessions at once: each one's latency, the calls they made, the round's wall time."""

    async def session(i: int) -> tuple[float, bool]:
        body = {"model": "default", "messages": [{"role": "user", "content": f"{tag} {i}: why is the sky blue?"}]}
        t0 = time.perf_counter()
        async with http.post(base + "/v1/chat/completions", json=body) as reply:
            data = await reply.json()
        status = data.get("council", {}).get("status") if reply.status == 200 else None
        # Partial with only late members (stage_grace closed a stage while this server's own event
        # loop was behind): counted and printed; every call still ran. Anything else is a fault.
        reasons = data.get("council", {}).get("partial_reasons") or []
        late_only = status == "partial" and reasons and all(" late " in why for why in reasons)
        if status != "complete" and not late_only:
            raise SystemExit(f"session {tag} {i}: HTTP {reply.status}, not complete: {reasons or data.get('error')}")
        return time.perf_counter() - t0, status == "partial"

    t0 = time.perf_counter()
    done = await asyncio.gather(*(session(i) for i in range(n)))
    # A session made one answer and one review per member (late ones too), and the synthesis.
    return {
        "wall": time.perf_counter() - t0,
        "latencies": sorted(latency for latency, _ in done),
        "calls": n * (2 * members + 1),
        "late": sum(partial for _, partial in done),
    }


HEADINGS = {
    "council": "council serve:",
    "floor": "floor (the same calls, nothing else; FLOOR in this script):",
    "baseline": "baseline (--baseline's council serve, in turn):",
}


def baseline_serve(args: argparse.Namespace, base_url: str, limit: int) -> Serve:
    """The ``--baseline`` checkout's ``council serve`` on a COUNCIL_HOME of its own (an earlier
    version may not read a newer database), with the same council but for ``--council-setting``."""
    home = tempfile.mkdtemp(prefix="council-bench-baseline-")
    atexit.register(shutil.rmtree, home, True)
    path = write_config(home, args, base_url, limit, args.baseline_setting)
    return Serve(path, home, args.workers, max_sessions=max(args.sessions, args.warm_up), tree=args.baseline.resolve())


def write_config(home: str, args: argparse.Namespace, base_url: str, limit: int, settings: list[str]) -> Path:
    """HOME/council.toml: the benchmark's council of mock members (``--rpm``; ``limit`` calls in
    flight a model), with ``settings`` (KEY=VALUE) on it."""
    rpm = {"rpm": args.rpm} if args.rpm else {}
    # retries as by default: a keep-alive connection the mock (uvicorn, 5 s) closes as it is
    # reused, in a slow round on a loaded machine, is asked again.
    config = council_config(base_url, args.members, max_concurrency=limit, retries=3, timeout=120, **rpm)
    config["councils"]["default"].update(council_settings(settings))
    return write_council_toml(Path(home) / "council.toml", config)


def council_settings(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as council settings: VALUE as JSON where it reads as JSON, else a string."""
    settings: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--council-setting {pair!r}: expected KEY=VALUE")
        try:
            settings[key] = json.loads(value)
        except ValueError:
            settings[key] = value
    return settings


def percentile(sorted_values: list[float], q: float) -> float:
    """The nearest-rank percentile (q in 0..100) of sorted values."""
    rank = max(1, -(-len(sorted_values) * q // 100))
    return sorted_values[int(rank) - 1]


async def measure(
    args: argparse.Namespace, servers: dict[str, Serve], mock_pid: int, database: Any = None
) -> dict[str, list[dict[str, Any]]]:
    """``args.rounds`` timed rounds on each server, in turn (each after a warm-up round)."""
    import aiohttp

    rounds: dict[str, list[dict[str, Any]]] = {label: [] for label in servers}
    timeout = aiohttp.ClientTimeout(total=600)
    # Idle connections dropped before the server's keep-alive timeout (uvicorn's: 5 s) ends them.
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=2)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        for serve in servers.values():
            await wait_healthy(http, serve.base)
            await one_round(http, serve.base, args.warm_up, "Warm-up", args.members)
        for r in range(args.rounds):
            for label, serve in servers.items():
                pids = {"server": serve.proc.pid, "mock": mock_pid, "client": os.getpid()}
                # The server's processes are the serve process's children; the client's children (the
                # mock, the servers) are counted apart.
                cpu = {"server": tree_cpu_seconds, "mock": process_cpu, "client": process_cpu}
                before = {k: cpu[k](p) for k, p in pids.items()}
                db_before = database_cpu(database) if database is not None and label == "council" else None
                result = await one_round(http, serve.base, args.sessions, f"Round {r}", args.members)
                result["cpu"] = {k: cpu[k](p) - before[k] for k, p in pids.items()}
                if db_before is not None:
                    result["cpu"]["database"] = database_cpu(database) - db_before
                rounds[label].append(result)
    return rounds


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200, help="sessions started at once per round")
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per mock call")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds; the best (lowest p99) counts")
    parser.add_argument("--warm-up", type=int, default=20, help="sessions of the untimed first round")
    parser.add_argument("--workers", type=int, default=1, help="server processes (council serve --workers N)")
    parser.add_argument("--postgres", action="store_true", help="the store on PostgreSQL (else SQLite)")
    parser.add_argument("--rpm", type=int, help="each model's rpm (the store's shared budget: a reservation a call)")
    parser.add_argument("--no-floor", action="store_true", help="skip the floor server (FLOOR), run in turn")
    parser.add_argument("--baseline", type=Path, metavar="CHECKOUT",
                        help="also run that checkout's council serve (its own COUNCIL_HOME), in turn, round by round")
    parser.add_argument("--baseline-setting", action="append", default=[], metavar="KEY=VALUE",
                        help="a [councils.default] setting for the baseline only (as --council-setting)")
    parser.add_argument("--council-setting", action="append", default=[], metavar="KEY=VALUE",
                        help="a [councils.default] setting (JSON, else a string), e.g. stage_grace=off")  # fmt: skip
    args = parser.parse_args()
    from mock_server import start_mock_server

    critical = 3 * args.latency
    print("$ python " + " ".join([os.path.relpath(__file__), *sys.argv[1:]]))
    print(
        f"{args.sessions} concurrent sessions per round, {args.rounds} rounds after a warm-up of {args.warm_up}; "
        f"{args.members} members, {args.workers} server process{'es' if args.workers > 1 else ''}, "
        f"store {'PostgreSQL' if args.postgres else 'SQLite'}{f', rpm {args.rpm}' if args.rpm else ''}, "
        f"mock at {args.latency * 1000:g} ms per call; "
        f"critical path = 3 × latency = {critical * 1000:g} ms; {os.cpu_count()} cores; load average before: {uptime()}"
    )
    limit = args.sessions * 3 + args.warm_up  # every session's calls in flight at once: no limit binds
    with start_mock_server(latency=args.latency) as mock, tempfile.TemporaryDirectory(prefix="council-bench-") as home:
        path = write_config(home, args, mock.base_url, limit, args.council_setting)
        with postgres_if(args.postgres) as database:
            url = database.fresh_database(migrated=True) if database is not None else None
            servers = {"council": Serve(path, home, args.workers, url, max_sessions=max(args.sessions, args.warm_up))}
            try:
                if not args.no_floor:
                    stages = asyncio.run(session_bodies(mock.base_url, args.members))
                    spec = {
                        "url": mock.base_url + "/chat/completions",
                        "stages": [[b.decode() for b in s] for s in stages],
                    }
                    floor = Path(home) / "floor-bodies.json"
                    floor.write_text(json.dumps(spec), encoding="utf-8")
                    servers["floor"] = Serve(path, home, floor=floor)
                if args.baseline is not None:
                    servers["baseline"] = baseline_serve(args, mock.base_url, limit)
                measured = asyncio.run(measure(args, servers, mock.process.pid, database))
            finally:
                for serve in servers.values():
                    serve.stop()
    rounds = measured["council"]

    db = "database" in rounds[0]["cpu"]
    for label, of in measured.items():
        with_db = "database" in of[0]["cpu"]  # a throwaway PostgreSQL's, counted for council's rounds
        print()
        print(HEADINGS.get(label, label))
        print(f"{'round':>5} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'p50/CP':>7} {'p99/CP':>7} {'wall s':>7} "
              f"{'calls':>6}  CPU ms per call: server   mock  client{'  PostgreSQL' if with_db else ''}")  # fmt: skip
        for i, r in enumerate(of):
            lat = r["latencies"]
            per_call = {k: v * 1000 / r["calls"] for k, v in r["cpu"].items()}
            print(
                f"{i:>5} {percentile(lat, 50) * 1000:>7.0f} {percentile(lat, 99) * 1000:>7.0f} "
                f"{lat[-1] * 1000:>7.0f} {percentile(lat, 50) / critical:>7.3f} {percentile(lat, 99) / critical:>7.3f} "
                f"{r['wall']:>7.2f} {r['calls']:>6}  {'':>16}{per_call['server']:>6.2f} {per_call['mock']:>6.2f} "
                f"{per_call['client']:>7.2f}" + (f" {per_call['database']:>11.2f}" if with_db else "")
                + (f"  ({r['late']} sessions partial: members late)" if r.get("late") else "")
            )
    print()
    best = min(rounds, key=lambda r: percentile(r["latencies"], 99))
    p50, p99 = percentile(best["latencies"], 50), percentile(best["latencies"], 99)
    server_ms = best["cpu"]["server"] * 1000 / best["calls"]
    print(
        f"best round: p50 {p50 * 1000:.0f} ms ({p50 / critical:.3f} × CP), p99 {p99 * 1000:.0f} ms "
        f"({p99 / critical:.3f} × CP); server CPU {server_ms:.2f} ms per call, "
        f"{best['cpu']['server']:.2f} s for the round's {best['calls']} calls "
        f"({best['cpu']['server'] / best['wall']:.2f} of a core over {best['wall']:.2f} s)"
    )
    # All sessions start together, so their stages' replies arrive together and wait for the
    # event loops. Estimates, not bounds: as if none of the CPU ran while sessions waited.
    loops = min(args.workers, os.cpu_count() or 1)
    need = (GOAL - 1) * critical * loops / best["calls"] * 1000
    estimate = critical + best["cpu"]["server"] / loops
    print(
        f"estimate from the server's {loops} event loop{'s' if loops > 1 else ''}: CP + its CPU for the round"
        f"{f' / {loops}' if loops > 1 else ''} = {estimate * 1000:.0f} ms ({estimate / critical:.3f} × CP), as if "
        f"none of it ran during the waits; by it, p99 ≤ {GOAL} × CP needs ≤ {need:.2f} ms of server CPU per "
        f"call at {args.sessions} sessions"
    )
    # The mock, this client (and PostgreSQL) share the cores too.
    cores = os.cpu_count() or 1
    machine = critical + sum(best["cpu"].values()) / cores
    others = "server, mock, client and PostgreSQL" if db else "server, mock and client"
    print(
        f"estimate from the machine's {cores} cores: CP + {others} CPU for the round / {cores} = "
        f"{machine * 1000:.0f} ms ({machine / critical:.3f} × CP)"
    )
    if "floor" in measured:
        floor = min(measured["floor"], key=lambda r: percentile(r["latencies"], 99))
        f50, f99 = percentile(floor["latencies"], 50), percentile(floor["latencies"], 99)
        print(
            f"floor's best round: p50 {f50 * 1000:.0f} ms ({f50 / critical:.3f} × CP), p99 {f99 * 1000:.0f} ms "
            f"({f99 / critical:.3f} × CP); its CPU {floor['cpu']['server'] * 1000 / floor['calls']:.2f} ms per call; "
            f"council ÷ floor: p50 {p50 / f50:.3f}, p99 {p99 / f99:.3f}"
        )
    if "baseline" in measured:
        # Rounds ran in turn, so each pair of rounds met the same load: the ratio is taken per pair.
        ratios = sorted(
            (c["cpu"]["server"] / c["calls"]) / (b["cpu"]["server"] / b["calls"])
            for c, b in zip(rounds, measured["baseline"], strict=True)
        )
        base = [b["cpu"]["server"] * 1000 / b["calls"] for b in measured["baseline"]]
        overall = sum(r["cpu"]["server"] for r in rounds) / sum(b["cpu"]["server"] for b in measured["baseline"])
        print(
            f"baseline ({args.baseline}): server CPU per call, median of its rounds {statistics.median(base):.2f} ms; "
            f"this tree ÷ baseline, round by round: median {statistics.median(ratios):.3f} "
            f"(from {ratios[0]:.3f} to {ratios[-1]:.3f} over {len(ratios)} pairs); all rounds together {overall:.3f}"
        )
    print(f"load average after: {uptime()}")
    verdict = "PASS" if p99 <= GOAL * critical else "MISS"
    print(f"goal p99 ≤ {GOAL} × critical path: {verdict} ({p99 / critical:.3f})")
    if "floor" in measured and f99 > GOAL * critical:
        print(
            f"  (the floor, a server making the same calls with council's HTTP stack and nothing else, reaches "
            f"{f99 / critical:.3f} × CP here: no such server meets the goal on this machine)"
        )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
