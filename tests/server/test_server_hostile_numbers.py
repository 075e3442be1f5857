"""Numbers and dates a user types are read by one strict parser each: ASCII digits only, in range.

Python's ``int()`` and ``str.isdigit()`` take other scripts' digits (``²``, ``⁹``, ``٣``, ``３``),
and ``--since 9999-12-31T23:59:59-23:59`` is a valid ISO date whose UTC time is past year 9999:
these were 500s on the server's routes and tracebacks in the CLI. Every route, with every query
parameter and ``Last-Event-ID`` set to such values, answers without a 500 (a 400 where the value
is read); every command's number and date options give one line and exit 2."""

from __future__ import annotations

import pytest
from conftest import invoke_cli
from starlette.testclient import TestClient

from council.config import load_config
from council.server.app import create_app

CONFIG = {"councils": {"default": {"members": ["fake/alpha", "fake/beta", "fake/gamma"], "chairman": "fake/alpha"}}}
DIGITS = ["²", "⁹", "٣", "３", "1²", "1_0", "+5", " 5", "-1", "", "9" * 40]
DATES = ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59", "٢٠٢٦-01-01", "2026-01-0１", "9" * 40]
PARAMS = ["limit", "after", "bootstrap", "seed", "since"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import os

    home = tmp_path_factory.mktemp("home")
    old = os.environ.get("COUNCIL_HOME")
    os.environ["COUNCIL_HOME"] = str(home)
    try:
        with TestClient(create_app(load_config(CONFIG)), base_url="http://127.0.0.1",
                        raise_server_exceptions=False) as client:  # fmt: skip
            chat = {"model": "default", "messages": [{"role": "user", "content": "Why?"}]}
            session_id = client.post("/v1/chat/completions", json=chat).json()["council"]["session_id"]
            yield client, session_id
    finally:
        os.environ.pop("COUNCIL_HOME") if old is None else os.environ.__setitem__("COUNCIL_HOME", old)


def every_route(client: TestClient, session_id: str) -> list[tuple[str, str]]:
    """(method, path) of each route the app serves, its path parameters filled in."""
    found = []
    for route in client.app.routes:
        path = route.path.replace("{session_id}", session_id).replace("{model_id:path}", "default")
        for method in sorted(route.methods or {"GET"}):
            found.append((method, path))
    return found


@pytest.mark.parametrize("value", DIGITS + DATES)
def test_no_route_answers_a_hostile_number_or_date_with_a_500(served, value):
    client, session_id = served
    routes = every_route(client, session_id)
    assert len(routes) >= 12
    for method, path in routes:
        body = {"council": "default", "question": "Why?"} if path == "/v1/sessions" else {
            "model": "default", "messages": [{"role": "user", "content": "Why?"}]}  # fmt: skip
        for param in PARAMS:
            reply = client.request(method, path, params={param: value}, headers={"last-event-id": value} if
                                   value.isascii() else {}, json=body if method == "POST" else None)  # fmt: skip
            assert reply.status_code != 500, (method, path, param, reply.text)


@pytest.mark.parametrize("value", [v for v in DIGITS if v])  # an empty after: from the start
@pytest.mark.parametrize(
    ("path", "param"),
    [("/v1/sessions", "limit"), ("/v1/leaderboard", "bootstrap"), ("/v1/leaderboard", "seed"), ("EVENTS", "after")],
)
def test_a_query_number_that_is_not_plain_ascii_digits_is_a_400_naming_it(served, path, param, value):
    client, session_id = served
    path = f"/v1/sessions/{session_id}/events" if path == "EVENTS" else path
    reply = client.get(path, params={param: value})
    assert reply.status_code == 400, reply.text
    assert param in reply.json()["error"]["message"]


def test_a_last_event_id_that_is_not_plain_ascii_digits_is_a_400(served):
    client, session_id = served
    for value in ("²", "٣", "1_0", "-1"):
        reply = client.get(f"/v1/sessions/{session_id}/events", headers={"last-event-id": value.encode()})
        assert reply.status_code == 400, (value, reply.text)


@pytest.mark.parametrize("value", DATES)
@pytest.mark.parametrize("path", ["/v1/sessions", "/v1/leaderboard", "/v1/bias-report"])
def test_a_since_that_is_no_date_or_leaves_the_calendar_is_a_400(served, path, value):
    client, _ = served
    reply = client.get(path, params={"since": value})
    assert reply.status_code == 400, reply.text
    assert "since" in reply.json()["error"]["message"]


def test_plain_numbers_and_dates_still_work(served):
    client, session_id = served
    listed = client.get("/v1/sessions", params={"limit": "500", "since": "2000-01-01T00:00:00+23:59"}).json()
    assert session_id in {s["session_id"] for s in listed}
    assert client.get("/v1/leaderboard", params={"bootstrap": "10", "seed": "3"}).status_code == 200
    assert client.get(f"/v1/sessions/{session_id}/events", params={"after": "0"}).status_code == 200


def assert_one_line_exit_2(*args: str) -> None:
    result = invoke_cli(*args)
    assert result.exit_code == 2 and len(result.error_lines) == 1, (args, result.stderr)
    assert result.error_lines[0].startswith("error: "), result.stderr


@pytest.mark.parametrize("value", DATES)
@pytest.mark.parametrize(
    "command",
    [("sessions", "list"), ("bias-report",), ("leaderboard",), ("export",), ("export", "--bias-records"),
     ("export", "--judged-pairs")],
)
def test_every_since_option_gives_one_line_and_exit_2(command, value):
    assert_one_line_exit_2(*command, "--since", value)


@pytest.mark.parametrize("value", ["1e12", "9" * 40, "nan", "-1"])
def test_a_cache_age_past_the_calendar_gives_one_line_and_exit_2(value):
    assert_one_line_exit_2("cache", "clear", "--older-than", value)


@pytest.mark.parametrize("value", DIGITS)
@pytest.mark.parametrize(
    "command",
    [
        ("sessions", "list", "--limit"),
        ("leaderboard", "--seed"),
        ("leaderboard", "--bootstrap"),
        ("run", "--config", "COUNCIL", "Why?", "--seed"),
        ("worker", "--concurrency"),
        ("compare", "--prompt", "p", "--a", "A", "--b", "B", "--judge", "fake/j", "--votes"),
        ("serve", "--config", "COUNCIL", "--port"),
        ("serve", "--config", "COUNCIL", "--max-sessions"),
        ("serve", "--config", "COUNCIL", "--read-timeout"),
    ],
)
def test_every_whole_number_option_gives_one_line_and_exit_2(tmp_path, command, value):
    config = tmp_path / "council.toml"
    config.write_text('[councils.default]\nmembers = ["fake/a", "fake/b"]\n')
    for name in ("A", "B"):
        (tmp_path / name).write_text("An answer.")
    args = [str(config) if a == "COUNCIL" else str(tmp_path / a) if a in ("A", "B") else a for a in command]
    assert_one_line_exit_2(*args, value)


def test_a_bias_record_whose_time_leaves_the_calendar_gives_one_line_and_exit_2(tmp_path):
    import json

    record = {"schema_version": "1.2.0", "session_id": "s1", "reviewer_id": "r", "model_id": "m", "position": 0,
              "response_length_chars": 10, "response_length_words": 2, "score_value": 7.0, "query_hash": None,
              "timestamp": "9999-12-31T23:59:59-23:59", "scale_min": 1, "scale_max": 10,
              "self_review": False}  # fmt: skip
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(record) + "\n")
    assert_one_line_exit_2("bias-report", "--records", str(path))
