"""`council mcp` shows a session's deliberation rounds (issue 59), through the SDK's client over stdio."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402
from mcp_stdio import mcp_server  # noqa: E402


async def test_council_run_and_sessions_show_the_rounds(tmp_path, council_home):
    cfg = tmp_path / "council.toml"
    cfg.write_text('[councils.default]\nmembers = ["fake/alpha", "fake/beta", "fake/gamma+adopt"]\n'
                   'deliberation = "always"\n')  # fmt: skip
    params = mcp_server(cfg, council_home)
    progress = []

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async with Client(params) as client:
        ran = await client.call_tool("council_run", {"question": "Why is the sky blue?", "seed": 2},
                                     progress_callback=on_progress)  # fmt: skip
        assert not ran.is_error, ran.content
        rounds = ran.structured_content["deliberation"]["rounds"]
        assert rounds[0]["members"][2]["capitulation"] is True
        text = ran.content[0].text
        assert "Deliberation:\nRound 1 (always): Kendall's W " in text
        assert "fake/gamma+adopt adopted" in text and "with no reason given (capitulation)" in text
        shown = await client.call_tool("council_sessions", {"session_id": ran.structured_content["session_id"]})
        assert "Deliberation:\nRound 1 (always)" in shown.content[0].text
    messages = [m for _, _, m in progress]
    assert "deliberation round 1: always" in messages
    assert any(m.startswith("round 1: fake/gamma+adopt revised its answer") for m in messages)
    assert all(done <= total for done, total, _ in progress)
