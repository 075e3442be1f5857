"""Reliability under faults: timeouts, 5xx, 429s, garbage output, deadlines, Ctrl-C, bad input.

The ``council`` command in-process where the point is what the user sees (one line, exit
code), a real subprocess where it is what a signal or a killed process leaves behind, and a
real OpenAI-compatible mock server or the in-process fake provider for the models.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import db_rows, invoke_cli, write_config
from mock_server import start_mock_server

from council import Council
from council.config import ModelSpec, ResolvedModel
from council.errors import ProviderError, QuorumError
from council.providers.base import ChatRequest, ChatResponse
from council.providers.client import ModelClient
from council.providers.litellm_api import LiteLLMAPI

QUESTION = "Why is the sky blue?"


# -- helpers -----------------------------------------------------------------
def cli_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COUNCIL_DEBUG", "COUNCIL_TEST_UNSET_KEY")}
    return {**env, "COUNCIL_HOME": str(home), **extra}


def flat(text: str) -> str:
    """Console output with rich's line wrapping undone."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def mock():
    # "+slow" models sleep 30 s before replying: a hanging provider.
    with start_mock_server(latency=0.01, slow_seconds=30) as server:
        yield server


# -- faults inside a session that still reaches quorum --------------------------
def test_timeout_500_and_garbage_members_session_completes_and_names_each_cause(tmp_path, council_home, mock):
    base = mock.base_url
    models: dict[str, dict[str, object]] = {
        "ok1": {"model": "openai/mock-alpha", "api_base": base},
        "ok2": {"model": "openai/mock-beta", "api_base": base},
        "hang": {"model": "openai/mock-gamma+slow", "api_base": base, "timeout": 1, "retries": 0},
        "five": {"model": "openai/mock-delta+fail", "api_base": base, "retries": 1},
        "garb": {"model": "openai/mock-eps+garbage", "api_base": base},
    }
    cfg = write_config(tmp_path / "c.toml", models, chairman="ok1", max_review_attempts=2)
    proc = invoke_cli("run", QUESTION, "--config", str(cfg), "--seed", "5")
    assert proc.exit_code == 0, proc.stderr
    out = flat(proc.stdout)
    assert "status partial" in out
    # Each failure with its real cause, as the provider said it, and no wrapper noise: one
    # warning line per stage on stderr, and nothing else there (no log noise).
    answers_line, reviews_line = proc.error_lines
    assert answers_line.startswith("warning: 2 of 5 members failed to answer (")
    assert "hang: openai/mock-gamma+slow: Timeout: no reply within 1s" in answers_line
    assert (
        "five: openai/mock-delta+fail: InternalServerError: "
        "fake failure requested by the +fail behaviour (HTTP 500)" in answers_line
    )
    # The two members that failed to answer are not asked to review (the hanging one would
    # have held the session for its timeout again), and the result says so.
    assert reviews_line.startswith("warning: 1 of 3 reviews invalid or failed (")
    assert "flag: not asked to review: hang, five (their answers failed)" in out
    assert "garb: invalid output after 2 attempts: the reply contains no JSON object" in reviews_line
    assert "litellm." not in out + proc.stderr and "OpenAIException" not in out + proc.stderr

    [(status, error)] = db_rows(council_home, "select status, error from sessions")
    assert (status, error) == ("partial", None)
    answers = dict(db_rows(council_home, "select member, status from answers"))
    assert answers == {"ok1": "ok", "ok2": "ok", "hang": "failed", "five": "failed", "garb": "ok"}
    [(valid, attempts)] = db_rows(council_home, "select valid, attempts from reviews where reviewer = 'garb'")
    assert (valid, attempts) == (0, 2)
    # "five" was retried once: two failed attempts in the call log, each with the provider's text.
    five = db_rows(council_home, "select attempt, ok, error from calls where member = 'five' and stage = 'answer'")
    assert [(a, ok) for a, ok, _ in five] == [(1, 0), (2, 0)]
    assert all("fake failure requested" in e for _, _, e in five)
    # The ranking holds the three members that answered.
    result = json.loads(db_rows(council_home, "select result from sessions")[0][0])
    assert sorted(e["member"] for e in result["consensus"]["ranking"]) == ["garb", "ok1", "ok2"]


def test_a_member_that_failed_to_answer_is_not_asked_to_review_and_the_session_says_so(tmp_path, council_home):
    # Reviewers default to the members: a member whose answer failed was asked to review
    # anyway, and a hanging one held the session for its whole timeout a second time.
    from collections import Counter

    from council.session.schemas import PEER_REVIEW_SCHEMA_NAME

    with start_mock_server(latency=0.01, log_requests=tmp_path / "requests.jsonl") as mock:
        models: dict[str, dict[str, object]] = {
            "ok1": {"model": "openai/mock-alpha", "api_base": mock.base_url},
            "ok2": {"model": "openai/mock-beta", "api_base": mock.base_url},
            "ok3": {"model": "openai/mock-gamma", "api_base": mock.base_url},
            "five": {"model": "openai/mock-delta+fail", "api_base": mock.base_url, "retries": 0},
        }
        cfg = write_config(tmp_path / "c.toml", models, chairman="ok1")
        proc = invoke_cli("run", QUESTION, "--config", str(cfg), "--seed", "5", "--json")
        requests = mock.logged_requests()
    assert proc.exit_code == 0, proc.stderr
    reviews_asked = Counter(r["model"] for r in requests if r.get("schema") == PEER_REVIEW_SCHEMA_NAME)
    assert reviews_asked == {"mock-alpha": 1, "mock-beta": 1, "mock-gamma": 1}  # none to mock-delta+fail
    assert [r["model"] for r in requests].count("mock-delta+fail") == 1  # its answer, no more
    result = json.loads(proc.stdout)
    assert result["status"] == "partial"
    assert sorted(r["reviewer"] for r in result["reviews"]) == ["ok1", "ok2", "ok3"]
    assert all(r["valid"] for r in result["reviews"])
    assert "not asked to review: five (its answer failed)" in result["flags"]
    [(stored,)] = db_rows(council_home, "select result from sessions")
    assert "not asked to review: five (its answer failed)" in json.loads(stored)["flags"]


# -- below quorum, and past the session deadline: exit 1, one line ---------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "models, council, expected",
    [
        (
            {
                "a": {"model": "fake/a"},
                "b": {"model": "fake/b+fail", "retries": 0},
                "c": {"model": "fake/c+slow", "timeout": 0.1, "retries": 0},
            },
            {"quorum": 2},
            "error: only 1 of 3 members answered (quorum 2): "
            "b: fake/b+fail: fake failure requested by the +fail behaviour (HTTP 500); "
            "c: fake/c+slow: Timeout: no reply within 0.1s",
        ),
        (
            {"a": {"model": "fake/a+slow"}, "b": {"model": "fake/b+slow"}},
            {"session_timeout": 0.2},
            "error: the session exceeded its deadline of 0.2s",
        ),
    ],
    ids=["below-quorum", "session-deadline"],
)
def test_council_failure_exits_1_with_one_line_and_a_failed_row(tmp_path, council_home, models, council, expected):
    cfg = write_config(tmp_path / "c.toml", models, **council)
    proc = invoke_cli("run", QUESTION, "--config", str(cfg))
    assert proc.exit_code == 1
    assert proc.stdout == ""
    assert proc.error_lines == [expected]
    [(status, error, finished)] = db_rows(council_home, "select status, error, finished_at from sessions")
    assert status == "failed" and finished
    assert error == expected.removeprefix("error: ")


async def test_session_deadline_records_failed_status_and_cancelled_calls(council_home):
    members = ["fake/a+slow", "fake/b+slow", "fake/c+slow"]  # each call takes 0.5 s
    config = {"councils": {"default": {"members": members, "session_timeout": 0.2}}}
    async with Council.from_config(config) as council:
        t0 = time.perf_counter()
        with pytest.raises(QuorumError, match=r"deadline of 0\.2s"):
            await council.run(QUESTION, seed=1)
        assert time.perf_counter() - t0 < 0.45, "the deadline must cut the calls short"
    [(status, error)] = db_rows(council_home, "select status, error from sessions")
    assert (status, error) == ("failed", "the session exceeded its deadline of 0.2s")
    # The three calls in flight when the deadline hit are in the call log, not lost.
    calls = db_rows(council_home, "select member, ok, error from calls order by member")
    assert calls == [(m, 0, "cancelled") for m in members]


async def test_error_after_the_session_is_written_neither_fails_it_nor_duplicates_its_call_log(council_home):
    # An exception raised after the session was persisted (here by the progress callback at
    # "session_finished") used to rewrite it as failed and write every call-log row a second time.
    def on_event(event):
        if event.type == "session_finished":
            raise RuntimeError("the UI went away")

    config = {"councils": {"default": {"members": ["fake/a", "fake/b", "fake/c"]}}}
    async with Council.from_config(config) as council:
        with pytest.raises(RuntimeError, match="the UI went away"):
            await council.run(QUESTION, seed=1, on_event=on_event)
    [(status, error)] = db_rows(council_home, "select status, error from sessions")
    assert (status, error) == ("complete", None)
    calls = db_rows(council_home, "select stage, member, attempt from calls")
    assert len(calls) == len(set(calls)) == 7  # 3 answers, 3 reviews, 1 synthesis
    assert db_rows(council_home, "select count(*) from bias_records") == [(6,)]


# -- retries -------------------------------------------------------------------
async def test_429_and_500_that_clear_on_retry_end_in_success_with_failed_attempts_logged(tmp_path, council_home):
    log = tmp_path / "requests.jsonl"
    # Seed 11 at a 30 % fault rate: the server's fault sequence holds both 429s and a 500.
    with start_mock_server(fault_rate=0.3, fault_kinds="429,500", seed=11, log_requests=log) as server:
        models = {
            f"m{i}": {"model": f"openai/mock-{name}", "api_base": server.base_url, "retries": 5}
            for i, name in enumerate(("alpha", "beta", "gamma"), 1)
        }
        config = {"councils": {"default": {"members": list(models), "chairman": "m1"}}, "models": models}
        async with Council.from_config(config) as council:
            result = await council.run(QUESTION, seed=3)
        requests = server.logged_requests()
    assert result.status == "complete", result.partial_reasons
    faulted = [r for r in requests if r["faulted"]]
    assert {r["status"] for r in faulted} == {429, 500}

    calls = db_rows(council_home, "select stage, member, attempt, ok, error from calls order by id")
    failed = [c for c in calls if not c[3]]
    assert len(failed) == len(faulted) == result.usage.failed_calls
    assert len(calls) == len(requests) == result.usage.calls
    errors = " | ".join(c[4] for c in failed)
    assert "RateLimitError: Rate limit reached (injected fault). (HTTP 429)" in errors
    assert "InternalServerError: The server had an error processing your request (injected 500). (HTTP 500)" in errors
    # Per logical call: attempts 1..n, every attempt but the last failed, the last one ok.
    by_call: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for stage, member, attempt, ok, _ in calls:
        by_call.setdefault((stage, member), []).append((attempt, ok))
    for attempts in by_call.values():
        assert [a for a, _ in attempts] == list(range(1, len(attempts) + 1))
        assert [ok for _, ok in attempts] == [0] * (len(attempts) - 1) + [1]
    assert any(len(a) > 1 for a in by_call.values())


async def test_permanent_provider_error_is_not_retried(mock):
    spec = ModelSpec(model="openai/mock-x+nosuch", api_base=mock.base_url, retries=3)
    client = ModelClient(ResolvedModel(id="x", spec=spec), LiteLLMAPI(spec.model, api_base=mock.base_url))
    records = []
    with pytest.raises(ProviderError, match=r"NotFoundError: fake model 'mock-x\+nosuch': unknown behaviour") as exc:
        await client.complete(
            ChatRequest(messages=[{"role": "user", "content": "hi"}]), stage="answer", sink=records.append
        )
    assert exc.value.status_code == 404 and not exc.value.retryable
    assert [(r.attempt, r.ok) for r in records] == [(1, False)]
    await client.aclose()


class _FailsFirst:
    """A backend whose first ``failures`` calls fail with ``error``, then answer."""

    def __init__(self, failures: int, error: ProviderError) -> None:
        self.failures, self.error, self.sent = failures, error, 0

    async def generate(self, request: ChatRequest) -> ChatResponse:
        self.sent += 1
        if self.sent <= self.failures:
            raise self.error
        return ChatResponse(text="fine", prompt_tokens=1, completion_tokens=1)

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize(
    ("failures", "retries", "retryable", "sent", "waits", "ok"),
    [
        (0, 3, True, 1, [], True),  # answered at once: no retry loop at all
        (2, 3, True, 3, [1.0, 2.0], True),  # tenacity's backoff, from the first failure on
        (5, 3, True, 4, [1.0, 2.0, 4.0], False),  # retries run out: the last error
        (5, 0, True, 1, [], False),  # no retries configured
        (5, 3, False, 1, [], False),  # a permanent error is never retried
    ],
)
async def test_retries_follow_the_policy_whether_the_first_attempt_fails_or_not(
    monkeypatch, failures, retries, retryable, sent, waits, ok
):
    from council.providers.client import RetryPolicy

    slept: list[float] = []

    async def no_sleep(seconds: float, *args: object) -> None:
        slept.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", no_sleep)
    error = ProviderError("InternalServerError: down", model="m", status_code=500, retryable=retryable)
    api = _FailsFirst(failures, error)
    spec = ModelSpec(model="openai/m", api_base="http://127.0.0.1:9", retries=retries)
    client = ModelClient(ResolvedModel(id="m", spec=spec), api, retry=RetryPolicy(jitter=0.0))
    records: list = []
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}])
    if ok:
        assert (await client.complete(request, stage="answer", sink=records.append)).text == "fine"
    else:
        with pytest.raises(ProviderError, match="down"):
            await client.complete(request, stage="answer", sink=records.append)
    assert api.sent == sent and slept == waits
    assert [(r.attempt, r.ok) for r in records] == [(n, ok and n == sent) for n in range(1, sent + 1)]


class _SlowToPrepare:
    """A backend whose one-off setup takes longer than a call's deadline (like LiteLLM's import)."""

    def __init__(self) -> None:
        self.prepared = 0

    def prepare(self) -> None:
        self.prepared += 1
        time.sleep(0.3)

    async def generate(self, request: ChatRequest) -> ChatResponse:
        await asyncio.sleep(0.01)
        return ChatResponse(text="fine")

    async def aclose(self) -> None:
        return None


async def test_backend_setup_does_not_count_against_the_first_call_deadline():
    api = _SlowToPrepare()
    client = ModelClient(ResolvedModel(id="m", spec=ModelSpec(model="custom/m", timeout=0.2, retries=0)), api)
    records = []
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}])
    for _ in range(2):
        assert (await client.complete(request, stage="answer", sink=records.append)).text == "fine"
    assert api.prepared == 1
    assert all(r.ok and r.latency_ms < 200 for r in records)


# -- Ctrl-C and SIGTERM --------------------------------------------------------
def _interrupt_running_session(
    home: Path, cfg: Path, sig: signal.Signals, wait: float
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "council", "run", QUESTION, "--config", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(home),
        # A background test runner may ignore SIGINT; the child must see it as a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if db_rows(home, "select 1 from sessions where status = 'running'"):
                    break
            except sqlite3.Error:
                pass
            time.sleep(0.02)
        else:
            pytest.fail(f"the session never started: {proc.communicate(timeout=5)}")
        time.sleep(wait)  # into the calls
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("sig, backend", [(signal.SIGINT, "http"), (signal.SIGTERM, "fake")])
def test_interrupted_run_leaves_a_consistent_database(tmp_path, council_home, mock, sig, backend):
    if backend == "http":  # every member hangs on the mock server
        models = {k: {"model": f"openai/mock-{k}+slow", "api_base": mock.base_url} for k in ("a", "b", "c")}
        wait = 1.0
    else:  # in-process fake: each call takes 0.5 s, so the signal lands in stage 1
        models = {k: {"model": f"fake/{k}+slow"} for k in ("a", "b", "c")}
        wait = 0.2
    cfg = write_config(tmp_path / "c.toml", models)
    proc = _interrupt_running_session(council_home, cfg, sig, wait)
    assert proc.returncode == 130
    assert proc.stderr.strip().splitlines() == ["interrupted"]
    assert db_rows(council_home, "select status, error from sessions") == [("interrupted", "interrupted")]
    assert db_rows(council_home, "select count(*) from sessions where finished_at is null") == [(0,)]
    assert db_rows(council_home, "pragma integrity_check") == [("ok",)]
    calls = db_rows(council_home, "select ok, error from calls")
    assert (0, "cancelled") in calls, calls
    # Nothing of an unfinished session is half-written.
    assert db_rows(council_home, "select count(*) from answers") == [(0,)]
    assert db_rows(council_home, "select count(*) from bias_records") == [(0,)]


# -- bad input: one line, exit 2, no database ------------------------------------
# (Empty question, missing config, unknown council, a dict-shaped candidate list and
# Latin-1 candidates are covered in test_cli_e2e.py.)
@pytest.mark.parametrize(
    "case, fragment",
    [
        ("toml-syntax", "invalid TOML"),
        ("unknown-key", "councils.default.memberz: unknown key"),
        ("bad-scale", "scale must be [low, high] with low < high"),
        ("latin1-config", "not UTF-8 text"),
        ("missing-key-env", "needs the environment variable COUNCIL_TEST_UNSET_KEY, which is not set"),
        ("bad-env-flag", "COUNCIL_HASH_QUERIES must be 1 or 0"),
        ("candidates-number", "no candidates"),
        ("candidates-empty-list", "no candidates"),
        ("candidates-strings", "candidate 1 is not"),
        ("candidates-jsonl-broken", "cands.json:2: not JSON"),
        ("candidates-empty-text", "candidate 'b' has empty text"),
        ("candidates-duplicate-ids", "candidate ids must be unique"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_no_database(tmp_path, council_home, case, fragment):
    good = write_config(tmp_path / "good.toml", {"a": {"model": "fake/a"}, "b": {"model": "fake/b"}})
    cfg, cands, env = good, None, {}
    if case == "toml-syntax":
        cfg = tmp_path / "c.toml"
        cfg.write_text("[councils.default\nmembers = ['a']\n")
    elif case == "unknown-key":
        cfg = tmp_path / "c.toml"
        cfg.write_text('[councils.default]\nmembers = ["fake/a"]\nmemberz = ["fake/b"]\n')
    elif case == "bad-scale":
        cfg = tmp_path / "c.toml"
        cfg.write_text('[councils.default]\nmembers = ["fake/a", "fake/b"]\nscale = [10, 1]\n')
    elif case == "latin1-config":
        cfg = tmp_path / "c.toml"
        cfg.write_bytes('# café\n[councils.default]\nmembers = ["fake/a"]\n'.encode("latin-1"))
    elif case == "missing-key-env":
        cfg = write_config(
            tmp_path / "c.toml", {"a": {"model": "openai/gpt-4o", "api_key_env": "COUNCIL_TEST_UNSET_KEY"}}
        )
    elif case == "bad-env-flag":
        env = {"COUNCIL_HASH_QUERIES": "maybe"}
    else:
        cands = tmp_path / "cands.json"
        cands.write_text(
            {
                "candidates-number": "42",
                "candidates-empty-list": "[]",
                "candidates-strings": '["an answer", "another"]',
                "candidates-jsonl-broken": '{"id": "a", "text": "x"}\n{"id": "b", "text": \n',
                "candidates-empty-text": '{"a": "an answer", "b": "   "}',
                "candidates-duplicate-ids": '[{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]',
            }[case]
        )
    args = ["run", QUESTION, "--config", str(cfg)] + (["--candidates", str(cands)] if cands else [])
    proc = invoke_cli(*args, env=env)
    assert proc.exit_code == 2, proc.stderr
    lines = proc.error_lines
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], proc.stderr
    assert proc.stdout == ""
    assert not (council_home / "council.db").exists()


# -- huge answers ----------------------------------------------------------------
async def test_huge_answer_is_truncated_for_review_with_notice_and_stored_whole(council_home):
    members = ["fake/alpha", "fake/beta", "fake/gamma"]
    config = {"councils": {"default": {"members": members, "chairman": "fake/beta", "max_answer_chars": 200}}}
    huge = "The sky is blue because of Rayleigh scattering. " * 500
    text = huge.strip()  # what the session keeps of an answer
    async with Council.from_config(config) as council:
        council.clients["fake/alpha"].api.enqueue(huge)  # alpha's first call is its answer
        result = await council.run(QUESTION, seed=2)
        seen_by = {m: council.clients[m].api.history for m in members}
    assert result.status == "complete", result.partial_reasons
    alpha = next(a for a in result.answers if a.member == "fake/alpha")
    assert alpha.truncated and alpha.length_chars == len(text)
    assert "answer of fake/alpha truncated to 200 characters for review" in result.flags
    notice = f"[… truncated: {len(text) - 200} more characters not shown]"
    # Reviewers and the chairman see the cut text and the notice, never the whole answer.
    for member in ("fake/beta", "fake/gamma"):
        prompts = [m["content"] for req in seen_by[member] for m in req.messages]
        assert any(notice in p for p in prompts)
        assert not any(text in p for p in prompts)
    stored = dict(db_rows(council_home, "select member, length(text) from answers"))
    assert stored["fake/alpha"] == len(text)
    sql = "select distinct response_length_chars from bias_records where model_id = 'fake/alpha'"
    assert db_rows(council_home, sql) == [(len(text),)]
