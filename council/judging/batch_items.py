"""A batch item and the settings it is judged with, and judging one item: shared by the batch
run (council.judging.batch) and its workers (council.judging.worker)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer

from council.accounting.usage import CallLog, CallRecord
from council.judging.adaptive import AdaptiveJury
from council.judging.engine import ComparisonOutcome, GradeOutcome, compare, grade
from council.judging.schemas import Rubric
from council.methods.swap import DEFAULT_STRATEGY
from council.methods.voting import GRADE_VOTES, PAIRWISE_VOTES
from council.providers.client import ModelClient
from council.storage import Store

Mode = Literal["pairwise", "grade"]


class BatchItem(BaseModel):
    id: str
    mode: Mode
    line: int
    prompt: str
    a: str | None = None
    b: str | None = None
    response: str | None = None
    reference: str | None = None
    rubric: str | None = None
    context: str | None = None
    metadata: Any = None
    label: Literal["A", "B", "TIE"] | None = None
    gold_score: float | None = None
    model_a: str | None = None
    model_b: str | None = None


def item_digest(item: BatchItem) -> str:
    """What identifies an item's content (everything but its line): an edited item differs."""
    data = item.model_dump(mode="json", exclude={"line"})
    return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class BatchSettings(BaseModel):
    """Everything that changes the results; part of the default batch id."""

    mode: Mode | None = None
    judges: list[str]
    strategy: str = DEFAULT_STRATEGY
    swap: bool = True
    allow_tie: bool = True
    criteria: list[str] | None = None
    rubric: str = "general"
    #: None: each mode's default (a comparison: one swap pair; a grade: three votes).
    votes: int | None = None
    adaptive: bool = False
    max_attempts: int = 3
    #: How a jury's verdicts become one per pair (council.judging.jury.COMBINATIONS).
    combine: Literal["vote", "dawid-skene"] = "vote"
    #: ``--combine dawid-skene --adaptive``: the jury that stops when it is sure, with the
    #: reliabilities it weighs the judges by (council.judging.adaptive).
    jury: AdaptiveJury | None = None

    @model_serializer(mode="wrap")
    def _default_combination_unsaid(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The default leaves the settings as they were before there was a choice: a batch keeps
        # its id (a digest of them) and a stored batch resumes with the same settings.
        data = handler(self)
        if data.get("combine") == "vote":
            del data["combine"]
        if data.get("jury") is None:
            data.pop("jury", None)
        return data

    @property
    def combination(self) -> str:
        """How the pairs' verdicts are combined: ``combine``, or ``adaptive`` for the adaptive jury
        (whose verdicts are made as each pair is judged, not refitted over the batch)."""
        return "adaptive" if self.jury is not None else self.combine


async def judge_item(
    item: BatchItem,
    settings: BatchSettings,
    judges: Sequence[ModelClient],
    rubrics: Mapping[str, Rubric],
    *,
    store: Store,
    keep_text: bool,
) -> tuple[ComparisonOutcome | GradeOutcome, list[CallRecord]]:
    # Calls are written to the batch's database as they start and finish (a kill -9 mid-call
    # leaves them on record); the run itself is recorded, with its item, when it ends.
    run_id = str(uuid.uuid4())
    log = CallLog(store.journal(run_id))
    outcome: ComparisonOutcome | GradeOutcome
    if item.mode == "pairwise":
        outcome = await compare(
            item.prompt,
            item.a or "",
            item.b or "",
            judges=judges,
            criteria=settings.criteria,
            context=item.context,
            allow_tie=settings.allow_tie,
            swap=settings.swap,
            strategy=settings.strategy,
            votes=settings.votes or PAIRWISE_VOTES,
            adaptive=settings.adaptive,
            max_attempts=settings.max_attempts,
            sink=log,
            store=None,
            keep_text=keep_text,
            run_id=run_id,
            jury=settings.jury,
        )
    else:
        outcome = await grade(
            item.prompt,
            item.response or "",
            rubric=rubrics[item.rubric or settings.rubric],
            judges=judges,
            reference=item.reference,
            context=item.context,
            votes=settings.votes or GRADE_VOTES,
            adaptive=settings.adaptive,
            max_attempts=settings.max_attempts,
            sink=log,
            store=None,
            keep_text=keep_text,
            run_id=run_id,
        )
    return outcome, log.records
