"""The structured synthesis and a partial council's first line on every interface: chat
completions (streamed and not), the session API's events, `council run` (text and --json),
`sessions show` and MCP's text; real processes against the mock LLM server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mock_server import start_mock_server
from serve_helpers import council_serve

pytestmark = pytest.mark.slow  # real server and CLI processes

SECTION = "### Where the council disagreed"
PARTIAL = "Partial council:"


@pytest.fixture(scope="module")
def mock_url():
    with start_mock_server(latency=0.005, stream_interval=0.005) as server:
        yield server.base_url


@pytest.fixture
def config(tmp_path, mock_url) -> Path:
    models = {"a": "mock-alpha", "b": "mock-beta", "c": "mock-gamma", "dead": "mock-delta+fail"}
    lines = [
        "[councils.default]", 'members = ["a", "b", "c"]', 'chairman = "a"',
        "[councils.partial]", 'members = ["a", "b", "dead"]', 'chairman = "a"',
        "[councils.plain]", 'members = ["a", "b", "dead"]', 'chairman = "a"', 'synthesis = "plain"',
        "[councils.fallback]", 'members = ["a", "b"]', 'chairman = "dead"', 'fallback_chairman = "b"',
    ]  # fmt: skip
    for alias, model in models.items():
        lines += [f"[models.{alias}]", f'model = "openai/{model}"', f'api_base = "{mock_url}"', "retries = 0"]
    path = tmp_path / "council.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _chat(base: str, council: str, *, stream: bool) -> tuple[str, dict]:
    body = {"model": council, "messages": [{"role": "user", "content": "Why is the sky blue?"}], "stream": stream}
    reply = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    if not stream:
        data = reply.json()
        return data["choices"][0]["message"]["content"], data["council"]
    content, details = "", {}
    for line in reply.text.splitlines():
        if not line.startswith("data: {"):
            continue
        chunk = json.loads(line.removeprefix("data: "))
        for choice in chunk.get("choices", []):
            content += choice.get("delta", {}).get("content") or ""
        details = chunk.get("council", details)
    return content, details


def test_chat_clients_read_the_answer_then_where_the_council_disagreed(config, council_home):
    with council_serve(config, council_home) as (base, _):
        for stream in (False, True):
            content, details = _chat(base, "default", stream=stream)
            assert details["status"] == "complete"
            answer, _, section = content.partition(SECTION)
            assert answer.strip() and not answer.startswith(PARTIAL)
            assert section.strip()  # the disagreement the chairman found, by member
            assert re.search(r"\((?:a|b|c)(?:, (?:a|b|c))*\)", section)  # who holds each position, by member
            stored = httpx.get(f"{base}/v1/sessions/{details['session_id']}").json()
            structure = stored["synthesis"]["structure"]
            assert structure["answer"] == answer.strip()
            # The council field carries the structure as the session API does, labels mapped to members.
            assert details["synthesis_structure"] == structure
            assert details["partial_line"] is None
            held = {m for d in structure["disagreements"] for p in d["positions"] for m in p["members"]}
            assert held and held <= {"a", "b", "c"}


@pytest.mark.parametrize(("council", "why"), [("partial", "1 of 3 members failed"), ("plain", "1 of 3 members failed"),
                                              ("fallback", "fallback chairman b")])  # fmt: skip
def test_a_partial_councils_chat_answer_says_so_first(config, council_home, council, why):
    with council_serve(config, council_home) as (base, _):
        for stream in (False, True):
            content, _ = _chat(base, council, stream=stream)
            first = content.lstrip().splitlines()[0]
            assert first.startswith(PARTIAL) and why in first, content[:300]
            assert (SECTION in content) == (council != "plain")


def test_a_cap_that_refuses_the_chairman_still_says_partial_first(tmp_path, mock_url, council_home):
    """The spend cap refuses the chairman's own call (and the fallback's): no synthesis, so the
    top-ranked member's answer stands in, after the partial line, streamed or not."""
    cheap = "input_cost_per_token = 1e-9\noutput_cost_per_token = 1e-8\nmax_tokens = 400\nretries = 0"
    lines = ['[councils.default]', 'members = ["a", "b", "c"]', 'chairman = "big"', 'fallback_chairman = "b"',
             "[budget]", "max_cost_usd = 0.5"]  # fmt: skip
    for alias in ("a", "b", "c"):
        lines += [f"[models.{alias}]", f'model = "openai/mock-{alias}"', f'api_base = "{mock_url}"', cheap]
    # Its worst case (1e5 tokens at 1e-5 a token: $1) is over the cap; every member's fits.
    lines += ["[models.big]", 'model = "openai/mock-big"', f'api_base = "{mock_url}"',
              "input_cost_per_token = 1e-9", "output_cost_per_token = 1e-5", "max_tokens = 100000"]  # fmt: skip
    config = tmp_path / "capped.toml"
    config.write_text("\n".join(lines) + "\n")
    with council_serve(config, council_home) as (base, _):
        for stream in (False, True):
            content, details = _chat(base, "default", stream=stream)
            assert details["status"] == "partial" and details["synthesis_structure"] is None
            first, _, rest = content.partition("\n\n")
            assert first == details["partial_line"], content[:300]
            assert first.startswith(PARTIAL) and "no synthesis" in first and "budget reached" in first
            assert "top-ranked member's answer" in rest


def test_the_session_api_streams_the_answer_then_carries_the_structure(config, council_home):
    with council_serve(config, council_home) as (base, _):
        started = httpx.post(f"{base}/v1/sessions", json={"council": "partial", "question": "Why is the sky blue?"})
        assert started.status_code == 202, started.text
        sid = started.json()["session_id"]
        body = httpx.get(f"{base}/v1/sessions/{sid}/events", timeout=60).text
        events = [json.loads(line.removeprefix("data: ")) for line in body.splitlines() if line.startswith("data: ")]
        deltas = [e["text"] for e in events if e["type"] == "synthesis_delta"]
        [synthesis] = [e for e in events if e["type"] == "synthesis"]
        assert len(deltas) > 2 and "".join(deltas) == synthesis["text"]
        assert deltas[0].startswith(PARTIAL) and SECTION in deltas[-1]
        assert synthesis["structure"]["answer"] not in deltas[0]  # the answer came as it was written
        assert synthesis["structure"]["answer"] and synthesis["text"].startswith(PARTIAL)


def _council(home: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(COUNCIL_HOME=str(home), COLUMNS="200")
    config_args = ["--config", str(config)] if args[0] == "run" else []
    return subprocess.run([sys.executable, "-m", "council", *args, *config_args],
                          capture_output=True, text=True, env=env, timeout=120)  # fmt: skip


def test_the_cli_says_partial_first_and_json_carries_the_structure(config, council_home):
    text = _council(council_home, config, "run", "Why is the sky blue?", "--council", "partial", "--seed", "3")
    assert text.returncode == 0, text.stderr
    assert text.stdout.lstrip().splitlines()[0].startswith(PARTIAL)
    as_json = _council(council_home, config, "run", "Why is the sky blue?", "--council", "default", "--json")
    result = json.loads(as_json.stdout)
    structure = result["synthesis"]["structure"]
    assert structure["answer"] and result["synthesis"]["text"].startswith(structure["answer"])
    assert {i["member"] for i in structure["unique_insights"]} <= {"a", "b", "c"}
    shown = _council(council_home, config, "sessions", "show", result["session_id"])
    assert shown.returncode == 0, shown.stderr
    assert "Where the council disagreed" in shown.stdout and "Blind spots" in shown.stdout


async def test_mcp_text_says_partial_first(council_home):
    from council import Council
    from council.mcp.server import session_text

    council = Council.from_config(
        {"councils": {"default": {"members": ["fake/alpha", "fake/beta", "fake/gamma+fail"]}}}, store=False
    )
    result = await council.run("Why is the sky blue?", seed=3)
    await council.aclose()
    text = session_text(result)
    assert text.splitlines()[0].startswith(PARTIAL)
    assert SECTION in text
