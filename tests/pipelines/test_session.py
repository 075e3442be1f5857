"""A whole council session on the in-process fake provider."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter

import pytest
from scipy.stats import chisquare

from council import Council
from council.errors import InputError, QuorumError
from council.session import Candidate, reviewer_order
from council.storage import SQLiteStore

MEMBERS = ["fake/alpha", "fake/beta", "fake/gamma", "fake/delta"]
QUESTION = "What is the boiling point of water at sea level, in Celsius?"


def make_council(members=MEMBERS, store=True, **council_overrides):
    council = {"members": list(members), "chairman": members[0], **council_overrides}
    return Council.from_config({"councils": {"default": council}}, store=store)


async def test_full_session_complete_and_stored(council_home):
    council = make_council()
    result = await council.run(QUESTION, seed=7)
    await council.aclose()
    assert result.status == "complete", result.partial_reasons
    assert result.members == MEMBERS
    assert {a.member for a in result.answers if a.status == "ok"} == set(MEMBERS)
    assert len(result.reviews) == 4 and all(r.valid for r in result.reviews)
    # self-review excluded by default: each reviewer ranks the other three
    for r in result.reviews:
        assert r.reviewer not in r.display_order and sorted(r.display_order) == sorted(set(MEMBERS) - {r.reviewer})
        assert sorted(r.ranking) == sorted(r.display_order)
    assert result.consensus is not None and sorted(result.consensus.order) == sorted(MEMBERS)
    assert result.synthesis.status == "ok" and result.synthesis.text
    assert len({tuple(r.display_order) for r in result.reviews}) >= 2

    store = SQLiteStore.open()
    row = store.get_session(result.session_id)
    assert row["status"] == "complete"
    records = list(store.db.query("select * from bias_records where session_id = ?", [result.session_id]))
    assert len(records) == 4 * 3
    pairs = {(r["reviewer_id"], r["model_id"]) for r in records}
    assert pairs == {(a, b) for a in MEMBERS for b in MEMBERS if a != b}
    for rec in records:
        assert QUESTION not in json.dumps(rec)
        assert rec["query_hash"] is None  # not opted in
    calls = store.count("calls")
    assert calls == result.usage.calls >= 4 + 4 + 1


async def test_same_seed_same_orders_different_seed_differs():
    c = make_council(store=False)
    a = await c.run(QUESTION, seed=123)
    b = await c.run(QUESTION, seed=123)
    d = await c.run(QUESTION, seed=124)
    orders = lambda r: {x.reviewer: x.display_order for x in r.reviews}  # noqa: E731
    assert orders(a) == orders(b)
    assert orders(a) != orders(d)
    assert a.consensus.order == b.consensus.order


def test_shuffles_are_uniform_and_independent_between_reviewers():
    members = ["m0", "m1", "m2", "m3"]
    first_pos = Counter()
    joint = Counter()
    n = 4000
    for seed in range(n):
        o1 = reviewer_order(seed, "r1", members)
        o2 = reviewer_order(seed, "r2", members)
        first_pos[o1[0]] += 1
        joint[(o1[0], o2[0])] += 1
    # each member first equally often
    assert chisquare([first_pos[m] for m in members]).pvalue > 0.001
    # reviewer 2's first answer does not depend on reviewer 1's (16 cells uniform)
    assert chisquare([joint[(a, b)] for a in members for b in members]).pvalue > 0.001


def test_a_reviewers_order_does_not_depend_on_the_others():
    assert reviewer_order(5, "r1", ["a", "b", "c"]) == reviewer_order(5, "r1", ["a", "b", "c"])
    assert sorted(reviewer_order(5, "r1", ["a", "b", "c"])) == ["a", "b", "c"]


async def test_failed_member_gives_partial_with_the_real_error():
    c = make_council(["fake/alpha", "fake/beta", "fake/gamma+fail"], store=False)
    result = await c.run(QUESTION, seed=1)
    assert result.status == "partial"
    failure = next(f for f in result.failures if f.stage == "answer")
    assert failure.member == "fake/gamma+fail" and failure.error
    assert any("failed to answer" in r for r in result.partial_reasons)
    assert result.consensus is not None


async def test_below_quorum_fails_and_is_recorded(council_home):
    c = make_council(["fake/alpha+fail", "fake/beta+fail", "fake/gamma"])
    with pytest.raises(QuorumError) as e:
        await c.run(QUESTION, seed=1)
    assert "quorum" in str(e.value) and "fake/alpha+fail" in str(e.value)
    rows = SQLiteStore.open().list_sessions()
    assert rows[0]["status"] == "failed" and "quorum" in rows[0]["error"]


@pytest.mark.parametrize("transcripts", [True, False])
async def test_a_session_below_quorum_keeps_the_answers_that_came(store_backend, transcripts):
    members = ["fake/alpha+fail", "fake/beta+fail", "fake/gamma"]
    config = {"councils": {"default": {"members": members, "chairman": "fake/gamma"}},
              "privacy": {"store_transcripts": transcripts}}  # fmt: skip
    council = Council.from_config(config, store=store_backend)
    with pytest.raises(QuorumError):
        await council.run(QUESTION, seed=1)
    await council.aclose()
    [listed] = store_backend.list_sessions()
    row = store_backend.get_session(listed["id"])
    assert row["status"] == "failed" and "quorum" in row["error"]
    answers = {a["member"]: a for a in row["answers"]}
    assert sorted(answers) == sorted(members)
    assert answers["fake/gamma"]["status"] == "ok" and answers["fake/gamma"]["length_chars"] > 0
    assert (answers["fake/gamma"]["text"] is not None) == transcripts
    assert answers["fake/alpha+fail"]["status"] == "failed" and answers["fake/alpha+fail"]["error"]
    result = json.loads(row["result"])  # the whole record, as for any finished session
    assert result["status"] == "failed" and result["reviews"] == [] and result["consensus"] is None
    assert [a["member"] for a in result["answers"]] == members
    kept = next(a for a in result["answers"] if a["member"] == "fake/gamma")
    assert (kept["text"] == answers["fake/gamma"]["text"]) and (kept["text"] is not None) == transcripts
    assert result["question"] == (QUESTION if transcripts else None)
    assert sorted(f["member"] for f in result["failures"]) == ["fake/alpha+fail", "fake/beta+fail"]
    calls = store_backend.session_calls(row["id"])  # the call log, once: every attempt
    assert result["usage"]["calls"] == len(calls) and len({c["call_id"] for c in calls}) == len(calls)


async def test_a_failed_session_is_written_in_the_stores_write_thread_if_it_has_one(store_backend, monkeypatch):
    # As a finished session is: on PostgreSQL the write held the event loop, and every other
    # session of a server with it, for as long as the database took (a second or more when away).
    from conftest import threads_calling

    threads = threads_calling(monkeypatch, store_backend, "fail_session")
    members = ["fake/alpha+fail", "fake/beta+fail", "fake/gamma"]
    council = Council.from_config({"councils": {"default": {"members": members, "chairman": "fake/gamma"}}},
                                  store=store_backend)  # fmt: skip
    with pytest.raises(QuorumError):
        await council.run(QUESTION, seed=1)
    await council.aclose()
    loop_thread = threading.current_thread().name
    assert threads == {"fail_session": ["council-group-commit_0"] if store_backend.threadsafe else [loop_thread]}
    [listed] = store_backend.list_sessions()
    assert store_backend.get_session(listed["id"])["status"] == "failed"


async def test_a_session_past_its_deadline_in_review_keeps_its_answers(store_backend):
    members = ["fake/alpha", "fake/beta", "fake/gamma"]
    config = {"councils": {"default": {"members": members, "chairman": "fake/alpha", "reviewers": ["fake/judge+slow"],
                                       "session_timeout": 0.3}}}  # fmt: skip
    council = Council.from_config(config, store=store_backend)
    with pytest.raises(QuorumError, match="deadline"):
        await council.run(QUESTION, seed=1)
    await council.aclose()
    [listed] = store_backend.list_sessions()
    row = store_backend.get_session(listed["id"])
    assert row["status"] == "failed" and "deadline" in row["error"]
    assert sorted(a["member"] for a in row["answers"] if a["status"] == "ok" and a["text"]) == members
    assert json.loads(row["result"])["reviews"] == []  # the review in flight is not invented


@pytest.mark.parametrize("transcripts", [True, False])
async def test_a_session_past_its_deadline_while_answering_keeps_the_answers_that_came(store_backend, transcripts):
    """The deadline passes while one member is still answering: the answers that came are kept
    (paid for, and the README's promise), the member cut off is a failure that says why."""
    members = ["fake/alpha", "fake/beta", "fake/gamma+slow"]
    config = {"councils": {"default": {"members": members, "chairman": "fake/alpha", "session_timeout": 0.3}},
              "privacy": {"store_transcripts": transcripts}}  # fmt: skip
    council = Council.from_config(config, store=store_backend)
    events = []
    with pytest.raises(QuorumError, match="deadline"):
        await council.run(QUESTION, seed=1, on_event=events.append)
    await council.aclose()
    [listed] = store_backend.list_sessions()
    row = store_backend.get_session(listed["id"])
    assert row["status"] == "failed" and "deadline" in row["error"]
    answers = {a["member"]: a for a in row["answers"]}
    assert sorted(answers) == sorted(members)
    for member in ("fake/alpha", "fake/beta"):
        assert answers[member]["status"] == "ok" and answers[member]["length_chars"] > 0
        assert (answers[member]["text"] is not None) == transcripts
    cut = answers["fake/gamma+slow"]
    assert cut["status"] == "failed" and "deadline" in cut["error"] and cut["text"] is None
    result = json.loads(row["result"])
    assert result["status"] == "failed" and result["reviews"] == [] and result["consensus"] is None
    assert [a["member"] for a in result["answers"]] == members  # the council's order, as a finished stage gives
    assert [(f["stage"], f["member"]) for f in result["failures"]] == [("answer", "fake/gamma+slow")]
    assert [e.member for e in events if e.type == "answer"][:2] == ["fake/alpha", "fake/beta"]
    calls = store_backend.session_calls(row["id"])
    assert result["usage"]["calls"] == len(calls) == 3


async def test_a_session_cancelled_while_answering_keeps_the_answers_that_came(store_backend):
    members = ["fake/alpha", "fake/beta+slow"]
    config = {"councils": {"default": {"members": members, "chairman": "fake/alpha", "quorum": 1}}}
    council = Council.from_config(config, store=store_backend)
    events = []
    running = asyncio.create_task(council.run(QUESTION, seed=1, on_event=events.append))
    while not any(e.type == "answer" for e in events):
        await asyncio.sleep(0.01)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await council.aclose()
    [listed] = store_backend.list_sessions()
    row = store_backend.get_session(listed["id"])
    assert row["status"] == "interrupted"
    assert [(a["member"], a["status"], a["error"]) for a in row["answers"]] == [
        ("fake/alpha", "ok", None),
        ("fake/beta+slow", "failed", "no answer: interrupted"),
    ]


async def test_garbage_reviewer_is_rerequested_then_recorded_invalid():
    c = make_council(["fake/alpha", "fake/beta", "fake/gamma+garbage"], store=False, max_review_attempts=3)
    result = await c.run(QUESTION, seed=1)
    bad = next(r for r in result.reviews if r.reviewer == "fake/gamma+garbage")
    assert not bad.valid and bad.attempts == 3 and "invalid output" in bad.error
    assert result.status == "partial"
    assert result.consensus is not None  # the two valid reviews still make a consensus
    assert result.consensus.ballots == 2


async def test_flaky_reviewer_succeeds_on_rerequest():
    c = make_council(["fake/alpha", "fake/beta", "fake/gamma+flaky"], store=False)
    result = await c.run(QUESTION, seed=1)
    flaky = next(r for r in result.reviews if r.reviewer == "fake/gamma+flaky")
    assert flaky.valid and flaky.attempts == 2


async def test_chairman_failure_uses_fallback():
    c = Council.from_config(
        {
            "councils": {
                "default": {
                    "members": ["fake/alpha", "fake/beta"],
                    "chairman": "fake/chair+fail",
                    "fallback_chairman": "fake/beta",
                }
            }
        },
        store=False,
    )
    result = await c.run(QUESTION, seed=1)
    assert result.synthesis.status == "ok" and result.synthesis.fallback_used
    assert result.synthesis.chairman == "fake/beta"


async def test_no_chairman_left_is_partial_never_complete():
    c = Council.from_config(
        {"councils": {"default": {"members": ["fake/alpha", "fake/beta"], "chairman": "fake/chair+fail"}}},
        store=False,
    )
    result = await c.run(QUESTION, seed=1)
    assert result.synthesis.status == "failed"
    assert result.status == "partial"


async def test_self_review_include_and_flag():
    c = make_council(store=False, self_review="flag")
    result = await c.run(QUESTION, seed=3)
    for r in result.reviews:
        assert r.reviewer in r.display_order and r.self_reviewed
    selfs = [rec for rec in result.bias.model_dump().get("self_preference", {}) or []]
    assert isinstance(selfs, list | dict)


async def test_no_synthesis_flag():
    c = make_council(store=False)
    result = await c.run(QUESTION, seed=3, synthesis=False)
    assert result.synthesis.status == "skipped" and result.status == "complete"


async def test_candidates_are_reviewed_instead_of_answers():
    c = make_council(store=False)
    cands = [
        Candidate(id="x", text="100 degrees"),
        Candidate(id="y", text="90 degrees"),
        Candidate(id="z", text="It depends."),
    ]
    result = await c.run(QUESTION, seed=3, candidates=cands)
    assert result.members == ["x", "y", "z"]
    assert all(sorted(r.display_order) == ["x", "y", "z"] for r in result.reviews)
    assert sum(1 for call in [result.usage] for _ in [call]) == 1
    assert result.usage.calls == 4 + 1  # four reviews + synthesis, no answer calls


async def test_empty_question_rejected():
    c = make_council(store=False)
    with pytest.raises(InputError):
        await c.run("   ")


async def test_transcripts_off_keeps_no_text(council_home, monkeypatch):
    monkeypatch.setenv("COUNCIL_STORE_TRANSCRIPTS", "0")
    c = make_council()
    result = await c.run(QUESTION, seed=2)
    dump = SQLiteStore.open().db.conn.iterdump()
    text = "\n".join(dump)
    assert QUESTION not in text
    for a in result.answers:
        assert a.text[:30] not in text


async def test_hashed_queries_when_opted_in(council_home, monkeypatch):
    monkeypatch.setenv("COUNCIL_HASH_QUERIES", "1")
    c = make_council()
    result = await c.run(QUESTION, seed=2)
    hashes = {r["query_hash"] for r in SQLiteStore.open().db.query("select query_hash from bias_records")}
    assert len(hashes) == 1
    (h,) = hashes
    assert h and len(h) == 64 and QUESTION not in h
    assert result.session_id


async def test_stream_yields_events_then_result():
    c = make_council(store=False)
    kinds = []
    final = None
    async for item in c.stream(QUESTION, seed=5):
        if hasattr(item, "type"):
            kinds.append(item.type)
        else:
            final = item
    assert final is not None and final.status == "complete"
    assert kinds[0] == "session_started" and kinds[-1] == "session_finished"
    assert kinds.count("answer") == 4 and kinds.count("review") == 4


async def test_the_councils_consensus_method_orders_the_session():
    borda = await make_council(store=False).run(QUESTION, seed=7)
    copeland = await make_council(store=False, consensus="copeland").run(QUESTION, seed=7)
    assert borda.consensus.method == "borda" and copeland.consensus.method == "copeland"
    assert "Copeland" in copeland.consensus.tie_break
    # Same seed, same ballots: only the rule differs. 4 members, self excluded: each pair meets on 2 ballots.
    assert [r.ranking for r in borda.reviews] == [r.ranking for r in copeland.reviews]
    assert all(0 <= e.score <= 3 for e in copeland.consensus.ranking)


def test_the_text_output_names_the_consensus_method(tmp_path, council_home):
    from conftest import invoke_cli, write_config

    path = write_config(tmp_path / "c.toml", {}, members=MEMBERS, chairman=MEMBERS[0], consensus="copeland")
    result = invoke_cli("run", "--config", str(path), QUESTION, "--seed", "3")
    assert result.exit_code == 0, result.stderr
    assert "Consensus ranking (Copeland, pairwise majorities" in result.stdout
    plain = invoke_cli("run", "--config", str(write_config(tmp_path / "d.toml", {}, members=MEMBERS)), QUESTION)
    assert "Consensus ranking (Borda, normalised per ballot" in plain.stdout


@pytest.mark.parametrize("self_review", ["exclude", "include"])
async def test_the_agreement_tests_draws_are_made_off_the_event_loop_with_the_same_p(monkeypatch, self_review):
    # Five members' ballots are beyond the exact enumeration: 10,000 draws with numpy. The
    # session makes them in a worker thread while the calls are in flight (they depend only on
    # which answers each reviewer ranks), never on the loop between the reviews and the chairman.
    import threading

    from council.methods import concordance

    threads = []

    def draw(*args):
        threads.append(threading.current_thread())
        return concordance._draw_null(*args)

    monkeypatch.setattr(concordance, "_sampled_null", concordance._Once(draw))
    members = ["fake/alpha", "fake/beta", "fake/gamma", "fake/delta", "fake/epsilon"]
    c = make_council(members, store=False, self_review=self_review)
    result = await c.run(QUESTION, seed=5)
    await c.aclose()
    assert result.status == "complete"
    assert len(threads) == 1 and threads[0] is not threading.main_thread()  # drawn once, off the loop
    agreed = result.consensus.agreement
    assert agreed.p_method == "monte-carlo" and agreed.ballots == 5
    monkeypatch.undo()
    assert agreed == concordance.agreement([r.ranking for r in result.reviews])
    assert result.consensus.kendall_w_p_value == agreed.p_value


async def test_a_failed_review_changes_the_design_and_the_agreement_still_holds_its_ballots():
    from council.methods import concordance

    members = ["fake/alpha", "fake/beta", "fake/gamma", "fake/delta", "fake/epsilon+garbage"]
    c = make_council(members, store=False, max_review_attempts=1)
    result = await c.run(QUESTION, seed=5)
    await c.aclose()
    valid = [r.ranking for r in result.reviews if r.valid]
    assert len(valid) == 4 and result.status == "partial"
    assert result.consensus.agreement == concordance.agreement(valid)
    assert result.consensus.agreement.ballots == 4
