"""Drive the web app in headless Chromium against the mock LLM server: write its screenshot
(docs/web-app.png) and measure what a user waits for.

Measured, with a mock whose models take ``--latency`` seconds to start a reply and send a word
every ``--stream-interval`` seconds (a hosted model's pace):
- the web app: from clicking "Ask" to the first member's answer on screen, to the first words
  of the synthesis, and to the finished session;
- a streamed chat completion (``stream: true``): to the first progress line
  (``reasoning_content``), to the first word of the answer, and to the end;
- the server's CPU per streamed token: the ``council serve`` process's CPU time (every thread,
  from /proc/PID/task/*/schedstat) from the first streamed token to the last, divided by the
  tokens between — for chat completions, and for a session started with ``POST /v1/sessions``
  whose events are stored in batches and read as SSE by one client.

    python scripts/screenshot_web.py                       # screenshot + figures
    python scripts/screenshot_web.py --no-screenshot --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "tests"):  # the package, tests/mock_server.py and tests/serve_helpers.py
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

import httpx  # noqa: E402
from mock_server import start_mock_server  # noqa: E402
from serve_helpers import council_serve  # noqa: E402

QUESTION = "Why is the sky blue, and why are sunsets red?"
TOKEN = "screenshot-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}


def cpu_seconds(pid: int) -> float:
    """CPU time of a process, all its threads, in nanoseconds' precision (Linux schedstat; the
    clock ticks of /proc/PID/stat are 10 ms, coarser than a run's whole streaming)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def server_pid(port: str) -> int:
    """The pid of the process listening on ``port`` (the council serve child)."""
    inode = None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            if parts[1].rsplit(":", 1)[1] == f"{int(port):04X}" and parts[3] == "0A":
                inode = parts[9]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return int(pid)
        except OSError:
            continue
    raise RuntimeError(f"no process listens on port {port}")


def _per_token(cpu: list[float]) -> float:
    """CPU ms per token between the first and the last streamed token (the session's fixed work,
    before and after the synthesis, stays outside the window)."""
    return 1000 * (cpu[-1] - cpu[0]) / max(len(cpu) - 1, 1)


def chat_stream(base: str, pid: int, mock_pid: int) -> dict[str, float]:
    body = {"model": "default", "stream": True, "messages": [{"role": "user", "content": QUESTION}]}
    first_progress = first_content = None
    cpu: list[float] = []
    mock_cpu: list[float] = []
    t0 = time.perf_counter()
    with httpx.stream("POST", base + "/v1/chat/completions", json=body, headers=AUTH, timeout=60) as reply:
        for line in reply.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            delta = chunk["choices"][0]["delta"] if chunk.get("choices") else {}
            if delta.get("reasoning_content") and first_progress is None:
                first_progress = time.perf_counter() - t0
            if delta.get("content"):
                first_content = first_content or time.perf_counter() - t0
                cpu.append(cpu_seconds(pid))
                mock_cpu.append(cpu_seconds(mock_pid))
    total = time.perf_counter() - t0
    return {
        "first_progress": first_progress or 0.0,
        "first_content": first_content or 0.0,
        "total": total,
        "tokens": len(cpu),
        "cpu_per_token_ms": _per_token(cpu),
        "mock_per_token_ms": _per_token(mock_cpu),
    }


def events_stream(base: str, pid: int) -> dict[str, float]:
    """A session started with POST /v1/sessions, its events read as SSE by one client."""
    session_id = httpx.post(f"{base}/v1/sessions", json={"council": "default", "question": QUESTION},
                            headers=AUTH).json()["session_id"]  # fmt: skip
    cpu: list[float] = []
    with httpx.stream("GET", f"{base}/v1/sessions/{session_id}/events", headers=AUTH, timeout=60) as reply:
        for line in reply.iter_lines():
            if line == "event: synthesis_delta":
                cpu.append(cpu_seconds(pid))
    return {"tokens": len(cpu), "cpu_per_token_ms": _per_token(cpu)}


def web_session(page, base: str) -> dict[str, float]:
    page.goto(base + "/")
    page.wait_for_selector("#ask-council option", state="attached")
    page.fill("#ask-question", QUESTION)
    t0 = time.perf_counter()
    page.click("#ask-submit")
    page.wait_for_selector("#session #question")
    shown = time.perf_counter() - t0
    page.wait_for_selector("#answer-panel .answer-text")
    first_answer = time.perf_counter() - t0
    while not page.text_content("#synthesis-text"):  # polled from here: the page's CSP forbids eval
        page.wait_for_timeout(5)
    first_synthesis = time.perf_counter() - t0
    page.wait_for_selector("#status.complete", timeout=60_000)
    total = time.perf_counter() - t0
    return {"shown": shown, "first_answer": first_answer, "first_synthesis": first_synthesis, "total": total}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--output", default=str(ROOT / "docs" / "web-app.png"), help="where the PNG goes")
    parser.add_argument("--no-screenshot", action="store_true", help="measure only")
    parser.add_argument("--runs", type=int, default=3, help="sessions measured of each kind (median shown)")
    parser.add_argument("--latency", type=float, default=0.3, help="seconds before each mock reply starts")
    parser.add_argument("--stream-interval", type=float, default=0.02, help="seconds between streamed words")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    print("$ python " + " ".join([os.path.relpath(__file__), *sys.argv[1:]]))
    with (
        tempfile.TemporaryDirectory(prefix="council-web-") as tmp,
        start_mock_server(latency=args.latency, stream_interval=args.stream_interval) as mock,
    ):
        home = Path(tmp) / "home"
        home.mkdir()
        config = Path(tmp) / "council.toml"
        lines = ["[councils.default]", 'members = ["alpha", "beta", "gamma"]', 'chairman = "alpha"']
        for alias in ("alpha", "beta", "gamma"):
            lines += [f"[models.{alias}]", f'model = "openai/mock-{alias}"', f'api_base = "{mock.base_url}"']
        config.write_text("\n".join(lines) + "\n")
        with council_serve(config, home, "--token", TOKEN) as (base, _), sync_playwright() as p:
            pid = server_pid(base.rsplit(":", 1)[1])
            browser = p.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1100, "height": 1000})
            page.goto(base + "/")
            page.evaluate(f"sessionStorage.setItem('council-token', {json.dumps(TOKEN)})")
            web = [web_session(page, base) for _ in range(args.runs)]
            if not args.no_screenshot:
                page.click(".tab[data-member=beta]")  # a member's answer beside the chairman's
                page.screenshot(path=args.output, full_page=False)
                print(f"wrote {args.output} ({Path(args.output).stat().st_size // 1024} KB)")
            browser.close()
            mock_pid = server_pid(mock.base_url.rstrip("/").rsplit(":", 1)[1].split("/")[0])
            chats = [chat_stream(base, pid, mock_pid) for _ in range(args.runs)]
            events = [events_stream(base, pid) for _ in range(args.runs)]

    def median(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    print(f"mock: {args.latency:g} s before each reply, a word every {args.stream_interval:g} s; "
          f"3 members, 3 reviewers, medians of {args.runs} runs")  # fmt: skip
    print(
        f"web app: session on screen {median(web, 'shown'):.2f} s, first answer {median(web, 'first_answer'):.2f} s, "
        f"first synthesis words {median(web, 'first_synthesis'):.2f} s, session finished {median(web, 'total'):.2f} s"
    )
    print(f"POST /v1/sessions + one SSE reader: server CPU {median(events, 'cpu_per_token_ms'):.3f} ms per streamed "
          f"token ({median(events, 'tokens'):.0f} tokens)")  # fmt: skip
    print(f"chat stream: first progress line {median(chats, 'first_progress'):.2f} s, first answer word "
          f"{median(chats, 'first_content'):.2f} s, end {median(chats, 'total'):.2f} s; "
          f"server CPU {median(chats, 'cpu_per_token_ms'):.3f} ms per streamed token "
          f"({median(chats, 'tokens'):.0f} tokens)")  # fmt: skip
    print(f"for scale: the mock server, which only sleeps and sends each token, used "
          f"{median(chats, 'mock_per_token_ms'):.3f} ms of CPU per token")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
