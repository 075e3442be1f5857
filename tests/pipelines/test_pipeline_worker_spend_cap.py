"""A worker under a batch's spend cap (docs/methods.md, "Spend caps"): refused while its own calls
hold the room, it waits for them to settle and goes on while the cap allows, stopping only when no
call could start with none of its own in flight; a call refused a connection (nothing sent) costs
nothing, so a provider that was down leaves the batch's budget as it was and the batch goes on once
the provider is back. Real HTTP on loopback (the mock server), a real ``council worker`` process."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys

import pytest
from batch_files import pair, write_jsonl
from conftest import db_rows, write_config
from mock_server import start_mock_server

from council.accounting.budget import Budget
from council.config import ModelSpec, ResolvedModel
from council.judging.engine import compare
from council.providers.client import ModelClient, cap_spending
from council.providers.registry import make_api

PRICE = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-5, "max_tokens": 400}


def council(*args: str, home, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COUNCIL_HOME": str(home), "MOCK_KEY": "unused"}
    return subprocess.run([sys.executable, "-m", "council", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)  # fmt: skip


def judge_config(tmp_path, base_url: str):
    judge = {"model": "openai/mock-judge", "api_base": base_url, "api_key_env": "MOCK_KEY", "timeout": 30, **PRICE}
    return write_config(tmp_path / "judge.toml", {"j": judge})


def one_vote(base_url: str) -> tuple[float, float]:
    """(the worst case a vote of one of these items reserves, what it really costs) on this mock."""
    spec = ModelSpec(model="openai/mock-judge", api_base=base_url, retries=0, **PRICE)
    resolved = ResolvedModel(id="j", spec=spec)
    client = ModelClient(resolved, make_api(resolved))
    budget = Budget.capped(100.0)
    asked: list[float] = []
    reserve = budget.ledger.reserve
    budget.ledger.reserve = lambda amount: (asked.append(amount), reserve(amount))[1]  # type: ignore[method-assign]
    cap_spending([client], budget)
    item = pair(0)

    async def go():
        try:
            return await compare(item["prompt"], item["a"], item["b"], judges=[client], store=None)
        finally:
            await client.aclose()

    assert asyncio.run(go()).success
    return asked[0], budget.totals()[0]


def test_a_worker_waits_for_its_own_calls_and_goes_on_while_the_cap_allows(tmp_path, council_home):
    """With four items in flight and a cap that holds three votes' worst case, the fourth vote's
    reservation is refused while the worker's own three are in flight: it waits for them to settle
    (at their real cost, far below the worst case), and every item is judged."""
    with start_mock_server(latency=0.05) as mock:
        vote, real = one_vote(mock.base_url)
        cap = 3.5 * vote
        items = min(8, int((cap - vote) / (1.2 * real)))  # all of them fit what they really cost
        assert items >= 5 and real < vote / 2, (vote, real)
        config = judge_config(tmp_path, mock.base_url)
        write_jsonl(tmp_path / "b.jsonl", [pair(i) for i in range(items)])
        queued = council("batch", str(tmp_path / "b.jsonl"), "--config", str(config), "--judge", "j", "--enqueue",
                         "--batch-id", "w", "--max-cost", f"{cap:.6f}", home=council_home)  # fmt: skip
        assert queued.returncode == 0, queued.stderr
        done = council("worker", "--batch-id", "w", "--config", str(config), "--concurrency", "4", home=council_home)
    assert done.returncode == 0, done.stderr
    assert f"judged {items} items (0 failed)" in done.stderr
    [(spent, held)] = db_rows(council_home, "select spent_usd, (select count(*) from budget_reservations) from budgets")
    assert 0 < spent <= cap and held == 0


def test_a_worker_stops_only_when_no_vote_fits_with_none_of_its_own_in_flight(tmp_path, council_home):
    with start_mock_server(latency=0.05) as mock:
        vote, real = one_vote(mock.base_url)
        cap = 3.5 * vote
        config = judge_config(tmp_path, mock.base_url)
        write_jsonl(tmp_path / "b.jsonl", [pair(i % 10) | {"id": f"item-{i}"} for i in range(40)])
        queued = council("batch", str(tmp_path / "b.jsonl"), "--config", str(config), "--judge", "j", "--enqueue",
                         "--batch-id", "w", "--max-cost", f"{cap:.6f}", home=council_home)  # fmt: skip
        assert queued.returncode == 0, queued.stderr
        stopped = council("worker", "--batch-id", "w", "--config", str(config), "--concurrency", "4", home=council_home)
    assert stopped.returncode == 1 and "budget reached" in stopped.stderr.strip().splitlines()[-1], stopped.stderr
    [(spent, held)] = db_rows(council_home, "select spent_usd, (select count(*) from budget_reservations) from budgets")
    # Within the cap, and stopped where a vote no longer fits what is left (not while its own calls held it).
    assert spent <= cap < spent + 1.05 * vote and held == 0, (spent, cap, vote)
    [(done,)] = db_rows(council_home, "select count(*) from batch_queue where state = 'done'")
    assert done >= int((cap - vote) / (1.2 * real)) and done < 40


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_calls_refused_a_connection_cost_nothing_and_the_batch_goes_on_when_the_provider_returns(
    tmp_path, council_home
):
    port = free_port()  # nothing listens there: every connection is refused before a byte is sent
    base = f"http://127.0.0.1:{port}/v1"
    with start_mock_server() as probe:
        vote, _ = one_vote(probe.base_url)
    cap = 3.5 * vote
    config = judge_config(tmp_path, base)
    write_jsonl(tmp_path / "b.jsonl", [pair(i) for i in range(4)])
    enqueue = ("batch", str(tmp_path / "b.jsonl"), "--config", str(config), "--judge", "j", "--enqueue", "--batch-id",
               "w", "--max-cost", f"{cap:.6f}")  # fmt: skip
    assert council(*enqueue, home=council_home).returncode == 0
    down = council("worker", "--batch-id", "w", "--config", str(config), "--concurrency", "4", home=council_home)
    assert "budget reached" not in down.stderr, down.stderr
    assert db_rows(council_home, "select spent_usd from budgets") == [(0.0,)]  # nothing was sent, nothing spent
    [(failed,)] = db_rows(council_home, "select count(*) from batch_queue where state = 'failed'")
    assert failed == 4, down.stderr
    with start_mock_server(port=port):  # the provider is back: the failed items are queued again and judged
        assert council(*enqueue, home=council_home).returncode == 0
        back = council("worker", "--batch-id", "w", "--config", str(config), "--concurrency", "4", home=council_home)
    assert back.returncode == 0, back.stderr
    assert db_rows(council_home, "select count(*) from batch_queue where state = 'done'") == [(4,)]
    [(spent,)] = db_rows(council_home, "select spent_usd from budgets")
    assert 0 < spent <= cap


async def test_a_refused_connection_releases_its_reservation_at_zero():
    from council.errors import ProviderError
    from council.providers.base import ChatRequest

    spec = ModelSpec(model="openai/mock-judge", api_base=f"http://127.0.0.1:{free_port()}/v1", retries=2, **PRICE)
    resolved = ResolvedModel(id="j", spec=spec)
    client = ModelClient(resolved, make_api(resolved))
    budget = Budget.capped(1.0)
    cap_spending([client], budget)
    records: list = []
    try:
        with pytest.raises(ProviderError, match="APIConnectionError"):
            await client.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=10),
                                  stage="t", sink=records.append)  # fmt: skip
    finally:
        await client.aclose()
    assert len(records) == 3 and budget.totals() == (0.0, 1.0)
    assert json.dumps([r.error for r in records]).count("APIConnectionError") == 3


# -- the waiting budget, in one process ----------------------------------------------------------------


def fake_judge(latency: float = 0.02, retries: int = 0) -> ModelClient:
    from council.providers.fake import FakeAPI
    from council.providers.prices import configured_price

    spec = ModelSpec(model="fake/m", max_concurrency=1000, retries=retries, **PRICE)
    api = FakeAPI("fake/m", latency=latency, price=configured_price(PRICE["input_cost_per_token"],
                                                                     PRICE["output_cost_per_token"]))  # fmt: skip
    return ModelClient(ResolvedModel(id="m", spec=spec), api)


@pytest.mark.parametrize("waits", [False, True])
async def test_a_waiting_budget_starts_a_call_refused_beside_its_own_once_they_settle(waits):
    from council.accounting.budget import BudgetReached, MemoryLedger
    from council.providers.base import ChatRequest

    client = fake_judge()
    request = ChatRequest(messages=[{"role": "user", "content": "What is 2+2?"}], max_tokens=400)
    worst = client.worst_case(request)
    budget = Budget(MemoryLedger(worst * 2.5), waits=waits)
    cap_spending([client], budget)
    results = await asyncio.gather(*(client.complete(request, stage="t") for _ in range(6)), return_exceptions=True)
    sent = [r for r in results if not isinstance(r, BaseException)]
    assert all(isinstance(r, BudgetReached) for r in results if isinstance(r, BaseException))
    # Refused for good, only the two worst cases that fit at once are sent; waiting, all six are,
    # two at a time, since each settles far below its worst case.
    assert len(sent) == (6 if waits else 2) == len(client.api.history)
    spent, cap = budget.totals()
    assert spent == pytest.approx(sum(r.cost_usd for r in sent)) and spent <= cap
    assert budget.ledger.reserved == {}


async def test_a_call_whose_room_only_its_own_group_holds_is_refused_not_left_waiting():
    """A retry beyond its group's calls reserves on its own; refused while only that group holds the
    room (which settles only after the retry), waiting would never end: the budget is reached."""
    from council.accounting.budget import BudgetReached, MemoryLedger, together
    from council.errors import ProviderError
    from council.providers.base import ChatRequest

    client = fake_judge(retries=1)
    request = ChatRequest(messages=[{"role": "user", "content": "What is 2+2?"}], max_tokens=400)
    worst = client.worst_case(request)
    budget = Budget(MemoryLedger(worst * 2.5), waits=True)
    cap_spending([client], budget)
    client.api.enqueue(ProviderError("connection reset", retryable=True))  # no status: it may have been billed
    with together(budget, 2):
        results = await asyncio.wait_for(
            asyncio.gather(*(client.complete(request, stage="t") for _ in range(2)), return_exceptions=True), 10
        )
    assert sum(isinstance(r, BudgetReached) for r in results) == 1 and budget.reached is not None
    assert budget.ledger.reserved == {} and budget.totals()[0] <= worst * 2.5
