"""A session's events: with content, numbered, in order, as published, and private when asked."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import jsonschema
import pytest
from mock_server import start_mock_server

from council import Council
from council.errors import QuorumError
from council.session import Candidate, parse_event
from council.session.events import events_json_schema, events_json_schema_text

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "schemas" / "session-events.json"
MEMBERS = ["fake/alpha", "fake/beta", "fake/gamma"]
QUESTION = "Which of the three sorting algorithms is stable, and why does it matter here?"


def council(members=MEMBERS, store=False, privacy=None, **overrides):
    config = {"councils": {"default": {"members": list(members), "chairman": members[0], **overrides}}}
    if privacy is not None:
        config["privacy"] = privacy
    return Council.from_config(config, store=store)


async def collect(c, question=QUESTION, **kwargs):
    events, result = [], None
    try:
        async for item in c.stream(question, **kwargs):
            if hasattr(item, "seq"):
                events.append(item)
            else:
                result = item
    finally:
        await c.aclose()
    return events, result


def test_published_schema_is_the_models_schema():
    # Regenerate with: python -c "from council.session.events import events_json_schema_text as t; print(t(), end='')"
    assert SCHEMA_FILE.read_text(encoding="utf-8") == events_json_schema_text()


async def test_events_carry_the_session_content_in_order():
    events, result = await collect(council(), seed=3)
    assert result is not None and result.status == "complete"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {e.session_id for e in events} == {result.session_id}
    types = [e.type for e in events]
    assert types[0] == "session_started" and types[-1] == "session_finished"
    assert types.index("consensus") > max(i for i, t in enumerate(types) if t == "review")
    assert types.index("synthesis") > types.index("synthesis_delta") > types.index("consensus")

    started = events[0]
    assert started.question == QUESTION and started.members == MEMBERS
    assert started.seed == 3 and started.synthesis is True

    answers = {e.member: e for e in events if e.type == "answer"}
    assert {m: e.text for m, e in answers.items()} == {a.member: a.text for a in result.answers}
    assert all(e.text for e in answers.values())

    reviews = {e.reviewer: e for e in events if e.type == "review"}
    for r in result.reviews:
        e = reviews[r.reviewer]
        assert (e.order, e.labels, e.scores, e.ranking) == (r.display_order, r.labels, r.scores, r.ranking)
        assert e.reasoning == r.reasoning and all(e.reasoning.values())

    [consensus] = [e for e in events if e.type == "consensus"]
    assert consensus.order == result.consensus.order
    assert consensus.kendall_w == result.consensus.kendall_w and consensus.p == result.consensus.kendall_w_p_value
    assert [row.member for row in consensus.table] == [row.member for row in result.consensus.ranking]

    deltas = "".join(e.text for e in events if e.type == "synthesis_delta")
    [synthesis] = [e for e in events if e.type == "synthesis"]
    assert deltas == synthesis.text == result.synthesis.text
    assert synthesis.status == "ok" and synthesis.chairman == result.synthesis.chairman

    finished = events[-1]
    assert finished.status == "complete" and finished.usage == result.usage


async def test_every_event_matches_the_published_schema_and_round_trips():
    events, _ = await collect(council(), seed=4)
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    for e in events:
        data = json.loads(e.model_dump_json())
        validator.validate(data)
        assert parse_event(data) == e
        assert parse_event(e.model_dump_json()) == e
    assert not validator.is_valid({"type": "answer", "seq": 1, "session_id": "x", "at": "", "member": "a"})
    assert events_json_schema()["discriminator"]["propertyName"] == "type"


async def test_transcripts_off_no_event_carries_private_text():
    events, result = await collect(council(privacy={"store_transcripts": False}), seed=5)
    assert result.status == "complete"
    private = [QUESTION, *(a.text for a in result.answers), result.synthesis.text]
    private += [text for r in result.reviews for text in r.reasoning.values()]
    dumped = "\n".join(e.model_dump_json() for e in events)
    for text in private:
        assert text and text not in dumped
    assert "synthesis_delta" not in {e.type for e in events}
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # no gaps where deltas were dropped
    # what is not text is still there
    assert sum(e.type == "review" and bool(e.scores) for e in events) == 3


async def test_a_failed_chairman_is_followed_by_a_notice_and_the_fallback():
    members = ["fake/alpha+fail", "fake/beta", "fake/gamma"]
    c = council(members, fallback_chairman="fake/beta", quorum=2)
    events, result = await collect(c, seed=6)
    types = [e.type for e in events]
    notices = [e for e in events if e.type == "notice"]
    assert any("fallback chairman fake/beta writes" in n.text for n in notices)
    [synthesis] = [e for e in events if e.type == "synthesis"]
    assert synthesis.fallback_used and synthesis.chairman == "fake/beta"
    assert types.index("synthesis") > types.index("notice")
    failed = [e for e in events if e.type == "answer" and e.status == "failed"]
    assert [e.member for e in failed] == ["fake/alpha+fail"] and "fake failure" in failed[0].error
    assert events[-1].status == "partial" == result.status


async def test_a_failed_session_ends_with_a_failed_event_then_raises():
    c = council(["fake/alpha+fail", "fake/beta+fail", "fake/gamma"])
    events = []
    with pytest.raises(QuorumError):
        async for item in c.stream(QUESTION, seed=1):
            events.append(item)
    await c.aclose()
    assert events[-1].type == "session_finished" and events[-1].status == "failed"
    assert "quorum" in events[-1].error
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


async def test_candidates_are_answer_events():
    cands = [Candidate(id="one", text="Merge sort is stable."), Candidate(id="two", text="Heap sort is not.")]
    events, _ = await collect(council(), candidates=cands, seed=2, synthesis=False)
    answers = [e for e in events if e.type == "answer"]
    assert [(e.member, e.status, e.text) for e in answers] == [(c.id, "candidate", c.text) for c in cands]
    assert events[0].synthesis is False and "synthesis" not in {e.type for e in events}


async def test_transcripts_off_an_error_quoting_an_answer_is_cut_from_the_events():
    # "+quote" puts each answer's text where its score belongs: the review is invalid and the
    # validation message quotes the answer, which must not reach an event either.
    members = ["fake/alpha", "fake/beta", "fake/gamma+quote"]
    events, result = await collect(council(members, privacy={"store_transcripts": False}), seed=8)
    [bad] = [e for e in events if e.type == "review" and e.status == "invalid"]
    assert bad.reviewer == "fake/gamma+quote" and bad.error
    dumped = "\n".join(e.model_dump_json() for e in events)
    for a in result.answers:
        assert a.text and a.text[:40] not in dumped


async def test_the_bias_records_are_computed_while_the_chairman_writes(monkeypatch):
    # They need only the reviews: off the session's critical path, once the chairman's request is sent.
    from council._util import speedups
    from council.bias import records
    from council.providers.fake import FakeAPI

    order = []
    real_stream, real_metadata = FakeAPI.stream, records.session_bias_metadata
    monkeypatch.setattr(speedups, "GRACE_S", 0.01)

    async def stream(self, request, on_delta):
        order.append("chairman asked")
        await asyncio.sleep(0.5)  # a chairman that takes longer than the grace
        response = await real_stream(self, request, on_delta)
        order.append("chairman answered")
        return response

    def metadata(bias_records):
        order.append("bias computed")
        return real_metadata(bias_records)

    monkeypatch.setattr(FakeAPI, "stream", stream)
    monkeypatch.setattr(records, "session_bias_metadata", metadata)
    events, result = await collect(council(), seed=5)
    assert order == ["chairman asked", "bias computed", "chairman answered"]
    assert result.status == "complete" and result.bias is not None and result.bias.records == 6
    assert [e.type for e in events][-2:] == ["synthesis", "session_finished"]


async def test_a_chairman_quicker_than_the_grace_is_not_kept_waiting_for_it(monkeypatch):
    from council._util import speedups

    # A process's first sessions begin work of their own after the grace: ended before it is made long.
    await collect(council(), seed=4)
    await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))
    monkeypatch.setattr(speedups, "GRACE_S", 60.0)  # were the session to wait it out, this would time out
    events, result = await asyncio.wait_for(collect(council(), seed=5), 20)
    assert result.status == "complete" and result.bias is not None and result.bias.records == 6


def test_the_chairmans_request_reaches_the_server_before_the_bias_records_are_computed(tmp_path, monkeypatch):
    # Over real HTTP. aiohttp writes a request in a task of its own, one turn of the loop after
    # the call's: work begun on the loop then ran first and held the request back (~1.5 ms).
    from council._util import speedups
    from council.bias import records

    computed, real = [], records.session_bias_metadata
    monkeypatch.setattr(records, "session_bias_metadata", lambda rows: (computed.append(time.time()), real(rows))[1])
    monkeypatch.setattr(speedups, "GRACE_S", 0.2)  # far beyond the server's own delays
    log, latency = tmp_path / "requests.jsonl", 0.5
    with start_mock_server(latency=latency, log_requests=log) as server:
        models = {f"m{i}": {"model": f"openai/mock-m{i}", "api_base": server.base_url} for i in range(3)}
        config = {"councils": {"default": {"members": list(models), "chairman": "m0"}}, "models": models}

        async def session():
            async with Council.from_config(config, store=False) as c:
                return await c.run(QUESTION, seed=4, on_event=lambda event: None)

        result = asyncio.run(session())
        requests = server.logged_requests()
    assert result.status == "complete", result.partial_reasons
    assert len(requests) == 7 and requests[-1]["stream"]  # the chairman's, streamed, the last to end
    # The mock logs a call once it has waited ``latency`` after reading the request: it had the
    # chairman's request by ``time - latency`` at the latest.
    assert len(computed) == 1 and requests[-1]["time"] - latency < computed[0]
