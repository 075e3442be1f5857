"""What reviewers must return, as pydantic models built per review.

The model is built for the exact labels a reviewer sees, so the JSON schema sent to
the provider (and to the local models' grammar) already names every label, and the
same model validates the reply: integer scores on the council's scale (3.5, "7" and
11 are rejected, never rounded), non-empty reasoning before each score, and a
ranking that is a permutation of the labels.
"""

from __future__ import annotations

import json
import string
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model, model_validator

PEER_REVIEW_SCHEMA_NAME = "peer_review"
#: A member's reply in a deliberation round (council.session.deliberation.Revision).
REVISION_SCHEMA_NAME = "deliberation_revision"

Reasoning = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


def answer_labels(n: int) -> list[str]:
    """A, B, ..., Z, then AA, AB, ... (a council rarely has more than a handful)."""
    letters = string.ascii_uppercase
    return [letters[i] if i < 26 else letters[i // 26 - 1] + letters[i % 26] for i in range(n)]


@lru_cache(maxsize=256)
def peer_review_model(labels: tuple[str, ...], scale: tuple[int, int]) -> type[BaseModel]:
    """The validating model of one peer review over ``labels`` (in display order)."""
    lo, hi = scale
    label_type: Any = Literal[labels]  # type: ignore[valid-type]
    strict = ConfigDict(extra="forbid")

    evaluation = create_model(
        "Evaluation",
        __config__=strict,
        reasoning=(Reasoning, Field(description="why this score; written before the score")),
        score=(int, Field(strict=True, ge=lo, le=hi, description=f"an integer from {lo} to {hi}")),
    )
    evaluations = create_model(
        "Evaluations",
        __config__=strict,
        **{label: (evaluation, ...) for label in labels},  # type: ignore[call-overload]
    )

    class PeerReview(BaseModel):
        model_config = strict

        evaluations: evaluations  # type: ignore[valid-type]
        ranking: list[label_type] = Field(  # type: ignore[valid-type]
            min_length=len(labels),
            max_length=len(labels),
            json_schema_extra={"uniqueItems": True},
            description="every label exactly once, best first",
        )

        @model_validator(mode="after")
        def _ranking_is_a_permutation(self) -> PeerReview:
            if len(set(self.ranking)) != len(self.ranking):
                dupes = sorted({x for x in self.ranking if self.ranking.count(x) > 1})
                raise ValueError(f"ranking repeats {', '.join(dupes)}; rank every answer exactly once")
            return self

    return PeerReview


@lru_cache(maxsize=256)
def _peer_review_schema_json(labels: tuple[str, ...], scale: tuple[int, int]) -> str:
    return json.dumps(peer_review_model(labels, scale).model_json_schema())


def peer_review_schema(labels: tuple[str, ...], scale: tuple[int, int]) -> dict[str, Any]:
    """The JSON schema of ``peer_review_model(labels, scale)``.

    Generating it is slow and a session needs it once per review call; decoding the cached
    text is far cheaper and gives every caller its own dict, which providers and grammars may
    then change.
    """
    return json.loads(_peer_review_schema_json(labels, scale))


@lru_cache(maxsize=256)
def peer_review_schema_text(labels: tuple[str, ...], scale: tuple[int, int]) -> str:
    """The same schema as compact JSON text, as review prompts quote it (made once, not per review)."""
    return json.dumps(peer_review_schema(labels, scale), separators=(",", ":"))
