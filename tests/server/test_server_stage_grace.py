"""A chat over `council serve` with a stalled member: the stream closes the answer stage at its
quorum plus the grace, says who was late, and ends without waiting for the straggler."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import jsonschema
import pytest
from mock_server import start_mock_server
from serve_helpers import council_serve

pytestmark = pytest.mark.slow  # a real server process

STALL = 600.0  # the straggler's delay: hundreds of times the grace, and past every timeout here
SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "schemas" / "session-events.json").read_text())


def test_a_chat_stream_tells_who_was_late_and_ends_before_the_straggler(tmp_path, council_home):
    with start_mock_server(latency=0.01, slow_seconds=STALL) as mock:
        models = {"a": "mock-alpha", "b": "mock-beta", "stalled": "mock-gamma+slow"}
        lines = ["[councils.default]", 'members = ["a", "b", "stalled"]', 'chairman = "a"', "stage_grace = 0.5"]
        for alias, model in models.items():
            lines += [f"[models.{alias}]", f'model = "openai/{model}"', f'api_base = "{mock.base_url}"']
            lines.append(f"timeout = {STALL * 2}")
        config = tmp_path / "council.toml"
        config.write_text("\n".join(lines) + "\n")
        with council_serve(config, council_home) as (base, _):
            question = [{"role": "user", "content": "Why is the sky blue?"}]
            body = {"model": "default", "stream": True, "messages": question}
            with httpx.stream("POST", base + "/v1/chat/completions", json=body, timeout=STALL / 4) as reply:
                assert reply.status_code == 200
                chunks = [json.loads(x[6:]) for x in reply.iter_lines() if x.startswith("data: ") and x[6:] != "[DONE]"]
            deltas = [c["choices"][0]["delta"] for c in chunks if c.get("choices")]
            reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
            assert "stalled is late: its answer is not reviewed." in reasoning
            assert "Stage answer closed at its quorum" in reasoning and "late: stalled." in reasoning
            session_id = chunks[-1]["council"]["session_id"]
            events = httpx.get(f"{base}/v1/sessions/{session_id}/events", timeout=30).text
            data = [json.loads(x[6:]) for x in events.splitlines() if x.startswith("data: ")]
            [closed] = [e for e in data if e["type"] == "stage_closed"]
            jsonschema.validate(closed, SCHEMA)
            assert closed["stage"] == "answer" and closed["late"] == ["stalled"] and closed["grace_seconds"] == 0.5
            stored = httpx.get(f"{base}/v1/sessions/{session_id}", timeout=30).json()
            assert stored["late_members"] == ["stalled"] and stored["status"] == "partial"
