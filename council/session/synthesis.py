"""Stage 3 in the structured form (``synthesis = "structured"``, the default): one chairman's
reply under :mod:`council.session.structured`'s schema, validated and re-asked like a review.

The answer's text is told as the chairman writes it (``synthesis_delta`` events), the partial
line (:mod:`council.session.degraded`) in front of it; once the reply validates, the rest of the
answer and the "Where the council disagreed" section follow. The synthesis's ``text`` is what a
user reads (the line, the answer, the section); its ``structure`` carries the parts, the
anonymous labels mapped back to members.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING

from council.providers.asking import ask_valid
from council.session import prompts
from council.session.degraded import Lead, with_partial_line
from council.session.early_events import Notice
from council.session.structured import (
    SYNTHESIS_SCHEMA_NAME,
    AnswerStream,
    disagreement_section,
    invented_labels_flag,
    structure_of,
    synthesis_model,
    synthesis_schema,
)
from council.session.turns import OneTurn
from council.untrusted.redaction import add_private
from council.untrusted.slots import neutralise

if TYPE_CHECKING:
    from council.config import ResolvedModel
    from council.providers.client import ModelClient
    from council.session.results import Synthesis
    from council.session.stages import RunState

RESTATED = "the chairman's answer did not follow the format at first; here it is in full, as validated"


@lru_cache(maxsize=64)
def output_instruction(labels: tuple[str, ...]) -> str:
    """What the chairman's prompt says about the structured reply (the schema quoted as data)."""
    schema = neutralise(json.dumps(synthesis_schema(labels), ensure_ascii=False, separators=(",", ":")))
    return (
        "Reply with one JSON object only, no prose around it, that matches this JSON schema: "
        f'{schema}. Write the final answer first, in "answer" (markdown; it is shown to the user as it is). '
        "Then list what the answers agree on, where they disagree (each position with the labels of the "
        "answers that hold it), the view only a minority holds (empty if none), what only one answer saw "
        "(with its label) and what no answer considered. Say which answers hold what only in the "
        "members and member fields, by label; the texts are read by people who never see the labels."
    )


async def structured_synthesis(
    run: RunState,
    client: ModelClient,
    chair: ResolvedModel,
    messages: list[dict[str, str]],
    label_to_member: Mapping[str, str],
    *,
    fallback: bool,
    lead: str | None,
) -> Synthesis:
    """``chair``'s structured synthesis (status "failed" with the reason when no valid reply came)."""
    from council.session.events import SynthesisDelta
    from council.session.results import Synthesis

    labels = tuple(label_to_member)
    turn = OneTurn(lambda text: run.emit(SynthesisDelta, chairman=chair.id, text=text))
    first = Lead(lead)
    shown: list[str] = []  # what this chairman's deltas have said so far

    def out(text: str) -> None:
        if text := first.first(text):
            shown.append(text)
            turn.add(text)

    def stream(attempt: int) -> Callable[[str], None] | None:
        if run.on_event is None or attempt > 1:  # a re-asked reply's answer is told once it validates
            return None
        answer = AnswerStream()
        return lambda piece: out(answer.feed(piece))

    try:
        reply = await ask_valid(
            client,
            messages,
            synthesis_model(labels),
            schema=synthesis_schema(labels),
            schema_name=SYNTHESIS_SCHEMA_NAME,
            retry_message=prompts.synthesis_retry_message,
            stage="synthesis",
            seed=run.seed,
            max_attempts=run.council.max_review_attempts,
            sink=run.calls,
            stream=stream,
        )
    finally:
        turn.flush()  # what this chairman wrote goes out before anything said after it
    if reply.parsed is None:
        error = str(reply.error) if reply.error is not None else reply.problem
        return Synthesis(status="failed", chairman=chair.id, error=error, attempts=reply.attempts)
    structure, invented = structure_of(reply.parsed, label_to_member)
    if invented:
        run.flags.append(invented_labels_flag(invented))
    body = with_partial_line(lead, reply.parsed.answer)
    told = "".join(shown)
    if run.on_event is not None:
        if not body.startswith(told):  # a re-asked reply: what was told is not its answer
            run.emit(Notice, level="warning", text=RESTATED)
            told = ""
        rest = body[len(told) :]
        run.emit(SynthesisDelta, chairman=chair.id, text=f"{rest}\n\n{disagreement_section(structure)}")
    text = f"{body}\n\n{disagreement_section(structure)}"
    add_private(text)
    return Synthesis(
        status="ok",
        chairman=chair.id,
        model=chair.model,
        text=text,
        fallback_used=fallback,
        attempts=reply.attempts,
        structure=structure,
    )
