"""What operators and clients read besides the answers: the probes (``/livez``, ``/readyz``,
``/health``), ``/metrics`` scraped and parsed with prometheus-client's own parser, the token rule,
and the ``x-council-session-id`` / ``x-council-status`` headers read by the openai SDK."""

from __future__ import annotations

import time

import httpx
import pytest
from mock_server import start_mock_server
from serve_helpers import council_serve

openai = pytest.importorskip("openai")
parser = pytest.importorskip("prometheus_client.parser")

pytestmark = pytest.mark.slow  # a real server process per test

PRICE_IN, PRICE_OUT = 1e-6, 2e-6
MODELS = {"a": "mock-alpha", "b": "mock-beta", "c": "mock-gamma"}


@pytest.fixture(scope="module")
def mock_url():
    with start_mock_server(latency=0.005) as server:
        yield server.base_url


def write_config(path, mock_url, *extra: str):
    lines = ["[councils.default]", 'members = ["a", "b", "c"]', 'chairman = "a"', *extra]
    for alias, model in MODELS.items():
        lines += [f"[models.{alias}]", f'model = "openai/{model}"', f'api_base = "{mock_url}"', "retries = 1"]
        lines += [f"input_cost_per_token = {PRICE_IN}", f"output_cost_per_token = {PRICE_OUT}", "max_tokens = 200"]
    path.write_text("\n".join(lines) + "\n")
    return path


def scrape(base: str, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics``: (name, sorted labels) → value, as Prometheus would read it."""
    reply = httpx.get(f"{base}/metrics", headers=headers, timeout=10)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in parser.text_string_to_metric_families(reply.text)
        for s in family.samples
    }


def by(samples, name: str, **labels: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of ``name`` whose labels include ``labels``."""
    return {k: v for (n, k), v in samples.items() if n == name and set(labels.items()) <= set(k)}


def total(samples, name: str, **labels: str) -> float:
    return sum(by(samples, name, **labels).values())


def ask(base: str, question: str = "why is the sky blue?") -> dict:
    body = {"model": "default", "messages": [{"role": "user", "content": question}], "seed": 7}
    reply = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_metrics_count_exactly_what_the_sessions_did(tmp_path, mock_url, council_home):
    config = write_config(tmp_path / "council.toml", mock_url)
    with council_serve(config, council_home) as (base, _):
        before = scrape(base)
        assert total(before, "council_provider_calls_total") == 0
        replies = [ask(base), ask(base, "and why is the sea blue?")]
        after = scrape(base)
    assert [r["council"]["status"] for r in replies] == ["complete", "complete"]
    calls = {dict(k)["model"]: v for k, v in by(after, "council_provider_calls_total", outcome="ok").items()}
    # Per session: three answers, three reviews, one synthesis by the chairman (a).
    assert calls == {"openai/mock-alpha": 6, "openai/mock-beta": 4, "openai/mock-gamma": 4}
    assert total(after, "council_provider_calls_total") == total(after, "council_provider_calls_total", outcome="ok")
    for kind in ("prompt", "completion"):
        spent = sum(r["usage"][f"{kind}_tokens"] for r in replies)
        assert total(after, "council_tokens_total", kind=kind) == spent > 0
    cost = sum(r["council"]["cost_usd"] for r in replies)
    assert total(after, "council_cost_usd_total") == pytest.approx(cost, rel=1e-9) and cost > 0
    assert total(after, "council_sessions_total", status="complete") == 2
    assert total(after, "council_session_duration_seconds_count") == 2
    for stage in ("answer", "review", "synthesis"):
        assert total(after, "council_stage_duration_seconds_count", stage=stage) == 2
    chat = by(after, "council_http_requests_total", route="/v1/chat/completions", method="POST", status="200")
    assert sum(chat.values()) == 2
    scrapes = by(after, "council_http_requests_total", route="/metrics", status="200")
    assert sum(scrapes.values()) == 1  # the first scrape (this one is counted once it is answered)
    assert total(after, "council_spend_cap_refusals_total") == total(after, "council_cache_hits_total") == 0


def test_a_call_answered_from_the_cache_is_a_hit_without_tokens_or_cost():
    """The server's sessions do not use the call cache; the library's do (``--cache``, batches),
    through the same hook: what a process hosting the metrics counts for them."""
    from council.accounting.usage import CallLog, CallRecord
    from council.server.metrics import ServerMetrics

    metrics = ServerMetrics()
    stop = metrics.observe_library()
    try:
        log = CallLog()
        record = dict(stage="answer", member="a", model="openai/m", started_at="", latency_ms=1.0)
        log(CallRecord(**record, prompt_tokens=10, completion_tokens=5, cost_usd=0.0, cached=True, saved_usd=0.01))
        log(CallRecord(**record, prompt_tokens=10, completion_tokens=5, cost_usd=0.25))
        log(CallRecord(**record, ok=False, error="HTTP 500"))
    finally:
        stop()
    log(CallRecord(**record, prompt_tokens=99))  # no longer observed
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in parser.text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
    }
    assert total(samples, "council_cache_hits_total", model="openai/m") == 1
    outcomes = {dict(k)["outcome"]: v for k, v in by(samples, "council_provider_calls_total").items()}
    assert outcomes == {"cached": 1, "ok": 1, "failed": 1, "cancelled": 0}
    assert total(samples, "council_tokens_total", kind="prompt") == 10
    assert total(samples, "council_cost_usd_total") == 0.25


def test_a_spend_cap_refusal_is_counted(tmp_path, mock_url, council_home):
    config = write_config(tmp_path / "council.toml", mock_url, "[budget]", "max_cost_usd = 0.00000001")
    with council_serve(config, council_home) as (base, _):
        body = {"model": "default", "messages": [{"role": "user", "content": "why?"}]}
        reply = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=60)
        samples = scrape(base)
    assert reply.status_code >= 400
    # Each member's answer call is refused before it is sent; nothing reaches a provider.
    assert total(samples, "council_spend_cap_refusals_total") == len(MODELS)
    assert total(samples, "council_provider_calls_total") == 0


def test_metrics_need_the_token_and_the_probes_do_not(tmp_path, mock_url, council_home):
    config = write_config(tmp_path / "council.toml", mock_url)
    with council_serve(config, council_home, env={"COUNCIL_SERVER_TOKEN": "s3cret"}) as (base, _):
        assert httpx.get(f"{base}/metrics", timeout=10).status_code == 401
        assert httpx.get(f"{base}/metrics", headers={"authorization": "Bearer nope"}, timeout=10).status_code == 401
        assert scrape(base, authorization="Bearer s3cret")
        for probe in ("/livez", "/readyz", "/health"):
            assert httpx.get(f"{base}{probe}", timeout=10).status_code == 200, probe


def test_readyz_says_503_with_the_reason_while_postgresql_is_down(tmp_path, mock_url, council_home, own_postgres):
    config = write_config(tmp_path / "council.toml", mock_url)
    url = own_postgres.fresh_database()
    with council_serve(config, council_home, env={"COUNCIL_DATABASE_URL": url}) as (base, _):
        assert httpx.get(f"{base}/readyz", timeout=10).json() == {"status": "ready"}
        own_postgres.pause()
        try:
            down = httpx.get(f"{base}/readyz", timeout=10)
            assert httpx.get(f"{base}/livez", timeout=10).status_code == 200  # the process still answers
        finally:
            own_postgres.resume()
        assert down.status_code == 503
        reason = down.json()["reason"]
        assert "store" in reason and "\n" not in reason and "password" not in reason
        # Ready again once the database is back (the pool reconnects by itself).
        deadline = time.monotonic() + 30
        while (up := httpx.get(f"{base}/readyz", timeout=10)).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert up.json() == {"status": "ready"}


def test_every_completion_and_session_response_names_the_session(tmp_path, mock_url, council_home):
    config = write_config(tmp_path / "council.toml", mock_url)
    with council_serve(config, council_home) as (base, _):
        client = openai.OpenAI(base_url=base + "/v1", api_key="unused")
        messages = [{"role": "user", "content": "why is the sky blue?"}]
        raw = client.chat.completions.with_raw_response.create(model="default", messages=messages)
        completion = raw.parse()
        details = completion.model_extra["council"]
        assert raw.headers["x-council-session-id"] == details["session_id"]
        assert raw.headers["x-council-status"] == details["status"] == "complete"

        with client.chat.completions.with_streaming_response.create(
            model="default", messages=messages, stream=True
        ) as streamed:
            streamed_id = streamed.headers["x-council-session-id"]
            assert streamed.headers["x-council-status"] == "running"
            chunks = list(streamed.parse())
        last = next(c for c in reversed(chunks) if c.model_extra.get("council"))
        assert last.model_extra["council"]["session_id"] == streamed_id

        started = httpx.post(f"{base}/v1/sessions", json={"council": "default", "question": "why?"}, timeout=30)
        assert started.status_code == 202
        assert started.headers["x-council-session-id"] == started.json()["session_id"]
        assert started.headers["x-council-status"] == "running"
        stored = httpx.get(f"{base}/v1/sessions/{streamed_id}", timeout=10)
        assert stored.headers["x-council-session-id"] == streamed_id
        assert stored.headers["x-council-status"] == stored.json()["status"] == "complete"


def scrape_url(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    reply = httpx.get(url, timeout=10)
    assert reply.status_code == 200, reply.text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in parser.text_string_to_metric_families(reply.text)
        for s in family.samples
    }


def test_calls_that_wait_for_their_rate_budget_are_counted(tmp_path, mock_url, council_home):
    # Model a answers, reviews and chairs: its three calls of a session, one every 0.25 s at most.
    config = write_config(tmp_path / "council.toml", mock_url)
    text = config.read_text().replace('model = "openai/mock-alpha"', 'model = "openai/mock-alpha"\nrpm = 240\n'
                                      "max_concurrency = 1")  # fmt: skip
    config.write_text(text)
    with council_serve(config, council_home) as (base, _):
        ask(base)
        samples = scrape(base)
    waits = total(samples, "council_rate_limit_waits_total", model="openai/mock-alpha")
    assert waits >= 1
    assert 0 < total(samples, "council_rate_limit_wait_seconds_total", model="openai/mock-alpha") <= waits * 0.25
    assert total(samples, "council_rate_limit_waits_total", model="openai/mock-beta") == 0


def enqueue(tmp_path, mock_url, home, items: int) -> tuple[dict[str, str], str]:
    """A batch of ``items`` pairs queued in ``home``'s store; the environment and judge config of its workers."""
    import json

    from conftest import council_process

    judge = tmp_path / "judge.toml"
    judge.write_text(f'[models.j]\nmodel = "openai/mock-judge"\napi_base = "{mock_url}"\nretries = 0\n')
    batch = tmp_path / "b.jsonl"
    batch.write_text("".join(json.dumps({"id": f"p{i}", "prompt": "Q?", "a": "A.", "b": "B."}) + "\n"
                             for i in range(items)))  # fmt: skip
    queued = council_process("batch", str(batch), "--config", str(judge), "--judge", "j", "--enqueue",
                             "--batch-id", "q", home=home)  # fmt: skip
    assert queued.returncode == 0, queued.stderr
    return {"COUNCIL_HOME": str(home)}, str(judge)


def metrics_url(lines: list[str]) -> str:
    import re

    found = [m for m in (re.search(r"metrics: (http://\S+/metrics)", line) for line in lines) if m]
    assert found, lines
    return found[0][1]


def test_metrics_on_their_own_address_need_no_token_and_say_the_queue_depth(tmp_path, mock_url, council_home):
    enqueue(tmp_path, mock_url, council_home, items=3)
    config = write_config(tmp_path / "council.toml", mock_url)
    env = {"COUNCIL_SERVER_TOKEN": "s3cret"}
    with council_serve(config, council_home, "--metrics-address", "127.0.0.1:0", env=env) as (base, lines):
        url = metrics_url(lines)
        assert not url.startswith(base)
        apart = scrape_url(url)
        behind_the_token = scrape(base, authorization="Bearer s3cret")
    for samples in (apart, behind_the_token):
        assert total(samples, "council_queue_items", state="queued") == 3
        assert total(samples, "council_queue_items", state="running") == 0


def test_metrics_address_needs_one_server_process():
    from click.testing import CliRunner

    from council.cli.main import cli

    result = CliRunner().invoke(cli, ["serve", "--workers", "2", "--metrics-address", "127.0.0.1:0"])
    assert result.exit_code == 2 and "--metrics-address needs --workers 1" in result.output


def test_a_worker_serves_its_claims_items_and_the_queue_depth(tmp_path, mock_url, council_home):
    import os
    import signal
    import subprocess
    import sys

    env, judge = enqueue(tmp_path, mock_url, council_home, items=4)
    worker = subprocess.Popen([sys.executable, "-m", "council", "worker", "--config", judge, "--follow",
                               "--metrics-address", "127.0.0.1:0"], env={**os.environ, **env},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        url = metrics_url([worker.stderr.readline()])
        deadline = time.monotonic() + 60
        while total(samples := scrape_url(url), "council_worker_items_total") < 4:
            assert time.monotonic() < deadline, samples
            time.sleep(0.05)
    finally:
        worker.send_signal(signal.SIGINT)
        worker.communicate(timeout=30)
    assert total(samples, "council_worker_claimed_items_total") == 4
    assert total(samples, "council_worker_items_total", status="judged") == 4
    assert total(samples, "council_worker_item_duration_seconds_count") == 4
    assert total(samples, "council_queue_items", state="queued") == 0
    calls = by(samples, "council_provider_calls_total", model="openai/mock-judge", outcome="ok")
    assert sum(calls.values()) == 8  # each pair judged in both orders
