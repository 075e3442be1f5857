"""A chat request too large for every member's ``tpm``: one 400 that OpenAI clients read as
"context length exceeded", streamed or not, and the session kept as failed with the reason."""

from __future__ import annotations

import httpx
import pytest
from serve_helpers import council_serve

openai = pytest.importorskip("openai")

TOO_LONG = "Why is the sky blue? " + "Please be thorough. " * 150  # ~3,000 bytes


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = tmp_path_factory.mktemp("config") / "council.toml"
    lines = ["[councils.default]", 'members = ["a", "b", "c"]', 'chairman = "fake/chair"']
    for alias in "abc":
        lines += [f"[models.{alias}]", f'model = "fake/{alias}"', "tpm = 2000", "max_tokens = 50"]
    path.write_text("\n".join(lines) + "\n")
    with council_serve(path, tmp_path_factory.mktemp("home")) as server:
        yield server.base


def sessions(base: str) -> list[dict]:
    return httpx.get(f"{base}/v1/sessions?limit=100").json()


@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_no_member_can_take_is_a_400_naming_the_limit(served, stream):
    client = openai.OpenAI(base_url=served + "/v1", api_key="unused", max_retries=0)
    before = {s["session_id"] for s in sessions(served)}
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="default", messages=[{"role": "user", "content": TOO_LONG}],
                                       stream=stream)  # fmt: skip
    error = refused.value.body
    assert refused.value.status_code == 400 and error["code"] == "context_length_exceeded"
    assert error["type"] == "invalid_request_error" and error["param"] == "messages"
    assert "[models.a] tpm = 2000" in error["message"] and "\n" not in error["message"]
    assert refused.value.response.headers["x-should-retry"] == "false"
    # Nothing lost: the session is kept, failed, with the reason.
    [new] = [s for s in sessions(served) if s["session_id"] not in before]
    kept = httpx.get(f"{served}/v1/sessions/{new['session_id']}").json()
    assert kept["status"] == "failed" and "tpm = 2000" in kept["error"]


def test_a_prompt_that_fits_is_answered(served):
    reply = httpx.post(f"{served}/v1/chat/completions", timeout=30,
                       json={"model": "default", "messages": [{"role": "user", "content": "Why?"}]})  # fmt: skip
    # The members answer; the reviews' prompts (every answer) do not fit 2,000 tokens: partial, not a 400.
    assert reply.status_code == 200, reply.text
    assert reply.json()["council"]["status"] == "partial"
