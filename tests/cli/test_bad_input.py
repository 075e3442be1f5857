"""Bad input gets one line, the right exit code (or an OpenAI-shaped 4xx), and nothing half-written.

CLI cases run in-process (and one with real argv bytes); server cases against a real
``council serve``; candidate cases check through the mock's request log that nothing was billed.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from conftest import council_process, db_rows, invoke_cli, write_config
from mock_server import start_mock_server
from serve_helpers import council_serve

QUESTION = "Which gas makes up most of Earth's atmosphere?"


@pytest.fixture(scope="module")
def mock(tmp_path_factory):
    log = tmp_path_factory.mktemp("mock") / "requests.jsonl"
    with start_mock_server(log_requests=log) as server:
        yield server


@pytest.fixture
def cfg(tmp_path, mock):
    models = {m: {"model": f"openai/mock-{m}", "api_base": mock.base_url, "retries": 0} for m in ("a", "b", "c")}
    return write_config(tmp_path / "c.toml", models, chairman="a")


def assert_one_line_exit_2(result, fragment: str) -> None:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert len(result.error_lines) == 1 and result.error_lines[0].startswith("error: "), result.stderr
    assert fragment in result.error_lines[0], result.error_lines[0]
    assert result.stdout == ""


def nothing_billed(mock, before: int) -> bool:
    return len(mock.logged_requests()) == before


# -- the question and the seed -------------------------------------------------------------


@pytest.mark.parametrize(
    "question, seed, fragment",
    [
        ("Why is \udcff\udcfe the sky blue?", None, "the question is not valid UTF-8 text"),
        ("Lone \ud800 surrogate", None, "the question is not valid UTF-8 text"),
        (QUESTION, str(2**63), "--seed must be a whole number from 0 to 9223372036854775807"),
        (QUESTION, str(2**80), "--seed must be a whole number from 0 to"),
        (QUESTION, "-1", "--seed must be a whole number from 0 to"),
    ],
)
def test_bad_question_or_seed_is_one_line_exit_2_and_nothing_written(council_home, cfg, mock, question, seed, fragment):
    before = len(mock.logged_requests())
    args = ["run", question, "--config", str(cfg)] + (["--seed", seed] if seed else [])
    assert_one_line_exit_2(invoke_cli(*args), fragment)
    assert not (council_home / "council.db").exists()
    assert nothing_billed(mock, before)


def test_invalid_utf8_bytes_on_the_real_command_line(council_home, cfg):
    proc = council_process("run", b"caf\xe9 \xff?", "--config", str(cfg), home=council_home)
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    assert stderr.splitlines() == ["error: the question is not valid UTF-8 text (an undecodable byte or unpaired "
                                   "surrogate at character 4)"]  # fmt: skip
    assert not (council_home / "council.db").exists()


def test_the_largest_seed_is_accepted_and_stored(council_home, cfg):
    proc = invoke_cli("run", QUESTION, "--config", str(cfg), "--seed", str(2**63 - 1), "--json")
    assert proc.exit_code == 0, proc.stderr
    assert db_rows(council_home, "select seed from sessions") == [(2**63 - 1,)]


# -- candidates: a council reviews at least two answers with real ids ----------------------


@pytest.mark.parametrize(
    "candidates, fragment",
    [
        ('[{"id": "", "text": "an answer"}, {"id": "b", "text": "another"}]', "candidate 1 is not"),
        ('[{"id": "   ", "text": "an answer"}, {"id": "b", "text": "another"}]', "candidate 1 is not"),
        ('[{"id": "a", "text": "x"}, {"id": " a ", "text": "y"}]', "candidate ids must be unique"),
        ('[{"id": "only", "text": "a single answer"}]', "a council reviews at least two answers, got 1"),
        ('{"only": "a single answer"}', "a council reviews at least two answers, got 1"),
    ],
)
def test_bad_candidates_are_one_line_exit_2_before_any_call(tmp_path, council_home, cfg, mock, candidates, fragment):
    path = tmp_path / "cands.json"
    path.write_text(candidates)
    before = len(mock.logged_requests())
    assert_one_line_exit_2(invoke_cli("run", QUESTION, "--config", str(cfg), "--candidates", str(path)), fragment)
    assert nothing_billed(mock, before)
    assert not (council_home / "council.db").exists()


# -- the salt ------------------------------------------------------------------------------


def test_a_salt_path_that_is_a_directory_is_one_line_exit_2(council_home, cfg, mock):
    (council_home / "query_hash_salt").mkdir()
    before = len(mock.logged_requests())
    result = invoke_cli("run", QUESTION, "--config", str(cfg), env={"COUNCIL_HASH_QUERIES": "1"})
    assert_one_line_exit_2(result, "query_hash_salt is a directory")
    assert nothing_billed(mock, before)
    assert db_rows(council_home, "select count(*) from sessions") == [(0,)]


# -- dates: one parser with time zones, and never a silent empty answer ----------------------


@pytest.mark.parametrize(
    "args",
    [
        ("export", "--since", "last tuesday"),
        ("export", "--bias-records", "--since", "2026-13-45"),
        ("sessions", "list", "--since", "yesterday"),
        ("bias-report", "--since", "soon"),
    ],
)
def test_a_since_that_is_not_a_date_is_one_line_exit_2(council_home, args):
    assert_one_line_exit_2(invoke_cli(*args), "--since:")


def test_since_with_a_time_zone_means_the_same_instant_everywhere(council_home, cfg):
    for _ in range(2):
        assert invoke_cli("run", QUESTION, "--config", str(cfg)).exit_code == 0
    created = sorted(r[0] for r in db_rows(council_home, "select created_at from sessions"))
    second = datetime.fromisoformat(created[1])
    # The second session's own instant, written in UTC+02:00: matches it and not the first.
    local = second.astimezone(timezone(timedelta(hours=2))).isoformat()
    assert "+02:00" in local
    exported = invoke_cli("export", "--since", local).stdout.splitlines()
    listed = json.loads(invoke_cli("sessions", "list", "--since", local, "--json").stdout)
    records = invoke_cli("export", "--bias-records", "--since", local).stdout.splitlines()
    report = json.loads(invoke_cli("bias-report", "--since", local, "--json").stdout)
    second_id = [r[0] for r in db_rows(council_home, "select id from sessions order by created_at")][1]
    assert [json.loads(line)["session_id"] for line in exported] == [second_id]
    assert [row["session_id"] for row in listed] == [second_id]
    assert {json.loads(line)["session_id"] for line in records} == {second_id}
    assert report["total_records"] == len(records) > 0


# -- the stored duration ---------------------------------------------------------------------


def test_the_stored_duration_is_the_real_one_and_sessions_show_prints_it(tmp_path, council_home):
    cfg = write_config(tmp_path / "slow.toml", {"a": {"model": "fake/a+slow"}, "b": {"model": "fake/b+slow"}})
    run = invoke_cli("run", QUESTION, "--config", str(cfg), "--json", "--no-synthesis")
    assert run.exit_code == 0, run.stderr
    [(result,)] = db_rows(council_home, "select result from sessions")
    stored = json.loads(result)["duration_ms"]
    assert stored >= 1000  # two stages of 0.5 s fake calls
    assert stored == pytest.approx(json.loads(run.stdout)["duration_ms"])
    shown = invoke_cli("sessions", "show", json.loads(run.stdout)["session_id"])
    assert f"{stored / 1000:.1f}s" in shown.stdout and " 0.0s" not in shown.stdout


# -- session lookup ---------------------------------------------------------------------------


def test_session_lookup_is_by_id_or_a_literal_prefix_of_eight(council_home):
    from council.errors import NotFoundError
    from council.storage import SQLiteStore

    store = SQLiteStore.open()
    for sid in ("c68a1f00-0000-4000-8000-000000000001", "d2c68b00-0000-4000-8000-000000000002"):
        store.begin_session(sid, council="default")
    try:
        assert store.get_session("c68a1f00")["id"].startswith("c68a1f00")
        assert store.get_session("c68a1f00-0000-4000-8000-000000000001")["id"].endswith("1")
        for probe in ("%c68", "%c68a1f00", "c68a1f0_", "_2c68b00", "c68", "%", "________"):
            with pytest.raises(NotFoundError):
                store.get_session(probe)
    finally:
        store.close()


# -- the server --------------------------------------------------------------------------------


def assert_openai_error(response: httpx.Response, status: int, fragment: str = "") -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) >= {"message", "type", "code"} and fragment in error["message"], error


def chat(content: object = QUESTION, **extra: object) -> dict:
    return {"model": "default", "messages": [{"role": "user", "content": content}], **extra}


@pytest.fixture(scope="module")
def served(tmp_path_factory, mock):
    home = tmp_path_factory.mktemp("served-home")
    models = {m: {"model": f"openai/mock-{m}", "api_base": mock.base_url, "retries": 0} for m in ("a", "b")}
    cfg = write_config(home / "c.toml", models, chairman="a")
    with council_serve(cfg, home) as (base, _):
        yield base, home


def test_server_client_input_is_a_4xx_in_openai_shape(served):
    base, _ = served
    post = lambda body: httpx.post(base + "/v1/chat/completions", content=body,  # noqa: E731
                                   headers={"content-type": "application/json"}, timeout=30)  # fmt: skip
    assert_openai_error(post(json.dumps(chat(seed=2**63))), 400, "seed")
    assert_openai_error(post(json.dumps(chat(seed=-5))), 400, "seed")
    assert_openai_error(post(json.dumps(chat("caf\ud800 latte?"))), 400, "not valid UTF-8")
    history = {"model": "default", "messages": [{"role": "assistant", "content": "\udcff"}, {"role": "user",
               "content": QUESTION}]}  # fmt: skip
    assert_openai_error(post(json.dumps(history)), 400, "not valid UTF-8")
    assert_openai_error(post(json.dumps(chat(stream=True, seed=2**64))), 400, "seed")
    deep = '{"model": "default", "messages": ' + "[" * 400_000 + "]" * 400_000 + "}"
    assert_openai_error(post(deep), 400, "nested")
    assert_openai_error(post(json.dumps({"model": "\udcff", "messages": [{"role": "user", "content": "q"}]})), 404)


def test_server_session_lookup_is_literal(served):
    base, home = served
    response = httpx.post(base + "/v1/chat/completions", json=chat(), timeout=60)
    assert response.status_code == 200, response.text
    sid = response.json()["council"]["session_id"]
    assert httpx.get(f"{base}/v1/sessions/{sid[:8]}", timeout=10).json()["session_id"] == sid
    for probe in ("%25", "%25" + sid[1:3], "_" + sid[1:8], sid[:7], "%25%25%25%25%25%25%25%25"):
        assert_openai_error(httpx.get(f"{base}/v1/sessions/{probe}", timeout=10), 404)


def test_server_since_goes_through_the_one_date_parser(served):
    base, _ = served
    assert_openai_error(httpx.get(base + "/v1/bias-report?since=tomorrow", timeout=10), 400, "since")
    ok = httpx.get(base + "/v1/bias-report", params={"since": "2026-01-01T00:00:00+02:00"}, timeout=10)
    assert ok.status_code == 200 and ok.json()["filters"]["since"] == "2025-12-31T22:00:00.000000+00:00"


@pytest.mark.parametrize("server_token, sent", [("s3cr3t-tok", "s3crét-tök"), ("tökén-ünïcode", "tökén-ünïcode")])
def test_non_ascii_bearer_tokens_never_cause_a_500(tmp_path, council_home, mock, server_token, sent):
    models = {m: {"model": f"openai/mock-{m}", "api_base": mock.base_url} for m in ("a", "b")}
    cfg = write_config(tmp_path / "c.toml", models, chairman="a")
    with council_serve(cfg, council_home, "--token", server_token) as (base, _):
        raw = {"authorization": b"Bearer " + sent.encode("utf-8")}
        response = httpx.get(base + "/v1/models", headers=raw, timeout=10)
        if sent == server_token:
            assert response.status_code == 200, response.text
        else:
            assert_openai_error(response, 401)
        assert_openai_error(httpx.get(base + "/v1/models", headers={"authorization": b"Bearer \xff\xfe"}), 401)
