"""Hard spend caps in the library: every call reserves its worst case in ModelClient, so no
call starts that could take the spending past the cap, however many are in flight."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from council.accounting.budget import (
    Budget,
    BudgetReached,
    CallPrice,
    MemoryLedger,
    Tranches,
    check_cap,
    prompt_tokens_bound,
    together,
    usd,
)
from council.config import ModelSpec, ResolvedModel
from council.errors import ProviderError, UsageError
from council.providers.base import ChatRequest
from council.providers.client import ModelClient, cap_spending
from council.providers.fake import FakeAPI
from council.providers.prices import configured_price

RATE_IN, RATE_OUT = 1e-5, 3e-5


def priced(name: str = "m", *, max_tokens: int | None = 50, latency: float = 0.0, **spec) -> ModelClient:
    model_spec = ModelSpec(
        model=f"fake/{name}",
        max_tokens=max_tokens,
        input_cost_per_token=RATE_IN,
        output_cost_per_token=RATE_OUT,
        max_concurrency=1000,
        retries=0,
        **spec,
    )
    api = FakeAPI(model_spec.model, latency=latency, price=configured_price(RATE_IN, RATE_OUT))
    return ModelClient(ResolvedModel(id=name, spec=model_spec), api)


def request(text: str = "hello there", max_tokens: int | None = 50) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], max_tokens=max_tokens)


def noting(budget: Budget) -> list[float]:
    """The amounts ``budget``'s ledger is asked to reserve, from now on, in order."""
    amounts: list[float] = []
    reserve = budget.ledger.reserve

    def noted(amount: float):
        amounts.append(amount)
        return reserve(amount)

    budget.ledger.reserve = noted  # type: ignore[method-assign]
    return amounts


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "NaN", "inf", "-inf", "", "1e400", "abc", 0, -0.5, True])
def test_a_cap_must_be_a_finite_amount_above_zero(bad):
    with pytest.raises(UsageError, match="--max-cost"):
        check_cap(bad)


def test_money_is_printed_with_cents_and_the_digits_that_matter():
    assert usd(0.05) == "$0.05"
    assert usd(1) == "$1.00"
    assert usd(0.0123456) == "$0.012346"


def test_the_prompt_bound_is_never_below_what_the_fake_counts():
    from council.testing.replies import prompt_tokens

    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "ünïcödé words " * 40}]
    assert prompt_tokens_bound(messages) >= prompt_tokens(messages)
    assert prompt_tokens_bound(messages, {"type": "object"}) > prompt_tokens_bound(messages)


def test_worst_case_is_prompt_bound_times_input_plus_max_tokens_times_output():
    client = priced()
    req = request(max_tokens=50)
    expected = prompt_tokens_bound(req.messages) * RATE_IN + 50 * RATE_OUT
    assert math.isclose(client.worst_case(req), expected)
    assert CallPrice(RATE_IN, RATE_OUT, None).worst_case(10, None) is None
    assert CallPrice(RATE_IN, RATE_OUT, 4096).worst_case(10, None) == 10 * RATE_IN + 4096 * RATE_OUT


def test_a_model_without_a_known_price_is_refused_up_front():
    spec = ModelSpec(model="openai/no-such-model-anywhere", max_tokens=10)
    client = ModelClient(ResolvedModel(id="x", spec=spec), FakeAPI("fake/x"))
    with pytest.raises(UsageError, match=r"no known price .* input_cost_per_token"):
        cap_spending([client], Budget.capped(1.0))
    assert client.budget is None


def test_a_priced_model_without_max_tokens_or_known_output_limit_is_refused():
    client = priced(max_tokens=None)
    with pytest.raises(UsageError, match="no max_tokens and no known output limit"):
        cap_spending([client], Budget.capped(1.0))


def test_an_unpriced_fake_model_is_free_under_a_cap():
    client = ModelClient(ResolvedModel(id="f", spec=ModelSpec(model="fake/f")), FakeAPI("fake/f"))
    budget = Budget.capped(0.01)
    cap_spending([client], budget)
    assert client.worst_case(request(max_tokens=None)) == 0.0


async def test_the_priced_fake_bills_its_tokens():
    client = priced()
    response = await client.complete(request(), stage="t")
    assert response.cost_usd == pytest.approx(response.prompt_tokens * RATE_IN + response.completion_tokens * RATE_OUT)
    assert response.cost_usd > 0


async def test_calls_stop_before_the_cap_and_spending_never_exceeds_it():
    client = priced()
    worst = client.worst_case(request())
    budget = Budget.capped(worst * 3.5)
    cap_spending([client], budget)
    done = 0
    with pytest.raises(BudgetReached, match=r"^budget reached: \$[0-9.]+ of \$[0-9.]+$"):
        for _ in range(100):
            await client.complete(request(), stage="t")
            done += 1
    spent, cap = budget.totals()
    assert spent <= cap
    # Real calls cost less than their worst case, so more than 3 fit, but never one that could overshoot.
    assert done >= 3
    assert spent + worst > cap
    assert client.api.history.__len__() == done


async def test_many_calls_in_flight_at_once_cannot_overshoot():
    """The attacker's view: 200 calls start together; each reserves its worst case before it is sent."""
    client = priced(latency=0.02)
    worst = client.worst_case(request())
    budget = Budget.capped(worst * 10)
    cap_spending([client], budget)
    results = await asyncio.gather(*(client.complete(request(), stage="t") for _ in range(200)), return_exceptions=True)
    sent = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BudgetReached)]
    assert len(sent) == 10  # exactly the worst cases that fit were in flight
    assert len(refused) == 190
    assert len(client.api.history) == 10
    spent, cap = budget.totals()
    assert spent <= cap
    assert spent == pytest.approx(sum(r.cost_usd for r in sent))


async def test_once_reached_no_later_call_starts_even_a_cheaper_one():
    client = priced()
    worst = client.worst_case(request())
    budget = Budget.capped(worst * 1.5)
    cap_spending([client], budget)
    await client.complete(request(), stage="t")
    with pytest.raises(BudgetReached):
        await client.complete(request(), stage="t")
    with pytest.raises(BudgetReached):
        await client.complete(request("x", max_tokens=1), stage="t")
    assert len(client.api.history) == 1


async def test_a_provider_error_response_is_not_billed_but_a_timeout_counts_at_worst():
    client = priced()
    worst = client.worst_case(request())
    budget = Budget.capped(worst * 10)
    cap_spending([client], budget)
    client.api.enqueue(ProviderError("bad request", status_code=400))
    with pytest.raises(ProviderError):
        await client.complete(request(), stage="t")
    assert budget.totals()[0] == 0.0
    client.api.enqueue(ProviderError("connection reset"))  # no status: it may have been billed
    with pytest.raises(ProviderError):
        await client.complete(request(), stage="t")
    assert budget.totals()[0] == pytest.approx(worst)


async def test_a_refused_call_is_not_retried_and_not_logged_as_a_call():
    client = priced()
    budget = Budget.capped(client.worst_case(request()) / 2)
    cap_spending([client], budget)
    log = []
    with pytest.raises(BudgetReached):
        await client.complete(request(), stage="t", sink=log.append)
    assert log == []
    assert client.api.history == []


async def test_over_real_http_the_server_sees_only_the_calls_that_fit(tmp_path):
    """The mock server on loopback: 60 calls at once, a cap fitting 7 worst cases: 7 requests arrive."""
    from mock_server import start_mock_server

    from council.config.endpoints import native_endpoint
    from council.providers.openai_compatible import OpenAICompatibleAPI

    log = tmp_path / "requests.jsonl"
    with start_mock_server(latency=0.05, log_requests=str(log)) as server:
        spec = ModelSpec(
            model="openai/mock-model",
            api_base=server.base_url,
            max_tokens=64,
            input_cost_per_token=RATE_IN,
            output_cost_per_token=RATE_OUT,
            max_concurrency=100,
            retries=0,
        )
        api = OpenAICompatibleAPI(
            spec.model,
            native_endpoint(spec.model, spec.api_base),
            api_key="unused",
            input_cost_per_token=RATE_IN,
            output_cost_per_token=RATE_OUT,
        )
        client = ModelClient(ResolvedModel(id="mock", spec=spec), api)
        worst = client.worst_case(request(max_tokens=64))
        budget = Budget.capped(worst * 7.5)
        cap_spending([client], budget)
        try:
            results = await asyncio.gather(
                *(client.complete(request(max_tokens=64), stage="t") for _ in range(60)), return_exceptions=True
            )
        finally:
            await client.aclose()
        arrived = server.logged_requests()
    sent = [r for r in results if not isinstance(r, BaseException)]
    assert len(sent) == 7 == len(arrived)
    assert all(isinstance(r, BudgetReached) for r in results if isinstance(r, BaseException))
    spent, cap = budget.totals()
    assert spent == pytest.approx(sum(r.cost_usd for r in sent)) and spent <= cap


# -- calls that are only worth something together (a vote's two passes) reserve as one -------------


async def test_calls_started_together_reserve_as_one_and_none_is_sent_when_they_do_not_all_fit():
    client = priced(latency=0.01)
    worst = client.worst_case(request())
    budget = Budget.capped(worst * 1.5)  # one fits, two do not
    cap_spending([client], budget)
    with together(budget, 2):
        results = await asyncio.gather(*(client.complete(request(), stage="t") for _ in range(2)),
                                       return_exceptions=True)  # fmt: skip
    assert all(isinstance(r, BudgetReached) for r in results), results
    assert client.api.history == [] and budget.totals()[0] == 0.0


async def test_calls_together_that_fit_are_sent_and_settle_at_their_real_cost():
    client = priced(latency=0.01)
    worst = client.worst_case(request())
    budget = Budget.capped(worst * 3.5)
    cap_spending([client], budget)
    with together(budget, 2):
        sent = await asyncio.gather(*(client.complete(request(), stage="t") for _ in range(2)))
    assert len(client.api.history) == 2
    spent = budget.totals()[0]
    assert spent == pytest.approx(sum(r.cost_usd for r in sent)) and spent < 2 * worst
    assert budget.ledger.reserved == {}  # the one reservation is settled
    # A third call (beyond the two) reserves on its own, as any call outside the block does.
    await client.complete(request(), stage="t")
    assert budget.ledger.reserved == {} and len(client.api.history) == 3


async def test_a_call_of_the_group_still_in_flight_when_the_block_ends_is_counted_when_it_ends():
    client = priced(latency=0.05)
    budget = Budget.capped(client.worst_case(request()) * 10)
    cap_spending([client], budget)
    with together(budget, 2):
        late = asyncio.ensure_future(client.complete(request(), stage="t"))
        await asyncio.sleep(0.01)  # it has reserved for both and is in flight
    assert budget.ledger.reserved != {}  # held until the call ends
    reply = await late
    assert budget.ledger.reserved == {} and budget.totals()[0] == pytest.approx(reply.cost_usd)


# -- a store's ledger is reserved in tranches: one transaction for several calls ------------------------


async def test_calls_in_flight_together_draw_on_a_few_reservations_settled_at_what_they_spent(monkeypatch):
    from conftest import threads_calling

    client = priced(latency=0.02)
    ledger = MemoryLedger(cap=client.worst_case(request()) * 1000)
    asked = threads_calling(monkeypatch, ledger, "reserve", "settle", "shrink")
    budget = Budget(Tranches(ledger))
    cap_spending([client], budget)
    replies = await asyncio.gather(*(client.complete(request(), stage="t") for _ in range(40)))
    # 16 calls' worst case reserved at once: 40 calls in flight take three reservations, each settled
    # (with the room nobody drew) once its last call has ended.
    assert {name: len(seen) for name, seen in asked.items()} == {"reserve": 3, "settle": 3}  # and no shrink
    assert ledger.reserved == {} and ledger.spent == pytest.approx(sum(r.cost_usd for r in replies))
    assert budget.totals() == (ledger.spent, ledger.cap)
    # One call alone: its tranche is settled when it ends, so an idle process holds no room.
    reply = await client.complete(request(), stage="t")
    assert ledger.reserved == {} and len(asked["reserve"]) == 4
    assert ledger.spent == pytest.approx(sum(r.cost_usd for r in [*replies, reply]))


async def test_totals_count_what_calls_settled_while_their_tranche_is_still_held():
    client = priced(latency=0.01)
    ledger = MemoryLedger(cap=client.worst_case(request()) * 1000)
    budget = Budget(Tranches(ledger))
    cap_spending([client], budget)
    slow = priced(latency=0.2)
    cap_spending([slow], budget)
    held = asyncio.ensure_future(slow.complete(request(), stage="t"))  # keeps the tranche in flight
    await asyncio.sleep(0.01)
    fast = await client.complete(request(), stage="t")
    assert ledger.spent == 0.0 and budget.totals()[0] == pytest.approx(fast.cost_usd)
    await held


async def test_a_capped_batch_asks_the_store_once_per_tranche_and_keeps_what_its_calls_cost(store_backend, monkeypatch):
    import json

    from batch_files import pair
    from conftest import threads_calling

    from council.judging.batch import BatchSettings, content_digest, parse_batch, run_batch
    from council.storage import batch_key

    text = "".join(json.dumps(pair(i)) + "\n" for i in range(40))
    judge = priced("m", max_tokens=400, latency=0.01)
    asked = threads_calling(monkeypatch, store_backend, "reserve_budget", "settle_budget")
    summary = await run_batch(
        parse_batch(text, "b.jsonl"), settings=BatchSettings(judges=["fake/m"], votes=1, adaptive=False),
        judges=[judge], batch_id="capped", source="b.jsonl", content_sha256=content_digest(text), concurrency=16,
        store=store_backend, max_cost=10.0,
    )  # fmt: skip
    assert summary.finished == 40 and summary.failed == 0 and len(judge.api.history) == 80
    # 40 votes of two passes, 16 in flight: a reservation per call would be 80, one per vote 40.
    reserved = len(asked["reserve_budget"])
    assert 3 <= reserved <= 10 and len(asked["settle_budget"]) == reserved, asked
    spent, cap = store_backend.budget_totals(batch_key("capped"))
    assert spent == pytest.approx(store_backend.batch_spent("capped")) and summary.spent_usd == spent
    # Nothing is held once the batch has ended: all the room left can be reserved.
    assert store_backend.reserve_budget(batch_key("capped"), cap - spent - 1e-9)[0] is not None


async def test_a_capped_batch_reaching_its_cap_in_tranches_sends_no_pass_alone_and_holds_nothing(store_backend):
    import json

    from batch_files import pair

    from council.judging.batch import BatchSettings, content_digest, parse_batch, run_batch
    from council.storage import batch_key

    # Alike items (the same texts, other ids): every vote has the same worst case.
    text = "".join(json.dumps(pair(i % 10, id=f"item-{i}")) + "\n" for i in range(200))
    from council.judging.engine import compare

    first = pair(0)
    probe = priced("m", max_tokens=400)
    probe_budget = Budget.capped(100.0)
    amounts = noting(probe_budget)
    cap_spending([probe], probe_budget)
    await compare(first["prompt"], first["a"], first["b"], judges=[probe], store=None)
    [vote] = amounts  # a vote's two passes, reserved as one: the cap takes about ten of them at once
    judge = priced("m", max_tokens=400, latency=0.01)
    summary = await run_batch(
        parse_batch(text, "b.jsonl"), settings=BatchSettings(judges=["fake/m"], votes=1, adaptive=False),
        judges=[judge], batch_id="tight", source="b.jsonl", content_sha256=content_digest(text), concurrency=16,
        store=store_backend, max_cost=10.5 * vote,
    )  # fmt: skip
    # Ten votes' worst case fit at once; the eleventh is refused while the worker's own ten hold the
    # room, so it waits for them to settle (at their real cost, far below it) rather than stopping
    # the batch, which stops only where a vote no longer fits beside nothing of its own.
    assert summary.budget_reached and 10 < summary.finished < 200, summary
    spent, cap = store_backend.budget_totals(batch_key("tight"))
    assert spent <= cap < spent + vote and summary.spent_usd == spent
    # Every vote sent was sent whole: two passes per item judged, none for an item put back.
    assert len(judge.api.history) == 2 * summary.finished
    assert spent == pytest.approx(store_backend.batch_spent("tight"))
    assert store_backend.reserve_budget(batch_key("tight"), cap - spent - 1e-12)[0] is not None  # nothing held


@st.composite
def ledger_steps(draw):
    """Reservations (dyadic amounts, so every sum is exact) and settlements of earlier ones, in any order."""
    steps, open_ = [], 0
    for _ in range(draw(st.integers(1, 60))):
        if open_ and draw(st.booleans()):
            steps.append(("settle", draw(st.integers(0, open_ - 1)), draw(st.integers(0, 4)) / 4))
            open_ -= 1
        else:
            steps.append(("reserve", draw(st.integers(1, 64)) / 256))
            open_ += 1
    return steps


@settings(max_examples=300)
@given(steps=ledger_steps(), cap=st.integers(1, 2048).map(lambda n: n / 256), size=st.sampled_from([2, 16]))
def test_tranches_start_exactly_the_calls_a_call_by_call_ledger_starts(steps, cap, size):
    """In one process the tranches change how often the store is asked, never which calls start;
    and what the store holds never passes the cap."""
    plain, tranches = MemoryLedger(cap), MemoryLedger(cap)
    budgets = [Budget(plain), Budget(Tranches(tranches, size=size))]
    held: list[list] = [[], []]
    for step in steps:
        outcomes = []
        for i, budget in enumerate(budgets):
            if step[0] == "reserve":
                try:
                    held[i].append((budget.reserve(step[1]), step[1]))
                    outcomes.append(True)
                except BudgetReached:
                    outcomes.append(False)
            elif held[i]:
                token, amount = held[i].pop(min(step[1], len(held[i]) - 1))
                budget.settle(token, amount * step[2])
        assert outcomes[:1] == outcomes[1:], (step, outcomes)
        assert tranches.spent + sum(tranches.reserved.values()) <= cap
        assert budgets[1].totals()[0] == plain.spent
    for i, budget in enumerate(budgets):
        for token, amount in held[i]:
            budget.settle(token, amount)
    assert tranches.reserved == {} and tranches.spent == plain.spent


@pytest.mark.parametrize("votes", [1, 3])
async def test_a_judges_votes_under_a_cap_that_fits_all_passes_but_one_send_none(votes):
    """Position swap: a vote needs both passes, a verdict all of its votes; a pass sent alone
    would be spent for nothing."""
    from council.judging.engine import compare

    probe = priced("j", max_tokens=4000)
    probe_budget = Budget.capped(1.0)
    amounts = noting(probe_budget)
    cap_spending([probe], probe_budget)
    outcome = await compare("Capital of France?", "Paris.", "Lyon.", judges=[probe], store=None)
    assert outcome.success and len(probe.api.history) == 2
    one_pass = sum(amounts) / 2  # both passes' prompts have the same length: the same worst case
    judge = priced("j", max_tokens=4000, latency=0.01)  # the passes in flight at once
    budget = Budget.capped(one_pass * (2 * votes - 0.5))
    cap_spending([judge], budget)
    outcome = await compare("Capital of France?", "Paris.", "Lyon.", judges=[judge], store=None, votes=votes)
    assert not outcome.success and "budget reached" in (outcome.error or ""), outcome.error
    assert judge.api.history == [] and budget.totals()[0] == 0.0


@settings(max_examples=60)
@given(prompt=st.text(min_size=1, max_size=80), a=st.text(max_size=200), b=st.text(max_size=200))
def test_a_votes_two_passes_have_the_same_worst_case(prompt, a, b):
    """Why a vote's group reserves the first pass's worst case twice: the second pass's prompt
    holds the same texts in the other order, so its bound is the same."""
    from council.judging.prompts import pairwise_template
    from council.judging.rubrics import load_bias_checklist

    template = pairwise_template(["accuracy", "clarity"], bias_checklist=load_bias_checklist())
    assert prompt_tokens_bound(template.messages(prompt, a, b)) == prompt_tokens_bound(template.messages(prompt, b, a))


async def test_groups_within_a_group_are_its_calls_and_calls_beyond_it_group_anew():
    client = priced(latency=0.01)
    worst = client.worst_case(request())
    budget = Budget.capped(worst * 100)
    cap_spending([client], budget)
    reservations = noting(budget)

    async def pair():
        with together(budget, 2):
            await asyncio.gather(*(client.complete(request(), stage="t") for _ in range(2)))

    with together(budget, 4):  # as a judge's two votes, each vote's two passes
        await asyncio.gather(pair(), pair())
        assert reservations == [pytest.approx(4 * worst)]
        await pair()  # a later (adaptive) vote: beyond the group's four calls, a group of its own
    assert reservations == [pytest.approx(4 * worst), pytest.approx(2 * worst)]
    assert budget.ledger.reserved == {} and len(client.api.history) == 6


async def test_a_grades_votes_under_a_cap_that_fits_all_but_one_send_none():
    """Compiled from fewer votes than asked, a grade would be recorded with a missing vote; under a
    cap its votes start together or not at all, as a pairwise judge's passes do."""
    from council.judging.engine import grade

    probe = priced("g", max_tokens=4000)
    probe_budget = Budget.capped(10.0)
    amounts = noting(probe_budget)
    cap_spending([probe], probe_budget)
    assert (await grade("Capital of France?", "Paris.", judges=[probe], store=None, votes=1)).success
    one_vote = amounts[0]
    judge = priced("g", max_tokens=4000, latency=0.01)  # the votes in flight at once
    budget = Budget.capped(one_vote * 2.5)
    cap_spending([judge], budget)
    outcome = await grade("Capital of France?", "Paris.", judges=[judge], store=None, votes=3)
    assert not outcome.success and "budget reached" in (outcome.error or ""), outcome.error
    assert judge.api.history == [] and budget.totals()[0] == 0.0
