"""An endless or huge provider reply is never buffered without limit: the native transport stops
reading at ``COUNCIL_MAX_REPLY_BYTES`` (default 16 MiB) with one clear, non-retried error."""

from __future__ import annotations

import json
import time

import pytest
from conftest import invoke_cli, write_config
from mock_server import start_mock_server

from council.config.endpoints import native_endpoint
from council.errors import ProviderError
from council.providers.base import ChatRequest
from council.providers.openai_compatible import DEFAULT_MAX_REPLY_BYTES, OpenAICompatibleAPI

pytestmark = pytest.mark.slow  # a mock server streaming megabytes


@pytest.fixture(scope="module")
def mock(tmp_path_factory):
    with start_mock_server(log_requests=str(tmp_path_factory.mktemp("mock") / "log.jsonl")) as server:
        yield server


def test_the_default_cap_is_16_mib():
    assert DEFAULT_MAX_REPLY_BYTES == 16 * 1024 * 1024


@pytest.mark.parametrize("limit", [1 << 20, None])
async def test_an_endless_reply_stops_at_the_cap_with_one_error(mock, monkeypatch, limit):
    if limit is not None:
        monkeypatch.setenv("COUNCIL_MAX_REPLY_BYTES", str(limit))
    api = OpenAICompatibleAPI("openai/mock-a+endless", native_endpoint("openai/mock-a+endless", mock.base_url))
    started = time.monotonic()
    try:
        with pytest.raises(ProviderError) as caught:
            await api.generate(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
    finally:
        await api.aclose()
    shown = limit or DEFAULT_MAX_REPLY_BYTES
    assert f"larger than {shown} bytes" in str(caught.value) and "COUNCIL_MAX_REPLY_BYTES" in str(caught.value)
    assert "\n" not in str(caught.value) and not caught.value.retryable
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("raw", ["0", "-5", "lots", "1.5"])
def test_a_bad_cap_is_one_line_exit_2(tmp_path, monkeypatch, mock, raw):
    monkeypatch.setenv("COUNCIL_MAX_REPLY_BYTES", raw)
    models = {m: {"model": f"openai/mock-{m}", "api_base": mock.base_url, "retries": 0} for m in ("a", "b")}
    cfg = write_config(tmp_path / "c.toml", models, chairman="a")
    result = invoke_cli("run", "--config", str(cfg), "What is 2 + 2?")
    assert result.exit_code == 2 and len(result.error_lines) == 1, result.stderr
    assert "COUNCIL_MAX_REPLY_BYTES" in result.error_lines[0]


def test_a_council_whose_member_replies_forever_still_answers(tmp_path, mock, monkeypatch):
    monkeypatch.setenv("COUNCIL_MAX_REPLY_BYTES", str(1 << 20))
    models = {
        "a": {"model": "openai/mock-a", "api_base": mock.base_url, "retries": 0},
        "b": {"model": "openai/mock-b", "api_base": mock.base_url, "retries": 0},
        "c": {"model": "openai/mock-c+endless", "api_base": mock.base_url, "retries": 2},
    }
    cfg = write_config(tmp_path / "c.toml", models, chairman="a")
    result = invoke_cli("run", "--config", str(cfg), "--json", "What is 2 + 2?")
    assert result.exit_code in (0, 1), result.stderr
    out = json.loads(result.stdout)
    assert out["synthesis"]["text"] and all(a["text"] for a in out["answers"] if a["member"] != "c")
    failed_calls = [f for f in out["failures"] if f["member"] == "c"]
    assert failed_calls and all("COUNCIL_MAX_REPLY_BYTES" in f["error"] for f in failed_calls)
    endless = [r for r in mock.logged_requests() if r.get("fault") == "endless" and r["model"] == "mock-c"]
    assert len(endless) == len(failed_calls)  # not retried: the same server would send the same again
