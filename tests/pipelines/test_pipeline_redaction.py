"""Secrets are cut where they could appear, never by rewriting what the user wrote.

Ollama documents the key ``ollama`` and LM Studio ``lm-studio``; a shell may hold an unrelated
``SOME_TOKEN=answer``. Redacting such words by value everywhere rewrote the stored question and
model names ("Should I run [redacted] locally?", ``fake/[redacted]-llama3``) and made exports
stop joining. A real key echoed by a provider is still cut wherever it lands
(tests/pipelines/test_secrets.py); a common word is cut only from provider error text and logs, as a whole
word; council's own messages ("a bearer token") are never touched.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from conftest import db_rows, invoke_cli
from hypothesis import given
from hypothesis import strategies as st

from council import Council
from council.untrusted import redaction
from council.untrusted.redaction import REDACTED, redact, redact_document, register_secret

QUESTION = "Should I run ollama locally, or is lm-studio easier? I want the answer for a laptop."


@pytest.fixture(autouse=True)
def registered_secrets(monkeypatch):
    """Secrets registered here stay here (the registry is process-wide)."""
    monkeypatch.setattr(redaction, "_registered", set(redaction._registered))


async def run_keyed(monkeypatch, key: str, question: str = QUESTION, members: tuple[str, ...] = ()):
    monkeypatch.setenv("LOCAL_SERVER_KEY", key)
    models = {
        "local": {"model": "fake/ollama-llama3", "api_key_env": "LOCAL_SERVER_KEY"},
        "studio": {"model": "fake/lm-studio-qwen", "api_key_env": "LOCAL_SERVER_KEY"},
        "third": {"model": "fake/answer-engine"},
    }
    config = {"models": models, "councils": {"default": {"members": ["local", "studio", "third", *members],
                                                         "chairman": "local"}}}  # fmt: skip
    council = Council.from_config(config)
    try:
        return await council.run(question)
    finally:
        await council.aclose()


@pytest.mark.parametrize("key", ["ollama", "lm-studio"])
async def test_a_common_word_key_leaves_the_stored_question_and_model_names_intact(monkeypatch, council_home, key):
    result = await run_keyed(monkeypatch, key)
    [(stored_question, stored_result)] = db_rows(council_home, "select question, result from sessions")
    document = json.loads(stored_result)
    assert stored_question == document["question"] == QUESTION
    assert document["models"] == {"local": "fake/ollama-llama3", "studio": "fake/lm-studio-qwen",
                                  "third": "fake/answer-engine"}  # fmt: skip
    assert {a["model"] for a in document["answers"]} == {"fake/ollama-llama3", "fake/lm-studio-qwen",
                                                          "fake/answer-engine"}  # fmt: skip
    assert [a.text for a in result.answers] == [a["text"] for a in document["answers"]]
    # Exports join with the other tables: the same question and model names everywhere.
    [exported] = [json.loads(line) for line in invoke_cli("export").stdout.splitlines()]
    assert exported["question"] == QUESTION
    answers = list(csv.DictReader(io.StringIO(invoke_cli("export", "--format", "csv", "--shape", "answers").stdout)))
    assert {r["model"] for r in answers} == {"fake/ollama-llama3", "fake/lm-studio-qwen", "fake/answer-engine"}
    [listed] = json.loads(invoke_cli("sessions", "list", "--json").stdout)
    assert listed["question"] == QUESTION


async def test_an_unrelated_token_variable_never_blanks_a_word(monkeypatch, council_home):
    monkeypatch.setenv("SOME_TOKEN", "answer")
    result = await run_keyed(monkeypatch, "k-7f3a9c2e5b1d4e6f8a0b", members=("fake/d+fail",))
    assert "1 of 4 members failed to answer" in result.partial_reasons
    [(stored,)] = db_rows(council_home, "select result from sessions")
    document = json.loads(stored)
    assert document["question"] == QUESTION and document["partial_reasons"] == result.partial_reasons
    assert REDACTED not in stored
    out = invoke_cli("export", "--format", "csv")
    [row] = list(csv.DictReader(io.StringIO(out.stdout)))
    assert row["question"] == QUESTION
    assert redact("the answer was not valid JSON") == "the answer was not valid JSON"


def test_a_common_word_key_is_cut_from_provider_error_text_as_a_whole_word():
    register_secret("ollama")
    said = 'HTTP 401: bad token "ollama" for model ollama-llama3 at http://ollama.local:11434 (key: ollama)'
    assert redact(said) == (
        f'HTTP 401: bad token "{REDACTED}" for model ollama-llama3 at http://ollama.local:11434 (key: {REDACTED})'
    )
    assert redact("Authorization: Bearer ollama") == f"Authorization: Bearer {REDACTED}"
    assert redact(json.dumps({"api_key": "ollama"})) == json.dumps({"api_key": REDACTED})
    assert redact("GET http://admin:ollama@10.0.0.2/v1 refused") == f"GET http://admin:{REDACTED}@10.0.0.2/v1 refused"
    assert redact("pull ollama:latest from /srv/ollama/models") == "pull ollama:latest from /srv/ollama/models"


def test_a_real_key_is_cut_from_replies_but_user_words_are_kept():
    strong = "k-7f3a9c2e5b1d4e6f8a0b"
    register_secret(strong)
    register_secret("lm-studio")
    document = {
        "question": f"Is lm-studio safe? My key is {strong}",  # the user's own words stay as written
        "models": {"m1": "openai/lm-studio-community"},
        "answers": [
            {
                "member": "m1",
                "model": "openai/lm-studio-community",
                "text": f"Your key {strong} is set",
                "error": "provider said: bad key lm-studio",
            }
        ],  # fmt: skip
        "failures": [{"stage": "answer", "member": "m1", "error": f"echo: Bearer {strong}"}],
    }
    clean = redact_document(document)
    assert clean["question"] == document["question"] and clean["models"] == document["models"]
    assert clean["answers"][0]["model"] == "openai/lm-studio-community"
    assert clean["answers"][0]["text"] == f"Your key {REDACTED} is set"  # a provider's reply: no real key
    assert clean["answers"][0]["error"] == f"provider said: bad key {REDACTED}"
    assert strong not in json.dumps(clean["failures"])


@pytest.mark.parametrize(
    "own",
    [
        "missing or invalid bearer token",
        "refusing to bind 0.0.0.0 without --token: anything but loopback needs a bearer token",
        "Require 'Authorization: Bearer TOKEN' (env COUNCIL_SERVER_TOKEN).",
        "send the key as api_key=<your key>",
        "set OPENAI_API_KEY=$OPENAI_API_KEY before running",
    ],
)
def test_councils_own_messages_are_not_mangled(own):
    assert redact(own) == own


@pytest.mark.parametrize(
    "leak, secret",
    [
        ("Authorization: Bearer abc.def-123456", "abc.def-123456"),
        ("Authorization: Bearer AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
        ("bearer tokenvalue-9f8e7d", "tokenvalue-9f8e7d"),
    ],
)
def test_real_bearer_credentials_are_still_cut(leak, secret):
    assert secret not in redact(leak) and REDACTED in redact(leak)


def test_serve_refusal_prints_councils_words_whole():
    result = invoke_cli("serve", "--host", "0.0.0.0")
    assert result.exit_code == 2
    [line] = result.error_lines
    assert REDACTED not in line and "token" in line


def test_ollamas_documented_key_over_http_is_cut_from_the_echo_and_nothing_else(tmp_path, council_home):
    # A real OpenAI-compatible server requiring the key "ollama"; one member echoes the request
    # (its Authorization header and body) in a 400, as a careless proxy does.
    from conftest import write_config
    from mock_server import start_mock_server

    with start_mock_server(require_key="ollama") as server:
        common = {"api_base": server.base_url, "api_key_env": "OLLAMA_API_KEY", "retries": 0, "timeout": 20}
        models = {"local": {"model": "openai/ollama-llama3", **common},
                  "other": {"model": "openai/mock-beta", **common},
                  "echo": {"model": "openai/ollama-echo+echo", **common}}  # fmt: skip
        cfg = write_config(tmp_path / "c.toml", models, chairman="local")
        result = invoke_cli("run", QUESTION, "--config", str(cfg), "--json", env={"OLLAMA_API_KEY": "ollama"})
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["question"] == QUESTION and out["models"]["local"] == "openai/ollama-llama3"
    [echoed, *_] = [f["error"] for f in out["failures"] if f["member"] == "echo"]
    assert "Bearer ollama" not in echoed and f"Bearer {REDACTED}" in echoed
    [(question, stored)] = db_rows(council_home, "select question, result from sessions")
    document = json.loads(stored)
    assert question == document["question"] == QUESTION
    assert document["models"]["echo"] == "openai/ollama-echo+echo"
    call_errors = json.dumps(db_rows(council_home, "select error from calls"))
    assert "Bearer ollama" not in stored and "Bearer ollama" not in call_errors


def test_every_stored_table_redacts_a_reply_the_same_way(council_home):
    # The answers and reviews tables hold the same texts as the stored result: a strong key a
    # provider echoed in its reply is cut from both, the user's names are kept in both.
    from types import SimpleNamespace

    from council.storage import SQLiteStore

    strong = "k-7f3a9c2e5b1d4e6f8a0b"
    register_secret(strong)
    register_secret("ollama")
    answer = {"member": "ollama", "model": "openai/ollama", "text": f"your key {strong}, for ollama", "status": "ok",
              "error": "server said: bad key ollama", "length_chars": 9, "latency_ms": 1.0}  # fmt: skip
    review = SimpleNamespace(reviewer="ollama", model="openai/ollama", display_order=["ollama"],
                             labels={"A": "ollama"}, scores={"ollama": 7}, ranking=["ollama"],
                             reasoning={"ollama": f"uses {strong}"}, valid=True, attempts=1, error=None,
                             late=False)  # fmt: skip
    # A session result as the runner hands it to the store (only what save_session reads).
    result = SimpleNamespace(session_id="s1", status="complete", answers=[SimpleNamespace(**answer)], reviews=[review],
                             synthesis=SimpleNamespace(structure=None), model_dump=lambda mode: {"answers": [answer]},
                             model_dump_json=lambda: json.dumps({"answers": [answer]}))  # fmt: skip
    store = SQLiteStore.open()
    try:
        store.begin_session("s1", council="default", question="q")
        store.save_session(result, [], keep_text=True, calls=[])
    finally:
        store.close()
    [(member, model, text, error)] = db_rows(council_home, "select member, model, text, error from answers")
    [(result,)] = db_rows(council_home, "select result from sessions")
    assert (member, model) == ("ollama", "openai/ollama")
    assert text == f"your key {REDACTED}, for ollama" == json.loads(result)["answers"][0]["text"]
    assert error == f"server said: bad key {REDACTED}"
    [(reviewer, labels, reasoning)] = db_rows(council_home, "select reviewer, labels, reasoning from reviews")
    assert reviewer == "ollama" and json.loads(labels) == {"A": "ollama"}
    assert strong not in reasoning and json.loads(reasoning) == {"ollama": f"uses {REDACTED}"}


WORDS = st.sampled_from(["ollama", "lm-studio", "answer", "k-7f3a9c2e5b1d4e6f8a0b", "the", "model", "Bearer", ":", "/"])
TEXT = st.lists(WORDS, max_size=8).map(" ".join)


@given(question=TEXT, model=TEXT, reply=TEXT, error=TEXT)
def test_a_document_keeps_user_words_and_loses_strong_keys_everywhere_else(question, model, reply, error):
    strong, weak = "k-7f3a9c2e5b1d4e6f8a0b", frozenset({"k-7f3a9c2e5b1d4e6f8a0b", "ollama", "lm-studio"})
    document = {"question": question, "models": {"m": model}, "answers": [{"model": model, "text": reply,
                "error": error}], "failures": [{"member": model, "error": error}]}  # fmt: skip
    clean = redact_document(document, weak)
    assert clean["question"] == question and clean["models"] == {"m": model}
    assert clean["answers"][0]["model"] == model and clean["failures"][0]["member"] == model
    for text in (clean["answers"][0]["text"], clean["answers"][0]["error"], clean["failures"][0]["error"]):
        assert strong not in text
    assert "ollama" not in clean["answers"][0]["error"].split()
