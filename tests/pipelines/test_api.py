"""The Python API: sync wrapper, several councils in one process, multi-turn history."""

from __future__ import annotations

import asyncio

from council import Council, SessionResult


def config(*members: str) -> dict:
    return {"councils": {"default": {"members": list(members), "chairman": members[0]}}}


def test_run_sync_returns_a_result():
    council = Council.from_config(config("fake/a", "fake/b", "fake/c"), store=False)
    result = council.run_sync("What is 1 + 1?", seed=4)
    assert isinstance(result, SessionResult) and result.status == "complete"
    assert SessionResult.model_validate_json(result.model_dump_json()) == result


async def test_two_councils_in_one_process_share_nothing():
    # The same members in both: nothing may be shared just because the names match.
    one = Council.from_config(config("fake/a", "fake/b"), store=False)
    two = Council.from_config(config("fake/a", "fake/b"), store=False)
    for member in ("fake/a", "fake/b"):
        mine, theirs = one.clients[member], two.clients[member]
        assert mine is not theirs and mine.api is not theirs.api
        assert mine._semaphore is not theirs._semaphore  # each council has its own limits
    r1, r2 = await asyncio.gather(one.run("first question?", seed=1), two.run("second question?", seed=1))
    assert r1.session_id != r2.session_id and r1.question != r2.question
    # Each council's model clients saw only its own session's calls.
    for council, own, other in (
        (one, "first question?", "second question?"),
        (two, "second question?", "first question?"),
    ):
        prompts = [m["content"] for req in council.clients["fake/a"].api.history for m in req.messages]
        assert any(own in p for p in prompts) and not any(other in p for p in prompts)
    await one.aclose()
    await two.aclose()


async def test_history_reaches_members_and_chairman():
    council = Council.from_config(config("fake/a", "fake/b"), store=False)
    history = [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Teal."}]
    await council.run("Why that one?", history=history, seed=2)
    api = council.clients["fake/a"].api
    answer_call, *_, synthesis_call = api.history
    assert answer_call.messages[1:3] == history
    assert answer_call.messages[-1]["content"] == "Why that one?"
    assert any(m == history[1] for m in synthesis_call.messages)
    await council.aclose()


async def test_async_context_manager_closes_store(council_home):
    async with Council.from_config(config("fake/a", "fake/b")) as council:
        await council.run("q?", seed=1)
        assert council.store is not None
    assert council.store is None


def test_the_facade_imports_only_what_is_asked_of_it():
    # Every front-end imports council.api: a command that lists sessions or reports bias must not
    # pay for validation, the event loop or a model client by importing it.
    import subprocess
    import sys

    code = (
        "import sys, council.api as api\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'asyncio', 'aiohttp', 'numpy'}))\n"
        "print(all(getattr(api, name) is not None for name in api._EXPORTS))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == ["[]", "True"]


async def test_the_read_helpers_read_the_store_they_are_given(tmp_path):
    import io

    from council import api
    from council.storage import SQLiteStore

    store = SQLiteStore.open(tmp_path / "council.db")
    council = Council.from_config(config("fake/a", "fake/b", "fake/c"), store=store)
    result = await council.run("What is 1 + 1?", seed=4)
    await council.aclose_clients()
    rows = api.list_sessions(limit=5, since=None, council=None, store=store)
    assert [r["id"] for r in rows] == [result.session_id]
    row = api.get_session(result.session_id[:8], store=store)
    assert api.stored_result(row)["session_id"] == result.session_id
    out = io.StringIO()
    assert api.export_sessions(out, fmt="jsonl", shape="sessions", redact=True, since=None, store=store) == 1
    assert result.question not in out.getvalue()
    report = api.stored_bias_report(since=None, reviewers=(), council=None, max_points=0, length_unit=None,
                                    skip_bad=False, store=store)  # fmt: skip
    assert report.sessions == 1
    assert api.cache_stats(store=store)["entries"] == 0
    store.close()
