"""Secrets and private text never leave through errors, logs, stored rows or exports; files are private.

A hostile provider (the mock's ``+echo``: a 400 quoting the Authorization header and the
request body) and a reviewer that quotes the answers (``+quote``) try to carry the API key,
the question and the answers into everything council stores, prints, logs and exports.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
from pathlib import Path

import pytest
from conftest import council_process, db_dump, db_rows, invoke_cli, write_config
from hypothesis import given
from hypothesis import strategies as st
from mock_server import start_mock_server

from council.untrusted import redaction
from council.untrusted.redaction import PRIVATE_RUN, REDACTED, private_scope, redact, register_secret

KEY = "k-7f3a9c2e5b1d4e6f8a0b"  # not shaped like any well-known key: only known by value
QUESTION = "Which orbital mechanics principle explains why geostationary satellites stay above one spot?"
ROOT = Path(__file__).resolve().parents[2]


def copied_runs(text: str, private: str, run: int = PRIVATE_RUN) -> list[str]:
    """Every ``run``-character piece of ``private`` that occurs in ``text``."""
    return [private[i : i + run] for i in range(len(private) - run + 1) if private[i : i + run] in text]


# -- the redaction module ---------------------------------------------------------------


def test_a_configured_key_is_redacted_by_value_in_any_form():
    register_secret(KEY)
    assert KEY not in redact(f"upstream said: key={KEY}!")
    assert redact(f"x-custom-header {KEY}") == f"x-custom-header {REDACTED}"
    escaped = json.dumps({"k": KEY + '"'})  # inside JSON text
    assert KEY not in redact(escaped)


def test_environment_variables_named_like_keys_are_secrets(monkeypatch):
    monkeypatch.setenv("ACME_API_KEY", "acme-0123456789")
    monkeypatch.setenv("SOME_SETTING", "visible-0123456789")
    text = redact("acme-0123456789 and visible-0123456789")
    assert text == f"{REDACTED} and visible-0123456789"


@pytest.mark.parametrize(
    "text, secret",
    [
        ("Authorization: Bearer abc.def-123456", "abc.def-123456"),
        ('{"authorization": "Bearer zzz999yyy888"}', "zzz999yyy888"),
        ("key sk-proj-ABCDEFGH12345678 leaked", "sk-proj-ABCDEFGH12345678"),
        ("api_key=q1w2e3r4t5y6 &x=1", "q1w2e3r4t5y6"),
        ('{"x-api-key": "hunter2hunter2"}', "hunter2hunter2"),
    ],
)
def test_credential_shaped_text_is_redacted(text, secret):
    assert secret not in redact(text)
    assert REDACTED in redact(text)


def test_private_text_is_cut_only_inside_a_scope_with_transcripts_off():
    echo = f'request body: {json.dumps({"content": QUESTION})} (HTTP 400)'
    assert redact(echo) == echo  # no scope: secrets only
    with private_scope(keep_text=True, texts=[QUESTION]):
        assert redact(echo) == echo
    with private_scope(keep_text=False, texts=[QUESTION]):
        cut = redact(echo)
        partial = redact("the body began: " + QUESTION[:40] + " (truncated)")
        short = redact("it mentioned " + QUESTION[:12])
    assert copied_runs(cut, QUESTION) == [] and cut.startswith("request body: ") and cut.endswith("(HTTP 400)")
    assert copied_runs(partial, QUESTION) == [] and partial.startswith("the body began: ")
    assert short.endswith(QUESTION[:12])  # runs shorter than PRIVATE_RUN are not private text


def test_json_escaped_private_text_is_cut():
    answer = 'He said "nothing" —\nthen left: « quoted » text with enough length to count.'
    with private_scope(keep_text=False, texts=[answer]):
        for dumped in (json.dumps(answer), json.dumps(answer, ensure_ascii=False)):
            assert copied_runs(redact(dumped), dumped[1:-1]) == []


def test_resolving_a_model_registers_its_key():
    from council.config import ConfigFile, resolve_model

    config = ConfigFile.model_validate({"models": {"m": {"model": "openai/x", "api_key_env": "ODD_NAME"}}})
    resolve_model("m", config, {"ODD_NAME": "zq-55xx77yy99"}, "test")
    assert redact("zq-55xx77yy99") == REDACTED


def test_the_credentials_of_a_url_and_their_basic_token_are_secrets(monkeypatch):
    import base64

    monkeypatch.setattr(redaction, "_registered", set())
    redaction.register_url_credentials("http://alice:p%40ss-word@proxy.example:8080/v1")
    token = base64.b64encode(b"alice:p@ss-word").decode()
    echoed = f"401 from http://alice:p%40ss-word@proxy.example:8080/v1 (Authorization: Basic {token})"
    clean = redact(echoed)
    assert clean.startswith("401 from http://") and f"@proxy.example:8080/v1 (Authorization: Basic {REDACTED})" in clean
    assert "p%40ss-word" not in clean and token not in clean
    assert redact("the password p@ss-word") == f"the password {REDACTED}"  # decoded, too
    # In a reply only strong secrets go: the token is one, however short (a machine made it).
    redaction.register_url_credentials("http://u:pw@h/v1")
    short = base64.b64encode(b"u:pw").decode()
    assert redaction.redact_secrets(f"I was sent {short}.", error_text=False) == f"I was sent {REDACTED}."


@pytest.mark.parametrize(
    "text, kept",
    [
        ("Authorization: Basic dXNlcjpodW50ZXIy", False),  # user:hunter2
        ('{"authorization": "Basic YTpiY2RlZmdo"}', False),
        ("proxy said: http://bob:hunter22@10.0.0.1/v1 refused", False),
        ("basic training for beginners", True),
        ("Basic understanding of physics is enough.", True),
        ("see http://example.com:8080/docs@latest", True),
    ],
)
def test_basic_credentials_and_url_passwords_are_credential_shaped(text, kept):
    assert (redact(text) == text) is kept, redact(text)
    for secret in ("dXNlcjpodW50ZXIy", "YTpiY2RlZmdo", "hunter22"):
        assert secret not in redact(text)


@given(cuts=st.lists(st.integers(min_value=0, max_value=120), max_size=12), pad=st.text(max_size=20))
def test_a_streamed_reply_loses_a_secret_however_it_is_cut_into_pieces(cuts, pad):
    register_secret(KEY)
    reply = f"{pad}Your key is {KEY} and {KEY[:9]} is how it starts; {json.dumps(KEY)}{pad}"
    bounds = sorted({0, len(reply), *(c for c in cuts if c < len(reply))})
    stream = redaction.SecretStream()
    shown = [stream.feed(reply[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)] + [stream.end()]
    assert "".join(shown) == redaction.redact_secrets(reply, error_text=False)
    assert KEY not in "".join(shown)


async def test_a_client_streams_a_reply_without_a_key_split_across_its_pieces():
    from council.config import ModelSpec
    from council.config.loader import ResolvedModel
    from council.providers.base import ChatRequest, ChatResponse
    from council.providers.client import ModelClient

    register_secret(KEY)
    reply = f"The key you gave me is {KEY}, keep it safe."

    class OneCharacterAtATime:
        async def stream(self, request, on_delta):
            for ch in reply:
                on_delta(ch)
            return ChatResponse(text=reply)

        async def generate(self, request):
            return ChatResponse(text=reply)

    client = ModelClient(ResolvedModel(id="m", spec=ModelSpec(model="fake/m")), OneCharacterAtATime())
    pieces: list[str] = []
    response = await client.complete(ChatRequest(messages=[{"role": "user", "content": "q"}]), stage="t",
                                     on_delta=pieces.append)  # fmt: skip
    assert response.text == "".join(pieces) == f"The key you gave me is {REDACTED}, keep it safe."
    assert (await client.complete(ChatRequest(messages=[{"role": "user", "content": "q"}]), stage="t")).text == (
        response.text
    )


# -- logging: the library emits events, the host decides where they go --------------------


async def test_the_library_prints_nothing_when_used_from_python(capsys):
    from council import Council

    config = {"councils": {"default": {"members": ["fake/a", "fake/b", "fake/c+fail"], "chairman": "fake/a"}}}
    council = Council.from_config(config, store=False)
    try:
        result = await council.run("Why is the sky blue?")
    finally:
        await council.aclose()
    assert result.failures  # "model call failed" was logged
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_a_host_gets_council_events_through_standard_logging_redacted(caplog):
    from council._util.logs import get_logger

    register_secret(KEY)
    with caplog.at_level(logging.INFO, logger="council"):
        get_logger("council.test").info("call failed", api_key="plain-value-1", error=f"said Bearer {KEY}")
    [record] = [r for r in caplog.records if r.name == "council.test"]
    event = record.msg
    assert event["event"] == "call failed"
    assert event["api_key"] == REDACTED and KEY not in event["error"]


def test_a_logged_count_of_tokens_is_shown_and_a_token_is_not(caplog):
    from council._util.logs import get_logger

    with caplog.at_level(logging.INFO, logger="council"):
        get_logger("council.test").info("usage", prompt_tokens=812, completion_tokens=64, access_token="t-1",
                                        token="t-2", refresh_token="t-3")  # fmt: skip
    [record] = [r for r in caplog.records if r.name == "council.test"]
    event = record.msg
    assert (event["prompt_tokens"], event["completion_tokens"]) == (812, 64)
    assert event["access_token"] == event["token"] == event["refresh_token"] == REDACTED


def test_the_cli_log_file_is_private_json_lines_and_redacted(tmp_path, monkeypatch):
    from council._util.logs import configure_logging, get_logger, unconfigure_logging

    path = tmp_path / "council.log"
    monkeypatch.setenv("COUNCIL_LOG_FILE", str(path))
    register_secret(KEY)
    configure_logging(level="INFO")
    try:
        get_logger("council.test").info("provider said", error=f"header x: {KEY}", token="t-0123456789")
    finally:
        unconfigure_logging()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    [line] = [json.loads(x) for x in path.read_text().splitlines()]
    assert line["event"] == "provider said" and line["level"] == "info"
    assert KEY not in path.read_text() and line["token"] == REDACTED


def test_no_library_module_logs_through_unconfigured_structlog():
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "council").rglob("*.py")
        if p.name != "logs.py" and re.search(r"structlog\.get_logger|structlog\.configure", p.read_text())
    ]
    assert offenders == []


# -- end to end: a provider that echoes the request --------------------------------------


@pytest.fixture(scope="module")
def keyed_mock():
    with start_mock_server(require_key=KEY) as server:
        yield server


def echo_config(tmp_path: Path, base_url: str, members: list[str]) -> Path:
    models = {
        f"m{i}": {"model": f"openai/{name}", "api_base": base_url, "api_key_env": "COUNCIL_TEST_PROVIDER_CRED",
                  "retries": 0, "timeout": 20}
        for i, name in enumerate(members, 1)
    }  # fmt: skip
    return write_config(tmp_path / "council.toml", models, chairman="m1")


def test_an_echoing_provider_leaks_neither_key_nor_question(tmp_path, council_home, keyed_mock):
    cfg = echo_config(tmp_path, keyed_mock.base_url, ["mock-alpha", "mock-beta", "mock-gamma+echo"])
    log = council_home / "council.log"
    env = {"COUNCIL_TEST_PROVIDER_CRED": KEY, "COUNCIL_STORE_TRANSCRIPTS": "0", "COUNCIL_LOG_FILE": str(log),
           "COUNCIL_LOG_LEVEL": "INFO"}  # fmt: skip
    proc = council_process("run", QUESTION, "--config", str(cfg), "--json", home=council_home, env=env)
    assert proc.returncode == 0, proc.stderr
    stdout, stderr = proc.stdout.decode(), proc.stderr.decode()
    result = json.loads(stdout)
    [failure, *_] = [f for f in result["failures"] if f["member"] == "m3"]
    assert "BadRequestError" in failure["error"] and REDACTED in failure["error"]  # the provider's words stay
    assert KEY not in stdout and KEY not in stderr
    assert "model call failed" in log.read_text()
    stored = db_dump(council_home)
    assert db_rows(council_home, "select count(*) from calls where error like '%BadRequest%'")[0][0] >= 1
    exported, redacted = invoke_cli("export").stdout, invoke_cli("export", "--redact").stdout
    for where, text in (("log", log.read_text()), ("database", stored), ("export", exported),
                        ("export --redact", redacted)):  # fmt: skip
        assert KEY not in text, where
        assert copied_runs(text, QUESTION) == [], where


def test_a_quorum_failure_from_echoing_providers_prints_and_stores_no_key(tmp_path, council_home, keyed_mock):
    cfg = echo_config(tmp_path, keyed_mock.base_url, ["mock-alpha+echo", "mock-beta+echo"])
    env = {"COUNCIL_TEST_PROVIDER_CRED": KEY, "COUNCIL_STORE_TRANSCRIPTS": "0"}
    proc = council_process("run", QUESTION, "--config", str(cfg), home=council_home, env=env)
    stderr = proc.stderr.decode()
    assert proc.returncode == 1
    [line] = [x for x in stderr.splitlines() if x.strip()]
    assert line.startswith("error: ") and "quorum" in line and KEY not in line
    assert copied_runs(line, QUESTION) == []
    [(status, error)] = db_rows(council_home, "select status, error from sessions")
    assert status == "failed" and KEY not in error and copied_runs(error, QUESTION) == []


def test_export_redacts_keys_left_in_older_rows(council_home, monkeypatch):
    from council.storage import SQLiteStore

    store = SQLiteStore.open()
    store.begin_session("s-old", council="default")
    store.fail_session("s-old", status="failed", error=f"old error with {KEY}", calls=[])
    store.close()
    # Rows written by an older version kept the key; the export must not pass it on.
    with store_db_raw(council_home) as db:
        db.execute("update sessions set error = ? where id = 's-old'", [f"old error with {KEY}"])
    monkeypatch.setenv("LEGACY_PROVIDER_API_KEY", KEY)  # export knows keys from the environment
    for args in (("export",), ("export", "--redact"), ("export", "--format", "csv", "--redact")):
        proc = invoke_cli(*args)
        assert proc.exit_code == 0, proc.stderr
        assert "s-old" in proc.stdout and KEY not in proc.stdout


def store_db_raw(home: Path):
    import sqlite3
    from contextlib import closing

    return closing(sqlite3.connect(home / "council.db", isolation_level=None))


# -- transcripts off: quoted answers stay out of review and judgment errors ----------------


def test_a_reviewer_quoting_the_answers_leaves_the_reason_and_no_value(tmp_path, council_home, keyed_mock):
    base = keyed_mock.base_url
    common = {"api_base": base, "api_key_env": "COUNCIL_TEST_PROVIDER_CRED", "retries": 0}
    models = {"m1": {"model": "openai/mock-alpha", **common}, "m2": {"model": "openai/mock-beta", **common},
              "r": {"model": "openai/mock-rho+quote", **common}}  # fmt: skip
    cfg = write_config(tmp_path / "c.toml", models, members=["m1", "m2"], reviewers=["m1", "r"], chairman="m1",
                       max_review_attempts=1)  # fmt: skip
    env = {"COUNCIL_TEST_PROVIDER_CRED": KEY}
    kept = invoke_cli("run", QUESTION, "--config", str(cfg), "--json", env=env)
    assert kept.exit_code == 0, kept.stderr
    first = json.loads(kept.stdout)
    [quoted] = [r["error"] for r in first["reviews"] if r["reviewer"] == "r"]
    assert "(got " in quoted  # transcripts on: the value is quoted, as before
    answers = [a["text"] for a in first["answers"]]  # the mock answers the same way every time

    off = invoke_cli("run", QUESTION, "--config", str(cfg), "--json", env={**env, "COUNCIL_STORE_TRANSCRIPTS": "0"})
    assert off.exit_code == 0, off.stderr
    sid = json.loads(off.stdout)["session_id"]
    [(error,)] = db_rows(council_home, "select error from reviews where session_id = ? and reviewer = 'r'", (sid,))
    assert "score" in error and "valid integer" in error  # the reason stays
    assert "(got " not in error
    rows = db_rows(council_home, "select result, error from sessions where id = ?", (sid,))
    rows += db_rows(council_home, "select error, null from reviews where session_id = ?", (sid,))
    rows += db_rows(council_home, "select error, null from calls where session_id = ?", (sid,))
    stored = json.dumps(rows)
    for answer in answers:
        assert copied_runs(stored, answer, 16) == []


async def test_an_echoing_reviewer_does_not_store_the_answers_it_was_shown(council_home):
    from council import Council

    # A reviewer that is not a member: a member whose answer failed (an echoer's does) is not asked to review.
    council = {"members": ["fake/a", "fake/b", "fake/c"], "reviewers": ["fake/a", "fake/b", "fake/c+echo"],
               "chairman": "fake/a"}  # fmt: skip
    config = {"councils": {"default": council}, "privacy": {"store_transcripts": False}}
    council = Council.from_config(config)
    try:
        result = await council.run(QUESTION)
    finally:
        await council.aclose()
    answers = [a.text for a in result.answers if a.text]
    [review_error] = [r.error for r in result.reviews if r.reviewer == "fake/c+echo"]
    assert review_error and "could not process this request" in review_error
    stored = db_dump(council_home)
    for text in (review_error, stored):
        assert copied_runs(text, QUESTION) == []
        for answer in answers:
            assert copied_runs(text, answer) == []


async def test_judgments_with_transcripts_off_store_no_quoted_or_echoed_response(council_home):
    from fake_judges import fake_client

    from council.judging.engine import compare, grade
    from council.judging.rubrics import load_rubric
    from council.storage import SQLiteStore

    response_a = "Geostationary orbits match the rotation period of the Earth, about 23 hours 56 minutes."
    response_b = "Satellites hover because there is no gravity that far out, which is a common mistake."
    store = SQLiteStore.open()
    try:
        for j in ("fake/j+quote", "fake/k+echo"):
            await compare(QUESTION, response_a, response_b, judges=[fake_client(j)], store=store, keep_text=False,
                          max_attempts=1)  # fmt: skip
        await grade(QUESTION, response_a, rubric=load_rubric("general"), judges=[fake_client("fake/g+quote")],
                    store=store, keep_text=False, max_attempts=1)  # fmt: skip
    finally:
        store.close()
    problems = [p for (p,) in db_rows(council_home, "select problem from judgments where problem is not null")]
    assert any("valid integer" in p for p in problems) and any("could not process" in p for p in problems)
    stored = db_dump(council_home)
    for text in (response_a, response_b, QUESTION):
        assert copied_runs(stored, text) == []


# -- files -----------------------------------------------------------------------------------


def test_home_database_log_and_salt_are_private(tmp_path, monkeypatch):
    home = tmp_path / "fresh" / "home"
    monkeypatch.setenv("COUNCIL_HOME", str(home))
    cfg = write_config(tmp_path / "c.toml", {"a": {"model": "fake/a"}, "b": {"model": "fake/b"}})
    log = home / "council.log"
    env = {"COUNCIL_HASH_QUERIES": "1", "COUNCIL_LOG_FILE": str(log), "COUNCIL_LOG_LEVEL": "INFO"}
    proc = invoke_cli("run", "Why is the sky blue?", "--config", str(cfg), env=env)
    assert proc.exit_code == 0, proc.stderr
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    files = ["council.db", "council.db-wal", "council.db-shm", "council.log", "query_hash_salt"]
    modes = {name: stat.S_IMODE((home / name).stat().st_mode) for name in files if (home / name).exists()}
    assert set(modes) >= {"council.db", "council.log", "query_hash_salt"}
    assert modes == dict.fromkeys(modes, 0o600)


def test_a_deleted_salt_is_recreated_with_a_warning(tmp_path, council_home):
    cfg = write_config(tmp_path / "c.toml", {"a": {"model": "fake/a"}, "b": {"model": "fake/b"}})
    env = {"COUNCIL_HASH_QUERIES": "1"}
    first = invoke_cli("run", "Why is the sky blue?", "--config", str(cfg), env=env)
    assert first.exit_code == 0 and "salt" not in first.stderr
    (council_home / "query_hash_salt").unlink()
    second = invoke_cli("run", "Why is the sky blue?", "--config", str(cfg), env=env)
    assert second.exit_code == 0, second.stderr
    assert "earlier query hashes will no longer group" in second.stderr
    hashes = {h for (h,) in db_rows(council_home, "select distinct query_hash from bias_records")}
    assert len(hashes) == 2 and (council_home / "query_hash_salt").exists()


def test_a_replaced_salt_is_noticed_by_its_fingerprint_once(tmp_path, council_home):
    import hashlib
    import hmac

    from council.bias.records import FINGERPRINT_MESSAGE

    cfg = write_config(tmp_path / "c.toml", {"a": {"model": "fake/a"}, "b": {"model": "fake/b"}})
    env = {"COUNCIL_HASH_QUERIES": "1"}
    assert invoke_cli("run", "Why is the sky blue?", "--config", str(cfg), env=env).exit_code == 0
    salt_file = council_home / "query_hash_salt"
    old_salt = salt_file.read_bytes()
    stored = db_rows(council_home, "select value from settings where key = 'query_hash_salt_fingerprint'")
    assert stored == [(hmac.new(old_salt, FINGERPRINT_MESSAGE, hashlib.sha256).hexdigest(),)]
    assert old_salt.hex() not in db_dump(council_home)  # a fingerprint, never the salt
    salt_file.write_bytes(os.urandom(32))  # another installation's salt, copied over ours
    second = invoke_cli("run", "Why is the sky blue?", "--config", str(cfg), env=env)
    assert second.exit_code == 0, second.stderr
    warnings = [line for line in second.stderr.splitlines() if "query-hash salt" in line]
    assert len(warnings) == 1 and "is not the one earlier query hashes were made with" in warnings[0]
    third = invoke_cli("run", "Why is the sky blue?", "--config", str(cfg), env=env)
    assert third.exit_code == 0 and "salt" not in third.stderr  # said once; the new salt is the one now


def test_the_configuration_reference_names_the_salt_file_by_its_real_name():
    from site_docs import page, site_text

    from council.bias.records import SALT_FILE

    assert f"$COUNCIL_HOME/{SALT_FILE}" in page("operators/configuration.md")
    assert "$COUNCIL_HOME/salt`" not in site_text()


@given(st.from_regex(redaction._CREDENTIAL))
def test_every_credential_shape_contains_a_prefilter_word(text):
    # redact_secrets runs the credential expression only on text holding one of these words.
    match = redaction._CREDENTIAL.search(text)
    assert match is not None
    assert any(hint in match.group(0).casefold() for hint in redaction._CREDENTIAL_HINTS)
    if match.group("basic") is not None and redaction._credential(match) == match.group(0):
        return  # "Basic" and a word that is no base64 of "user:password": prose, kept
    assert redaction.REDACTED in redaction.redact_secrets(text, frozenset())
