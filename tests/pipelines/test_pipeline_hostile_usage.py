"""A provider's usage block is hostile text like any other: counts that are strings, negative,
fractional, booleans, not finite, or more than the call could have used are settled at the call's
worst case (its reservation under a spend cap) and flagged on its call-log row, on every path a
reply comes by (direct, streamed, LiteLLM, OpenAI batch lines, Anthropic batch results); never an
exception, never a negative or absurd figure in the ledger. The mock server (real HTTP on
loopback) sends the hostile blocks (``--usage``)."""

from __future__ import annotations

import json

import pytest
from conftest import db_rows, invoke_cli, write_config
from mock_server import start_mock_server

from council.accounting.budget import Budget, prompt_tokens_bound
from council.config import ModelSpec, ResolvedModel
from council.errors import ProviderError
from council.providers.base import ChatRequest
from council.providers.client import ModelClient, cap_spending
from council.providers.registry import make_api

RATE_IN, RATE_OUT, MAX_TOKENS = 1e-5, 3e-5, 64
HUGE = 10**30
HOSTILE = {
    "strings": '{"prompt_tokens": "12", "completion_tokens": "lots"}',
    "negative": '{"prompt_tokens": -400000000, "completion_tokens": -3}',
    "huge": json.dumps({"prompt_tokens": HUGE, "completion_tokens": HUGE}),
    "fractional": '{"prompt_tokens": 10.5, "completion_tokens": 2.25}',
    "booleans": '{"prompt_tokens": true, "completion_tokens": true}',
    "not finite": '{"prompt_tokens": 1e400, "completion_tokens": NaN}',
    "beyond the call": json.dumps({"prompt_tokens": 5, "completion_tokens": MAX_TOKENS + 1}),
    "not an object": '{"prompt_tokens": [1], "completion_tokens": {"n": 1}}',
}
PATHS = ["direct", "streamed", "litellm", "openai batch", "anthropic batch"]


@pytest.fixture(scope="module", params=sorted(HOSTILE))
def hostile(request):
    with start_mock_server(usage=HOSTILE[request.param], batch_seconds=0.02) as server:
        yield server


def client_for(path: str, server) -> ModelClient:
    prices = {"input_cost_per_token": RATE_IN, "output_cost_per_token": RATE_OUT}
    if path == "anthropic batch":
        spec = ModelSpec(model="anthropic/mock-claude", api_base=server.url, max_tokens=MAX_TOKENS, retries=0,
                         **prices)  # fmt: skip
        from council.providers.fake import FakeAPI

        return ModelClient(ResolvedModel(id="c", spec=spec), FakeAPI("fake/unused"))
    transport = "litellm" if path == "litellm" else None
    spec = ModelSpec(model="openai/mock-alpha", api_base=server.base_url, max_tokens=MAX_TOKENS, retries=0,
                     transport=transport, **prices)  # fmt: skip
    resolved = ResolvedModel(id="m", spec=spec)
    return ModelClient(resolved, make_api(resolved))


async def ask(client: ModelClient, path: str, request: ChatRequest, records: list):
    if path.endswith("batch"):
        from council.providers.provider_batch import BatchRounds, send_in_batches

        send_in_batches([client], BatchRounds(poll=0.02), env={})
    on_delta = (lambda _piece: None) if path == "streamed" else None
    try:
        return await client.complete(request, stage="t", sink=records.append, on_delta=on_delta)
    finally:
        await client.aclose()


@pytest.mark.parametrize("path", PATHS)
async def test_usage_that_cannot_be_trusted_settles_at_the_worst_case_and_says_so(hostile, path, request):
    if path == "litellm" and "booleans" in request.node.callspec.id:
        pytest.skip("LiteLLM reads a boolean count as 1 before council sees the reply")
    client = client_for(path, hostile)
    asked = ChatRequest(messages=[{"role": "user", "content": "What is 2+2?"}], max_tokens=MAX_TOKENS)
    worst = client.worst_case(asked)
    budget = Budget.capped(worst * 10)
    cap_spending([client], budget)
    records: list = []
    try:
        reply = await ask(client, path, asked, records)
    except ProviderError:
        reply = None  # a transport that refuses the block itself: the call failed, and counts at worst too
    spent, _ = budget.totals()
    assert spent == pytest.approx(worst)  # not 0, not negative, not 10^30 dollars
    assert records and all(isinstance(r.prompt_tokens, int) and isinstance(r.completion_tokens, int) for r in records)
    if reply is not None:
        [record] = records
        assert record.ok and record.usage_untrusted
        assert record.cost_usd == pytest.approx(worst)
        # The tokens logged are the call's own bounds, not the provider's figures.
        assert record.prompt_tokens == prompt_tokens_bound(asked.messages) and record.completion_tokens == MAX_TOKENS
        assert reply.text


async def test_honest_usage_is_trusted_and_settles_at_its_cost():
    with start_mock_server() as server:
        client = client_for("direct", server)
        request = ChatRequest(messages=[{"role": "user", "content": "What is 2+2?"}], max_tokens=MAX_TOKENS)
        budget = Budget.capped(1.0)
        cap_spending([client], budget)
        records: list = []
        reply = await ask(client, "direct", request, records)
    [record] = records
    assert not record.usage_untrusted and reply.prompt_tokens > 0
    assert budget.totals()[0] == pytest.approx(reply.cost_usd) and reply.cost_usd < client.worst_case(request)



async def test_a_local_models_own_count_is_not_taken_for_a_lying_provider(caplog):
    # A local model's usage is counted by this process's decoder, not reported by anyone: a
    # second, stricter pass of a cut-off JSON reply adds its tokens, past max_tokens, honestly.
    from council.providers.base import ChatResponse

    class TwoPasses:
        async def generate(self, request):
            return ChatResponse(text="{}", prompt_tokens=900, completion_tokens=2 * MAX_TOKENS, cost_usd=0.0)

    client = ModelClient(ResolvedModel(id="tiny", spec=ModelSpec(model="local/smollm2")), TwoPasses())
    request = ChatRequest(messages=[{"role": "user", "content": "q"}], max_tokens=MAX_TOKENS)
    records: list = []
    reply = await client.complete(request, stage="t", sink=records.append)
    assert not reply.usage_untrusted and reply.completion_tokens == 2 * MAX_TOKENS
    assert [r.usage_untrusted for r in records] == [False]
    assert "cannot be trusted" not in caplog.text


# -- the commands -----------------------------------------------------------------------------------------

PRICE = {"input_cost_per_token": RATE_IN, "output_cost_per_token": RATE_OUT, "max_tokens": 400}


def mock_council(tmp_path, server, provider: str = "openai", base: str | None = None):
    models = {
        name: {"model": f"{provider}/mock-{name}", "api_base": base or server.base_url, "api_key_env": "MOCK_KEY",
               "retries": 0, **PRICE}
        for name in ("a", "b", "c")
    }  # fmt: skip
    return write_config(tmp_path / "c.toml", models, chairman="a")


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("MOCK_KEY", "unused")


def test_run_with_a_usage_of_ten_to_the_thirty_tokens_completes_and_flags_its_calls(tmp_path, council_home):
    with start_mock_server(usage=HOSTILE["huge"]) as server:
        result = invoke_cli("run", "What is 2+2?", "--config", str(mock_council(tmp_path, server)), "--json")
    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stderr
    session = json.loads(result.stdout)
    assert session["status"] == "complete"
    assert session["usage"]["prompt_tokens"] < 10**9 and session["usage"]["cost_usd"] < 10
    assert "usage" in result.stderr  # said so
    [(calls, flagged)] = db_rows(council_home, "select count(*), sum(usage_untrusted) from calls")
    assert calls > 0 and flagged == calls


def test_under_a_cap_unreadable_usage_stops_where_the_worst_cases_say(tmp_path, council_home):
    """Settled at 0, strings let 60 calls run where honest usage stopped at 22: each such call now
    counts its whole worst case, so the run stops sooner than with honest usage, never later."""
    with start_mock_server() as server:
        honest = invoke_cli("run", "What is 2+2?", "--config", str(mock_council(tmp_path, server)),
                            "--max-cost", "0.05", "--json")  # fmt: skip
    with start_mock_server(usage=HOSTILE["strings"]) as server:
        hostile = invoke_cli("run", "What is 2+2?", "--config", str(mock_council(tmp_path, server)),
                             "--max-cost", "0.05", "--json")  # fmt: skip
    assert honest.exit_code == 1 and hostile.exit_code == 1, (honest.stderr, hostile.stderr)
    one, two = json.loads(honest.stdout), json.loads(hostile.stdout)
    assert 0 < two["usage"]["calls"] <= one["usage"]["calls"]
    assert 0 < two["usage"]["cost_usd"] <= 0.05
    assert "budget reached: $0.0" in hostile.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_provider_batch_with_negative_usage_keeps_its_ledger_and_its_cap(tmp_path, council_home, provider):
    items = tmp_path / "pairs.jsonl"
    items.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"Q{i}?", "a": "x", "b": "y"}) + "\n"
                             for i in range(30)))  # fmt: skip
    with start_mock_server(usage=HOSTILE["negative"], batch_seconds=0.02) as server:
        base = server.url if provider == "anthropic" else server.base_url
        config = mock_council(tmp_path, server, provider, base)
        result = invoke_cli("batch", str(items), "--judge", "a", "--config", str(config), "--provider-batch",
                            "--batch-id", "neg", "--max-cost", "0.5", "--json")  # fmt: skip
    assert "Traceback" not in result.stderr
    [(spent, cap)] = db_rows(council_home, "select spent_usd, cap_usd from budgets")
    assert 0 < spent <= cap == 0.5
    [(calls, cost, flagged)] = db_rows(
        council_home, "select count(*), sum(cost_usd), sum(usage_untrusted) from calls where ok = 1"
    )
    assert calls and flagged == calls and 0 < cost <= 0.5


def test_the_server_answers_a_session_whose_usage_is_ten_to_the_thirty_tokens(tmp_path, council_home):
    import httpx
    from serve_helpers import council_serve

    with start_mock_server(usage=HOSTILE["huge"]) as server:
        config = mock_council(tmp_path, server)
        with council_serve(config, council_home, env={"MOCK_KEY": "unused"}) as served:
            chat = {"model": "default", "messages": [{"role": "user", "content": "What is 2+2?"}]}
            reply = httpx.post(served.base + "/v1/chat/completions", json=chat, timeout=60)
    assert reply.status_code == 200, reply.text
    usage = reply.json()["usage"]
    assert 0 < usage["prompt_tokens"] < 10**9 and 0 < usage["completion_tokens"] < 10**9
