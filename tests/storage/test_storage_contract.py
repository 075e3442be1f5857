"""Every operation of the Store protocol, against every backend the run has.

``store_backend`` (tests/conftest.py) gives a fresh store per backend registered in
tests/storage_backends.py. These tests use only the protocol: a new backend passes them
without any code outside council/storage changing.
"""

from __future__ import annotations

import json
import math

import pytest
from fake_judges import fake_client

from council import Council
from council.accounting.usage import CallRecord
from council.bias.records import BiasRecord
from council.errors import CouncilFailure, NotFoundError, UsageError
from council.judging.batch import BatchSettings, content_digest, parse_batch, run_batch
from council.judging.engine import compare, grade
from council.storage import BiasQuery, Store, judgments

MEMBERS = ["fake/alpha", "fake/beta", "fake/gamma", "fake/delta"]


def record(session: str, reviewer: str, model: str, position: int, score: float, **extra: object) -> dict:
    return BiasRecord(
        session_id=session, reviewer_id=reviewer, model_id=model, position=position,
        response_length_chars=100 + 10 * position, response_length_words=20 + 2 * position,
        score_value=score, scale_min=1, scale_max=10,
        timestamp="2026-01-01T00:00:00Z", **extra,
    ).row()  # fmt: skip


def call(call_id: str, ok: bool = True) -> CallRecord:
    return CallRecord(call_id=call_id, stage="answer", member="m", model="fake/alpha",
                      started_at="2026-01-01T00:00:00Z", latency_ms=1.0, attempt=1, ok=ok)  # fmt: skip


def test_the_backend_implements_the_protocol(store_backend):
    assert isinstance(store_backend, Store)
    missing = [name for name in dir(Store) if not name.startswith("_") and not callable(getattr(store_backend, name))]
    assert missing == []


class _SlowWrite:
    """``store.<name>`` made 0.3 s slower (a busy or distant database), noting the thread each
    call ran on and how many times the event loop ticked meanwhile (run the session under
    ``ticking``)."""

    def __init__(self, store, name: str) -> None:
        import threading

        self.real, self.threads, self.ticks, self.ticks_during = getattr(store, name), [], [], []
        self.writing, self.first_args = threading.Event(), []
        setattr(store, name, self)

    def __call__(self, *args, **kwargs):
        import threading
        import time

        self.threads.append(threading.current_thread())
        self.first_args.append(args[0])
        self.writing.set()
        before = len(self.ticks)
        time.sleep(0.3)
        self.real(*args, **kwargs)
        self.ticks_during.append(len(self.ticks) - before)

    async def ticking(self, session):
        import asyncio

        async def ticker() -> None:
            while True:
                self.ticks.append(1)
                await asyncio.sleep(0.01)

        beside = asyncio.ensure_future(ticker())
        await asyncio.sleep(0)
        try:
            return await session
        finally:
            beside.cancel()

    async def cancel_during(self, session) -> None:
        """Run ``session``, cancel it once this write has begun, and see it raise the cancellation."""
        import asyncio

        running = asyncio.ensure_future(session)
        while not self.writing.is_set():
            await asyncio.sleep(0.01)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running


async def _complete_session_with_slow(store, name: str) -> _SlowWrite:
    """A session run on ``store`` with ``store.<name>`` made slow and the loop's ticks counted
    beside it; it ends complete. Returns the slow write, for where it ran and the ticks."""
    council = Council.from_config({"councils": {"default": {"members": MEMBERS, "chairman": MEMBERS[0]}}},
                                  store=store)  # fmt: skip
    slow = _SlowWrite(store, name)
    result = await slow.ticking(council.run("Why is the sky blue?", seed=3))
    await council.aclose()
    assert store.get_session(result.session_id)["status"] == "complete"
    return slow


async def test_a_session_is_written_from_the_stores_write_thread_and_the_event_loop_goes_on(store_backend):
    import threading

    writer = store_backend.write_thread()
    if not getattr(store_backend, "threadsafe", False):
        assert writer is None  # SQLite: one connection, written from the caller's thread
    else:  # PostgreSQL: the one thread its group commits run on, the same every time
        assert writer is not None and store_backend.write_thread() is writer
    save = await _complete_session_with_slow(store_backend, "save_session")
    if writer is None:
        assert save.threads == [threading.main_thread()]
    else:
        assert save.threads[0].name.startswith("council-group-commit")
        assert save.ticks_during[0] >= 5  # the loop ran on through the write (~30 ticks; before: 0)


async def test_a_session_starts_off_the_event_loop_on_a_store_written_from_several_threads(store_backend):
    import threading

    begin = await _complete_session_with_slow(store_backend, "begin_session")
    if not getattr(store_backend, "threadsafe", False):
        assert begin.threads == [threading.main_thread()]  # SQLite: a local write, on the loop
    else:
        assert begin.threads[0] is not threading.main_thread()
        assert begin.ticks_during[0] >= 5  # the loop ran on while the row was written (~30 ticks; before: 0)


async def test_a_session_cancelled_while_its_row_is_written_is_recorded_interrupted(postgres_url):
    from council.storage import location, open_location

    store = open_location(location.parse(postgres_url))
    council = Council.from_config({"councils": {"default": {"members": MEMBERS, "chairman": MEMBERS[0]}}},
                                  store=store)  # fmt: skip
    begin = _SlowWrite(store, "begin_session")
    await begin.cancel_during(council.run("Why is the sky blue?", seed=3))
    await council.aclose()
    [session_id] = begin.first_args
    # The row was written after all, and says how the session ended: not "running" for ever.
    row = store.get_session(session_id)
    assert row["status"] == "interrupted" and row["error"] == "interrupted"
    assert store.session_calls(session_id) == []  # no call was made
    store.close()


async def test_a_session_cancelled_during_its_final_write_is_recorded_as_it_was_written(postgres_url):
    # Only a store with a write thread (PostgreSQL) leaves the event loop free, and the session
    # cancellable, while its final write runs: on SQLite the write holds the loop.
    from council.storage import location, open_location

    store_backend = open_location(location.parse(postgres_url))
    council = Council.from_config({"councils": {"default": {"members": MEMBERS, "chairman": MEMBERS[0]}}},
                                  store=store_backend)  # fmt: skip
    save = _SlowWrite(store_backend, "save_session")
    events: list = []
    await save.cancel_during(council.run("Why is the sky blue?", seed=3, on_event=events.append))
    await council.aclose()
    [finished] = [e for e in events if e.type == "session_finished"]
    # The write was under way: it completed, and the session is on record as complete, once.
    assert finished.status == "complete"
    try:
        assert store_backend.get_session(finished.session_id)["status"] == "complete"
    finally:
        store_backend.close()


async def test_a_deadline_that_passes_during_the_final_write_leaves_the_session_complete(store_backend):
    import time

    spec = {"members": MEMBERS, "chairman": MEMBERS[0], "session_timeout": 0.6}
    council = Council.from_config({"councils": {"default": spec}}, store=store_backend)
    real = store_backend.save_session

    def slow_save(*args, **kwargs):  # begun well within the deadline, ended after it
        time.sleep(1.0)
        real(*args, **kwargs)

    store_backend.save_session = slow_save
    result = await council.run("Why is the sky blue?", seed=3)
    await council.aclose()
    assert result.status == "complete"
    assert store_backend.get_session(result.session_id)["status"] == "complete"


async def test_a_council_session_is_saved_whole_and_read_back(store_backend):
    council = Council.from_config({"councils": {"default": {"members": MEMBERS, "chairman": MEMBERS[0]}}},
                                  store=store_backend)  # fmt: skip
    result = await council.run("Why is the sky blue?", seed=3)
    await council.aclose()  # a store passed in stays open: its opener closes it
    assert result.status == "complete"
    row = store_backend.get_session(result.session_id)
    assert row["status"] == "complete" and row["council"] == "default" and row["question"] == "Why is the sky blue?"
    assert json.loads(row["members"]) == MEMBERS and json.loads(row["result"])["session_id"] == result.session_id
    assert sorted(a["member"] for a in row["answers"]) == sorted(MEMBERS)
    assert {a["text"] for a in row["answers"]} == {a.text for a in result.answers}
    assert sorted(r["reviewer"] for r in row["reviews"]) == sorted(r.reviewer for r in result.reviews)
    assert all(json.loads(r["ranking"]) for r in row["reviews"])
    assert store_backend.get_session(result.session_id[:8])["id"] == result.session_id  # a unique prefix
    calls = store_backend.session_calls(result.session_id)
    assert len(calls) == result.usage.calls > 0 and all(c["ok"] == 1 for c in calls)
    assert store_backend.count("bias_records") == sum(len(r.scores) for r in result.reviews if r.valid) > 0
    assert store_backend.count("sessions") == 1
    [listed] = store_backend.list_sessions(council="default")
    assert listed["id"] == result.session_id and "result" not in listed
    assert store_backend.list_sessions(council="other") == []
    assert [s["id"] for s in store_backend.iter_sessions()] == [result.session_id]
    assert store_backend.has_query_hashes() is False  # hashing is off by default
    assert store_backend.session_rounds(result.session_id) == {"round_answers": [], "round_reviews": []}

    # The comparisons the ballots imply: one unit (this session), over the four models.
    data = store_backend.comparisons(judgments=False)
    assert data.models == sorted(MEMBERS) and len(data.sessions) == 1 and data.judgments == []
    [(units, outcomes)] = data.sessions
    assert units == 1 and sum(outcomes.values()) > 0


async def test_a_sessions_result_is_stored_as_its_own_json_in_the_questions_own_characters(store_backend):
    council = Council.from_config({"councils": {"default": {"members": MEMBERS}}}, store=store_backend)
    question = "天空为什么是蓝色的？"
    result = await council.run(question, seed=3)
    await council.aclose()
    text = store_backend.get_session(result.session_id)["result"]
    assert question in text and "\\u" not in text  # UTF-8 as it is: half the escapes' size for CJK
    assert json.loads(text) == result.model_dump(mode="json")


def test_a_sessions_call_log_is_in_the_order_its_attempts_started(store_backend):
    """Attempts written in one transaction (a group commit; on PostgreSQL each transaction writes
    its call rows in call-id order, so that two never deadlock) still read back as they started."""
    store_backend.begin_session("cccccccc-1", council="c", created_at="2026-01-01T00:00:00.000000+00:00")
    first = call("zz-first", ok=False).model_copy(update={"started_at": "2026-01-01T00:00:01.000000+00:00"})
    retry = call("aa-retry").model_copy(update={"started_at": "2026-01-01T00:00:01.500000+00:00", "attempt": 2})
    other = call("mm-other").model_copy(update={"started_at": "2026-01-01T00:00:01.000000+00:00", "member": "n"})
    store_backend.fail_session("cccccccc-1", status="failed", error="boom", calls=[retry, other, first])
    started = [(c["started_at"][17:], c["attempt"]) for c in store_backend.session_calls("cccccccc-1")]
    assert started == [("01.000000+00:00", 1), ("01.000000+00:00", 1), ("01.500000+00:00", 2)]


def test_sessions_begin_fail_and_are_found_by_id_or_prefix_only(store_backend):
    store_backend.begin_session("aaaaaaaa-1", council="c1", question="q?", query_hash="h" * 64, seed=1, offline=True,
                                members=["m1"], created_at="2026-01-01T00:00:00.000000+00:00")  # fmt: skip
    store_backend.begin_session("aaaaaaab-2", council="c2", created_at="2026-02-01T00:00:00.000000+00:00")
    assert store_backend.get_session("aaaaaaaa-1")["status"] == "running"
    store_backend.fail_session("aaaaaaaa-1", status="failed", error="boom", calls=[call("c-1", ok=False)])
    row = store_backend.get_session("aaaaaaaa")
    assert (row["status"], row["error"], row["result"]) == ("failed", "boom", None) and row["finished_at"]
    assert [c["call_id"] for c in store_backend.session_calls("aaaaaaaa-1")] == ["c-1"]
    assert store_backend.has_query_hashes() is True
    with pytest.raises(NotFoundError):
        store_backend.get_session("aaaaaaa")  # too short, and matches both
    with pytest.raises(NotFoundError):
        store_backend.get_session("aaaaaaa%")  # a prefix is text, never a pattern
    assert [s["id"] for s in store_backend.list_sessions()] == ["aaaaaaab-2", "aaaaaaaa-1"]  # newest first
    assert [s["id"] for s in store_backend.list_sessions(limit=1)] == ["aaaaaaab-2"]
    assert [s["id"] for s in store_backend.list_sessions(since="2026-01-15")] == ["aaaaaaab-2"]
    assert [s["id"] for s in store_backend.iter_sessions(since="2026-01-15")] == ["aaaaaaab-2"]


def test_session_events_are_appended_once_and_read_in_order_after_an_id(store_backend):
    store_backend.begin_session("ev-1", council="c", question="Why Is The Sky Blue?")
    events = [{"seq": n, "type": "stage", "detail": f"step {n}"} for n in (1, 2, 3)]
    store_backend.append_events("ev-1", events[:2])
    store_backend.append_events("ev-1", events[1:])  # a retried batch: seq 2 is not written twice
    rows = store_backend.events_after("ev-1")
    assert [(seq, kind) for seq, kind, _ in rows] == [(1, "stage"), (2, "stage"), (3, "stage")]
    assert json.loads(rows[2][2])["detail"] == "step 3"
    assert [seq for seq, _, _ in store_backend.events_after("ev-1", after=1, limit=1)] == [2]
    assert store_backend.events_after("no-such-session") == []
    assert [r["id"] for r in store_backend.list_sessions(search="sky BLUE")] == ["ev-1"]
    assert store_backend.list_sessions(search="%") == []  # literal text, never a pattern


def test_the_call_journal_writes_calls_as_they_start_and_finish(store_backend):
    journal = store_backend.journal("run-1")
    journal.call_started(call("c-9"))
    [started] = store_backend.session_calls("run-1")
    assert started["ok"] is None and started["latency_ms"] is None
    journal.call_finished(call("c-9"))
    [finished] = store_backend.session_calls("run-1")
    assert finished["ok"] == 1 and finished["latency_ms"] == 1.0
    assert store_backend.recover_interrupted() == []  # this process is alive: nothing to recover


def test_a_store_recovering_while_open_finds_a_dead_owners_work_at_its_next_heartbeat(store_backend, monkeypatch):
    from mock_server import wait_for

    monkeypatch.setenv("COUNCIL_LEASE_SECONDS", "0.5")  # this process's lease, taken by its first session
    store_backend.begin_session("s-mine-0001", council="default")
    store_backend.begin_session("s-theirs-01", council="default")
    store_backend.recover_while_open()
    with store_backend.immediate() as db:  # as a process that died left it, once open: its lease gone
        db.execute("UPDATE sessions SET owner = 'f00d' WHERE id = 's-theirs-01'")
    # Nothing asks: the heartbeat finds it.
    assert wait_for(lambda: store_backend.get_session("s-theirs-01")["status"] == "interrupted", timeout=30)
    assert store_backend.get_session("s-mine-0001")["status"] == "running"


async def test_the_journal_leaves_its_rows_to_a_write_that_is_on_its_way(store_backend):
    """While a write is expected (a worker recording the items that finished in this turn), the
    call-log rows of the turn wait for it instead of taking a transaction of their own; once it is
    done, any left are committed at the end of the turn as usual."""
    import asyncio

    writes: list[str] = []
    real = store_backend._flush_now

    def flush() -> None:
        writes.append("own")
        real()

    store_backend._flush_now = flush  # a group commit's own transaction, on any thread
    done = store_backend.expect_write()
    store_backend.journal("run-w").call_started(call("w-1"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the end of the turn passed: the row still waits
    assert writes == [] and store_backend.session_calls("run-w") == []
    store_backend.open_batch("bw", source="w.jsonl", content_sha256="f", settings={}, items=0)  # the write
    assert [c["call_id"] for c in store_backend.session_calls("run-w")] == ["w-1"]  # carried by it
    done()
    store_backend.journal("run-w").call_finished(call("w-1"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    store_backend.wait_group_commit()  # on PostgreSQL the group commit runs in a thread of its own
    assert writes == ["own"] and store_backend.session_calls("run-w")[0]["ok"] == 1
    # A write expected, then done without writing: what waited is committed at the end of the turn.
    done = store_backend.expect_write()
    store_backend.journal("run-w").call_started(call("w-2"))
    await asyncio.sleep(0)
    done()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    store_backend.wait_group_commit()
    assert sorted(c["call_id"] for c in store_backend.session_calls("run-w")) == ["w-1", "w-2"]


def test_a_call_started_row_written_late_never_undoes_its_finished_row(store_backend):
    # Group commits on several threads may land a call's started row after its finished one.
    journal = store_backend.journal("run-2")
    journal.call_finished(call("c-8"))
    journal.call_started(call("c-8"))
    [row] = store_backend.session_calls("run-2")
    assert row["ok"] == 1 and row["latency_ms"] == 1.0


def test_bias_records_are_inserted_exported_and_summed(store_backend):
    rows = [record(f"s{s}", f"r{r}", f"m{m}", (m + r) % 3, 1 + (s + 2 * m + r) % 10) for s in range(4)
            for r in range(3) for m in range(3)]  # fmt: skip
    assert store_backend.insert_bias_records(rows) == len(rows) == store_backend.count("bias_records")
    fields = ("session_id", "reviewer_id", "score_value")
    exported = list(store_backend.bias_record_rows(fields))
    assert exported == [tuple(r[f] for f in fields) for r in rows]  # insertion order
    assert list(store_backend.bias_record_rows(fields, since="2027-01-01T00:00:00.000000+00:00")) == []

    sums = store_backend.bias_sums(BiasQuery())
    assert not sums.bad and not sums.normalized and sums.scales == [(1, 10)]
    for reviewer in ("r0", "r1", "r2"):
        scores = [r["score_value"] for r in rows if r["reviewer_id"] == reviewer]
        n, total, total_sq = sums.reviewers[reviewer]
        assert (n, total) == (len(scores), sum(scores)) and math.isclose(total_sq, sum(x * x for x in scores))
    assert sorted(sums.positions) == [0, 1, 2] and sum(g[0] for g in sums.positions.values()) == len(rows)
    assert sums.orderings == 12 and len(sums.sessions) == 4  # 4 sessions × 3 reviewers; 4 sessions
    assert all(answered == 3 and records == 9 for answered, records, *_ in sums.sessions)
    assert list(sums.positions) == [0, 1, 2]  # ascending: the report lists them in this order
    assert sums.points == []
    points = store_backend.bias_sums(BiasQuery(max_points=4)).points
    # The first answers in (session, model) order, s0's m0, m1, m2 then s1's m0: (mean length in
    # words, mean score). Each answer is seen at every position once, so its mean length is 22.
    assert points == [(22.0, 2.0), (22.0, 4.0), (22.0, 6.0), (22.0, 3.0)]
    only = store_backend.bias_sums(BiasQuery(reviewers=("r1",)))
    assert only.reviewers == sums.reviewers  # the calibration baseline keeps every reviewer
    assert sum(g[0] for g in only.positions.values()) == len(rows) // 3
    assert store_backend.bias_sums(BiasQuery(council="nowhere")).reviewers == {}


def test_lengths_fall_back_to_characters_only_when_no_record_has_words(store_backend):
    rows = [{**record(f"s{s}", "r1", f"m{m}", m, 2 + m + s), "response_length_words": None}
            for s in range(2) for m in range(3)]  # fmt: skip
    store_backend.insert_bias_records(rows)
    assert store_backend.bias_sums(BiasQuery()).length_unit == "chars"
    assert store_backend.bias_sums(BiasQuery(length_unit="words")).length_unit == "words"  # asked: kept
    assert all(n == 0 for _, _, n, *_ in store_backend.bias_sums(BiasQuery(length_unit="words")).sessions)
    assert all(n == 3 for _, _, n, *_ in store_backend.bias_sums(BiasQuery()).sessions)


def test_bad_reviews_are_found_and_left_out_only_when_asked(store_backend):
    good = [record("s1", "r1", f"m{i}", i, 5 + i) for i in range(3)]
    clash = [record("s2", "r1", f"m{i}", 0, 5) for i in range(2)]  # two answers at one position
    store_backend.insert_bias_records(good + clash)
    stopped = store_backend.bias_sums(BiasQuery())
    assert stopped.bad.reviews == [("s2", "r1")] and stopped.reviewers == {}  # the report stops there
    assert sorted(p for p, _ in stopped.bad.review_positions[("s2", "r1")]) == [0, 0]
    skipped = store_backend.bias_sums(BiasQuery(skip_bad=True))
    assert skipped.skipped_records == 2 and skipped.reviewers["r1"][0] == 3 and skipped.orderings == 1


def test_a_temporary_store_loads_records_with_and_without_scores(store_backend):
    scored = [{"id": i + 1, **record("s1", "r1", f"m{i}", i, 4 + i)} for i in range(2)]
    unscored = [{"id": -1, "session_id": "s1", "reviewer_id": "r1", "position": 2,
                 "timestamp": "2026-01-01T00:00:00.000000+00:00", "council": None}]  # fmt: skip
    store_backend.load_bias_records(scored, [])
    store_backend.load_bias_records((), unscored)
    sums = store_backend.bias_sums(BiasQuery())
    assert sums.unscored == 1 and sums.reviewers["r1"][0] == 2
    assert sums.orderings == 1 and sums.left_out == 1  # the unscored answer holds position 2: no top test


async def test_judgments_are_saved_with_passes_and_calls_and_audited(store_backend):
    answer = "A long, careful answer."
    outcome = await compare("Which is better?", answer, "B.", judges=[fake_client()], store=store_backend)
    run = store_backend.judgment_run(outcome.run_id)
    assert run is not None and run["kind"] == "compare" and run["status"] == "ok" and run["winner"] == outcome.winner
    assert run["result"]["run_id"] == outcome.run_id
    passes = store_backend.judgment_passes(outcome.run_id)
    assert [p["pass"] for p in passes] == [p.pass_number for p in outcome.passes] and passes[0]["output"] is not None
    assert len(store_backend.session_calls(outcome.run_id)) == outcome.calls
    [audit] = store_backend.position_audit()
    assert audit["judge_model"] == "fake/j" and audit["pairs"] >= 1 and 0 <= audit["consistency_rate"] <= 1
    assert store_backend.position_audit(judge_model="fake/other") == []
    assert store_backend.judgment_run("no-such-run") is None and store_backend.judgment_passes("no-such-run") == []

    private = await grade("Capital?", "Paris", judges=[fake_client()], store=store_backend, keep_text=False)
    stored = store_backend.judgment_run(private.run_id)
    assert stored["kind"] == "grade" and all(p["output"] is None for p in store_backend.judgment_passes(private.run_id))


async def test_a_batchs_passes_and_answer_lengths_are_read_for_its_jury(store_backend):
    # Two judges, one position-biased: every judge's verdict in each order is on record, and each
    # row says how long its two answers are (the panel's length preference).
    lines = [{"id": f"i{i}", "prompt": f"Q{i}?", "a": "A" * (3 + i), "b": "B" * (5 - i)} for i in range(3)]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    items = parse_batch(text, "p.jsonl")
    settings = BatchSettings(judges=["fake/x", "fake/y+first"])
    judges = [fake_client("fake/x"), fake_client("fake/y+first")]
    await run_batch(items, settings=settings, judges=judges, batch_id="p", source="p.jsonl",
                    content_sha256=content_digest(text), store=store_backend)  # fmt: skip
    rows = list(store_backend.batch_rows("p"))
    assert [(r["length_a"], r["length_b"]) for r in rows] == [(3, 5), (4, 4), (5, 3)]
    expected = [
        (r["item_id"], p["judge"], p["vote"], p["shown_first"], p["winner"])
        for r in rows
        for p in r["result"]["passes"]
        if p["valid"]
    ]
    read = [
        (p["item_id"], p["judge"], p["vote"], p["shown_first"], p["winner"]) for p in store_backend.batch_passes("p")
    ]
    assert sorted(read) == sorted(expected) and len(read) == 12  # 3 items, 2 judges, 2 orders
    assert {(p[1], p[3], p[4]) for p in read if p[1] == "fake/y+first"} == {("fake/y+first", "A", "A"),
                                                                              ("fake/y+first", "B", "B")}
    assert list(store_backend.batch_passes("no-such-batch")) == []


async def test_a_batch_is_opened_recorded_once_and_read_in_file_order(store_backend, tmp_path, monkeypatch):
    lines = [{"id": f"i{i}", "prompt": f"Q{i}?", "a": f"A {i}, in detail.", "b": f"B{i}.", "model_a": "fake/x",
              "model_b": "fake/y", "label": "A"} for i in range(3)]  # fmt: skip
    text = "".join(json.dumps(line) + "\n" for line in lines)
    items = parse_batch(text, "b.jsonl")
    settings = BatchSettings(judges=["fake/j"])
    common = {"settings": settings, "batch_id": "b1", "source": "b.jsonl", "content_sha256": content_digest(text)}
    summary = await run_batch(items, judges=[fake_client()], store=store_backend, **common)
    assert summary.finished == 3
    assert store_backend.batch_item_status("b1") == {"i0": "ok", "i1": "ok", "i2": "ok"}
    rows = list(store_backend.batch_rows("b1"))
    assert [r["item_id"] for r in rows] == ["i0", "i1", "i2"] and all(r["passes"] for r in rows)
    assert [r["position"] for r in rows] == sorted(r["position"] for r in rows)
    for page in (1, 2):  # read a page at a time: the same rows, each with its own passes
        monkeypatch.setattr(judgments, "BATCH_PAGE", page)
        assert list(store_backend.batch_rows("b1")) == rows
    # Opening it again: the same file and settings are accepted, others refused.
    assert store_backend.open_batch("b1", source="b.jsonl", content_sha256=common["content_sha256"],
                                    settings=settings.model_dump(mode="json"), items=3) is True  # fmt: skip
    with pytest.raises(UsageError):
        store_backend.open_batch("b1", source="b.jsonl", content_sha256="0" * 64, settings={}, items=3)
    # A finished item is never recorded twice.
    outcome = await compare("Q0?", "a", "b", judges=[fake_client()], store=None)
    with pytest.raises(CouncilFailure):
        store_backend.save_judgment("compare", outcome, [], keep_text=True, batch_id="b1", item=items[0])
    # Judged pairs that name their models count on the leaderboard.
    data = store_backend.comparisons(sessions=False)
    assert data.models == ["fake/x", "fake/y"] and sum(units for units, _ in data.judgments) == 3
    assert store_backend.comparisons(since="2999-01-01T00:00:00.000000+00:00").judgments == []


async def test_judged_pairs_keep_their_answers_lengths_and_markdown_counts(store_backend):
    from council.methods.style_counts import answer_style

    a_text = "# Plan\n\n- **one**\n- two\n1. three"
    lines = [{"id": "s0", "prompt": "Q?", "a": a_text, "b": "Just one line.", "model_a": "fake/x", "model_b": "fake/y"},
             {"id": "s1", "prompt": "Q?", "a": "é" * 7, "b": "__b__", "model_a": "fake/y", "model_b": "fake/z"},
             {"id": "s2", "prompt": "Q?", "response": "graded"}]  # fmt: skip
    text = "".join(json.dumps(line) + "\n" for line in lines)
    items = parse_batch(text, "s.jsonl")
    common = {"batch_id": "bs", "source": "s.jsonl", "content_sha256": content_digest(text)}
    summary = await run_batch(items, settings=BatchSettings(judges=["fake/j"]), judges=[fake_client()],
                              store=store_backend, keep_text=False, **common)  # fmt: skip
    assert summary.finished == 3
    pairs = list(store_backend.judged_pairs())
    assert [(p["model_a"], p["model_b"]) for p in pairs] == [("fake/x", "fake/y"), ("fake/y", "fake/z")]
    first, second = pairs
    assert first["winner"] in ("A", "B", "TIE") and first["run_id"] and first["created_at"]
    # the one definition of length and markdown counts, the judgments files' (docs/methods.md, "Style control")
    assert (first["length_a"], first["markdown_a"]) == answer_style(a_text)
    assert first["markdown_a"] == {"headers": 1, "lists": 3, "bold": 1} and first["length_a"] == len(a_text)
    assert (second["length_a"], second["markdown_b"]) == (7, {"headers": 0, "lists": 0, "bold": 1})
    assert list(store_backend.judged_pairs(since="2999-01-01T00:00:00.000000+00:00")) == []


@pytest.mark.parametrize("hashing", [True, False])
async def test_judged_pairs_carry_the_prompts_salted_hash_only_when_queries_are_hashed(
    store_backend, council_home, monkeypatch, hashing
):
    """prompt_id (m018) is the bias records' query hash of the prompt (docs/methods.md,
    "Length-controlled win rate"); with hashing off it stays NULL: no unsalted digest, no text."""
    from council.bias.records import QueryHasher

    monkeypatch.setenv("COUNCIL_HASH_QUERIES", "1" if hashing else "0")
    lines = [{"id": f"h{i}", "prompt": ("Same?", "Same?", "Other?")[i], "a": "a" * (i + 1), "b": "b",
              "model_a": "fake/x", "model_b": "fake/y"} for i in range(3)]  # fmt: skip
    text = "".join(json.dumps(line) + "\n" for line in lines)
    await run_batch(parse_batch(text, "h.jsonl"), settings=BatchSettings(judges=["fake/j"]), judges=[fake_client()],
                    store=store_backend, keep_text=False, batch_id="bh", source="h.jsonl",
                    content_sha256=content_digest(text))  # fmt: skip
    ids = [p["prompt_id"] for p in store_backend.judged_pairs()]
    # a lost salt is warned about when prompt ids made with it are on record, as for sessions' hashes
    assert store_backend.has_query_hashes() is hashing
    if not hashing:
        assert ids == [None, None, None]
        return
    expected = QueryHasher(council_home).hash("Same?")
    assert sorted(ids) == sorted([expected, expected, QueryHasher(council_home).hash("Other?")])
    assert len(set(ids)) == 2 and all(len(i) == 64 for i in ids)


def queued(i: int, text: str = "") -> dict:
    item = {"id": f"q{i}", "mode": "pairwise", "line": i + 1, "prompt": f"Q{i}?{text}", "a": "yes", "b": "no"}
    return {"item_id": f"q{i}", "position": i + 1, "digest": f"d{i}{text}", "item": item}


def test_the_batch_queue_hands_each_item_to_one_worker_under_a_lease(store_backend):
    import time

    store = store_backend
    assert abs(store.clock() - time.time()) < 60  # the database's clock on PostgreSQL
    settings = BatchSettings(judges=["fake/j"]).model_dump(mode="json")
    common = {"source": "q.jsonl", "content_sha256": "c1", "settings": settings, "spec": {"judges": ["fake/j"]}}
    counts = store.enqueue_batch("qb", items=[queued(i) for i in range(4)], **common)
    assert counts == {"new": 4, "changed": 0, "unchanged": 0, "retried": 0, "removed": 0}
    assert store.batch_spec("qb") == {"judges": ["fake/j"]} and store.batch_spec("nope") is None
    assert store.batch_status("nope") is None
    first = store.claim_items("w1", batch_id="qb", limit=2, lease_seconds=60)
    second = store.claim_items("w2", limit=5, lease_seconds=60)
    assert [r["item_id"] for r in first] == ["q0", "q1"] and [r["item_id"] for r in second] == ["q2", "q3"]
    assert first[0]["item"]["prompt"] == "Q0?" and first[0]["batch_id"] == "qb" and first[0]["digest"] == "d0"
    assert store.claim_items("w3", batch_id="qb", lease_seconds=60) == []
    status = store.batch_status("qb")
    assert status == {"batch_id": "qb", "items": 4, "queued": 0, "running": 4, "done": 0, "failed": 0,
                      "cost_usd": 0.0}  # fmt: skip
    assert store.renew_claims("w1", lease_seconds=60) == 2 and store.renew_claims("nobody", lease_seconds=60) == 0
    # What a worker holds, read back as its claim returned it (a claim's reply lost in an outage).
    assert store.claims_of("w1") == first and store.claims_of("w2") == second and store.claims_of("nobody") == []
    assert store.release_claims("w2") == 2 and store.batch_status("qb")["queued"] == 2
    # A claim whose lease has passed (its worker died) is queued again, and taken by another worker.
    assert len(store.claim_items("w4", batch_id="qb", limit=2, lease_seconds=-1)) == 2
    assert store.batch_status("qb")["queued"] == 2
    assert sorted(r["item_id"] for r in store.claim_items("w5", batch_id="qb", limit=9, lease_seconds=60)) == [
        "q2", "q3"]  # fmt: skip
    # The file changed under the same id: items matched by id and content.
    again = store.enqueue_batch("qb", items=[queued(0), queued(1, " edited"), queued(4)], **common)
    assert again == {"new": 1, "changed": 1, "unchanged": 1, "retried": 0, "removed": 2}
    assert store.batch_status("qb")["items"] == 3
    with pytest.raises(UsageError, match="different settings"):
        store.enqueue_batch("qb", items=[queued(0)], **{**common, "settings": {**settings, "votes": 3}})


class _CountedStatements:
    """A write transaction's connection seen through a counter of the statements sent (a
    ``db.conn.executemany`` counts once: on PostgreSQL it is one pipeline, not a round trip a row)."""

    def __init__(self, db, counts):
        self._db, self._counts = db, counts

    def __getattr__(self, name):
        attribute = getattr(self._db, name)
        if name in ("execute", "executemany", "query"):

            def counted(*args, **kwargs):
                self._counts.append(name)
                return attribute(*args, **kwargs)

            return counted
        return attribute

    def __getitem__(self, table):
        self._counts.append("table")
        return self._db[table]

    @property
    def conn(self):
        return _CountedStatements(self._db.conn, self._counts)


def test_queueing_and_matching_a_batch_costs_the_same_statements_for_5_or_60_items(store_backend, monkeypatch):
    # A statement per item was a round trip per item on PostgreSQL: 10,000 items took 1.5-2 s
    # to queue and 1.4 s more to match again when the batch was resumed.
    from contextlib import contextmanager

    settings = BatchSettings(judges=["fake/j"]).model_dump(mode="json")
    common = {"source": "c.jsonl", "content_sha256": "c1", "settings": settings, "spec": {"judges": ["fake/j"]}}
    immediate = store_backend.immediate
    counts: list[str] = []

    @contextmanager
    def counted_immediate():
        with immediate() as db:
            yield _CountedStatements(db, counts)

    monkeypatch.setattr(store_backend, "immediate", counted_immediate)
    spent = {}
    for n in (5, 60):
        batch = f"cb{n}"
        # New items, then: some edited, some gone, a new one, the rest unchanged (every statement kind).
        for items in ([queued(i) for i in range(n)], [queued(0, " edited"), *[queued(i) for i in range(2, n + 1)]]):
            del counts[:]
            store_backend.enqueue_batch(batch, items=items, **common)
            spent.setdefault(n, []).append(len(counts))
        # Recorded items matched with the file again (a resumed batch): one statement per kind too.
        for item in store_backend.claim_items("w", batch_id=batch, limit=n + 1, lease_seconds=60):
            store_backend.db.execute(
                "INSERT INTO batch_items (batch_id, item_id, position, mode, status, content_sha256)"
                " VALUES (?, ?, ?, 'pairwise', 'failed', ?)",
                [batch, item["item_id"], 1, item["digest"]],
            )
        del counts[:]
        store_backend.enqueue_batch(batch, items=[queued(i) for i in range(1, n + 2)], **common)
        spent[n].append(len(counts))
    assert spent[5] == spent[60], spent
    assert max(spent[60]) <= 12, spent


def test_claims_take_the_batchs_items_in_file_order_whether_queued_or_back_from_a_passed_lease(store_backend):
    settings = BatchSettings(judges=["fake/j"]).model_dump(mode="json")
    common = {"source": "o.jsonl", "content_sha256": "c1", "settings": settings, "spec": {"judges": ["fake/j"]}}
    store_backend.enqueue_batch("ob", items=[queued(i) for i in range(6)], **common)
    store_backend.enqueue_batch("oa", items=[queued(i) for i in range(2)], **common)  # another batch, first by id
    # q1 and q3 held by a worker that died (their leases passed), q0 by a live one.
    [first] = store_backend.claim_items("live", batch_id="ob", lease_seconds=60)
    assert first["item_id"] == "q0"
    assert [r["item_id"] for r in store_backend.claim_items("dead", batch_id="ob", limit=3, lease_seconds=-1)] == [
        "q1", "q2", "q3"]  # fmt: skip
    store_backend.release_claims("nobody")
    taken = store_backend.claim_items("w", batch_id="ob", limit=4, lease_seconds=60)
    assert [r["item_id"] for r in taken] == ["q1", "q2", "q3", "q4"]
    assert [r["item_id"] for r in store_backend.claim_items("w", batch_id="ob", limit=4, lease_seconds=60)] == ["q5"]
    assert [(r["batch_id"], r["item_id"]) for r in store_backend.claim_items("w", limit=9, lease_seconds=60)] == [
        ("oa", "q0"), ("oa", "q1")]  # fmt: skip


async def test_a_queued_item_is_recorded_once_and_marked_done(store_backend, tmp_path):
    from council.judging.worker import enqueue

    text = '{"id": "x", "prompt": "Q?", "a": "A.", "b": "B."}\n'
    items = parse_batch(text, "x.jsonl")
    settings = BatchSettings(judges=["fake/j"])
    enqueue(store_backend, items, batch_id="xb", settings=settings, judges=[fake_client()], rubrics={},
            source="x.jsonl", content_sha256=content_digest(text))  # fmt: skip
    [claimed] = store_backend.claim_items("w", batch_id="xb", lease_seconds=60)
    outcome = await compare("Q?", "A.", "B.", judges=[fake_client()], store=None)
    store_backend.save_judgment("compare", outcome, [], keep_text=False, batch_id="xb", item=items[0],
                                item_digest=claimed["digest"])  # fmt: skip
    status = store_backend.batch_status("xb")
    assert status["done"] == 1 and status["running"] == 0 and claimed["item_id"] == "x"
    late = await compare("Q?", "A.", "B.", judges=[fake_client()], store=None)
    with pytest.raises(CouncilFailure, match="already recorded"):  # a second worker's late result
        store_backend.save_judgment("compare", late, [], keep_text=False, batch_id="xb", item=items[0])
    assert store_backend.batch_status("xb")["done"] == 1


async def test_an_items_result_replaces_a_failed_one_and_never_a_finished_or_changed_one(store_backend):
    """The queue's item and the result are written together: a failed result is replaced by a later
    one (its run stays on record), a finished one is never replaced, and a result judged from content
    the queue no longer holds is dropped whole: none of its rows are written."""
    from council.judging.worker import enqueue

    text = '{"id": "x", "prompt": "Q?", "a": "A.", "b": "B."}\n'
    [item] = parse_batch(text, "x.jsonl")
    enqueue(store_backend, [item], batch_id="fb", settings=BatchSettings(judges=["fake/j"]), judges=[fake_client()],
            rubrics={}, source="x.jsonl", content_sha256=content_digest(text))  # fmt: skip
    [claimed] = store_backend.claim_items("w", batch_id="fb", lease_seconds=60)
    judged = await compare("Q?", "A.", "B.", judges=[fake_client()], store=None)
    failed = judged.model_copy(update={"run_id": "run-failed", "success": False, "error": "provider error: down"})
    save = {"keep_text": True, "batch_id": "fb", "item": item}
    store_backend.save_judgment("compare", failed, [call("f1", ok=False)], item_digest=claimed["digest"], **save)
    assert store_backend.batch_item_status("fb") == {"x": "failed"}
    assert store_backend.batch_status("fb")["failed"] == 1
    # A result judged from other content than the queue holds now: nothing of it is written.
    stale = judged.model_copy(update={"run_id": "run-stale"})
    with pytest.raises(CouncilFailure, match="changed in the queue"):
        store_backend.save_judgment("compare", stale, [call("s1")], item_digest="another-digest", **save)
    assert store_backend.judgment_run("run-stale") is None and store_backend.session_calls("run-stale") == []
    assert store_backend.batch_item_status("fb") == {"x": "failed"}
    # The failed result is replaced; its run stays on record.
    store_backend.save_judgment("compare", judged, [call("ok1")], item_digest=claimed["digest"], **save)
    [row] = store_backend.batch_rows("fb")
    assert (row["status"], row["run_id"], row["winner"]) == ("ok", judged.run_id, judged.winner)
    assert store_backend.judgment_run("run-failed")["status"] == "failed"
    assert [c["call_id"] for c in store_backend.session_calls(judged.run_id)] == ["ok1"]
    assert store_backend.batch_status("fb")["done"] == 1
    # A finished result is never replaced, and the late one leaves nothing behind.
    late = judged.model_copy(update={"run_id": "run-late"})
    with pytest.raises(CouncilFailure, match="already recorded"):
        store_backend.save_judgment("compare", late, [call("l1")], item_digest=claimed["digest"], **save)
    assert store_backend.judgment_run("run-late") is None and store_backend.session_calls("run-late") == []
    assert next(store_backend.batch_rows("fb"))["run_id"] == judged.run_id


async def test_finished_items_are_recorded_with_the_next_claims_in_one_call(store_backend):
    """A worker records the items it finished together and claims as many more in one transaction;
    an item that cannot be recorded is reported and the others are recorded all the same."""
    import dataclasses

    from council.judging.batch_items import item_digest
    from council.judging.worker import enqueue
    from council.storage import JudgmentSave

    text = "".join(json.dumps({"id": f"r{i}", "prompt": f"Q{i}?", "a": "A.", "b": "B."}) + "\n" for i in range(5))
    items = parse_batch(text, "r.jsonl")
    enqueue(store_backend, items, batch_id="rb", settings=BatchSettings(judges=["fake/j"]), judges=[fake_client()],
            rubrics={}, source="r.jsonl", content_sha256=content_digest(text))  # fmt: skip
    held = store_backend.claim_items("w", batch_id="rb", limit=3, lease_seconds=60)
    assert [r["item_id"] for r in held] == ["r0", "r1", "r2"]
    digests = {r["item_id"]: r["digest"] for r in held}

    async def judged(i: int) -> JudgmentSave:
        outcome = await compare(f"Q{i}?", "A.", "B.", judges=[fake_client()], store=None)
        return JudgmentSave("compare", outcome, [call(f"c{i}")], keep_text=True, batch_id="rb", item=items[i],
                            item_digest=digests.get(f"r{i}", "stale"))  # fmt: skip

    first, second = await judged(0), await judged(1)
    results, claimed = store_backend.record_and_claim([first, second], "w", batch_id="rb", limit=2,
                                                      lease_seconds=60)  # fmt: skip
    assert results == [None, None] and [r["item_id"] for r in claimed] == ["r3", "r4"]
    assert claimed[0]["item"]["prompt"] == "Q3?" and claimed[0]["digest"] == item_digest(items[3])
    assert store_backend.batch_item_status("rb") == {"r0": "ok", "r1": "ok"}
    assert store_backend.batch_status("rb") | {"cost_usd": None} == {
        "batch_id": "rb", "items": 5, "queued": 0, "running": 3, "done": 2, "failed": 0, "cost_usd": None}  # fmt: skip
    assert [c["call_id"] for c in store_backend.session_calls(first.outcome.run_id)] == ["c0"]
    # r0 again (already recorded), r2 (recorded), r3 judged from content no longer queued:
    again, third, stale = await judged(0), await judged(2), await judged(3)
    stale = dataclasses.replace(stale, item_digest="stale")
    results, claimed = store_backend.record_and_claim([again, third, stale], "w", batch_id="rb", limit=3,
                                                      lease_seconds=60)  # fmt: skip
    assert claimed == []  # nothing left to claim
    assert results[1] is None and all(isinstance(r, CouncilFailure) for r in (results[0], results[2]))
    assert "already recorded" in str(results[0]) and "changed in the queue" in str(results[2])
    assert store_backend.batch_item_status("rb") == {"r0": "ok", "r1": "ok", "r2": "ok"}
    assert store_backend.judgment_run(again.outcome.run_id) is None and store_backend.session_calls("c3") == []
    assert store_backend.judgment_run(stale.outcome.run_id) is None
    # Which saves a write recorded, by their runs' ids (a write whose reply was lost in an outage).
    ids = [first.outcome.run_id, again.outcome.run_id, third.outcome.run_id, "no-such-run"]
    assert store_backend.runs_recorded(ids) == {first.outcome.run_id, third.outcome.run_id}
    assert store_backend.runs_recorded([]) == set()
    # Nothing to record: a claim alone.
    assert store_backend.record_and_claim([], "w2", batch_id="rb", limit=1, lease_seconds=60) == ([], [])


def test_an_edited_batch_file_is_reconciled_item_by_item(store_backend):
    settings = {"judges": ["fake/j"]}
    assert store_backend.batch_exists("b2") is False
    store_backend.open_batch("b2", source="/data/b.jsonl", content_sha256="f1", settings=settings, items=0)
    assert store_backend.batch_exists("b2") is True
    assert store_backend.find_batch("/data/b.jsonl", settings) == "b2"
    assert store_backend.find_batch("/data/b.jsonl", {"judges": ["other"]}) is None
    assert store_backend.find_batch("/elsewhere.jsonl", settings) is None
    # Nothing recorded yet: nothing changed or removed.
    assert store_backend.reconcile_batch_items("b2", {"i0": ("d0", 1)}, content_sha256="f2") == (0, 0)
    # The batches opened (council export --judgments), oldest first; none after a date to come.
    store_backend.open_batch("b1", source="/data/a.jsonl", content_sha256="f1", settings=settings, items=0)
    assert store_backend.batch_ids() == ["b2", "b1"] or store_backend.batch_ids() == ["b1", "b2"]
    assert store_backend.batch_ids(since="2000-01-01") == store_backend.batch_ids()
    assert store_backend.batch_ids(since="9999-01-01") == []


async def test_judged_batch_items_keep_their_digest_and_follow_the_file(store_backend):
    lines = [{"id": f"i{i}", "prompt": f"Q{i}?", "a": f"A {i}.", "b": f"B {i}."} for i in range(3)]
    items = parse_batch("".join(json.dumps(line) + "\n" for line in lines), "b.jsonl")
    store_backend.open_batch("b3", source="b.jsonl", content_sha256="f1", settings={}, items=3)
    for item in items:
        outcome = await compare(item.prompt, item.a, item.b, judges=[fake_client()], store=None)
        store_backend.save_judgment("compare", outcome, [], keep_text=True, batch_id="b3", item=item,
                                    item_digest=f"d-{item.id}")  # fmt: skip
    assert store_backend.batch_item_status("b3") == {"i0": "ok", "i1": "ok", "i2": "ok"}
    # i0 unchanged (moved to line 9), i1 edited, i2 gone from the file.
    now = {"i0": ("d-i0", 9), "i1": ("d-i1-edited", 2)}
    assert store_backend.reconcile_batch_items("b3", now, content_sha256="f2") == (1, 1)
    assert store_backend.batch_item_status("b3") == {"i0": "ok"}
    [row] = store_backend.batch_rows("b3")
    assert (row["item_id"], row["position"]) == ("i0", 9)


def test_settings_are_swapped_and_the_old_value_returned(store_backend):
    assert store_backend.swap_setting("salt_fingerprint", "one") is None
    assert store_backend.swap_setting("salt_fingerprint", "two") == "one"
    assert store_backend.swap_setting("salt_fingerprint", "two") == "two"




async def test_a_budget_is_capped_reserved_settled_and_counts_a_batch_spending(store_backend):
    assert store_backend.open_budget("batch:x", cap_usd=None) is None  # no budget yet
    assert store_backend.open_budget("batch:x", cap_usd=1.0, spent_usd=0.25) == 1.0
    token, spent, cap = store_backend.reserve_budget("batch:x", 0.5)
    assert token is not None and (spent, cap) == (0.25, 1.0)
    assert store_backend.reserve_budget("batch:x", 0.5)[0] is None  # 0.25 spent + 0.5 reserved + 0.5 > 1
    # A reservation shrunk holds less; it never grows by it.
    held, _, _ = store_backend.reserve_budget("batch:x", 0.25)  # 0.25 + 0.5 + 0.25: full
    store_backend.shrink_budget("batch:x", held, 0.125)
    store_backend.shrink_budget("batch:x", held, 0.5)  # not grown
    assert store_backend.reserve_budget("batch:x", 0.25)[0] is None  # 0.25 + 0.5 + 0.125 + 0.25 > 1
    spare = store_backend.reserve_budget("batch:x", 0.125)[0]  # exactly full
    assert spare is not None
    store_backend.settle_budget("batch:x", held, 0.0)
    store_backend.settle_budget("batch:x", spare, 0.0)
    store_backend.settle_budget("batch:x", token, 0.125)
    assert store_backend.budget_totals("batch:x") == (0.375, 1.0)
    assert store_backend.open_budget("batch:x", cap_usd=2.0, spent_usd=99) == 2.0  # a new cap, same spending
    assert store_backend.budget_totals("batch:x") == (0.375, 2.0)
    assert store_backend.open_budget("batch:x", cap_usd=None) == 2.0

    [item] = parse_batch(json.dumps({"id": "i0", "prompt": "Q?", "a": "A.", "b": "B."}) + "\n", "b.jsonl")
    store_backend.open_batch("b-cost", source="b.jsonl", content_sha256="f", settings={}, items=1)
    outcome = await compare(item.prompt, item.a, item.b, judges=[fake_client()], store=None)
    calls = [
        call("p1").model_copy(update={"cost_usd": 0.25}),
        call("p2", ok=False).model_copy(update={"cost_usd": 1.0}),
        call("p3").model_copy(update={"cost_usd": 0.0, "cached": True, "saved_usd": 0.5}),
    ]
    store_backend.save_judgment("compare", outcome, calls, keep_text=True, batch_id="b-cost", item=item)
    assert store_backend.batch_spent("b-cost") == 0.25  # the failed attempt is not counted
    assert store_backend.batch_spent("no-such-batch") == 0.0
    assert store_backend.batch_cache_savings("b-cost") == (1, 0.5)


def test_the_call_cache_keeps_one_entry_per_key_and_version(store_backend):
    assert store_backend.cached_reply("k1", 1) is None
    entry = {"model": "fake/m", "text": "four", "cost_usd": 0.01}
    store_backend.cache_reply("k1", 1, entry)
    assert store_backend.cached_reply("k1", 1) == entry
    assert store_backend.cached_reply("k1", 2) is None  # written under another version
    store_backend.cache_reply("k1", 1, {**entry, "text": "4"})  # replaced, not added
    store_backend.cache_reply("k2", 1, {"model": "fake/n", "text": "x"})
    assert store_backend.cached_reply("k1", 1)["text"] == "4"
    stats = store_backend.cache_stats()
    assert stats["entries"] == 2 and stats["models"] == {"fake/m": 1, "fake/n": 1} and stats["bytes"] > 0
    assert stats["cached_calls"] == 0 and stats["saved_usd"] == 0
    assert store_backend.clear_cache(older_than_days=30) == 0  # both were just written
    assert store_backend.clear_cache() == 2 and store_backend.cache_stats()["entries"] == 0


def test_provider_batch_rounds_are_journalled_before_they_are_sent(store_backend):
    store_backend.round_intent("b1", "t1", "openai", ["c1", "c2"])
    store_backend.round_intent("b1", "t2", "openai", ["c3"])
    [held] = store_backend.rounds_holding("b1", ["c2", "c9"])
    assert held == {"token": "t1", "provider_batch_id": None, "status": "submitting", "custom_ids": ["c1", "c2"]}
    store_backend.round_submitted("t1", "batch_abc")
    store_backend.round_progress("t2", "failed", 0, 1)
    assert store_backend.rounds_holding("b1", ["c3"]) == []  # a failed round holds nothing
    assert store_backend.rounds_holding("b2", ["c1"]) == []  # another batch's journal
    store_backend.round_progress("t1", "in_progress", 1, 0)
    store_backend.round_submitted("t1", "batch_abc")  # a late acknowledgement keeps the status
    first, second = store_backend.provider_batches("b1")
    assert first | {"submitted_at": None} == {"id": "batch_abc", "provider": "openai", "status": "in_progress",
                                               "requests": 2, "done": 1, "failed": 0, "submitted_at": None,
                                               "collected_at": None}  # still running: not collected  # fmt: skip
    assert second | {"collected_at": None} == {"id": None, "provider": "openai", "status": "failed", "requests": 1,
                                                "done": 0, "failed": 1, "submitted_at": None,  # never submitted
                                                "collected_at": None}  # fmt: skip
    assert isinstance(first["submitted_at"], str) and isinstance(second["collected_at"], str)
    assert first["submitted_at"] <= second["collected_at"]
    store_backend.round_progress("t1", "ended", 2, 0)  # Anthropic's word for it
    assert store_backend.provider_batches("b1")[0]["collected_at"] >= first["submitted_at"]


def test_a_calibration_map_is_kept_by_name_and_replaced_by_a_new_fit(store_backend):
    assert store_backend.calibration_map("judges") is None
    fit = {"batch_id": "b1", "combine": "dawid-skene", "items": 40, "points": [[0.5, 0.0], [0.99, 0.8]]}
    store_backend.save_calibration_map("judges", **fit)
    kept = store_backend.calibration_map("judges")
    assert kept is not None and {k: kept[k] for k in fit} == fit
    assert kept["name"] == "judges" and isinstance(kept["created_at"], str)
    store_backend.save_calibration_map("judges", batch_id="b2", combine="vote", items=25, points=[[1.0, 0.9]])
    again = store_backend.calibration_map("judges")
    assert again is not None
    assert (again["batch_id"], again["combine"], again["items"], again["points"]) == ("b2", "vote", 25, [[1.0, 0.9]])
    assert store_backend.calibration_map("Judges") is None  # names are exact


def test_a_rate_budget_is_reserved_and_settled_in_one_row_per_key(store_backend):
    # tpm = 600: a call of n tokens is n × 0.1 s, the bucket holds 60 s (docs/methods.md).
    assert store_backend.reserve_rate("tpm:a", 50.0, tolerance=10.0) == 0.0  # 500 tokens: at once
    wait = store_backend.reserve_rate("tpm:a", 20.0, tolerance=40.0)  # 200 more: 10 s past the bucket
    assert 9.5 < wait <= 10.0
    store_backend.adjust_rate("tpm:a", -40.0)  # the first call used 100 of its 500 tokens
    assert store_backend.reserve_rate("tpm:a", 20.0, tolerance=40.0) == 0.0  # now it fits
    assert store_backend.reserve_rate("tpm:b", 60.0, tolerance=0.0) == 0.0  # another key, its own bucket
    store_backend.adjust_rate("tpm:b", -600.0)  # a refund never fills the bucket past full
    assert store_backend.reserve_rate("tpm:b", 60.0, tolerance=0.0) == 0.0
    assert store_backend.reserve_rate("tpm:b", 1.0, tolerance=59.0) > 0.5
    store_backend.adjust_rate("tpm:never-reserved", 5.0)  # settling an unknown key leaves no debt
    assert store_backend.reserve_rate("tpm:never-reserved", 1.0) == 0.0


async def test_a_deliberating_sessions_rounds_are_stored_in_round_order(store_backend):
    config = {"councils": {"default": {"members": MEMBERS, "deliberation": "always", "max_rounds": 2}}}
    council = Council.from_config(config, store=store_backend)
    result = await council.run("Why is the sky blue?", seed=3)
    await council.aclose()
    rounds = store_backend.session_rounds(result.session_id)
    reviewed = len(result.deliberation.earlier)  # the rounds whose answers were reviewed, after round 0
    assert [r["round"] for r in rounds["round_reviews"]] == sorted(r["round"] for r in rounds["round_reviews"])
    assert {r["round"] for r in rounds["round_reviews"]} == set(range(reviewed + 1))
    last = [a for a in rounds["round_answers"] if a["round"] == result.deliberation.rounds[-1].round]
    assert {a["member"]: a["text"] for a in last} == {a.member: a.text for a in result.answers}
    assert all(a["changed"] in (0, 1) for a in last)


def test_every_operation_of_the_protocol_is_exercised_here():
    from pathlib import Path

    source = Path(__file__).read_text(encoding="utf-8")
    operations = [name for name in vars(Store) if not name.startswith("_") and callable(getattr(Store, name))]
    assert len(operations) >= 25
    through = {"close": "the store_backend fixture", "save_session": "Council.run, in the first session test"}
    untested = [name for name in operations if f".{name}(" not in source and name not in through]
    assert untested == [], "add a contract test for each new Store operation"



def test_ping_answers_while_the_store_is_open(store_backend):
    """The readiness probe's query (``GET /readyz``; a stopped PostgreSQL: tests/server/test_server_operations.py)."""
    assert store_backend.ping() is None


def test_queue_depth_counts_every_batch_queued_and_running_items(store_backend):
    """What ``council_queue_items`` reports at each scrape (tests/server/test_server_operations.py)."""
    store = store_backend
    assert store.queue_depth() == {"queued": 0, "running": 0}
    settings = BatchSettings(judges=["fake/j"]).model_dump(mode="json")
    common = {"source": "q.jsonl", "content_sha256": "c1", "settings": settings, "spec": {"judges": ["fake/j"]}}
    store.enqueue_batch("d1", items=[queued(i) for i in range(3)], **common)
    store.enqueue_batch("d2", items=[queued(i) for i in range(2)], **{**common, "source": "r.jsonl"})
    store.claim_items("w1", batch_id="d1", limit=2, lease_seconds=60)
    store.claim_items("w2", batch_id="d2", limit=1, lease_seconds=-1)  # its lease has passed: queued again
    assert store.queue_depth() == {"queued": 3, "running": 2}


async def test_each_sessions_reviewer_agreement_is_stored_with_it_and_summed_over_sessions(store_backend):
    council = Council.from_config({"councils": {"default": {"members": MEMBERS, "chairman": MEMBERS[0]}}},
                                  store=store_backend)  # fmt: skip
    results = [await council.run(f"Question {i}?", seed=i) for i in range(3)]
    await council.aclose()
    reviewers = sorted(results[0].reviewers)
    sums = {(s.reviewer, s.other): s for s in store_backend.reviewer_agreement_sums()}
    stored = [a for r in results for a in r.bias.reviewer_agreement]
    assert {(a.reviewer, a.other) for a in stored} == set(sums)
    for (reviewer, other), s in sums.items():
        mine = [a for a in stored if (a.reviewer, a.other) == (reviewer, other)]
        taus = [a.kendall_tau for a in mine if a.kendall_tau is not None]
        assert s.sessions == len(mine) == 3 and s.tau_n == len(taus)
        assert s.tau_sum == pytest.approx(sum(taus))
        assert (s.top1_n, s.top1) == (sum(a.top1 is not None for a in mine), sum(bool(a.top1) for a in mine))
    assert {r for r, o in sums if o is None} == set(reviewers)
    only = store_backend.reviewer_agreement_sums(reviewers=reviewers[:2])
    assert {(s.reviewer, s.other) for s in only} <= {(reviewers[0], None), (reviewers[1], None),
                                                      (reviewers[0], reviewers[1])}  # fmt: skip
    assert store_backend.reviewer_agreement_sums(council="another") == []
    assert store_backend.reviewer_agreement_sums(since="2999-01-01T00:00:00Z") == []


async def test_a_late_answer_and_review_replace_their_rows_and_their_entries_in_the_stored_result(store_backend):
    """``save_late`` (stage_grace, council.session.grace): what came after the session was written."""
    council = Council.from_config({"councils": {"default": {"members": MEMBERS, "chairman": MEMBERS[0]}}},
                                  store=store_backend)  # fmt: skip
    result = await council.run("Why is the sky blue?", seed=5)
    await council.aclose()
    sid, member, reviewer = result.session_id, result.answers[-1].member, result.reviews[0].reviewer
    late_answer = result.answers[-1].model_copy(update={"status": "late", "text": "came late"})
    store_backend.save_late(sid, answer=late_answer)
    store_backend.save_late(sid, review=result.reviews[0].model_copy(update={"late": True}))
    stored = store_backend.get_session(sid)
    [row] = [a for a in stored["answers"] if a["member"] == member]
    assert (row["status"], row["text"]) == ("late", "came late")
    [review] = [r for r in stored["reviews"] if r["reviewer"] == reviewer]
    assert review["late"] == 1
    document = json.loads(stored["result"]) if isinstance(stored["result"], str) else stored["result"]
    [entry] = [a for a in document["answers"] if a["member"] == member]
    assert (entry["status"], entry["text"]) == ("late", "came late")
    assert [r["late"] for r in document["reviews"] if r["reviewer"] == reviewer] == [True]
    assert len(document["answers"]) == len(result.answers)  # replaced, not added
