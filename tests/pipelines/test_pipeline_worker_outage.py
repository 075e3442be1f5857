"""A batch worker on PostgreSQL whose database goes away while one of its writes is in flight:
the write may have committed before its reply was lost. The worker waits for the server (the
store's outage grace), records what the lost write did not, takes up the items it claimed, and
goes on: every item recorded once, none held unseen. A server away for longer stops the worker
with one line (tests/pipelines/test_pipeline_batch_workers.py, with a real server stopped)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from council.config import ConfigFile, resolve_model
from council.errors import CouncilFailure, StoreWentAway
from council.judging.batch import BatchSettings, content_digest, parse_batch
from council.judging.worker import enqueue, run_worker
from council.providers.client import ModelClient
from council.providers.fake import FakeAPI

# The shared url_store on PostgreSQL only: a SQLite commit is never lost with its reply.
pytestmark = pytest.mark.parametrize("backend_url", ["postgresql"], indirect=True)


class _Counted(FakeAPI):
    def __init__(self) -> None:
        super().__init__("fake/j")
        self.prompts: list[str] = []

    async def generate(self, request):
        self.prompts.append(request.messages[-1]["content"])
        return await super().generate(request)


def _queued(store, items: int, judge: str = "fake/j", config: ConfigFile | None = None):
    """Batch "w" of ``items`` pairs queued for ``judge`` (an alias of ``config``, or a model),
    answered by a fake that notes every prompt."""
    api = _Counted()
    client = ModelClient(resolve_model(judge, config or ConfigFile(), {}, "test"), api)
    text = "".join(json.dumps({"id": f"p{i}", "prompt": f"Q {i}?", "a": "A.", "b": "B."}) + "\n" for i in range(items))
    enqueue(store, parse_batch(text, "b.jsonl"), batch_id="w", settings=BatchSettings(judges=[judge]),
            judges=[client], rubrics={}, source="b.jsonl", content_sha256=content_digest(text))  # fmt: skip
    return client, api


async def _worked(store, judge, concurrency: int, **options):
    """One worker on batch "w" until it is done (at most 60 s); its report."""
    return await asyncio.wait_for(run_worker(store, judges_for=lambda _id, _spec: [judge], batch_id="w",
                                             concurrency=concurrency, keep_judges=[judge], **options), 60)  # fmt: skip


def _reply_lost(store, name: str, *, on_call: int, committed: bool = True, lasting: float = 0.0) -> list[int]:
    """Make the ``on_call``-th call of ``store.<name>`` (and those that start in the ``lasting``
    seconds after it) do their work (``committed``) and then fail as when the server goes away
    before the reply, at the end of those seconds: the store finds the server away, as it does."""
    real = getattr(store, name)
    count = [0]
    outage: list[float] = []

    def lost(*args, **kwargs):
        count[0] += 1
        if count[0] == on_call:
            outage.append(time.monotonic() + lasting)
        if count[0] != on_call and (not outage or time.monotonic() > outage[0]):
            return real(*args, **kwargs)
        if committed:
            real(*args, **kwargs)
        time.sleep(max(0.0, outage[0] - time.monotonic()))
        store.away_since = time.monotonic()  # as the store finds the server gone: it waits for it
        raise StoreWentAway("the PostgreSQL store failed: server closed the connection unexpectedly")

    setattr(store, name, lost)
    return count


def _each_item_judged_once(store, api, items: int) -> None:
    counts = store.batch_status("w")
    assert [counts[k] for k in ("items", "queued", "running", "done", "failed")] == [items, 0, 0, items, 0]
    assert sorted(r["item_id"] for r in store.batch_rows("w")) == sorted(f"p{i}" for i in range(items))
    asked = [f"Q {i}?" for i in range(items) for p in api.prompts if f"Q {i}?" in p]
    assert sorted(asked) == sorted(f"Q {i}?" for i in range(items) for _ in range(2))  # two passes, once each


async def test_a_write_whose_reply_was_lost_is_recorded_once_and_its_claims_taken_up(url_store):
    judge, api = _queued(url_store, 12)
    count = _reply_lost(url_store, "record_and_claim", on_call=2)
    report = await _worked(url_store, judge, 3)
    assert count[0] > 2  # the lost one, then the worker went on
    assert (report.judged, report.failed, report.dropped) == (12, 0, 0)  # each counted once, none as a duplicate
    _each_item_judged_once(url_store, api, 12)


async def test_several_writes_lost_at_once_each_record_once(url_store):
    """Every write in flight when the server goes (the store's threads) is lost at once; items
    finish while each reads back what the worker holds."""
    judge, api = _queued(url_store, 24)
    _reply_lost(url_store, "record_and_claim", on_call=2, lasting=0.1)
    report = await _worked(url_store, judge, 6)
    assert (report.judged, report.failed, report.dropped) == (24, 0, 0)
    _each_item_judged_once(url_store, api, 24)


async def test_a_write_lost_before_it_committed_is_written_again(url_store):
    judge, api = _queued(url_store, 12)
    _reply_lost(url_store, "record_and_claim", on_call=2, committed=False)
    report = await _worked(url_store, judge, 3)
    assert (report.judged, report.failed, report.dropped) == (12, 0, 0)
    _each_item_judged_once(url_store, api, 12)


async def test_a_claim_whose_reply_was_lost_has_its_items_taken_up(url_store):
    judge, api = _queued(url_store, 10)
    _reply_lost(url_store, "claim_items", on_call=1)
    report = await _worked(url_store, judge, 4)
    assert (report.judged, report.failed, report.dropped) == (10, 0, 0)
    _each_item_judged_once(url_store, api, 10)


async def test_items_taken_up_after_a_lost_claim_never_exceed_the_places(url_store):
    """The lost claim's items and the ones claimed again wait for free places: the worker never
    judges more items at once than ``concurrency``."""
    judge, api = _queued(url_store, 10)
    _reply_lost(url_store, "claim_items", on_call=1)
    at_once = [0, 0]
    real = api.generate

    async def counted(request):
        at_once[0] += 1
        at_once[1] = max(at_once)
        try:
            await asyncio.sleep(0.01)
            return await real(request)
        finally:
            at_once[0] -= 1

    api.generate = counted
    report = await _worked(url_store, judge, 2)
    assert report.judged == 10 and at_once[1] == 2 * 2  # two items, two passes each


async def test_a_heartbeat_lost_with_the_server_is_renewed_again(url_store):
    judge, api = _queued(url_store, 4)
    renewed = _reply_lost(url_store, "renew_claims", on_call=1, committed=False)
    real = api.generate

    async def slow(request):  # long enough for several heartbeats
        await asyncio.sleep(0.3)
        return await real(request)

    api.generate = slow
    report = await _worked(url_store, judge, 4, lease_seconds=0.6)
    assert renewed[0] >= 2 and report.judged == 4
    _each_item_judged_once(url_store, api, 4)


async def test_a_write_that_fails_again_stops_the_worker_with_one_line(url_store):
    judge, _ = _queued(url_store, 6)
    real = url_store.record_and_claim

    def gone(*args, **kwargs):  # each time: the server is not back
        url_store.away_since = time.monotonic()
        raise StoreWentAway("the PostgreSQL store failed: server closed the connection unexpectedly")

    url_store.record_and_claim = gone
    url_store.outage_grace_s = 0.5  # how long the worker goes on trying (the store's grace: 10 s)
    with pytest.raises(CouncilFailure, match="the store stopped answering mid-batch") as caught:
        await _worked(url_store, judge, 3)
    assert "\n" not in str(caught.value)
    url_store.record_and_claim = real
    assert url_store.batch_status("w")["done"] == 0  # nothing recorded; the items return when their lease passes


async def test_items_waiting_to_start_while_a_claim_is_under_way_are_not_taken_up_twice(url_store):
    """Items taken from those waiting to start while the worker's own claim is under way are known
    to it: a lost write's read-back at that moment must not take them up a second time (seen
    with a real server restarted under a 1,500-pair batch: 2-24 calls of items judged twice in 5
    runs of 8; not reproduced by this test, which holds the combination of slow claims and lost
    writes)."""
    judge, api = _queued(url_store, 40)
    api.latency = 0.02
    real_claim = url_store.claim_items

    def slow_claim(*args, **kwargs):  # a claim across a slow network: items finish meanwhile
        time.sleep(0.1)
        return real_claim(*args, **kwargs)

    url_store.claim_items = slow_claim
    _reply_lost(url_store, "record_and_claim", on_call=3, lasting=0.3)
    report = await _worked(url_store, judge, 5)
    assert (report.judged, report.failed, report.dropped) == (40, 0, 0)
    _each_item_judged_once(url_store, api, 40)


async def test_an_item_whose_rate_reservation_was_lost_with_the_server_is_judged_again(url_store):
    """A judge with an rpm budget shared through the store reserves each call there: the server
    going away under a reservation fails that item's judging, which is done again once the
    server is back (its calls asked again, as after a crash); the batch goes on."""
    config = ConfigFile.model_validate({"models": {"j": {"model": "fake/j", "rpm": 1_000_000}}})
    judge, api = _queued(url_store, 12, "j", config)
    reserved = _reply_lost(url_store, "reserve_rate", on_call=5)
    report = await _worked(url_store, judge, 3)
    assert reserved[0] > 5 and (report.judged, report.failed, report.dropped) == (12, 0, 0)
    assert sorted(r["item_id"] for r in url_store.batch_rows("w")) == sorted(f"p{i}" for i in range(12))
    asked = sorted(sum(f"Q {i}?" in p for p in api.prompts) for i in range(12))
    assert asked[:11] == [2] * 11 and asked[11] in (2, 3, 4)  # the cut item's calls asked again
