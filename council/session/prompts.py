"""Prompts for the three council stages.

The question and every answer are untrusted text: each enters a prompt through
:mod:`council.untrusted.slots` (its own ``<question>`` / ``<answer label="X">`` slot, with every
tag-like slot name inside it neutralised), so an answer cannot close its slot, open a
fake one, forge the ranking, or pose as instructions outside it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from council.untrusted.slots import data_not_instructions, invalid_reply_message, slot

#: The slots the question and each answer travel in (``<question>``, ``<answer label="X">``).
QUESTION_SLOT = "question"
ANSWER_SLOT = "answer"


def wrap_answer(label: str, text: str) -> str:
    return slot(ANSWER_SLOT, text, label=label)


MEMBER_SYSTEM = (
    "You are a member of a council of AI models. Answer the user's question directly, "
    "accurately and concisely. Other models answer the same question; your answer will be "
    "reviewed anonymously."
)


def member_messages(question: str, history: Sequence[dict[str, str]] = ()) -> list[dict[str, str]]:
    return [{"role": "system", "content": MEMBER_SYSTEM}, *history, {"role": "user", "content": question}]


def review_system(scale: tuple[int, int]) -> str:
    lo, hi = scale
    return (
        "You are an impartial reviewer on a council of AI models. You judge anonymised answers "
        "to a question. Judge each answer solely on merit: correctness, completeness, clarity and "
        "usefulness. The order in which answers appear must have NO influence on your judgement. "
        "Penalise unnecessary wordiness; length is not quality. "
        f"{data_not_instructions((QUESTION_SLOT, ANSWER_SLOT))}\n"
        f"For every answer, write your reasoning first, then give an integer score from {lo} to {hi} "
        f"(whole numbers only; {lo} = worst, {hi} = best). Then rank all answers, best first, "
        "using every label exactly once.\n"
        "Reply with one JSON object only, no prose around it."
    )


def review_messages(
    question: str,
    labelled_answers: Sequence[tuple[str, str]],
    scale: tuple[int, int],
    schema: dict[str, Any] | str,
) -> list[dict[str, str]]:
    """``schema``: the reply's JSON schema, or its compact JSON text (schemas.peer_review_schema_text)."""
    labels = [label for label, _ in labelled_answers]
    schema_text = schema if isinstance(schema, str) else json.dumps(schema, separators=(",", ":"))
    slots = "\n\n".join(wrap_answer(label, text) for label, text in labelled_answers)
    example = {
        "evaluations": {label: {"reasoning": "<why, citing the answer>", "score": "<integer>"} for label in labels[:1]},
        "ranking": labels,
    }
    user = (
        f"Question:\n{slot(QUESTION_SLOT, question)}\n\n"
        f"Answers ({len(labels)}: {', '.join(labels)}):\n\n{slots}\n\n"
        f'Return JSON with "evaluations" (one entry per label: "reasoning" then "score") and '
        f'"ranking" (all labels, best first). Shape, abbreviated: {json.dumps(example)}\n'
        f"JSON schema: {schema_text}"
    )
    return [{"role": "system", "content": review_system(scale)}, {"role": "user", "content": user}]


def review_retry_message(problem: str) -> dict[str, str]:
    return invalid_reply_message(
        problem,
        "with one JSON object that matches the schema exactly: integer scores within the scale, non-empty "
        "reasoning for every answer, every label ranked exactly once.",
    )


CHAIRMAN_SYSTEM = (
    "You are the chairman of a council of AI models. Several models answered a question and "
    "reviewed each other's answers anonymously. Write the single best final answer to the "
    "question, drawing on the strongest answers (the consensus ranking tells you which the "
    "council preferred) and correcting their mistakes. Answer the user directly; do not "
    "mention the council, the reviews or the ranking. " + data_not_instructions((ANSWER_SLOT,))
)


# Small models sometimes echo the answer slot's tags around their final answer, or open another
# slot as they stop ("...scattering.\n<answer>"). The tags taken as stray: an opening tag
# (``<answer``, at most 100 characters of attributes, ``>``) before everything else, and any run of
# closing and opening tags after everything else. Both ends are found in time linear in the
# text: the end by matching the text read backwards (a provider may stream megabytes of
# whitespace or tags, and a search from every position would take time quadratic in them).
_ATTRIBUTES = 100
_STRAY_OPEN = re.compile(rf"\s*<answer[^>]{{0,{_ATTRIBUTES}}}>\s*", re.IGNORECASE)
_OPEN = "<answer"
_OPEN_TAG_LIMIT = len(_OPEN) + _ATTRIBUTES + 1  # the ">" of a stray opening tag comes before this
# Read backwards: whitespace and whole tags; then (for the stream) what may still become a tag.
_TAGS_BACKWARDS = re.compile(rf"(?:\s|>rewsna/<|>(?:[^>]{{0,{_ATTRIBUTES}}}\s)?rewsna<)*", re.IGNORECASE)
_PART_BACKWARDS = re.compile(
    rf"(?:[^>]{{0,{_ATTRIBUTES}}}\s)?rewsna<|(?:(?:(?:(?:(?:r?e)?w)?s)?n)?a)?/?<", re.IGNORECASE
)


def _stray_end(text: str, start: int = 0, part: bool = False) -> tuple[int, int]:
    """Where the run of whitespace and stray tags that ends ``text`` begins (not before
    ``start``), and where the tag still being written at its very end begins (``len(text)``:
    none, or ``part`` false: such a tag is not counted)."""
    backwards = text[: start - 1 if start else None : -1]
    held = _PART_BACKWARDS.match(backwards) if part else None
    at = held.end() if held else 0
    return len(text) - _TAGS_BACKWARDS.match(backwards, at).end(), len(text) - at


def clean_synthesis(text: str) -> str:
    """The chairman's text without the stray slot tags at its ends (see above), stripped."""
    head = _STRAY_OPEN.match(text)
    start = head.end() if head else 0
    return text[start : _stray_end(text, start)[0]].strip()


class SynthesisStream:
    """``clean_synthesis`` applied while the chairman's text streams in: ``feed`` returns what can
    be shown now, ``end`` the rest; joined, they equal ``clean_synthesis`` of the whole text.
    Held back: only what could still be a stray tag or edge whitespace, at most
    :data:`HELD_LIMIT` characters (beyond that, what is held goes out as it is, and the shown
    text may end with whitespace or tags that the final, cleaned text has not). Each piece costs
    time about linear in its length."""

    HELD_LIMIT = 4096

    def __init__(self) -> None:
        self._head = ""  # before the first shown character (stripped): may be an opening tag
        self._head_done = False
        self._pending = ""  # held back: may become whitespace and tags at the end
        self._settled = 0  # how much of _pending is whole tags and whitespace (no part of a tag)
        self._started = False

    def feed(self, piece: str) -> str:
        if not self._head_done:
            head = (self._head + piece).lstrip()
            if len(head) < len(_OPEN) and _OPEN.startswith(head.lower()):
                self._head = head
                return ""  # still possibly the opening tag (or only whitespace)
            if head[: len(_OPEN)].lower() == _OPEN:
                tag = _STRAY_OPEN.match(head)
                if tag is None and len(head) < _OPEN_TAG_LIMIT:
                    self._head = head
                    return ""  # its ">" may still come (one in reach would have made it a tag)
                if tag is not None:
                    head = head[tag.end() :]
            self._head_done = True
            piece, self._head = head, ""
        text = self._pending + piece
        if not self._started:
            text = text.lstrip()
            self._settled = 0
        cut, part = _stray_end(text, self._settled, part=True)
        if cut == self._settled:  # all of the new text may still be held: so may what was before
            cut = 0
        cut = max(cut, len(text) - self.HELD_LIMIT)  # a tag being written is far shorter: kept whole
        shown, self._pending = text[:cut], text[cut:]
        self._settled = part - cut  # the next piece may complete that tag: read again from there
        self._started = self._started or bool(shown)
        return shown

    def end(self) -> str:
        if not self._head_done:  # never resolved: the whole text is the head
            return clean_synthesis(self._head)
        rest = self._pending[: _stray_end(self._pending)[0]].rstrip()
        return rest if self._started else rest.lstrip()


def synthesis_messages(
    question: str,
    ranked_answers: Sequence[tuple[str, str]],
    history: Sequence[dict[str, str]] = (),
    output_format: str | None = None,
) -> list[dict[str, str]]:
    """``ranked_answers``: (label, text) in consensus order, best first. ``output_format``:
    the caller's format instruction (``JsonFormat.instruction()``), appended to the request."""
    slots = "\n\n".join(
        f"Consensus rank {i}:\n{wrap_answer(label, text)}" for i, (label, text) in enumerate(ranked_answers, 1)
    )
    user = (
        f"Question:\n{slot(QUESTION_SLOT, question)}\n\n"
        f"The council's answers, in consensus order (best first):\n\n{slots}\n\n"
        "Write the final answer now."
    )
    if output_format:
        user += f" {output_format}"
    return [{"role": "system", "content": CHAIRMAN_SYSTEM}, *history, {"role": "user", "content": user}]


def synthesis_retry_message(problem: str) -> dict[str, str]:
    return invalid_reply_message(
        problem,
        "with the final answer as one JSON object that matches the requested format exactly, with no prose "
        "around it.",
    )
