"""The chairman's structured synthesis (issue 59 item 3) and the partial council's first line,
on the in-process fake provider and on real HTTP (the mock server)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from council import Council
from council.session.degraded import PARTIAL_PREFIX, partial_line
from council.session.structured import (
    SECTION_HEADING,
    SYNTHESIS_SCHEMA_NAME,
    AnswerStream,
    structure_of,
    synthesis_model,
    synthesis_schema,
)

MEMBERS = ["fake/alpha", "fake/beta", "fake/gamma"]
QUESTION = "What is the boiling point of water at sea level, in Celsius?"


def make_council(members=MEMBERS, store=False, **overrides):
    council = {"members": list(members), "chairman": members[0], **overrides}
    return Council.from_config({"councils": {"default": council}}, store=store)


async def run_with_events(council, question=QUESTION, **kwargs):
    events = []
    result = await council.run(question, seed=7, on_event=events.append, **kwargs)
    await council.aclose()
    return result, events


# -- the answer's text while the reply streams -----------------------------------------------
def _chunks(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True) if text[a:b]]


@given(
    answer=st.text(alphabet=st.sampled_from(['a', ' ', '\n', '"', '\\', 'é', '😀', '\u2028', '\t', '/', '\x01']),
                   max_size=40),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=30),
    ascii_only=st.booleans(),
)  # fmt: skip
def test_the_answer_streams_exactly_whatever_the_pieces_and_escapes(answer, cuts, ascii_only):
    # \n, \", \\ and \uXXXX (a surrogate pair for 😀 with ensure_ascii) split anywhere across pieces.
    reply = json.dumps({"answer": answer, "agreements": ["x"]}, ensure_ascii=ascii_only)
    stream = AnswerStream()
    shown = ""
    for piece in _chunks(reply, cuts):
        shown += stream.feed(piece)
        assert answer.strip().startswith(shown)  # never a character the answer does not hold
    assert shown == answer.strip()


@pytest.mark.parametrize(
    "reply",
    ['Sure! {"answer": "Paris"}', '{"agreements": [], "answer": "Paris"}', "Paris is the capital.", '{"answer": 3}'],
)
def test_a_reply_that_does_not_open_with_the_answer_streams_nothing(reply):
    stream = AnswerStream()
    assert "".join(stream.feed(c) for c in reply) == ""


def test_a_fenced_reply_streams_its_answer():
    stream = AnswerStream()
    assert "".join(stream.feed(c) for c in '```json\n{ "answer" : "Paris\\nFrance", "x": 1}```') == "Paris\nFrance"


# -- the schema and the labels ---------------------------------------------------------------
def test_the_schema_puts_the_answer_first_offers_only_the_labels_and_asks_no_confidence():
    schema = synthesis_schema(("A", "B"))
    assert list(schema["properties"])[0] == "answer"
    assert "confidence" not in json.dumps(schema)
    text = json.dumps(schema)
    assert '"enum": ["A", "B"]' in text
    assert sorted(schema["required"]) == sorted(schema["properties"])


def test_an_invented_label_is_dropped_never_a_crash():
    reply = {
        "answer": "Paris.",
        "agreements": ["the capital is Paris"],
        "disagreements": [{"point": "p", "positions": [{"summary": "s", "members": ["A", "Z", "<script>", "A"]}]}],
        "minority_view": "",
        "unique_insights": [{"member": "Q", "insight": "i"}, {"member": "B", "insight": "j"}],
        "blind_spots": [],
    }
    parsed = synthesis_model(("A", "B")).model_validate(reply)
    structure, invented = structure_of(parsed, {"A": "alpha", "B": "beta"})
    assert structure.disagreements[0].positions[0].members == ["alpha"]
    assert [(i.member, i.insight) for i in structure.unique_insights] == [("beta", "j")]
    assert invented == ["Z", "<script>", "Q"]
    assert structure.minority_view is None


# -- the partial line --------------------------------------------------------------------------
def test_the_partial_line_is_one_line_naming_each_reason():
    assert partial_line([]) is None
    line = partial_line(["1 of 3 members failed to answer", "x\ny"], fallback_chairman="beta")
    assert line is not None and "\n" not in line and line.startswith(PARTIAL_PREFIX)
    assert "1 of 3 members failed" in line and "fallback chairman beta" in line


# -- whole sessions ----------------------------------------------------------------------------
async def test_structured_by_default_streamed_live_and_mapped_back_to_members():
    result, events = await run_with_events(make_council())
    assert result.status == "complete"
    s = result.synthesis
    assert s.status == "ok" and s.structure is not None
    structure = s.structure
    # The labels the chairman saw are member ids in the result, never "A", "B", "C".
    held = {m for d in structure.disagreements for p in d.positions for m in p.members}
    held |= {i.member for i in structure.unique_insights}
    assert held and held <= set(MEMBERS)
    # What a user reads: the answer, then the section; no partial line for a whole council.
    assert s.text.startswith(structure.answer) and not s.text.startswith(PARTIAL_PREFIX)
    assert f"### {SECTION_HEADING}" in s.text[len(structure.answer) :]
    deltas = [e for e in events if e.type == "synthesis_delta"]
    # The answer went out piece by piece as it was written, the section once validated, last.
    assert len(deltas) > 3 and structure.answer.startswith(deltas[0].text)
    assert SECTION_HEADING in deltas[-1].text and all(SECTION_HEADING not in d.text for d in deltas[:-1])
    assert "".join(d.text for d in deltas) == s.text
    [told] = [e for e in events if e.type == "synthesis"]
    assert told.structure == structure and told.text == s.text


async def test_plain_is_todays_prose_exactly(monkeypatch):
    from council.session import prompts

    asked = []
    real = prompts.synthesis_messages
    monkeypatch.setattr(prompts, "synthesis_messages", lambda *a, **k: asked.append(k) or real(*a, **k))
    plain, _ = await run_with_events(make_council(synthesis="plain"))
    assert asked == [{"output_format": None}]  # today's prompt, with no format asked for
    assert plain.synthesis.structure is None and plain.synthesis.attempts is None
    assert plain.synthesis.text.startswith("Synthesis of 3 answers") and SECTION_HEADING not in plain.synthesis.text


@pytest.mark.parametrize("synthesis", ["structured", "plain"])
async def test_a_partial_council_says_so_on_the_first_line(synthesis):
    members = ["fake/alpha", "fake/beta", "fake/gamma+fail"]
    result, events = await run_with_events(make_council(members, synthesis=synthesis))
    assert result.status == "partial"
    first = result.synthesis.text.splitlines()[0]
    assert first.startswith(PARTIAL_PREFIX) and "1 of 3 members failed to answer" in first
    deltas = "".join(e.text for e in events if e.type == "synthesis_delta")
    assert deltas == result.synthesis.text  # streamed first, too


@pytest.mark.parametrize("synthesis", ["structured", "plain"])
async def test_a_fallback_chairman_says_so_on_the_first_line(synthesis):
    council = make_council(
        ["fake/alpha", "fake/beta"], chairman="fake/gamma+fail", fallback_chairman="fake/beta", synthesis=synthesis
    )
    result, _ = await run_with_events(council)
    assert result.synthesis.fallback_used and result.synthesis.status == "ok"
    first = result.synthesis.text.splitlines()[0]
    assert first.startswith(PARTIAL_PREFIX) and "fallback chairman fake/beta" in first


async def test_a_chairman_reasked_after_invalid_output_tells_its_answer_in_full():
    # +flaky: the first structured reply is prose with no JSON; the re-asked one is valid.
    council = make_council(["fake/alpha", "fake/beta"], chairman="fake/gamma+flaky")
    result, events = await run_with_events(council)
    s = result.synthesis
    assert s.status == "ok" and s.attempts == 2 and s.structure is not None
    deltas = "".join(e.text for e in events if e.type == "synthesis_delta")
    assert deltas == s.text


async def test_a_callers_json_format_is_left_as_it_is():
    from council.providers.asking import JsonFormat

    council = make_council(["fake/alpha", "fake/beta", "fake/gamma+fail"])
    fmt = JsonFormat({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    result = await council.run(QUESTION, seed=7, synthesis_format=fmt)
    await council.aclose()
    assert json.loads(result.synthesis.text)["city"]  # JSON, with no line in front of it
    assert result.synthesis.structure is None


async def test_the_chairman_is_asked_under_the_synthesis_schema():
    from council.testing.replies import FakeResponder

    seen = []
    real = FakeResponder.reply

    def spy(self, model, messages, **kwargs):
        seen.append((model, kwargs.get("schema_name")))
        return real(self, model, messages, **kwargs)

    FakeResponder.reply = spy
    try:
        await run_with_events(make_council())
    finally:
        FakeResponder.reply = real
    assert ("fake/alpha", SYNTHESIS_SCHEMA_NAME) in seen


# -- the local models' grammar -------------------------------------------------------------------
def test_under_the_grammar_the_answer_has_room_and_starts_with_words():
    from council.providers.grammar import ANSWER_CHARS, SHORT_TEXT_CHARS, constrain_schema_for_grammar, json_schema_gbnf

    constrained = constrain_schema_for_grammar(synthesis_schema(("A", "B")), max_string_length=192)
    answer = constrained["properties"]["answer"]
    assert SHORT_TEXT_CHARS < answer["maxLength"] <= ANSWER_CHARS and "pattern" in answer
    insight = constrained["properties"]["unique_insights"]["items"]["properties"]["member"]
    assert insight["enum"] == ["A", "B"]  # a tiny model cannot invent a label
    pytest.importorskip("llama_cpp")
    assert json_schema_gbnf(constrained)
