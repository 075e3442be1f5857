"""Prompts for the three council stages.

The question and every answer are untrusted text: each enters a prompt through
:mod:`council.slots` (its own ``<question>`` / ``<answer label="X">`` slot, with every
tag-like slot name inside it neutralised), so an answer cannot close its slot, open a
fake one, forge the ranking, or pose as instructions outside it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from council.slots import data_not_instructions, neutralise, slot

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
    return {
        "role": "user",
        "content": (
            f"Your previous reply was invalid: {neutralise(problem)}. Reply again with one JSON object that "
            "matches the schema exactly: integer scores within the scale, non-empty reasoning for "
            "every answer, every label ranked exactly once."
        ),
    }


CHAIRMAN_SYSTEM = (
    "You are the chairman of a council of AI models. Several models answered a question and "
    "reviewed each other's answers anonymously. Write the single best final answer to the "
    "question, drawing on the strongest answers (the consensus ranking tells you which the "
    "council preferred) and correcting their mistakes. Answer the user directly; do not "
    "mention the council, the reviews or the ranking. "
    + data_not_instructions((ANSWER_SLOT,))
)


_STRAY_SLOT = re.compile(r"^\s*<answer[^>]*>\s*|\s*</answer>\s*$", re.IGNORECASE)


def clean_synthesis(text: str) -> str:
    """Small models sometimes echo the slot tags around their final answer."""
    return _STRAY_SLOT.sub("", text).strip()


# What may still turn into the stray closing tag (and the whitespace around it) at the end.
_TAIL = re.compile(r"\s*(?:<(?:/(?:a(?:n(?:s(?:w(?:e(?:r(?:>\s*)?)?)?)?)?)?)?)?)?\Z", re.IGNORECASE)
_OPEN = "<answer"


class SynthesisStream:
    """``clean_synthesis`` applied while the chairman's text streams in: ``feed`` returns what can
    be shown now, ``end`` the rest; joined, they equal ``clean_synthesis`` of the whole text.
    Only what could still be a stray tag or edge whitespace is held back (a few characters)."""

    def __init__(self) -> None:
        self._head = ""  # before the first shown character: may be an opening tag
        self._head_done = False
        self._pending = ""  # held back: may become the closing tag
        self._started = False

    def feed(self, piece: str) -> str:
        if not self._head_done:
            self._head += piece
            head = self._head.lstrip()
            if len(head) < len(_OPEN) and _OPEN.startswith(head.lower()):
                return ""  # still possibly the opening tag (or only whitespace)
            if head.lower().startswith(_OPEN):
                end = head.find(">")
                if end < 0:
                    return ""
                head = head[end + 1 :]
            self._head_done = True
            piece, self._head = head, ""
        self._pending += piece
        if not self._started:
            self._pending = self._pending.lstrip()
        held = _TAIL.search(self._pending)
        cut = held.start() if held else len(self._pending)
        shown, self._pending = self._pending[:cut], self._pending[cut:]
        self._started = self._started or bool(shown)
        return shown

    def end(self) -> str:
        if not self._head_done:  # never resolved: the whole text is the head
            return clean_synthesis(self._head)
        rest = re.sub(r"\s*</answer>\s*\Z", "", self._pending, flags=re.IGNORECASE).rstrip()
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
    return {
        "role": "user",
        "content": (
            f"Your previous reply was invalid: {neutralise(problem)}. Reply again with the final answer as one "
            "JSON object that matches the requested format exactly, with no prose around it."
        ),
    }
