"""What the web app needs from the server (issue 60, item 5): the configured default council
named in ``GET /v1/models``, a follow-up question's earlier turns taken by ``POST /v1/sessions``
(``history``, as the chat route takes its messages) and reaching every member, and the
leaderboard and bias report as the CLI's HTML (``?format=html``)."""

from __future__ import annotations

import json

import httpx
import pytest
from mock_server import start_mock_server, wait_for
from serve_helpers import council_serve

pytestmark = pytest.mark.slow  # a real server process

TOKEN = "t0ken-for-tests"
AUTH = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("routes")
    (root / "home").mkdir()
    with start_mock_server(latency=0.01) as mock:
        lines = ["[defaults]", 'council = "main"',
                 "[councils.main]", 'members = ["q1", "q2"]', 'chairman = "q1"',
                 "[councils.another]", 'members = ["q1", "q2"]', 'chairman = "q2"']  # fmt: skip
        for alias in ("q1", "q2"):  # they quote the questions they were asked (+quote)
            lines += [f"[models.{alias}]", f'model = "openai/mock-{alias}+quote"', f'api_base = "{mock.base_url}"']
        config = root / "council.toml"
        config.write_text("\n".join(lines) + "\n")
        with council_serve(config, root / "home", "--token", TOKEN) as (base, _):
            yield base


def finished(base: str, session_id: str) -> dict:
    url = f"{base}/v1/sessions/{session_id}"
    assert wait_for(lambda: httpx.get(url, headers=AUTH).json().get("status") not in (None, "running"), 60, 0.05)
    return httpx.get(url, headers=AUTH).json()


def test_the_models_list_names_the_configured_default_council(served):
    listed = httpx.get(served + "/v1/models", headers=AUTH).json()
    assert [m["id"] for m in listed["data"]] == ["another", "main"]  # OpenAI's shape, sorted
    assert listed["default_council"] == "main"


def test_a_follow_up_question_sends_the_earlier_turns_to_every_member(served):
    history = [
        {"role": "user", "content": "What is the tallest mountain?"},
        {"role": "assistant", "content": "Mount Everest."},
    ]
    body = {"council": "main", "question": "How tall is it?", "history": history}
    started = httpx.post(served + "/v1/sessions", json=body, headers=AUTH)
    assert started.status_code == 202, started.text
    result = finished(served, started.json()["session_id"])
    assert result["question"] == "How tall is it?"
    for answer in result["answers"]:
        assert answer["text"] == "Earlier you asked: What is the tallest mountain?\n\nYou asked: How tall is it?"
    alone = httpx.post(served + "/v1/sessions", json={"council": "main", "question": "How tall is it?"}, headers=AUTH)
    texts = {a["text"] for a in finished(served, alone.json()["session_id"])["answers"]}
    assert texts == {"You asked: How tall is it?"}


@pytest.mark.parametrize(("history", "word"), [
    ([{"role": "tool", "content": "x"}], "role"),
    ([{"role": "user"}], "content"),
    ([{"role": "user", "content": 3}], "content"),
    ([{"role": "user", "content": "x", "name": "me"}], "name"),
    ({"role": "user", "content": "x"}, "history"),
    ([{"role": "user", "content": "bad \ud800 text"}], "message 1 of the conversation"),
])
def test_a_bad_history_is_one_clear_400_and_nothing_runs(served, history, word):
    before = len(httpx.get(served + "/v1/sessions", headers=AUTH).json())
    body = json.dumps({"council": "main", "question": "Why?", "history": history})  # a lone surrogate: \ud800
    reply = httpx.post(served + "/v1/sessions", content=body, headers={**AUTH, "content-type": "application/json"})
    assert reply.status_code == 400, reply.text
    assert word in reply.json()["error"]["message"]
    assert len(httpx.get(served + "/v1/sessions", headers=AUTH).json()) == before


@pytest.mark.parametrize("path", ["/v1/leaderboard", "/v1/bias-report"])
def test_the_reports_come_as_the_clis_html_on_request(served, path):
    html = httpx.get(served + path, params={"format": "html"}, headers=AUTH)
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    assert "<html" not in html.text and "<style" not in html.text and "<script" not in html.text  # the page's body
    assert html.headers["content-security-policy"].startswith("default-src 'none'")
    as_json = httpx.get(served + path, params={"format": "json"}, headers=AUTH)
    assert as_json.headers["content-type"] == "application/json"
    bad = httpx.get(served + path, params={"format": "xml"}, headers=AUTH)
    assert bad.status_code == 400 and "format must be json or html" in bad.json()["error"]["message"]
    assert httpx.get(served + path, params={"format": "html"}).status_code == 401
