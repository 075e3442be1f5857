"""``council mcp`` holds the council file's ``[budget] max_cost_usd``: each tool call (a session, a
comparison) spends within it, against the mock server (real HTTP on loopback)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp")

from conftest import db_rows, write_config  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp_stdio import mcp_server  # noqa: E402
from mock_server import start_mock_server  # noqa: E402

# One member call's worst case (about 0.008 + its prompt bound at 1e-6 a byte) fits the cap, two do not.
PRICE = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-5, "max_tokens": 400}
CAP = 0.015


def capped_server(tmp_path: Path, home: Path, mock) -> StdioServerParameters:
    models = {
        name: {"model": f"openai/mock-{name}", "api_base": mock.base_url, "retries": 0, **PRICE}
        for name in ("a", "b", "c")
    }
    config = write_config(tmp_path / "c.toml", models, chairman="a")
    config.write_text(config.read_text() + f"\n[budget]\nmax_cost_usd = {CAP}\n")
    return mcp_server(config, home)


async def test_each_tool_call_spends_within_the_config_cap(tmp_path, council_home):
    with start_mock_server(log_requests=str(tmp_path / "requests.jsonl")) as mock:
        async with Client(capped_server(tmp_path, council_home, mock)) as client:
            for _ in range(2):
                ran = await client.call_tool("council_run", {"question": "What is 2+2?"})
                assert ran.is_error and "budget reached" in ran.content[0].text, ran.content
            asked = len(mock.logged_requests())
            compared = await client.call_tool(
                "council_compare", {"prompt": "What is 2+2?", "response_a": "4", "response_b": "5", "judges": ["a"]}
            )
            assert "budget reached" in compared.content[0].text, compared.content
            assert len(mock.logged_requests()) == asked  # a vote's two passes do not fit: neither is sent
    sessions = db_rows(council_home, "select count(*), sum(cost_usd) from calls where ok = 1 group by session_id")
    assert len(sessions) == 2 and all(0 < cost <= CAP for _, cost in sessions), sessions
    assert asked == 2
