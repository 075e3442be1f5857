"""Benchmark: one council session's wall time against its critical path (3 × latency).

    python scripts/bench_critical_path.py                      # 3, 5 and 9 members, 0.2 s per call, 5 repeats
    python scripts/bench_critical_path.py --latency 0.1 --repeats 10 --members 3,5

The mock LLM server (``scripts/mock_llm_server.py``, real HTTP on 127.0.0.1, its own process)
answers every call after ``--latency`` seconds. Members are ``openai/mock-mN`` models reached
through LiteLLM with ``api_base``, as an OpenAI-compatible server is configured. A session has
three sequential stages, each with all of its calls in parallel (N answers, N reviews, one
synthesis); each model allows N calls in flight, so no limit binds and the critical path is
3 × latency. The session writes to a real council.db (in a temporary COUNCIL_HOME).

Per member count it prints the median span (wall time of ``Council.run``), the session's own
``duration_ms``, their ratio to 3 × latency (goal ≤ 1.05; SPEC: within 10 %), and where the time
beyond the three latencies goes, from the session's progress events: before the first stage
(query hash, session row), each stage beyond one latency, between stages, and after the synthesis
(bias records, result, the write to council.db). LiteLLM is imported and each council runs one
warm-up session (HTTP connections opened) before timing, so the figures are the steady state.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from typing import Any

from bench_common import prepare  # also puts the package and tests/ on sys.path

GOAL = 1.05
# (label, from event, to event); an event is (kind, stage) and "the last" of its kind.
PHASES = [
    ("before stage 1 (hash, session row)", "start", "stage:answer"),
    ("stage 1: answers", "stage:answer", "answer"),
    ("between stages 1 and 2", "answer", "stage:review"),
    ("stage 2: reviews", "stage:review", "review"),
    ("between stages 2 and 3 (consensus)", "review", "stage:synthesis"),
    ("stage 3: synthesis", "stage:synthesis", "synthesis"),
    ("after stage 3 (bias records, result, db write)", "synthesis", "done"),
    ("after the done event (return)", "done", "end"),
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


def council_config(base_url: str, n: int) -> dict[str, Any]:
    names = [f"m{i}" for i in range(n)]
    model = {"api_base": base_url, "max_concurrency": n, "timeout": 30, "retries": 0}
    return {
        "councils": {"default": {"members": names, "chairman": names[0]}},
        "models": {name: {"model": f"openai/mock-{name}", **model} for name in names},
    }


async def sessions(base_url: str, n: int, repeats: int) -> list[dict[str, Any]]:
    from council import Council

    out = []
    async with Council.from_config(council_config(base_url, n)) as council:
        for i in range(repeats + 1):  # the first is the warm-up
            marks: dict[str, float] = {}

            def on_event(event: Any) -> None:
                key = f"stage:{event.stage}" if event.kind == "stage" else event.kind
                marks[key] = time.perf_counter()  # the last event of a kind wins

            marks["start"] = time.perf_counter()
            result = await council.run(f"Question {i}: why is the sky blue?", seed=i, on_event=on_event)
            marks["end"] = time.perf_counter()
            if result.status != "complete":
                raise SystemExit(f"session {i} of {n} members is {result.status}: {result.partial_reasons}")
            if i > 0:
                out.append({"span": marks["end"] - marks["start"], "own": result.duration_ms / 1000, "marks": marks})
    return out


async def raw_stage(base_url: str, n: int, repeats: int) -> float:
    """Median wall time of n parallel answer calls posted with plain httpx: a stage's floor here."""
    import httpx

    from council.session import prompts

    body = {"model": "mock-m0", "messages": prompts.member_messages("Why is the sky blue?")}
    spans = []
    async with httpx.AsyncClient(base_url=base_url) as http:
        for i in range(repeats + 1):  # the first opens the connections
            t0 = time.perf_counter()
            replies = await asyncio.gather(*(http.post("/chat/completions", json=body) for _ in range(n)))
            for reply in replies:
                reply.raise_for_status()
                reply.json()
            if i > 0:
                spans.append(time.perf_counter() - t0)
    return statistics.median(spans)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--members", default="3,5,9", help="comma-separated member counts")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per mock call")
    parser.add_argument("--repeats", type=int, default=5, help="timed sessions per member count")
    args = parser.parse_args()
    counts = [int(x) for x in args.members.split(",") if x]

    home = prepare(  # noqa: F841 (kept until exit)
        __file__,
        f"members {counts}, latency {args.latency * 1000:g} ms, {args.repeats} timed sessions each "
        f"(after 1 warm-up session per council); critical path = 3 × latency = {3 * args.latency * 1000:g} ms",
        "steady state: LiteLLM imported and HTTP connections opened before timing; server in its own process",
    )
    from mock_server import start_mock_server

    critical = 3 * args.latency
    rows = []
    full_gc = FullCollections()
    gc.callbacks.append(full_gc)
    with start_mock_server(latency=args.latency) as server:
        for n in counts:
            rows.append((n, asyncio.run(sessions(server.base_url, n, args.repeats))))
        floors = [asyncio.run(raw_stage(server.base_url, n, args.repeats)) - args.latency for n in counts]

    print()
    header = f"{'members':>7} {'span ms':>8} {'(min-max)':>13} {'own ms':>7} {'span/CP':>8} {'own/CP':>7}"
    print(f"{header}  goal ≤ {GOAL}")
    misses = []
    for n, runs in rows:
        spans = [r["span"] for r in runs]
        span, own = statistics.median(spans), statistics.median(r["own"] for r in runs)
        ratio = span / critical
        verdict = "PASS" if ratio <= GOAL else "MISS"
        if ratio > GOAL:
            misses.append(n)
        print(
            f"{n:>7} {span * 1000:>8.1f} {f'({min(spans) * 1000:.0f}-{max(spans) * 1000:.0f})':>13} "
            f"{own * 1000:>7.1f} {ratio:>8.3f} {own / critical:>7.3f}  {verdict}"
        )

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
    print(f"{'floor: N parallel raw httpx calls, minus latency':<48}" + "".join(f"{f * 1000:>11.1f}" for f in floors))
    print(
        "(a stage's excess over that floor is client CPU: LiteLLM's per-call work, serialised on one event loop, "
        "and ours; see scripts/bench_overhead.py)"
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
    return 0 if not misses else 1


if __name__ == "__main__":
    sys.exit(main())
