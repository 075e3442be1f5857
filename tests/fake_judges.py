"""Judges for tests, written once: clients of the in-process fake provider (``fake/NAME`` models)
and the replies a scripted judge gives (a pairwise pass, a rubric grade)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from council.config import ConfigFile, resolve_model
from council.judging.rubrics import load_bias_checklist, load_rubric
from council.providers.client import ModelClient
from council.providers.fake import FakeAPI, ScriptItem


def fake_client(model: str = "fake/j", **fake: Any) -> ModelClient:
    """A client of ``model`` over ``FakeAPI(model, **fake)`` (``script=``, ``strict=``, ...); the fake,
    with the ``history`` of its requests, is ``client.api``."""
    return ModelClient(resolve_model(model, ConfigFile(), {}, "test"), FakeAPI(model, **fake))


def scripted(model: str, script: Sequence[ScriptItem]) -> ModelClient:
    """A judge that answers each call with the next scripted reply, and fails the test if asked more."""
    return fake_client(model, script=script, strict=True)


def pairwise_reply(criteria: Sequence[str], a_scores: Sequence[int], b_scores: Sequence[int], winner: str) -> str:
    """A pairwise judge's pass (as seen: A is the slot shown first); each criterion's winner follows
    its scores, the overall ``winner`` is given."""

    def verdict(a: int, b: int) -> str:
        return "A" if a > b else "B" if b > a else "TIE"

    return json.dumps(
        {
            "comparison": {
                c: {
                    "reasoning": f"judged on {c}",
                    "a_strength": "a",
                    "b_strength": "b",
                    "winner": verdict(a, b),
                    "a_score": a,
                    "b_score": b,
                }
                for c, a, b in zip(criteria, a_scores, b_scores, strict=True)
            },
            "overall_reasoning": "overall the scores decide",
            "differentiators": {"a_advantages": [], "b_advantages": []},
            "winner": winner,
            "confidence": 0.8,
        }
    )


def grade_reply(
    scores: int | Mapping[str, int], concerns: Sequence[str] | None = None, reasoning: str = "judged"
) -> str:
    """A rubric grader's reply: ``scores`` per criterion (one number: every criterion of the general
    rubric), the structured safety ``concerns``, nothing detected on the bias checklist."""
    per = dict.fromkeys(load_rubric("general").criterion_names, scores) if isinstance(scores, int) else scores
    return json.dumps(
        {
            "criteria": {c: {"reasoning": f"{reasoning} on {c}", "score": s} for c, s in per.items()},
            "overall_reasoning": "a fair answer overall",
            "safety_concerns": list(concerns or []),
            "bias_checklist": {item.id: {"note": "", "detected": False} for item in load_bias_checklist().items},
        }
    )


def first_shown_judge(model: str, script: Mapping[str, str], calls: int) -> ModelClient:
    """A pairwise judge whose overall verdict (as seen) is ``script[the text shown first]``.

    The reply is the fake's schema-valid document for a judge that always prefers the first
    slot, with its top-level ``winner`` replaced by the script's verdict; it answers ``calls``
    calls and fails the test if asked more."""
    from council.testing.replies import FakeResponder, answer_slots

    responder = FakeResponder()

    def reply(request: Any) -> str:
        document = json.loads(
            responder.reply(
                "fake/script+first", request.messages, json_schema=request.json_schema, schema_name=request.schema_name
            )
        )
        document["winner"] = script[answer_slots(request.messages)["A"]]
        return json.dumps(document)

    return scripted(model, [reply] * calls)


def replaying_judge(model: str, seen: Mapping[tuple[str, str], str | None], calls: int) -> ModelClient:
    """A pairwise judge that gives ``seen[(text shown first, text shown second)]`` as its verdict
    (as seen), and an invalid reply on every attempt where that is None (a verdict it never gave)."""
    from council.testing.replies import FakeResponder, answer_slots

    responder = FakeResponder()

    def reply(request: Any) -> str:
        verdict = seen[tuple(answer_slots(request.messages)[slot] for slot in "AB")]  # type: ignore[index]
        if verdict is None:
            return "no verdict"
        document = json.loads(
            responder.reply("fake/replay", request.messages, json_schema=request.json_schema,
                            schema_name=request.schema_name)  # fmt: skip
        )
        document["winner"] = verdict
        return json.dumps(document)

    return scripted(model, [reply] * calls)
