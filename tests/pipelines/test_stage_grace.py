"""Stages that close at their quorum (``stage_grace``): a straggler's answer is not reviewed, a
late review not counted, both stored when they arrive; ``"off"`` waits as before.

No timing luck: the straggler waits on an event the test sets (or, on the mock server, is
hundreds of times slower than the grace)."""

from __future__ import annotations

import asyncio
import json

import pytest

from council import Council
from council.errors import ConfigError
from council.session import grace
from council.storage import SQLiteStore

MEMBERS = ["fake/alpha", "fake/beta", "fake/gamma"]
QUESTION = "Which sorting algorithm is stable, and why does it matter for this report?"


def make_council(store, members=MEMBERS, **overrides):
    config = {"councils": {"default": {"members": list(members), "chairman": members[0], **overrides}}}
    return Council.from_config(config, store=store)


def stall(council, member, stage):
    """Hold ``member``'s calls of ``stage`` until the returned event is set."""
    gate = asyncio.Event()
    client = council.clients[member]
    original = client.complete

    async def held(request, **kwargs):
        if kwargs.get("stage") == stage:
            await gate.wait()
        return await original(request, **kwargs)

    client.complete = held
    return gate


def comparable(result):
    """A result without what differs from one run to the next (ids, times, latencies)."""
    data = json.loads(result.model_dump_json())
    for key in ("session_id", "created_at", "duration_ms", "usage"):
        data.pop(key)
    for a in data["answers"]:
        a.pop("latency_ms")
    return data


async def test_a_straggling_member_is_late_not_reviewed_and_stored_when_it_arrives(store_backend):
    council = make_council(store_backend, stage_grace=0.05)
    gate = stall(council, "fake/gamma", "answer")
    events = []
    result = await council.run(QUESTION, seed=5, on_event=events.append)

    assert result.late_members == ["fake/gamma"] and result.late_reviewers == []
    late = next(a for a in result.answers if a.member == "fake/gamma")
    assert late.status == "late" and late.text is None and not late.usable
    assert {r.reviewer for r in result.reviews} == {"fake/alpha", "fake/beta"}  # not asked to review
    assert all("fake/gamma" not in r.display_order for r in result.reviews)
    assert sorted(result.consensus.order) == ["fake/alpha", "fake/beta"]
    assert result.status == "partial" and any("late" in reason for reason in result.partial_reasons)
    assert not [f for f in result.failures if f.member == "fake/gamma"]  # late is not failed
    closed = [e for e in events if e.type == "stage_closed"]
    assert [(e.stage, e.late) for e in closed] == [("answer", ["fake/gamma"])]
    assert [e.status for e in events if e.type == "answer" and e.member == "fake/gamma"] == ["late"]
    stored = store_backend.get_session(result.session_id)
    (row,) = [a for a in stored["answers"] if a["member"] == "fake/gamma"]
    assert row["status"] == "late" and row["text"] is None

    gate.set()  # the straggler answers after the session returned
    await grace.late_settled(council.resolved)
    stored = store_backend.get_session(result.session_id)
    (row,) = [a for a in stored["answers"] if a["member"] == "fake/gamma"]
    assert row["status"] == "late" and row["text"] and row["error"] is None
    kept = json.loads(stored["result"])
    (entry,) = [a for a in kept["answers"] if a["member"] == "fake/gamma"]
    assert entry["status"] == "late" and entry["text"] == row["text"]
    assert kept["late_members"] == ["fake/gamma"] and stored["status"] == "partial"
    assert events[-1].type == "session_finished"  # the late answer told no event after the end
    assert "fake/gamma" not in {x for row in store_backend.bias_record_rows(["reviewer_id", "model_id"]) for x in row}
    await council.aclose()


async def test_a_late_review_is_stored_and_not_counted(store_backend):
    council = make_council(store_backend, stage_grace=0.05)
    gate = stall(council, "fake/gamma", "review")
    events = []
    result = await council.run(QUESTION, seed=5, on_event=events.append)

    assert result.late_members == [] and result.late_reviewers == ["fake/gamma"]
    (late,) = [r for r in result.reviews if r.reviewer == "fake/gamma"]
    assert late.late and not late.valid
    assert result.consensus.ballots == 2  # the two reviews in time
    assert not [f for f in result.failures if f.stage == "review"]
    assert [(e.stage, e.late) for e in events if e.type == "stage_closed"] == [("review", ["fake/gamma"])]

    gate.set()
    await grace.late_settled(council.resolved)
    stored = store_backend.get_session(result.session_id)
    (row,) = [r for r in stored["reviews"] if r["reviewer"] == "fake/gamma"]
    assert row["late"] == 1 and row["valid"] == 1 and json.loads(row["ranking"])
    (entry,) = [r for r in json.loads(stored["result"])["reviews"] if r["reviewer"] == "fake/gamma"]
    assert entry["late"] is True and entry["valid"] is True and entry["ranking"]
    assert "fake/gamma" not in {row[0] for row in store_backend.bias_record_rows(["reviewer_id"])}
    assert json.loads(stored["result"])["consensus"]["ballots"] == 2  # still counted without it
    await council.aclose()


async def test_off_waits_for_the_straggler_as_before(tmp_path):
    council = make_council(SQLiteStore.open(tmp_path / "c.db"), stage_grace="off")
    gate = stall(council, "fake/gamma", "answer")
    answered = asyncio.Event()
    events = []

    def on_event(event):
        events.append(event)
        if sum(1 for e in events if e.type == "answer") == 2:
            answered.set()

    session = asyncio.ensure_future(council.run(QUESTION, seed=5, on_event=on_event))
    await answered.wait()
    for _ in range(50):  # the loop turns; nothing but the straggler can end the stage
        await asyncio.sleep(0)
    assert not session.done() and not any(e.type == "stage" and e.stage == "review" for e in events)
    gate.set()
    result = await session
    assert result.status == "complete" and result.late_members == []
    assert all(a.status == "ok" for a in result.answers) and len(result.reviews) == 3
    assert not any(e.type == "stage_closed" for e in events)
    await council.aclose()


async def test_off_and_a_grace_nobody_needs_give_the_same_result():
    results = []
    for setting in ("off", 1000.0, "auto"):
        council = make_council(False, stage_grace=setting)
        results.append(comparable(await council.run(QUESTION, seed=11)))
        await council.aclose()
    assert results[0] == results[1] == results[2]


async def test_closing_the_council_cancels_the_late_call(tmp_path):
    council = make_council(SQLiteStore.open(tmp_path / "c.db"), stage_grace=0)
    stall(council, "fake/gamma", "answer")  # never released
    result = await council.run(QUESTION, seed=5)
    assert result.late_members == ["fake/gamma"]
    await council.aclose()  # returns: nothing waits for the straggler
    assert not grace._BACKGROUND.get(id(council.resolved))


def test_the_auto_rule():
    assert grace.grace_seconds("off", 3.0) is None
    assert grace.grace_seconds(2.5, 100.0) == 2.5
    assert grace.grace_seconds("auto", 0.01) == grace.AUTO_FLOOR
    assert grace.grace_seconds("auto", 4.0) == 4.0 * grace.AUTO_FACTOR
    assert grace.grace_seconds("auto", 10_000.0) == grace.AUTO_CAP


@pytest.mark.parametrize("value", [-1, True, "soon", float("nan")])
def test_a_bad_stage_grace_is_refused_in_one_line(value):
    with pytest.raises(ConfigError) as caught:
        make_council(False, stage_grace=value)
    assert "stage_grace" in str(caught.value) and "\n" not in str(caught.value).strip()


class TakesTheCancellationForATimeout:
    """A transport that takes its call's first cancellation for its own timeout, as aiohttp's
    timer could (aio-libs/aiohttp#5979): the call goes on as a retry, which answers at once."""

    def __init__(self, api):
        self.api, self.calls, self.tasks = api, 0, []

    def __getattr__(self, name):
        return getattr(self.api, name)

    async def generate(self, request):
        self.calls += 1
        self.tasks.append(asyncio.current_task())
        if self.calls == 1:
            try:
                await asyncio.Event().wait()  # no reply, until the session's deadline cancels the call
            except asyncio.CancelledError:
                asyncio.current_task().uncancel()
                raise TimeoutError from None
        return await self.api.generate(request)


async def test_a_call_that_outlives_its_cancellation_is_stopped_before_the_session_is_recorded(store_backend):
    from council.errors import QuorumError
    from council.providers.client import RetryPolicy

    config = {"councils": {"default": {"members": MEMBERS, "chairman": MEMBERS[0], "session_timeout": 0.2}}}
    council = Council.from_config(config, store=store_backend, retry=RetryPolicy(initial_wait=0, max_wait=0, jitter=0))
    client = council.clients["fake/gamma"]
    client.api = api = TakesTheCancellationForATimeout(client.api)
    events = []
    with pytest.raises(QuorumError, match="deadline"):
        await council.run(QUESTION, seed=5, on_event=events.append)
    await asyncio.wait(api.tasks, timeout=10)  # the call, whether or not it was stopped in time

    assert events[-1].type == "session_finished"  # nothing answered after the end
    told = sorted((e.member, e.status) for e in events if e.type == "answer")
    (session,) = store_backend.list_sessions()
    stored = store_backend.get_session(session["id"])
    assert sorted((a["member"], a["status"]) for a in stored["answers"]) == told
    await council.aclose()
