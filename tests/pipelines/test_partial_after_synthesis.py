"""A council that turns partial only at or after its synthesis still says so first, in the text a
user reads (issue 59's honest degradation): the spend cap refusing the chairman's own call (no
synthesis), and the cap reached by another call while the chairman writes (a synthesis whose line
was decided before). Real HTTP: the mock LLM server on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import write_config
from mock_server import start_mock_server

from council import Council
from council.accounting.budget import BudgetReached
from council.session import degraded
from council.session.degraded import PARTIAL_PREFIX, partial_line_of

QUESTION = "Why is the sky blue?"
CHEAP = {"input_cost_per_token": 1e-9, "output_cost_per_token": 1e-8, "max_tokens": 400, "retries": 0}
# The chairman's worst case (1e5 tokens at 1e-5: $1) is over the cap; every member's and review's fits.
BIG = {"input_cost_per_token": 1e-9, "output_cost_per_token": 1e-5, "max_tokens": 100_000, "retries": 0}
CAP = 0.5


@pytest.fixture(scope="module")
def mock_url():
    with start_mock_server(latency=0.002, stream_interval=0.002) as server:
        yield server.base_url


def _models(url: str, **specs: dict) -> dict[str, dict]:
    return {a: {"model": f"openai/mock-{a}", "api_base": url, **spec} for a, spec in specs.items()}


def chairman_over_the_cap(tmp_path, url, **council) -> str:
    """A council whose chairman (and fallback) the cap refuses: members a, b, c; chairman big."""
    models = _models(url, a=CHEAP, b=CHEAP, c=CHEAP, big=BIG)
    path = write_config(tmp_path / "c.toml", models, members=["a", "b", "c"], chairman="big",
                        fallback_chairman="b", **council)  # fmt: skip
    path.write_text(path.read_text() + f"\n[budget]\nmax_cost_usd = {CAP}\n")
    return str(path)


@pytest.mark.parametrize("synthesis", ["structured", "plain"])
async def test_a_cap_that_refuses_the_chairman_leaves_the_line_first_in_the_answer(tmp_path, mock_url, synthesis):
    events = []
    async with Council.from_config(chairman_over_the_cap(tmp_path, mock_url, synthesis=synthesis), store=False) as c:
        result = await c.run(QUESTION, seed=1, on_event=events.append)
    assert result.status == "partial" and result.synthesis.status == "failed"
    assert "budget reached" in result.synthesis.error
    line = partial_line_of(result)
    assert line is not None and "no synthesis" in line and "budget reached" in line
    # The text a user reads: the line first, then which answer stands in for the synthesis.
    text = result.answer
    assert text == degraded.reader_text(result)
    first, _, rest = text.partition("\n\n")
    assert first == line
    best = result.consensus.order[0]
    assert f"top-ranked member's answer ({best})" in rest
    assert rest.endswith(next(a.text for a in result.answers if a.member == best))


async def test_a_cap_reached_while_the_chairman_writes_restates_the_first_line(tmp_path, mock_url):
    """A council whose cap is shared by its sessions (``max_cost``): another call is refused while
    this session's chairman writes, after its first line was decided. The stored text and the
    result's say it first; the stream, which has told the answer, ends with a notice of the line."""
    models = _models(mock_url, a=CHEAP, b=CHEAP, c=CHEAP)
    path = write_config(tmp_path / "c.toml", models, chairman="a")
    events = []
    async with Council.from_config(str(path), max_cost=CAP, store=True) as council:

        def on_event(event):
            events.append(event)
            if event.type == "synthesis_delta" and council.budget.reached is None:
                # Another session's call under the same cap, refused: the chairman's was reserved already.
                with pytest.raises(BudgetReached):
                    council.budget.reserve(CAP * 10)

        result = await council.run(QUESTION, seed=2, on_event=on_event)
        stored = json.loads(council.store.get_session(result.session_id)["result"])
    assert result.synthesis.status == "ok" and result.status == "partial"
    line = partial_line_of(result)
    assert line is not None and "budget reached" in line
    for text in (result.synthesis.text, result.answer, stored["synthesis"]["text"]):
        assert text.startswith(line + "\n\n"), text[:200]
        assert text.count(PARTIAL_PREFIX) == 1
    told = "".join(e.text for e in events if e.type == "synthesis_delta")
    assert not told.startswith(PARTIAL_PREFIX)  # the answer streamed before the council was partial
    notices = [e.text for e in events if e.type == "notice"]
    after = [e.type for e in events].index("synthesis")
    assert line in notices and [e.type for e in events][after:].count("notice") >= 1
    # The chat completion's stream of the same session: the answer as told, then the line as the
    # last of its text; the finish chunk's council field names it.
    content, details = await _chat_stream([*events, result])
    assert content.startswith(told) and content.rstrip().endswith(f"[{line}]")
    assert details["status"] == "partial" and details["partial_line"] == line


async def _chat_stream(items: list) -> tuple[str, dict]:
    from council.server.chat import _Replay, _Reply, _stream

    reply = _Reply(id="chatcmpl-x", created=0, model="default", system_fingerprint="fp")
    content, details = "", {}
    async for part in _stream(_Replay(items).stream(), None, reply):
        text = part.decode()
        if not text.startswith("data: {"):
            continue
        chunk = json.loads(text.removeprefix("data: "))
        content += "".join(c["delta"].get("content") or "" for c in chunk["choices"])
        details = chunk.get("council", details)
    return content, details


async def test_a_line_known_before_the_chairman_wrote_is_not_restated(tmp_path, mock_url):
    models = _models(mock_url, a=CHEAP, b=CHEAP, dead={**CHEAP, "model": "openai/mock-delta+fail"})
    path = write_config(tmp_path / "c.toml", models, chairman="a")
    events = []
    async with Council.from_config(str(path), store=False) as council:
        result = await council.run(QUESTION, seed=3, on_event=events.append)
    line = partial_line_of(result)
    assert result.synthesis.text.startswith(line + "\n\n") and result.synthesis.text.count(PARTIAL_PREFIX) == 1
    assert "".join(e.text for e in events if e.type == "synthesis_delta") == result.synthesis.text
    assert not any(e.type == "notice" and PARTIAL_PREFIX in e.text for e in events)


async def test_a_whole_councils_text_is_the_synthesis_and_a_json_format_gets_no_line(tmp_path, mock_url):
    from council import JsonFormat

    path = write_config(tmp_path / "c.toml", _models(mock_url, a=CHEAP, b=CHEAP, c=CHEAP), chairman="a")
    async with Council.from_config(str(path), store=False) as council:
        whole = await council.run(QUESTION, seed=4)
        formatted = await council.run(QUESTION, seed=4, synthesis_format=JsonFormat(None))
    assert whole.status == "complete" and whole.answer == whole.synthesis.text
    assert json.loads(formatted.answer) == json.loads(formatted.synthesis.text)


def test_council_run_says_partial_first_in_text_and_in_json_answer(tmp_path, mock_url, council_home):
    """A real ``council run``: the cap refuses the chairman; the first line printed, and the
    ``answer`` of ``--json`` (the text a user reads), say the council was partial."""
    config = chairman_over_the_cap(tmp_path, mock_url)
    env = {**os.environ, "COUNCIL_HOME": str(council_home), "COLUMNS": "200"}

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "council", "run", QUESTION, "--config", config, "--seed", "5", *extra]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)

    text, as_json = run(), run("--json")
    for done in (text, as_json):  # the cap was reached: exit 1, one line saying so
        assert done.returncode == 1 and done.stderr.strip().splitlines()[-1].startswith("error: budget reached")
    first = text.stdout.lstrip().splitlines()[0]
    assert first.startswith(PARTIAL_PREFIX) and "no synthesis" in first and "budget reached" in first
    result = json.loads(as_json.stdout)
    assert result["synthesis"]["text"] is None and result["status"] == "partial"
    line, _, rest = result["answer"].partition("\n\n")
    assert line.startswith(PARTIAL_PREFIX) and "no synthesis" in line and "top-ranked member's answer" in rest


def test_restating_changes_only_the_line_and_only_when_it_changed():
    from council.session.degraded import partial_line, restated
    from council.session.results import Synthesis

    told = partial_line(["1 of 3 members failed to answer"])
    ok = Synthesis(status="ok", chairman="a", text=f"{told}\n\nPartial council: the model's own words.")
    same, line = restated(ok, ["1 of 3 members failed to answer", "  "], 1)  # no new words: nothing to say
    assert same is ok and line is None
    again, line = restated(ok, ["1 of 3 members failed to answer", "budget reached: $1 of $1"], 1)
    assert line == partial_line(["1 of 3 members failed to answer", "budget reached: $1 of $1"])
    assert again.text == f"{line}\n\nPartial council: the model's own words."  # the answer's text untouched
    fresh, line = restated(Synthesis(status="ok", chairman="a", text="Paris."), ["budget reached"], 0)
    assert fresh.text == f"{line}\n\nParis." and line.startswith(PARTIAL_PREFIX)
