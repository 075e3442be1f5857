"""The chairman's structured synthesis: its schema, its reply mapped back to members, the
"Where the council disagreed" section, and its answer's text read while it streams.

The chairman sees the answers under anonymous labels (A, B, ...) and replies under
:func:`synthesis_model`: ``answer`` first (so its text can be forwarded while the chairman
writes it, :class:`AnswerStream`), then the agreements, the disagreements with the positions
and which answers hold them, the minority view, the unique insights and the blind spots. No
confidence is asked for: a model's report of its own confidence is not evidence.

The labels are the chairman's to quote, so a label it invents (one no answer had) is hostile
input: the JSON schema offers only the real labels (a constrained decoder cannot write another),
and the validating model accepts any string so that :func:`structure_of` can drop the invented
ones, said in a flag, instead of failing a synthesis whose answer is good.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema

SYNTHESIS_SCHEMA_NAME = "council_synthesis"
SECTION_HEADING = "Where the council disagreed"

Text = Annotated[str, StringConstraints(strip_whitespace=True)]


# Every text is None where transcripts are off (``without_text``): who held what stays.
class Position(BaseModel):
    summary: str | None
    members: list[str] = Field(default_factory=list, description="The members who hold it")


class Disagreement(BaseModel):
    point: str | None
    positions: list[Position] = Field(default_factory=list)


class Insight(BaseModel):
    member: str
    insight: str | None


class SynthesisStructure(BaseModel):
    """The chairman's structured reply, its labels mapped back to member ids (what is stored and shown)."""

    answer: str | None
    agreements: list[str | None] = Field(default_factory=list)
    disagreements: list[Disagreement] = Field(default_factory=list)
    minority_view: str | None = None
    unique_insights: list[Insight] = Field(default_factory=list)
    blind_spots: list[str | None] = Field(default_factory=list)

    def without_text(self) -> SynthesisStructure:
        """The same structure with every text None: what is kept when transcripts are off."""
        return SynthesisStructure(
            answer=None,
            agreements=[None for _ in self.agreements],
            disagreements=[
                Disagreement(point=None, positions=[Position(summary=None, members=p.members) for p in d.positions])
                for d in self.disagreements
            ],
            minority_view=None,
            unique_insights=[Insight(member=i.member, insight=None) for i in self.unique_insights],
            blind_spots=[None for _ in self.blind_spots],
        )


@lru_cache(maxsize=64)
def synthesis_model(labels: tuple[str, ...]) -> type[BaseModel]:
    """The validating model of the chairman's reply over the answers' ``labels``: every object
    closed and every field required (what strict structured output and the local grammar need)."""
    strict = ConfigDict(extra="forbid")
    label = Annotated[str, WithJsonSchema({"type": "string", "enum": list(labels)})]

    class ChairPosition(BaseModel):
        model_config = strict
        summary: Text = Field(description="one position on the point")
        members: list[label] = Field(description="the labels of the answers that hold it")  # type: ignore[valid-type]

    class ChairDisagreement(BaseModel):
        model_config = strict
        point: Text = Field(description="what the answers disagree about")
        positions: list[ChairPosition]

    class ChairInsight(BaseModel):
        model_config = strict
        member: label = Field(description="the label of the one answer that saw it")  # type: ignore[valid-type]
        insight: Text

    class ChairSynthesis(BaseModel):
        model_config = strict
        answer: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)] = Field(
            description="the final answer to the question, in markdown"
        )
        agreements: list[Text] = Field(description="points the answers agree on")
        disagreements: list[ChairDisagreement]
        minority_view: Text = Field(description="a view only a minority of the answers hold; empty if none")
        unique_insights: list[ChairInsight]
        blind_spots: list[Text] = Field(description="what no answer considered")

    return ChairSynthesis


@lru_cache(maxsize=64)
def _schema_json(labels: tuple[str, ...]) -> str:
    return json.dumps(synthesis_model(labels).model_json_schema())


def synthesis_schema(labels: tuple[str, ...]) -> dict[str, Any]:
    """The JSON schema of ``synthesis_model(labels)`` (a fresh dict: providers and grammars may change it)."""
    return json.loads(_schema_json(labels))


def structure_of(parsed: Any, label_to_member: Mapping[str, str]) -> tuple[SynthesisStructure, list[str]]:
    """The validated reply with its labels mapped to member ids, and the labels it named that no
    answer had (left out: a position keeps its summary, an insight without its answer goes)."""
    invented: list[str] = []

    def members(labels: Sequence[str]) -> list[str]:
        known = []
        for lab in labels:
            member = label_to_member.get(lab)
            if member is None:
                invented.append(lab)
            elif member not in known:
                known.append(member)
        return known

    disagreements = [
        Disagreement(
            point=d.point,
            positions=[Position(summary=p.summary, members=members(p.members)) for p in d.positions],
        )
        for d in parsed.disagreements
    ]
    insights = []
    for i in parsed.unique_insights:
        found = members([i.member])
        if found:
            insights.append(Insight(member=found[0], insight=i.insight))
    structure = SynthesisStructure(
        answer=parsed.answer,
        agreements=[a for a in parsed.agreements if a],
        disagreements=disagreements,
        minority_view=parsed.minority_view or None,
        unique_insights=insights,
        blind_spots=[b for b in parsed.blind_spots if b],
    )
    return structure, list(dict.fromkeys(invented))


def invented_labels_flag(labels: Sequence[str]) -> str:
    shown = ", ".join(json.dumps(lab[:20], ensure_ascii=False) for lab in labels[:5])
    return f"the chairman named answers that do not exist ({shown}); left out of the synthesis"


def disagreement_section(structure: SynthesisStructure) -> str:
    """The short markdown section chat clients read after the answer."""
    lines = [f"### {SECTION_HEADING}", ""]
    for d in structure.disagreements:
        held = "; ".join(
            f"{p.summary or ''} ({', '.join(p.members)})" if p.members else p.summary or "" for p in d.positions
        )
        lines.append(f"- **{_one_line(d.point or '')}**" + (f": {_one_line(held)}" if held else ""))
    if structure.minority_view:
        lines.append(f"- Minority view: {_one_line(structure.minority_view)}")
    if len(lines) == 2:
        lines.append("The answers did not disagree on any point that matters.")
    return "\n".join(lines)


def _one_line(text: str) -> str:
    return " ".join(text.split())


# -- the answer's text while the reply streams ------------------------------------------------
_OPENING = re.compile(r'\s*(?:```(?:json)?\s*)?\{\s*"answer"\s*:\s*"')
_OPENING_LIMIT = 64  # longer than any opening the pattern allows with ordinary whitespace
_HEX = frozenset("0123456789abcdefABCDEF")
_STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*', re.DOTALL)  # a JSON string's text up to its closing quote


class AnswerStream:
    """The decoded text of the reply's ``answer`` string, piece by piece as the reply streams in.

    The well-kept partial-JSON parsers (pydantic-core's ``from_json(allow_partial=...)``, jiter)
    parse the whole reply again for every piece: time quadratic in a long answer. Here each
    character is read once; the JSON library decodes each piece of the string's text, with an
    escape split across pieces (``\\``, ``\\u00``, a surrogate pair's first half) held until it
    is whole, and whitespace at the ends held back (the answer is stripped). A reply that does
    not open with ``{"answer": "`` (a model that ignored the order, or prose) streams nothing:
    its answer goes out whole once validated. ``feed`` returns what can be shown now; joined,
    the pieces are a prefix of the answer the reply holds.
    """

    def __init__(self) -> None:
        self._head = ""
        self._state = "head"  # head -> string -> done | off
        self._held = ""  # raw string text not yet decoded: an escape that is not whole yet
        self._blank = ""  # decoded whitespace not shown yet: the answer is stripped at its ends
        self._started = False

    def feed(self, piece: str) -> str:
        if self._state == "head":
            self._head += piece
            match = _OPENING.match(self._head)
            if match is None:
                if len(self._head) > _OPENING_LIMIT or not _may_open(self._head):
                    self._state = "off"
                return ""
            piece, self._head, self._state = self._head[match.end() :], "", "string"
        if self._state != "string":
            return ""
        return self._decode(piece)

    def _decode(self, piece: str) -> str:
        # What is held begins an escape, so the scan may start there: a few characters read again.
        raw = self._held + piece
        end = _STRING_BODY.match(raw).end()  # type: ignore[union-attr]  # it matches the empty string
        if end < len(raw) and raw[end] == '"':
            self._state = "done"
            text, self._held = raw[:end], ""
        else:  # the string goes on: a trailing lone backslash is past ``end``, a \u escape may be cut
            cut = _whole_escapes_end(raw, end)
            text, self._held = raw[:cut], raw[cut:]
        if not text:
            return ""
        try:
            decoded = self._blank + _STRING_DECODER.decode(f'"{text}"')
        except ValueError:  # an invalid escape: the validated answer goes out whole instead
            self._state = "off"
            return ""
        if not self._started:
            decoded = decoded.lstrip()
        shown = decoded.rstrip()
        self._blank = decoded[len(shown) :]
        self._started = self._started or bool(shown)
        return shown


#: One decoder for every piece: ``json.loads(..., strict=False)`` builds a new one each call.
_STRING_DECODER = json.JSONDecoder(strict=False)


def _may_open(head: str) -> bool:
    """Whether ``head`` can still become the reply's opening ``{"answer": "`` (in a code fence or not)."""
    compact = "".join(head.split())
    for fence in ("```json", "```", ""):
        if fence.startswith(compact):
            return True
        if compact.startswith(fence) and '{"answer":"'.startswith(compact[len(fence) :]):
            return True
    return False


def _whole_escapes_end(raw: str, end: int) -> int:
    """Where the decodable text of ``raw[:end]`` (whole escapes but the last) ends: before a
    ``\\u`` escape with fewer than four hex digits, and before a high surrogate whose low half
    may follow."""
    cut = end
    back = _unicode_escape_before(raw, cut)
    if back != -1 and cut - back < 6 and all(c in _HEX for c in raw[back + 2 : cut]):
        cut = back
        back = _unicode_escape_before(raw, cut)
    if back != -1 and cut - back == 6 and 0xD800 <= int(raw[back + 2 : cut], 16) <= 0xDBFF:
        cut = back
    return cut


def _unicode_escape_before(raw: str, end: int) -> int:
    """Where a ``\\u`` escape begins within the six characters before ``end`` (-1: none)."""
    back = raw.rfind("\\u", max(0, end - 6), end)
    return back if back != -1 and _escape_starts_at(raw, back) else -1


def _escape_starts_at(raw: str, at: int) -> bool:
    """Whether the backslash at ``at`` begins an escape (an even number of backslashes before it)."""
    run = 0
    while at - run - 1 >= 0 and raw[at - run - 1] == "\\":
        run += 1
    return run % 2 == 0
