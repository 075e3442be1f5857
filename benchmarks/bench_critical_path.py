"""Benchmark: one council session's wall time against its critical path (3 × latency), in the
process and as a whole ``council run`` process.

    python benchmarks/bench_critical_path.py                      # both parts, native transport
    python benchmarks/bench_critical_path.py --transport litellm  # the same through LiteLLM
    python benchmarks/bench_critical_path.py --latency 0.1 --repeats 10 --members 3,5 --no-process

The mock LLM server (``scripts/mock_llm_server.py``, real HTTP on 127.0.0.1, its own process)
answers every call after ``--latency`` seconds. Members are ``openai/mock-mN`` models with an
``api_base``, as an OpenAI-compatible server is configured, reached through ``--transport``
(native: council's own client; litellm: LiteLLM). A session has three sequential stages, each
with all of its calls in parallel (N answers, N reviews, one synthesis); each model allows N
calls in flight, so no limit binds and the critical path is 3 × latency. The session writes to
a real council.db (in a temporary COUNCIL_HOME).

Part 1, in the process (goal: span ≤ 1.02 × the critical path at 0.2 s for 3, 5 and 9 members):

Per member count it prints the median span (wall time of ``Council.run``), the session's own
``duration_ms``, their ratio to 3 × latency (goal ≤ 1.02; SPEC: within 10 %), and where the time
beyond the three latencies goes, from the session's progress events: before the first stage
(query hash, session row), each stage beyond one latency, between stages, and after the synthesis
(bias records, result, the write to council.db). Each council runs one warm-up session (HTTP
connections opened; LiteLLM imported on that transport) before timing: the steady state. After
each session (native transport) the same request bodies, as council encoded them, are posted
again with plain aiohttp (:func:`replay`): each stage's in parallel, the stages in turn, each
reply parsed, the chairman's streamed. That is the floor: it prints the span ÷ the floor, each
stage's floor, and, where the floor itself misses the goal, says so.

Part 2, the whole process (goal: ≤ 1.3 × the critical path, ``--process-members`` 5 at
``--process-latency`` 0.25 s): the ``council run QUESTION --config FILE`` console script as a
fresh process each time, output piped (rendered as for a file), from start to exit: interpreter
start, imports, config, database, the session, rendering. In turn with it run two floors
(:data:`FLOOR`): the least a process making the same calls takes here, with aiohttp alone and with
aiohttp and pydantic (council's two libraries on its path to the first call), and ``python -c
pass``; it prints council ÷ each floor, and when even the pydantic floor misses the goal, says
so. The modules' bytecode is written by the warm-up run (as installing the package writes it),
also when PYTHONDONTWRITEBYTECODE is set. With ``--marks`` as many more processes run under a probe that
notes when each call to a model starts and ends (wrapping ``ModelClient.complete``): where the
time goes, from the process's start to its first call, stage by stage, and from the last reply
to its exit, beside the floors' own (they note their calls alike).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import (  # also puts the package and tests/ on sys.path
    TRANSPORTS,
    StageBodies,
    council_config,
    entry_point,
    prepare,
    this_checkout,
    write_council_toml,
)

GOAL = 1.02
PROCESS_GOAL = 1.3
# (label, from event, to event); an event is (kind, stage) and "the last" of its kind.
PHASES = [
    ("before stage 1 (hash, session row)", "start", "stage:answer"),
    ("stage 1: answers", "stage:answer", "answer"),
    ("between stages 1 and 2", "answer", "stage:review"),
    ("stage 2: reviews", "stage:review", "review"),
    ("between stages 2 and 3 (consensus)", "review", "stage:synthesis"),
    ("stage 3: synthesis", "stage:synthesis", "synthesis"),
    ("after stage 3 (bias records, result, db write)", "synthesis", "session_finished"),
    ("after the session_finished event (return)", "session_finished", "end"),
]
STAGES = {"stage 1: answers", "stage 2: reviews", "stage 3: synthesis"}


class FullCollections:
    """Counts the garbage collector's full (generation 2) passes and their time.

    With LiteLLM loaded the heap holds ~300k objects, so one full pass stops the event loop
    for ~150 ms: a session it lands in is that much longer.
    """

    def __init__(self) -> None:
        self.count, self.seconds, self._t0 = 0, 0.0, 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.count, self.seconds = self.count + 1, self.seconds + time.perf_counter() - self._t0


async def sessions(base_url: str, n: int, repeats: int, transport: str) -> list[dict[str, Any]]:
    """``repeats`` timed sessions of an n-member council (after a warm-up), each followed by the
    same calls replayed with plain aiohttp (:func:`replay`; native transport only)."""
    import aiohttp

    from council import Council

    out = []
    config = council_config(base_url, n, transport=transport, max_concurrency=n)
    sent = StageBodies() if transport == "native" else None
    async with (
        Council.from_config(config) as council,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http,
    ):
        for i in range(repeats + 1):  # the first is the warm-up (and opens the replay's connections)
            marks: dict[str, float] = {}

            def on_event(event: Any, marks: dict[str, float] = marks) -> None:
                key = f"stage:{event.stage}" if event.type == "stage" else event.type
                marks[key] = time.perf_counter()  # the last event of a kind wins
                if sent is not None:
                    sent.note(event)

            if sent is not None:
                sent.clear()
            marks["start"] = time.perf_counter()
            result = await council.run(f"Question {i}: why is the sky blue?", seed=i, on_event=on_event)
            marks["end"] = time.perf_counter()
            if result.status != "complete":
                raise SystemExit(f"session {i} of {n} members is {result.status}: {result.partial_reasons}")
            floor = None
            if sent is not None:
                floor = await replay(http, base_url + "/chat/completions", sent.stages())
            if i > 0:
                run = {"span": marks["end"] - marks["start"], "own": result.duration_ms / 1000, "marks": marks}
                out.append({**run, "floor": floor})
    return out


async def replay(http: Any, url: str, stages: list[list[bytes]]) -> list[float]:
    """A session's calls again, with plain aiohttp and nothing else: each stage's request bodies,
    as council encoded them, posted in parallel, the stages in turn; each reply read and parsed
    (a streamed one chunk by chunk, as the chairman's is). Its stages' wall times: the floor."""
    headers = {"content-type": "application/json", "accept": "application/json", "authorization": "Bearer x"}

    async def post(data: bytes) -> None:
        async with http.post(url, data=data, headers=headers) as reply:
            if reply.status != 200:
                raise SystemExit(f"replay: HTTP {reply.status}: {(await reply.read())[:200]!r}")
            if not reply.content_type.startswith("text/event-stream"):
                json.loads(await reply.read())["choices"][0]["message"]["content"]
                return
            async for line in reply.content:
                data = line.strip()
                if data.startswith(b"data:") and (data := data[5:].strip()) != b"[DONE]":
                    json.loads(data)

    spans = []
    for stage in stages:
        t0 = time.perf_counter()
        await asyncio.gather(*(post(data) for data in stage))
        spans.append(time.perf_counter() - t0)
    return spans


#: Runs the command with every model call's start and end noted (wall clock, and the CPU time of
#: the main thread, which runs the event loop: what the calls wait for), printed at exit.
MARKS_PROBE = """
import atexit, json, sys, time
from council.providers.client import ModelClient
calls = []
complete = ModelClient.complete
async def noted(self, request, *, stage, **kwargs):
    t0, c0 = time.time(), time.thread_time()
    try:
        return await complete(self, request, stage=stage, **kwargs)
    finally:
        calls.append((stage, t0, time.time(), c0, time.thread_time()))
ModelClient.complete = noted
atexit.register(lambda: sys.stderr.write("\\nMARKS " + json.dumps([calls, time.thread_time()]) + "\\n"))
sys.argv = ["council", *sys.argv[1:]]
from council.cli.main import main
main()
"""
#: The least a process doing a run's HTTP work takes here: the floor council is measured against.
#: It reads the same council.toml and makes the same calls to the same mock as ``council run``
#: (the members' answers in parallel, their reviews in parallel, the chairman's answer), each
#: reply read and parsed, the answer printed; nothing else: no prompts, no storage, no
#: statistics. argv: the TOML file, then "pydantic" (the config and each reply validated by
#: pydantic models, as council validates both) or "aiohttp" (plain dicts from ``json``). aiohttp's
#: import skips loading the CA certificates, which no plain-HTTP call needs, as council's does
#: (council.providers.http_client), and it exits without the interpreter's teardown, as council's
#: commands do. Its calls are noted as the probe above notes council's.
FLOOR = """
import asyncio, json, os, ssl, sys, time, tomllib
default_paths = ssl.SSLContext.set_default_verify_paths
ssl.SSLContext.set_default_verify_paths = lambda self: None
import aiohttp
ssl.SSLContext.set_default_verify_paths = default_paths
config = tomllib.load(open(sys.argv[1], "rb"))
if sys.argv[2] == "pydantic":
    from pydantic import BaseModel

    class Model(BaseModel):
        model: str
        api_base: str
        transport: str
        timeout: float
        retries: int
        max_concurrency: int

    class Members(BaseModel):
        members: list[str]
        chairman: str

    class Config(BaseModel):
        councils: dict[str, Members]
        models: dict[str, Model]

    class Message(BaseModel):
        content: str

    class Choice(BaseModel):
        message: Message

    class Reply(BaseModel):
        choices: list[Choice]

    config = Config.model_validate(config).model_dump()
    def content(body):
        return Reply.model_validate_json(body).choices[0].message.content
else:
    def content(body):
        return json.loads(body)["choices"][0]["message"]["content"]
council, models, calls = config["councils"]["default"], config["models"], []

async def run():
    async with aiohttp.ClientSession() as http:
        async def ask(name, prompt, stage):
            m = models[name]
            body = {"model": m["model"].split("/", 1)[1], "messages": [{"role": "user", "content": prompt}]}
            t0, c0 = time.time(), time.thread_time()
            async with http.post(m["api_base"] + "/chat/completions", json=body) as reply:
                reply.raise_for_status()
                text = content(await reply.read())
            calls.append((stage, t0, time.time(), c0, time.thread_time()))
            return text

        answers = await asyncio.gather(*(ask(n, "Why is the sky blue?", "answer") for n in council["members"]))
        joined = "\\n\\n".join(answers)
        ranking = "Rank these answers:\\n\\n" + joined
        ranked = await asyncio.gather(*(ask(n, ranking, "review") for n in council["members"]))
        print(await ask(council["chairman"], joined + "\\n\\n" + "\\n\\n".join(ranked), "synthesis"))

asyncio.run(run())
sys.stderr.write("\\nMARKS " + json.dumps([calls, time.thread_time()]) + "\\n")
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)  # no interpreter teardown, as council's commands exit (council.cli.main)
"""
FLOORS = {"pydantic": "floor: aiohttp + pydantic", "aiohttp": "floor: aiohttp alone"}
MARKS = [
    "start → 1st call",
    "stage 1",
    "stage 2",
    "reviews → chairman",
    "stage 3",
    "last reply → exit",
    "total",
    "main thread CPU before the 1st call",
    "main thread CPU after the last reply",
]


def marks_of(noted: list[Any], started: float, ended: float) -> dict[str, float]:
    """The phases of one process, in ms, from its calls' (stage, start, end, CPU at start, CPU
    at end) and the main thread's CPU at exit."""
    calls, cpu_at_exit = noted

    def span(stage: str) -> tuple[float, float]:
        of = [(c[1], c[2]) for c in calls if c[0] == stage]
        return min(a for a, _ in of), max(b for _, b in of)

    (a1, b1), (a2, b2), (a3, b3) = span("answer"), span("review"), span("synthesis")
    last = max(calls, key=lambda c: c[2])
    ms = [a1 - started, b1 - a1, b2 - a2, a3 - b2, b3 - a3, ended - last[2], ended - started]
    ms += [min(c[3] for c in calls), cpu_at_exit - last[4]]
    return {k: v * 1000 for k, v in zip(MARKS, ms, strict=True)}


def whole_process(members: int, latency: float, repeats: int, transport: str, marks: bool = False) -> dict[str, Any]:
    """Wall times of ``council run`` as a fresh process, of the floors (:data:`FLOOR`) and of
    ``python -c pass``, run in turn so that all see the same machine."""
    from mock_server import start_mock_server

    with start_mock_server(latency=latency) as server, tempfile.TemporaryDirectory() as home:
        config = council_config(server.base_url, members, transport=transport, max_concurrency=members)
        path = write_council_toml(Path(home) / "council.toml", config)
        env = this_checkout({**os.environ, "COUNCIL_HOME": home, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
        env.pop("COUNCIL_CONFIG", None)
        # As an installed package has its modules' bytecode (pip writes it), the warm-up run writes
        # it for a source checkout too: with PYTHONDONTWRITEBYTECODE set, every run would compile
        # council's ~70 modules from source first (~70 ms of CPU that no installed copy pays).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        argv = [*entry_point(), "run", "Why is the sky blue?", "--config", str(path)]
        floors = {kind: [sys.executable, "-c", FLOOR, str(path), kind] for kind in FLOORS}
        spans, passes, cpus, phases = [], [], [], []
        floor_spans: dict[str, list[float]] = {kind: [] for kind in FLOORS}
        floor_phases: dict[str, list[dict[str, float]]] = {kind: [] for kind in FLOORS}
        for i in range(repeats + 1):  # the first warms the OS file cache and writes the bytecode
            span, cpu, _ = _timed(argv, env, "council run")
            for kind, floor in floors.items():
                floor_span, _, noted = _timed(floor, env, FLOORS[kind], noting=True)
                if i > 0:
                    floor_spans[kind].append(floor_span)
                    floor_phases[kind].append(noted)
            bare, _, _ = _timed([sys.executable, "-c", "pass"], env, "python -c pass")
            if i > 0:
                spans.append(span)
                passes.append(bare)
                cpus.append(cpu)
        for _ in range(repeats if marks else 0):  # after the warm-up above, as the plain runs
            probed = [sys.executable, "-c", MARKS_PROBE, *argv[1:]]
            _, _, noted = _timed(probed, env, "council run under the probe", noting=True)
            phases.append(noted)
    return {
        "spans": spans,
        "floor": statistics.median(passes),
        "cpu": statistics.median(cpus),
        "cpus": cpus,
        "argv": argv[:2],
        "phases": phases,
        "floors": floor_spans,
        "floor_phases": floor_phases,
    }


def _timed(
    argv: list[str], env: dict[str, str], what: str, *, noting: bool = False
) -> tuple[float, float, dict[str, float]]:
    """One process's wall time and CPU (user + system), and with ``noting`` its phases, from the
    line ``MARKS [calls, CPU at exit]`` it writes on its standard error (the probe and the floors)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started, t0 = time.time(), time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    span, ended = time.perf_counter() - t0, time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if not noting:
        return span, cpu, {}
    line = next((x for x in proc.stderr.splitlines() if x.startswith("MARKS ")), None)
    if line is None:
        raise SystemExit(f"{what} noted no calls: {proc.stderr.strip()[-500:]}")
    return span, cpu, marks_of(json.loads(line.removeprefix("MARKS ")), started, ended)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--members", default="3,5,9", help="comma-separated member counts")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per mock call")
    parser.add_argument("--repeats", type=int, default=5, help="timed sessions per member count")
    parser.add_argument("--transport", choices=TRANSPORTS, default="native", help="how the members are reached")
    parser.add_argument("--no-process", action="store_true", help="skip part 2 (whole council run processes)")
    parser.add_argument("--no-session", action="store_true", help="skip part 1 (sessions in this process)")
    parser.add_argument("--process-members", type=int, default=5)
    parser.add_argument("--process-latency", type=float, default=0.25)
    parser.add_argument("--process-repeats", type=int, default=5)
    parser.add_argument("--marks", action="store_true", help="part 2: also where each process's time goes")
    args = parser.parse_args()
    counts = [int(x) for x in args.members.split(",") if x]

    home = prepare(  # noqa: F841 (kept until exit)
        __file__,
        f"transport {args.transport}; part 1: members {counts}, latency {args.latency * 1000:g} ms, {args.repeats} "
        f"timed sessions each (after 1 warm-up session per council); critical path = 3 × latency = "
        f"{3 * args.latency * 1000:g} ms; part 2: {args.process_members} members, latency "
        f"{args.process_latency * 1000:g} ms, {args.process_repeats} timed `council run` processes (after 1 warm-up)",
        f"part 1 is the steady state: HTTP connections opened before timing; server in its own process; "
        f"{os.cpu_count()} cores",
        litellm=args.transport == "litellm" and not args.no_session,
    )
    ok = True
    if not args.no_session:
        ok = session_part(args, counts) and ok
    if not args.no_process:
        ok = process_part(args) and ok
    return 0 if ok else 1


def process_part(args: argparse.Namespace) -> bool:
    critical = 3 * args.process_latency
    r = whole_process(args.process_members, args.process_latency, args.process_repeats, args.transport, args.marks)
    spans = r["spans"]
    span = statistics.median(spans)
    ratio = span / critical
    print()
    print(
        f"whole process: `council run` ({' '.join(Path(a).name for a in r['argv'])}), {args.process_members} members, "
        f"latency {args.process_latency * 1000:g} ms, critical path {critical * 1000:.0f} ms; the floors and "
        f"`python -c pass` run in turn with it"
    )
    print(f"{'':<28} {'wall ms':>8} {'(min-max)':>13} {'wall/CP':>8} {'council ÷ it':>13}")
    rows = [("council run", spans), *((FLOORS[kind], r["floors"][kind]) for kind in FLOORS)]
    for label, values in rows:
        median = statistics.median(values)
        versus = "" if values is spans else f"{span / median:.3f}"
        print(
            f"{label:<28} {median * 1000:>8.0f} {f'({min(values) * 1000:.0f}-{max(values) * 1000:.0f})':>13} "
            f"{median / critical:>8.3f} {versus:>13}"
        )
    print(f"{'python -c pass':<28} {r['floor'] * 1000:>8.0f}")
    print(
        f"beyond the critical path: {(span - critical) * 1000:.0f} ms (interpreter start, imports, config, "
        f"database, the session's own work, rendering)"
    )
    print(
        f"CPU of the process (user + system, median): {r['cpu'] * 1000:.0f} ms; CP + CPU = "
        f"{(critical + r['cpu']) * 1000:.0f} ms ({(critical + r['cpu']) / critical:.3f} × CP) would be the wall time "
        f"if none of it overlapped the waits (what a run imports and computes in worker threads while its calls "
        f"are in flight does; --marks shows the main thread's share)"
    )
    print(f"CPU of each process, ms: {' '.join(f'{c * 1000:.0f}' for c in r['cpus'])}")
    if r["phases"]:
        print(f"where the time goes ({len(r['phases'])} processes each; median (min) ms; wall clock):")
        columns = [("council run (probe)", r["phases"]), *((FLOORS[k], r["floor_phases"][k]) for k in FLOORS)]
        print(f"  {'':<36}" + "".join(f"{label:>28}" for label, _ in columns))
        for mark in MARKS:
            cells = []
            for _, phases in columns:
                values = [p[mark] for p in phases]
                cells.append(f"{statistics.median(values):.0f} ({min(values):.0f})")
            print(f"  {mark:<36}" + "".join(f"{c:>28}" for c in cells))
    verdict = "PASS" if ratio <= PROCESS_GOAL else "MISS"
    print(f"goal whole process ≤ {PROCESS_GOAL} × critical path: {verdict} ({ratio:.3f})")
    least = statistics.median(r["floors"]["pydantic"]) / critical
    if least > PROCESS_GOAL:
        print(
            f"  (the floor with council's two libraries, aiohttp and pydantic, is {least:.3f} × CP here: no process "
            f"that imports them meets the goal on this machine; council takes {ratio / least:.3f} × that floor)"
        )
    return ratio <= PROCESS_GOAL


def session_part(args: argparse.Namespace, counts: list[int]) -> bool:
    from mock_server import start_mock_server

    critical = 3 * args.latency
    rows = []
    full_gc = FullCollections()
    gc.callbacks.append(full_gc)
    with start_mock_server(latency=args.latency) as server:
        for n in counts:
            rows.append((n, asyncio.run(sessions(server.base_url, n, args.repeats, args.transport))))
    replayed = all(r["floor"] is not None for _, runs in rows for r in runs)

    print()
    header = f"{'members':>7} {'span ms':>8} {'(min-max)':>13} {'own ms':>7} {'span/CP':>8} {'own/CP':>7}"
    if replayed:
        header += f" {'floor ms':>9} {'floor/CP':>9} {'span ÷ floor':>13}"
    print(f"{header}  goal ≤ {GOAL}")
    misses, below = [], []
    for n, runs in rows:
        spans = [r["span"] for r in runs]
        span, own = statistics.median(spans), statistics.median(r["own"] for r in runs)
        ratio = span / critical
        verdict = "PASS" if ratio <= GOAL else "MISS"
        if ratio > GOAL:
            misses.append(n)
        line = (
            f"{n:>7} {span * 1000:>8.1f} {f'({min(spans) * 1000:.0f}-{max(spans) * 1000:.0f})':>13} "
            f"{own * 1000:>7.1f} {ratio:>8.3f} {own / critical:>7.3f}"
        )
        if replayed:
            floor = statistics.median(sum(r["floor"]) for r in runs)
            line += f" {floor * 1000:>9.1f} {floor / critical:>9.3f} {span / floor:>13.3f}"
            if floor / critical > GOAL:
                below.append((n, floor / critical, span / floor))
        print(f"{line}  {verdict}")

    print()
    print("where the time beyond 3 × latency goes (median ms over the timed sessions; stages minus one latency):")
    print(f"{'':<48}" + "".join(f"{f'{n} members':>11}" for n, _ in rows))
    for label, a, b in PHASES:
        cells = []
        for _, runs in rows:
            ms = statistics.median((r["marks"][b] - r["marks"][a]) * 1000 for r in runs)
            cells.append(ms - (args.latency * 1000 if label in STAGES else 0.0))
        print(f"{label:<48}" + "".join(f"{c:>11.1f}" for c in cells))
    excess = [(statistics.median(r["span"] for r in runs) - critical) * 1000 for _, runs in rows]
    print(f"{'total beyond the critical path':<48}" + "".join(f"{e:>11.1f}" for e in excess))
    if replayed:
        for k, label in enumerate(["answers", "reviews", "synthesis (streamed)"]):
            cells = [statistics.median(r["floor"][k] - args.latency for r in runs) * 1000 for _, runs in rows]
            print(f"{f'floor, stage {k + 1}: {label}':<48}" + "".join(f"{c:>11.1f}" for c in cells))
        cells = [statistics.median(sum(r["floor"]) - critical for r in runs) * 1000 for _, runs in rows]
        print(f"{'floor, total beyond the critical path':<48}" + "".join(f"{c:>11.1f}" for c in cells))
        print(
            "(the floor: after each session, the same request bodies posted again with plain aiohttp, each stage's "
            "in parallel, the stages in turn, each reply parsed; a stage's excess over it is client CPU, serialised "
            "on one event loop: our prompts, checks, records and events)"
        )

    print(
        f"full garbage collections during the run (warm-ups included): {full_gc.count} "
        f"({full_gc.seconds * 1000:.0f} ms in all; a session holding one is that much longer)"
    )
    for (n, _), e in zip(rows, excess, strict=True):
        print(
            f"{n} members: the same {e:.0f} ms beyond the critical path is ≤ {GOAL - 1:.0%} of it "
            f"from a latency of {e / 3 / (GOAL - 1):.0f} ms per call"
        )

    print()
    if misses:
        print(f"goal span ≤ {GOAL} × critical path: MISS for {', '.join(map(str, misses))} members")
    else:
        print(f"goal span ≤ {GOAL} × critical path: PASS for every member count measured")
    for n, floor, versus in below:
        print(
            f"  ({n} members: the same calls with plain aiohttp take {floor:.3f} × CP here: no client meets the goal "
            f"on this machine; council takes {versus:.3f} × that floor)"
        )
    return not misses


if __name__ == "__main__":
    sys.exit(main())
