"""The call cache: an identical request (model, messages, every sampling parameter, schema,
vote number) is answered from the store, logged ``cached`` at cost 0; invalid replies, replies
holding a secret, and entries of another version or unreadable ones are never returned."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from council.providers.asking import ask_valid
from council.accounting.budget import Budget
from council.accounting.call_cache import CACHE_VERSION, CallCache, request_key
from council.config import ModelSpec, ResolvedModel
from council.providers.base import ChatRequest
from council.providers.client import ModelClient, cap_spending
from council.providers.fake import FakeAPI
from council.providers.prices import configured_price
from council.untrusted.redaction import register_secret
from council.storage import SQLiteStore, Store, StoreReplies
from council.accounting.usage import CallLog, Usage


class Verdict(BaseModel):
    winner: str


def client_for(store: Store, name: str = "m", *, refresh: bool = False, script=()) -> ModelClient:
    spec = ModelSpec(model=f"fake/{name}", max_tokens=200, input_cost_per_token=1e-5, output_cost_per_token=2e-5)
    client = ModelClient(
        ResolvedModel(id=name, spec=spec), FakeAPI(spec.model, script=script, price=configured_price(1e-5, 2e-5))
    )
    client.cache = CallCache(StoreReplies(store), refresh=refresh)
    return client


def req(text: str = "What is 2+2?", **fields) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], **fields)


@pytest.fixture
def store(tmp_path):
    s = SQLiteStore.open(tmp_path / "c.db")
    yield s
    s.close()


def test_the_key_covers_the_whole_request():
    target = {"model": "fake/m", "api_base": None, "transport": "fake"}
    base = req(seed=0, temperature=0.7, max_tokens=10).model_dump(mode="json")
    key = request_key(target, base)
    assert len(key) == 64 and key == request_key(target, dict(base))
    changes = [
        {"seed": 1},  # another vote
        {"temperature": 0.8},
        {"max_tokens": 11},
        {"json_schema": {"type": "object"}},
        {"json_mode": True},
        {"schema_name": "x"},
        {"messages": [{"role": "user", "content": "What is 2+3?"}]},
    ]
    for change in changes:
        assert request_key(target, {**base, **change}) != key, change
    assert request_key({**target, "api_base": "http://other/v1"}, base) != key
    assert request_key({**target, "model": "fake/n"}, base) != key


async def test_an_identical_request_is_answered_from_the_store_logged_cached_at_cost_0(store):
    client = client_for(store)
    first_log, second_log = CallLog(), CallLog()
    first = await client.complete(req(), stage="answer", sink=first_log)
    second = await client.complete(req(), stage="answer", sink=second_log)
    assert second.text == first.text
    assert len(client.api.history) == 1
    [record] = second_log.records
    assert record.cached and record.cost_usd == 0.0 and record.saved_usd == pytest.approx(first.cost_usd)
    usage = Usage.of(second_log.records)
    assert usage.cached_calls == 1 and usage.cost_usd == 0.0 and usage.saved_usd == pytest.approx(first.cost_usd)
    assert not first_log.records[0].cached


async def test_the_cache_is_read_and_written_off_the_event_loop_where_the_store_allows(store_backend, monkeypatch):
    # On PostgreSQL each lookup and each entry kept is a round trip, which every other call on the
    # event loop (every session of a server) waited for; SQLite's connection is the loop's own.
    import threading

    from conftest import threads_calling

    threads = threads_calling(monkeypatch, store_backend, "cached_reply", "cache_reply")
    client = client_for(store_backend)
    first = await client.complete(req(), stage="answer")
    assert (await client.complete(req(), stage="answer")).text == first.text
    assert len(client.api.history) == 1
    assert {name: len(seen) for name, seen in threads.items()} == {"cached_reply": 2, "cache_reply": 1}
    here = threading.current_thread().name
    assert all((t != here) == store_backend.threadsafe for seen in threads.values() for t in seen), threads


async def test_three_votes_are_three_calls(store):
    client = client_for(store)
    for vote in range(3):
        await client.complete(req(seed=vote), stage="vote")
    assert len(client.api.history) == 3
    for vote in range(3):
        await client.complete(req(seed=vote), stage="vote")
    assert len(client.api.history) == 3


async def test_another_process_reads_what_one_kept(tmp_path):
    path = tmp_path / "c.db"
    one, two = SQLiteStore.open(path), SQLiteStore.open(path)
    try:
        await client_for(one).complete(req(), stage="t")
        other = client_for(two)
        await other.complete(req(), stage="t")
        assert other.api.history == []
    finally:
        one.close()
        two.close()


async def test_an_invalid_reply_is_never_cached(store):
    valid = json.dumps({"winner": "A"})
    client = client_for(store, script=["not json at all", valid])

    async def ask():
        return await ask_valid(
            client, [{"role": "user", "content": "judge"}], Verdict, schema=Verdict.model_json_schema(),
            schema_name="v", retry_message=lambda p: {"role": "user", "content": f"fix: {p}"}, stage="judge",
            seed=0, max_attempts=3, sink=CallLog(),
        )  # fmt: skip

    first = await ask()
    assert first.parsed is not None and first.attempts == 2
    client.api.enqueue(valid)
    second = await ask()  # the first request's invalid reply was not kept: it is asked again
    assert second.attempts == 1 and second.parsed.winner == "A"
    assert len(client.api.history) == 3
    third = await ask()
    assert third.attempts == 1 and len(client.api.history) == 3  # now the valid reply is kept


async def test_an_empty_reply_is_not_cached(store):
    client = client_for(store, script=["   ", "an answer"])
    await client.complete(req(), stage="t")
    again = await client.complete(req(), stage="t")
    assert again.text == "an answer" and len(client.api.history) == 2


async def test_a_reply_holding_a_configured_secret_is_not_cached(store, monkeypatch):
    from council.untrusted import redaction

    monkeypatch.setattr(redaction, "_registered", set())  # this test's secret stays in this test
    secret = "sk-proj-Zq8vN3kL5mP7rT9wX2yB4dF6hJ1"
    register_secret(secret)
    client = client_for(store, script=[f"the key is {secret}", f"the key is {secret}"])
    await client.complete(req(), stage="t")
    await client.complete(req(), stage="t")
    assert len(client.api.history) == 2
    assert store.cache_stats()["entries"] == 0
    assert secret not in "".join(str(r) for r in store.db.execute("SELECT * FROM call_cache"))


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE call_cache SET reply = '{not json'",
        "UPDATE call_cache SET reply = '[1, 2]'",
        'UPDATE call_cache SET reply = \'{"v": 1, "text": 5}\'',
        f"UPDATE call_cache SET version = {CACHE_VERSION - 1}",
        "UPDATE call_cache SET reply = json_set(reply, '$.v', 0)",
    ],
)
async def test_a_corrupted_or_old_entry_is_ignored_and_replaced(store, damage):
    client = client_for(store)
    first = await client.complete(req(), stage="t")
    store.db.execute(damage)
    again = await client.complete(req(), stage="t")
    assert len(client.api.history) == 2 and again.text == first.text
    third = await client_for(store).complete(req(), stage="t")  # the fresh reply replaced the bad entry
    assert third.text == first.text
    assert store.cache_stats()["entries"] == 1


async def test_refresh_asks_again_and_replaces(store):
    await client_for(store, script=["old answer"]).complete(req(), stage="t")
    fresh = await client_for(store, refresh=True, script=["new answer"]).complete(req(), stage="t")
    assert fresh.text == "new answer"
    assert (await client_for(store).complete(req(), stage="t")).text == "new answer"


async def test_cached_calls_spend_nothing_under_a_cap(store):
    client = client_for(store)
    await client.complete(req(max_tokens=10), stage="t")
    budget = Budget.capped(client.worst_case(req(max_tokens=10)) / 2)  # not even one real call fits
    cap_spending([client], budget)
    for _ in range(5):
        await client.complete(req(max_tokens=10), stage="t")
    assert budget.totals()[0] == 0.0 and budget.reached is None


async def test_clear_removes_old_entries_or_all(store):
    client = client_for(store)
    await client.complete(req("one"), stage="t")
    await client.complete(req("two"), stage="t")
    store.db.execute("UPDATE call_cache SET created_at = '2020-01-01T00:00:00.000000+00:00' WHERE rowid = 1")
    assert store.clear_cache(older_than_days=30) == 1
    assert store.cache_stats()["entries"] == 1
    assert store.clear_cache() == 1
    assert store.cache_stats()["entries"] == 0


async def test_a_cached_reply_is_streamed_whole_to_a_streaming_caller(store):
    client = client_for(store)
    first = await client.complete(req(), stage="synthesis", on_delta=lambda piece: None)
    pieces: list[str] = []
    again = await client.complete(req(), stage="synthesis", on_delta=pieces.append)
    assert "".join(pieces) == again.text == first.text
    assert len(client.api.history) == 1
