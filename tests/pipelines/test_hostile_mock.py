"""The mock's hostile behaviours do what the end-to-end tests rely on (+echo, +markup, +quote)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import httpx

from council.providers.asking import validate_output
from council.session import prompts
from council.session.schemas import PEER_REVIEW_SCHEMA_NAME, peer_review_model, peer_review_schema
from council.testing.replies import MARKUP, FakeResponder

ANSWERS = [("A", "The first answer, quoted in full by a hostile reviewer."), ("B", "The second answer.")]


def _script():
    path = Path(__file__).resolve().parents[2] / "scripts" / "mock_llm_server.py"
    spec = importlib.util.spec_from_file_location("mock_llm_server_hostile", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


async def test_echo_is_a_400_quoting_the_authorization_header_and_the_body():
    app = _script().make_app()
    body = {"model": "mock-x+echo", "messages": [{"role": "user", "content": "Secret question?"}]}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://mock") as client:
        r = await client.post("/v1/chat/completions", json=body, headers={"authorization": "Bearer k-123456789"})
    assert r.status_code == 400
    message = r.json()["error"]["message"]
    assert "Authorization: Bearer k-123456789" in message and "Secret question?" in message


def test_markup_and_quote_in_plain_replies():
    responder = FakeResponder()
    review = prompts.review_messages("Q?", ANSWERS, (1, 10), {})
    assert responder.reply("fake/x+markup", prompts.member_messages("Q?")).startswith(MARKUP)
    quoted = responder.reply("fake/x+quote", review)
    assert all(text in quoted for _, text in ANSWERS)
    assert responder.reply("fake/x+quote", prompts.member_messages("Why?")) == "You asked: Why?"
    history = [{"role": "user", "content": "First?"}, {"role": "assistant", "content": "One."}]
    assert responder.reply("fake/x+quote", prompts.member_messages("Why?", history)) == (
        "Earlier you asked: First?\n\nYou asked: Why?"
    )


def test_a_quoting_reviewer_is_invalid_with_the_answer_in_the_message():
    labels = ("A", "B")
    schema = peer_review_schema(labels, (1, 10))
    messages = prompts.review_messages("Q?", ANSWERS, (1, 10), schema)
    text = FakeResponder().reply("fake/r+quote", messages, json_schema=schema, schema_name=PEER_REVIEW_SCHEMA_NAME)
    assert json.loads(text)["evaluations"]["A"]["score"] == ANSWERS[0][1]
    parsed, problem = validate_output(peer_review_model(labels, (1, 10)), text)
    assert parsed is None and "valid integer" in problem and ANSWERS[0][1][:30] in problem
    _, kept = validate_output(peer_review_model(labels, (1, 10)), text, quote_values=False)
    assert "valid integer" in kept and ANSWERS[0][1][:10] not in kept
