"""`council mcp` driven by the MCP SDK's own client over stdio, as an editor or agent would."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402
from mcp_stdio import mcp_server  # noqa: E402
from mock_server import start_mock_server  # noqa: E402

import council  # noqa: E402
from council.session.results import SessionResult  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "Why do databases use B-trees rather than binary search trees for indexes?"
TOOLS = {"council_run", "council_compare", "council_grade", "council_leaderboard", "council_bias_report",
         "council_batch", "council_sessions"}  # fmt: skip


def fake_config(tmp_path: Path, chairman: str = "fake/alpha") -> Path:
    path = tmp_path / "council.toml"
    path.write_text(
        '[councils.default]\nmembers = ["fake/alpha", "fake/beta", "fake/gamma"]\n'
        f'chairman = "{chairman}"\n[councils.broken]\nmembers = ["fake/alpha", "fake/beta"]\nchairman = "failing"\n'
        # Not retried: the test is about the failure's report, not 9 s of backoff before it.
        '[models.failing]\nmodel = "fake/c+fail"\nretries = 0\n'
    )
    return path


@pytest.fixture(scope="module")
def mock_url():
    with start_mock_server(latency=0.01) as mock:
        yield mock.base_url


async def test_every_tool_over_stdio_against_the_mock_server(tmp_path, council_home, mock_url):
    cfg = tmp_path / "council.toml"
    lines = ["[councils.default]", 'members = ["m1", "m2", "m3"]', 'chairman = "m1"']
    for i, model in enumerate(("mock-alpha", "mock-beta", "mock-gamma"), 1):
        lines += [f"[models.m{i}]", f'model = "openai/{model}"', f'api_base = "{mock_url}"', "timeout = 10"]
    cfg.write_text("\n".join(lines) + "\n")

    async with Client(mcp_server(cfg, council_home)) as client:
        assert client.server_info.name == "council" and client.server_info.version == council.__version__
        listed = await client.list_tools()
        assert {t.name for t in listed.tools} == TOOLS
        run_tool = next(t for t in listed.tools if t.name == "council_run")
        assert run_tool.input_schema["required"] == ["question"]
        assert run_tool.input_schema["properties"]["seed"]["anyOf"][0]["minimum"] == 0
        outputs = {t.name: t.output_schema for t in listed.tools}
        assert "synthesis" in outputs["council_run"]["properties"]
        assert "winner" in outputs["council_compare"]["properties"]
        assert "report" in outputs["council_grade"]["properties"]
        assert {"judge_confidence", "agreement_level"} <= set(outputs["council_compare"]["properties"])
        assert all(outputs[name] is not None and outputs[name]["type"] == "object" for name in TOOLS)

        progress = []

        async def on_progress(done, total, message):
            progress.append((done, total, message))

        ran = await client.call_tool(
            "council_run",
            {"question": QUESTION, "seed": 3, "show": ["answers", "reviews"]},
            progress_callback=on_progress,
        )
        assert not ran.is_error, ran.content
        result = SessionResult.model_validate(ran.structured_content)
        assert result.status == "complete" and result.question == QUESTION
        text = ran.content[0].text
        assert "Consensus (Borda): 1. " in text
        assert all(line in text for line in result.synthesis.text.splitlines())  # the answer, where it disagreed
        assert all(a.text in text for a in result.answers)
        assert all(reason in text for r in result.reviews for reason in r.reasoning.values())
        # progress from the events: 3 answers, 3 reviews, the consensus, the synthesis; in order
        assert [p[0] for p in progress] == list(range(1, 9)) and {p[1] for p in progress} == {8}
        assert progress[0][2].startswith("answer from") and progress[-1][2] == "synthesis: ok"

        listed_sessions = await client.call_tool("council_sessions", {})
        assert [s["session_id"] for s in listed_sessions.structured_content["sessions"]] == [result.session_id]
        shown = await client.call_tool("council_sessions", {"session_id": result.session_id[:8]})
        assert shown.structured_content["session_id"] == result.session_id
        assert QUESTION in shown.content[0].text
        assert all(line in shown.content[0].text for line in result.synthesis.text.splitlines())

        board = await client.call_tool("council_leaderboard", {"bootstrap": 0})
        assert not board.is_error, board.content
        assert {m["model"] for m in board.structured_content["models"]} == {
            "openai/mock-alpha", "openai/mock-beta", "openai/mock-gamma"
        }  # fmt: skip
        against = await client.call_tool("council_leaderboard", {"bootstrap": 0, "baseline": "openai/mock-alpha"})
        assert not against.is_error and against.structured_content["baseline"] == "openai/mock-alpha"
        styled = await client.call_tool("council_leaderboard", {"bootstrap": 0, "control": ["length", "markdown"]})
        assert not styled.is_error and styled.structured_content["control"] == ["length", "markdown"]
        report = await client.call_tool("council_bias_report", {})
        assert not report.is_error, report.content
        assert set(report.structured_content["reviewers"]) == {
            "openai/mock-alpha", "openai/mock-beta", "openai/mock-gamma"
        }  # fmt: skip
        assert "length" in report.content[0].text.lower()


async def test_compare_and_grade_report_progress_per_call(tmp_path, council_home):
    async with Client(mcp_server(fake_config(tmp_path), council_home)) as client:
        progress = []

        async def on_progress(done, total, message):
            progress.append(message)

        compared = await client.call_tool(
            "council_compare",
            {
                "prompt": QUESTION,
                "response_a": "B-trees keep nodes full and shallow.",
                "response_b": "No idea.",
                "judges": ["fake/judge"],
            },  # fmt: skip
            progress_callback=on_progress,
        )
        assert not compared.is_error, compared.content
        outcome = compared.structured_content
        assert outcome["winner"] in ("A", "B", "TIE") and outcome["swap"] is True
        assert compared.content[0].text.startswith(f"winner: {outcome['winner']}")
        # Two measures, each under its own name: the judges' stated confidence and how far the votes agree.
        assert outcome["judge_confidence"] == outcome["confidence"]
        assert outcome["agreement_level"] == outcome["confidence_level"]
        first_line = compared.content[0].text.splitlines()[0]
        assert f"judge confidence {outcome['judge_confidence']:.2f}" in first_line
        assert f"agreement {outcome['agreement_level']}" in first_line
        assert f"(confidence {outcome['confidence']:.2f}" not in first_line
        assert len(progress) == outcome["calls"] >= 2

        progress.clear()
        graded = await client.call_tool(
            "council_grade",
            {
                "prompt": QUESTION,
                "response": "B-trees keep nodes full and shallow.",
                "judges": ["fake/judge"],
                "votes": 3,
            },  # fmt: skip
            progress_callback=on_progress,
        )
        assert not graded.is_error, graded.content
        assert graded.structured_content["report"] is not None and len(progress) >= 3
        # Text for a model to read, not the structured content again as JSON.
        text = graded.content[0].text
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)
        report = graded.structured_content["report"]
        assert f"total {report['total']:g}/{report['max_total']}" in text
        assert all(c["criterion"] in text for c in report["criteria"])


async def test_a_slow_chairman_still_reports_progress(tmp_path, council_home):
    # The chairman takes 0.5 s; with a heartbeat every 0.1 s the client hears from the server
    # meanwhile, always with a larger value than before (as the protocol requires).
    async with Client(
        mcp_server(fake_config(tmp_path, chairman="fake/alpha+slow"), council_home, "--heartbeat", "0.1")
    ) as c:
        progress = []

        async def on_progress(done, total, message):
            progress.append((done, total, message))

        ran = await c.call_tool("council_run", {"question": QUESTION, "seed": 4}, progress_callback=on_progress)
    assert not ran.is_error, ran.content
    values = [p[0] for p in progress]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert all(p[1] == 8 for p in progress) and values[-1] == 8
    beats = [p for p in progress if p[2] == "still working: the chairman writes the consensus answer"]
    assert len(beats) >= 2 and all(7 < p[0] < 8 for p in beats)


async def test_tool_failures_are_one_line_errors_and_the_server_goes_on(tmp_path, council_home):
    async with Client(mcp_server(fake_config(tmp_path), council_home)) as client:
        unknown = await client.call_tool("council_run", {"question": QUESTION, "council": "nope"})
        assert unknown.is_error
        [block] = unknown.content
        assert block.text.startswith("error: ") and "nope" in block.text and "\n" not in block.text

        empty = await client.call_tool("council_run", {"question": ""})
        assert empty.is_error

        partial = await client.call_tool("council_run", {"question": QUESTION, "council": "broken", "seed": 1})
        assert partial.is_error  # a synthesis was asked for and is missing
        assert partial.content[0].text.startswith("partial session") and "no synthesis" in partial.content[0].text
        assert partial.structured_content["status"] == "partial"

        secret = tmp_path / "secret.toml"
        secret.write_text('token = "do-not-read-me"\n[criteria\n')
        for rubric in (str(secret), "../../etc/passwd"):
            sneaky = await client.call_tool("council_grade", {"prompt": QUESTION, "response": "x", "rubric": rubric})
            assert sneaky.is_error and "not a built-in rubric" in sneaky.content[0].text
            assert "do-not-read-me" not in sneaky.content[0].text

        missing = await client.call_tool("council_sessions", {"session_id": "ffffffff"})
        assert missing.is_error and "\n" not in missing.content[0].text

        fine = await client.call_tool("council_run", {"question": QUESTION, "seed": 2})
        assert not fine.is_error and fine.structured_content["status"] == "complete"


def test_bad_config_is_one_line_before_serving(tmp_path, council_home):
    bad = tmp_path / "bad.toml"
    bad.write_text("[councils.default\n")
    proc = subprocess.run(
        [sys.executable, "-m", "council", "mcp", "--config", str(bad)],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stdout == ""  # stdout is the protocol's: never a word of ours
    [line] = proc.stderr.splitlines()
    assert line.startswith("error:") and "invalid TOML" in line


def test_missing_sdk_is_one_line(tmp_path, council_home):
    blocker = tmp_path / "blocker" / "mcp"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no mcp here')\n")
    proc = subprocess.run(
        [sys.executable, "-m", "council", "mcp", "--config", str(fake_config(tmp_path))],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker.parent), str(ROOT)])},
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == "error: council mcp needs the MCP SDK: pip install 'council-orchestrator[mcp]'"


def test_the_docs_mcp_snippet_is_valid_json():
    from site_docs import page

    readme = page("chat-apps/mcp.md")
    start = readme.index('{\n  "mcpServers"')
    snippet = json.loads(readme[start : readme.index("\n}\n", start) + 2])
    entry = snippet["mcpServers"]["council"]
    # An absolute path: an editor's PATH rarely holds council's (tests/mcp/test_mcp_editor_config.py runs it).
    assert entry["command"] == "/absolute/path/to/council" and entry["args"][:1] == ["mcp"]


async def test_compare_judges_with_rpm_wait_on_the_stores_shared_budget(tmp_path, council_home):
    """A judge's ``rpm`` is one budget with every process on the store (docs/methods.md,
    "Shared rate budget"), not one per tool call."""
    import time

    from council.storage import SQLiteStore

    config = tmp_path / "council.toml"
    config.write_text('[councils.default]\nmembers = ["fake/a", "fake/b"]\n'
                      '[models.j]\nmodel = "fake/j"\nrpm = 600\nmax_concurrency = 1\n')  # fmt: skip
    async with Client(mcp_server(config, council_home)) as client:
        store = SQLiteStore.open(council_home / "council.db")
        try:
            for _ in range(10):  # another process has just used the budget for the next second
                store.reserve_rate("rpm:j:fake/j", 0.1)
        finally:
            store.close()
        started = time.monotonic()
        compared = await client.call_tool(
            "council_compare", {"prompt": QUESTION, "response_a": "Shallow.", "response_b": "No.", "judges": ["j"]}
        )
        assert not compared.is_error, compared.content
        assert time.monotonic() - started >= 1.0  # its calls waited their turns after the others'


async def test_a_question_too_large_for_the_members_tpm_is_one_line_naming_the_limit(tmp_path, council_home):
    config = tmp_path / "council.toml"
    lines = ["[councils.default]", 'members = ["a", "b", "c"]', 'chairman = "fake/chair"']
    for alias in "abc":
        lines += [f"[models.{alias}]", f'model = "fake/{alias}"', "tpm = 2000", "max_tokens = 50"]
    config.write_text("\n".join(lines) + "\n")
    async with Client(mcp_server(config, council_home)) as client:
        refused = await client.call_tool("council_run", {"question": QUESTION + " Please be thorough." * 150})
        assert refused.is_error and refused.structured_content is None
        [block] = refused.content
        assert block.text.startswith("error: the request is too large for the members' token limits")
        assert "[models.a] tpm = 2000" in block.text and "\n" not in block.text
        # Nothing lost: the session is kept, failed, with the same reason.
        [kept] = (await client.call_tool("council_sessions", {})).structured_content["sessions"]
        assert kept["status"] == "failed"
        shown = await client.call_tool("council_sessions", {"session_id": kept["session_id"]})
        assert "tpm = 2000" in shown.content[0].text


def test_the_server_describes_its_tools_without_importing_numpy(tmp_path, council_home):
    """Publishing the leaderboard tool's output schema needs the leaderboard's shape, not numpy
    (~0.15 s of every client's wait for the server): numpy comes with the first leaderboard."""
    code = (
        "import sys\n"
        "from council.mcp.server import Tools, build_server\n"
        f"server = build_server(Tools({str(fake_config(tmp_path))!r}, 10.0))\n"
        "print('numpy' in sys.modules)\n"
        "from council.leaderboard.stored import leaderboard\n"
        "print('numpy' in sys.modules)\n"
    )
    env = {**os.environ, "COUNCIL_HOME": str(council_home), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "True"]


async def test_a_tool_call_the_client_cancels_leaves_its_session_interrupted_with_the_answers_that_came(
    tmp_path, council_home
):
    """The client cancels the call once two members' answers are reported (the third is slow):
    the session is recorded interrupted, with the answers that had come."""
    cfg = tmp_path / "council.toml"
    cfg.write_text(
        '[councils.default]\nmembers = ["fake/alpha", "fake/beta", "fake/gamma+slow"]\nchairman = "fake/alpha"\n'
    )
    async with Client(mcp_server(cfg, council_home)) as client:
        await client.list_tools()
        answered, messages = asyncio.Event(), []

        async def on_progress(done, total, message):
            messages.append(message or "")
            if sum(m.startswith("answer from") for m in messages) >= 2:
                answered.set()

        asked = client.call_tool("council_run", {"question": QUESTION}, progress_callback=on_progress)
        call = asyncio.create_task(asked)
        await asyncio.wait_for(answered.wait(), 30)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        db = sqlite3.connect(council_home / "council.db")
        try:
            for _ in range(200):  # recorded once the cancellation reaches the server
                sessions = db.execute("select status, error from sessions").fetchall()
                if sessions and sessions[0][0] != "running":
                    break
                await asyncio.sleep(0.05)
            answers = {m: (s, e) for m, s, e in db.execute("select member, status, error from answers")}
        finally:
            db.close()
    assert sessions == [("interrupted", "interrupted")]
    assert answers["fake/alpha"] == answers["fake/beta"] == ("ok", None)
    # Cut while answering (the slow member's 0.5 s), unless the cancellation came later than that.
    assert answers["fake/gamma+slow"] in {("failed", "no answer: interrupted"), ("ok", None)}
