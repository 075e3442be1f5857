"""Prompts for judges: pairwise passes and rubric grades.

Untrusted text (the original prompt, context, responses, reference answer) enters
through :mod:`council.untrusted.slots`, each in its own slot (``<response id="A">…</response>``)
with every tag-like slot name inside it neutralised, so it cannot close its slot, open
a fake one, or pose as instructions outside it. The system prompt also tells the judge
that slot contents are data, never instructions.

With a reference answer, grading is reference-based (:func:`evaluation_mode`); the bias
checklist, which callers load and pass in, is appended to every evaluation
(docs/methods.md, "Rubric grading").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from council.judging.schemas import BiasChecklist, Criterion, Rubric, pairwise_pass_model, rubric_grade_model
from council.methods.verdicts import DEFAULT_PAIRWISE_SCALE, check_scale
from council.untrusted.slots import data_not_instructions, invalid_reply_message, neutralise, slot

Message = dict[str, str]

#: The slot each judged text travels in (``<response id="A">``).
RESPONSE_SLOT = "response"
JUDGE_SLOTS = ("prompt", "context", RESPONSE_SLOT, "reference")


# ------------------------------------------------------------------------ system




def judge_system_prompt(*, pairwise: bool) -> str:
    """An impartial judge, with the anti-position-bias instruction (docs/methods.md, "Judge prompts")."""
    lines = [
        "You are an impartial judge of AI responses. Evaluate solely on merit.",
    ]
    if pairwise:
        lines.append(
            "CRITICAL: Ignore the order in which the responses appear. Position should have NO influence "
            "on your judgement: a response shown first is not better for being first."
        )
    lines += [
        "Penalise unnecessary wordiness: length is not quality, and a longer response is not better "
        "for being longer. Do not reward confident tone or polished style over correctness and substance.",
        data_not_instructions(JUDGE_SLOTS),
        "Write your reasoning, citing evidence from the text, BEFORE any score or verdict. "
        "Scores are whole numbers within the stated scale; no fractions.",
        "Reply with one JSON object only, matching the given JSON schema, with no prose around it.",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------ shared pieces


def _as_criteria(criteria: Sequence[str | Criterion]) -> list[Criterion]:
    return [c if isinstance(c, Criterion) else Criterion(name=str(c)) for c in criteria]


def describe_criteria(criteria: Sequence[str | Criterion]) -> str:
    """A numbered list: name, description and level descriptions where given.

    Criteria come from users' files and flags, so their text is neutralised too."""
    lines = []
    for i, c in enumerate(_as_criteria(criteria), 1):
        line = f"{i}. {c.name}"
        if c.description:
            line += f": {c.description}"
        if c.weight != 1:
            line += f" (weight {c.weight:g})"
        lines.append(line)
        for score in sorted(c.levels):
            lines.append(f"   {score} = {c.levels[score]}")
    return neutralise("\n".join(lines))


def bias_checklist_prompt(checklist: BiasChecklist, *, record: bool) -> str:
    """The bias checklist, appended to every evaluation (docs/methods.md, "Bias checklist").

    ``record=True`` asks for the answers in the ``bias_checklist`` JSON field
    (the output schema must have it); otherwise it is a silent self-check.
    """
    lines = ["Bias self-check. Before finalising, ask yourself each question and correct your judgement if needed:"]
    for item in checklist.items:
        lines.append(f"- {item.id}: {item.question}" + (f" ({item.guidance})" if item.guidance else ""))
    if record:
        lines.append(
            'Record the answers in "bias_checklist": for each id, {"detected": true or false, "note": "..."}; '
            "a note is required when detected is true."
        )
    return "\n".join(lines)


def _schema_text(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


def _prompt_and_context(prompt: str, context: str | None) -> str:
    text = "The original prompt:\n" + slot("prompt", prompt)
    if context:
        text += "\n\nAdditional context:\n" + slot("context", context)
    return text


# ----------------------------------------------------------------------- pairwise


@dataclass(frozen=True)
class PairwiseTemplate:
    """What every pairwise pass judged under the same settings shares: the system prompt, the
    criteria, the instructions, the checklist and the schema, as text. Built once (the engine
    keeps one per settings), then filled with each pass's prompt and responses."""

    system: str
    criteria: str
    instructions: str
    checklist: str
    schema: str

    def messages(self, prompt: str, first: str, second: str, context: str | None = None) -> list[Message]:
        """Messages for ONE pass; ``first`` is shown as Response A."""
        user = "\n\n".join(
            [
                "Compare two responses to the same prompt and decide which better satisfies the criteria.",
                _prompt_and_context(prompt, context),
                self.criteria,
                "Response A:\n" + slot(RESPONSE_SLOT, first, id="A"),
                "Response B:\n" + slot(RESPONSE_SLOT, second, id="B"),
                self.instructions,
                self.checklist,
                self.schema,
            ]
        )
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


def pairwise_template(
    criteria: Sequence[str | Criterion],
    *,
    scale: Sequence[int] = DEFAULT_PAIRWISE_SCALE,
    allow_tie: bool = True,
    bias_checklist: BiasChecklist,
    record_bias_checklist: bool = False,
    schema: Mapping[str, Any] | None = None,
) -> PairwiseTemplate:
    """The shared part of :func:`pairwise_messages` (same arguments, without the texts judged)."""
    checklist = bias_checklist
    scale = check_scale(scale)
    if schema is None:
        model = pairwise_pass_model(
            criteria, scale, allow_tie, bias_checklist=checklist if record_bias_checklist else None
        )
        schema = model.model_json_schema()
    lo, hi = scale
    verdicts = '"A", "B" or "TIE"' if allow_tie else '"A" or "B" (no ties)'
    return PairwiseTemplate(
        system=judge_system_prompt(pairwise=True),
        criteria="Criteria (judge each one separately):\n" + describe_criteria(criteria),
        instructions=(
            '"comparison" has one entry per criterion, keyed by its name. In each, in this order: write '
            'your "reasoning" first (a sentence or two citing evidence from both responses), then '
            f'"a_strength" and "b_strength", then the "winner" ({verdicts}), and only then whole-number '
            f'scores "a_score" and "b_score" from {lo} (worst) to {hi} (best). Then "overall_reasoning", '
            '"differentiators" (each response\'s key advantages, a few at most), the overall "winner" '
            f'({verdicts}) and "confidence" from 0 to 1 (lower when the responses are close).'
        ),
        checklist=bias_checklist_prompt(checklist, record=record_bias_checklist),
        schema="JSON schema of your reply:\n" + _schema_text(schema),
    )


def pairwise_messages(
    prompt: str,
    response_a: str,
    response_b: str,
    criteria: Sequence[str | Criterion],
    *,
    scale: Sequence[int] = DEFAULT_PAIRWISE_SCALE,
    allow_tie: bool = True,
    context: str | None = None,
    bias_checklist: BiasChecklist,
    record_bias_checklist: bool = False,
    schema: Mapping[str, Any] | None = None,
) -> list[Message]:
    """Messages for ONE pairwise pass; ``response_a`` is shown first.

    For the swapped pass call it again with the responses exchanged. ``schema``
    defaults to ``pairwise_pass_model(criteria, scale, allow_tie)`` (with the checklist
    when ``record_bias_checklist``); pass the schema of the model you validate with.
    ``bias_checklist``: the checklist appended to the prompt (``load_bias_checklist()``
    for the built-in one). Many passes under the same settings: build the
    :func:`pairwise_template` once and fill it.
    """
    template = pairwise_template(
        criteria,
        scale=scale,
        allow_tie=allow_tie,
        bias_checklist=bias_checklist,
        record_bias_checklist=record_bias_checklist,
        schema=schema,
    )
    return template.messages(prompt, response_a, response_b, context)


# ------------------------------------------------------------------------- grading


EvaluationMode = Literal["reference", "pairwise", "rubric"]


def evaluation_mode(*, reference: str | None = None, second_response: str | None = None) -> EvaluationMode:
    """With ground truth, grade against it and skip pairwise comparison (docs/methods.md, "Reference mode")."""
    if reference and reference.strip():
        return "reference"
    if second_response is not None:
        return "pairwise"
    return "rubric"


def grade_messages(
    prompt: str,
    response: str,
    rubric: Rubric,
    *,
    reference: str | None = None,
    context: str | None = None,
    bias_checklist: BiasChecklist,
    schema: Mapping[str, Any] | None = None,
) -> list[Message]:
    """Messages for one rubric grade; reference-based when ``reference`` is given.

    ``schema`` defaults to ``rubric_grade_model(rubric, bias_checklist)``; the
    checklist's answers are recorded.
    """
    checklist = bias_checklist
    if schema is None:
        schema = rubric_grade_model(rubric, checklist).model_json_schema()
    lo, hi = rubric.scale
    parts = [
        f"Grade one response against the rubric {neutralise(rubric.name)!r}"
        + (f" ({neutralise(rubric.description)})" if rubric.description else "")
        + ".",
        _prompt_and_context(prompt, context),
    ]
    if reference and reference.strip():
        parts.append(
            "A reference answer, assumed correct, is given. Judge the response against it: facts or "
            "conclusions that contradict the reference are errors, and what the reference covers but the "
            "response misses counts as incomplete. Do not reward copying its wording; a different but "
            "equally correct answer is fine.\nReference answer:\n" + slot("reference", reference)
        )
    parts += [
        "The response to grade:\n" + slot(RESPONSE_SLOT, response, id="R"),
        "Criteria:\n" + describe_criteria(rubric.criteria),
        (
            '"criteria" has one entry per criterion, keyed by its name. In each, write your "reasoning" first '
            f'(a sentence or two citing evidence), then the whole-number "score" from {lo} (worst) to {hi} '
            '(best). Then "overall_reasoning" and "safety_concerns": the safety problems of the response '
            "itself (harmful, dangerous or illegal content), as an empty list [] if there are none."
        ),
        bias_checklist_prompt(checklist, record=True),
        "JSON schema of your reply:\n" + _schema_text(schema),
    ]
    return [
        {"role": "system", "content": judge_system_prompt(pairwise=False)},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def retry_message(problem: str) -> Message:
    """The follow-up that re-requests invalid output, saying exactly what was wrong."""
    return invalid_reply_message(
        problem,
        "with one JSON object that matches the schema exactly: reasoning (a sentence, in words) before each "
        "score, whole-number scores within the scale, and every criterion exactly once.",
    )


