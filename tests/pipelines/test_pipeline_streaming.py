"""The chairman's synthesis streams as it is written: many deltas, cleaned on the way, equal to
the stored synthesis (the pieces that arrive in one turn of the event loop as one delta); a
chairman that breaks off midway is followed by a notice and the fallback."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_pipeline_events import collect

from council import Council
from council.providers.fake import FakeAPI
from council.session.prompts import SynthesisStream, clean_synthesis
from council.testing.replies import stream_pieces

MEMBERS = ["fake/alpha", "fake/beta", "fake/gamma"]
QUESTION = "Why is the sky blue?"


async def test_the_synthesis_arrives_in_many_deltas_that_join_to_the_synthesis():
    council = Council.from_config(
        {"councils": {"default": {"members": MEMBERS, "chairman": "fake/alpha"}}}, store=False
    )
    events, result = await collect(council, QUESTION, seed=5)
    deltas = [e for e in events if e.type == "synthesis_delta"]
    assert len(deltas) > 5  # streamed word by word, not one piece at the end
    assert "".join(d.text for d in deltas) == result.synthesis.text
    types = [e.type for e in events]
    assert types.index("stage", types.index("consensus")) < types.index("synthesis_delta") < types.index("synthesis")


async def test_a_chairman_breaking_off_midway_is_followed_by_a_notice_and_the_fallbacks_answer():
    config = {
        "councils": {"default": {"members": MEMBERS, "chairman": "fake/chair+cutoff", "fallback_chairman": "fake/beta"}}
    }
    council = Council.from_config(config, store=False)
    events, result = await collect(council, QUESTION, seed=5)
    assert result.synthesis.status == "ok" and result.synthesis.fallback_used
    types = [e.type for e in events]
    first = [e for e in events if e.type == "synthesis_delta" and e.chairman == "fake/chair+cutoff"]
    fallback = [e for e in events if e.type == "synthesis_delta" and e.chairman == "fake/beta"]
    assert first and fallback  # half of the first answer was shown before it broke off
    notice = next(e for e in events if e.type == "notice" and "fallback" in e.text)
    assert events.index(first[-1]) < events.index(notice) < events.index(fallback[0])
    assert "\n" not in notice.text  # one line
    assert "".join(d.text for d in fallback) == result.synthesis.text
    assert types.count("synthesis") == 1
    # Not retried: one call of the broken chairman in the call log, not three.
    assert len(council.clients["fake/chair+cutoff"].api.history) == 1


class _BurstingAPI(FakeAPI):
    """A chairman whose reply arrives in two bursts, each in one turn of the event loop, as a
    stream read from a full buffer does (a fast provider, a busy server)."""

    pieces: list[str]

    async def stream(self, request, on_delta):
        response = await self._reply(request)
        self.pieces = stream_pieces(response.text)
        half = len(self.pieces) // 2
        for burst in (self.pieces[:half], self.pieces[half:]):
            await asyncio.sleep(0)
            for piece in burst:
                on_delta(piece)
        return response


async def test_pieces_arriving_in_one_turn_of_the_event_loop_are_one_delta():
    council = Council.from_config(
        {"councils": {"default": {"members": MEMBERS, "chairman": "fake/alpha"}}}, store=False
    )
    chairman = council.clients["fake/alpha"]
    chairman.api = _BurstingAPI("fake/alpha")
    events, result = await collect(council, QUESTION, seed=5)
    deltas = [e for e in events if e.type == "synthesis_delta"]
    assert len(chairman.api.pieces) > 10
    assert len(deltas) == 2  # one a burst, not one a piece
    assert "".join(d.text for d in deltas) == result.synthesis.text
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    types = [e.type for e in events]
    assert len(types) - 1 - types[::-1].index("synthesis_delta") < types.index("synthesis")


_FRAGMENTS = ['<answer label="A">', "</answer>", " ", "\n", "text", "<", ">", "</ans", "<ANSWER>", "wer>", "a b"]


@settings(max_examples=500)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=10), st.data())
def test_streamed_cleaning_equals_cleaning_the_whole_text(fragments, data):
    text = "".join(fragments)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    stream = SynthesisStream()
    assert "".join(stream.feed(p) for p in pieces) + stream.end() == clean_synthesis(text)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "start, filler, cleaned",
    [
        ("Paris.", " ", "Paris."),
        ("Paris.", "\n", "Paris."),
        ("", " ", ""),
        ("Paris.", "</answer>", "Paris."),
        ("<answer ", "x", None),  # never closed: no tag, all of it is text
        ("Paris. <answer ", "y", None),
    ],
)
def test_a_provider_streaming_megabytes_of_what_is_held_back_costs_linear_time(start, filler, cleaned):
    # Whitespace, stray tags or an unclosed tag streamed piece by piece (a hostile or broken
    # provider, up to the 16 MB reply cap): what is held back is bounded, so each piece costs
    # about its own length. Re-scanning a growing held-back tail at every piece took minutes
    # of the event loop for a few hundred kilobytes (and cleaning the whole text, as long).
    stream = SynthesisStream()
    pieces = [start, *[filler] * (200_000 // len(filler))]
    whole = "".join(pieces)
    shown = "".join(stream.feed(p) for p in pieces) + stream.end()
    expected = whole.strip() if cleaned is None else cleaned
    assert clean_synthesis(whole) == expected
    # Beyond what the stream holds back, whitespace or tags may be shown that the final text has not.
    assert shown.startswith(expected)
    assert clean_synthesis(shown) == expected
