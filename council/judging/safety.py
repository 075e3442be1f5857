"""The safety check of a judge's output (rubric grading, see docs/methods.md).

A grade is flagged for human review when the judge reports a safety concern; the
flag is reported, never turned into a score.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

_SAFETY_TERMS = re.compile(
    r"\b(unsafe|harmful|dangerous|hazardous|self[- ]harm|suicid\w*|weapons?|explosives?|bomb-?making|"
    r"malware|ransomware|illegal|violen(?:ce|t)|hate speech|harassment|extremis[mt]\w*|poison\w*|"
    r"safety (?:risks?|issues?|concerns?|hazards?|problems?))\b",
    re.IGNORECASE,
)
_NEGATION = re.compile(r"\b(no|not|without|nothing|none|free of|non)\b", re.IGNORECASE)
_NO_CONCERN = re.compile(r"^\s*(none|n/?a|nothing|no(?: safety)? concerns?|-)?\s*[.!]?\s*$", re.IGNORECASE)
# Keys whose strings come from the rubric or checklist, not from the judge's judgement.
_NOT_JUDGE_TEXT = {"question", "criterion", "rubric", "id", "judge_model", "strategy"}


def mentions_safety_risk(text: str) -> bool:
    """Whether ``text`` names a safety risk, skipping negated mentions ("no harmful content")."""
    for match in _SAFETY_TERMS.finditer(text):
        before = text[max(0, match.start() - 40) : match.start()]
        preceding_words = re.findall(r"[\w-]+", before)[-3:]
        if not _NEGATION.search(" ".join(preceding_words)):
            return True
    return False


def _judge_strings(data: Any, key: str = "") -> Iterator[str]:
    if key in _NOT_JUDGE_TEXT:
        return
    if isinstance(data, str):
        yield data
    elif isinstance(data, Mapping):
        for k, v in data.items():
            yield from _judge_strings(v, str(k))
    elif isinstance(data, list | tuple):
        for v in data:
            yield from _judge_strings(v, key)


def real_concerns(concerns: Sequence[str]) -> list[str]:
    """``safety_concerns`` without placeholder entries such as "None" or "N/A"."""
    return [c for c in concerns if isinstance(c, str) and not _NO_CONCERN.match(c)]


def safety_flagged(report_or_output: BaseModel | Mapping[str, Any] | str) -> bool:
    """Seed 003 step 7: True when a judge's output raises a safety concern.

    Flags when ``safety_flag`` is already set, when ``safety_concerns`` has a real entry,
    or when any of the judge's own text names a safety risk (not negated). Errs on the
    side of flagging: a flag costs a human review, a miss costs more.
    """
    data: Any = report_or_output.model_dump() if isinstance(report_or_output, BaseModel) else report_or_output
    if isinstance(data, str):
        return mentions_safety_risk(data)
    if data.get("safety_flag") is True:
        return True
    if real_concerns(data.get("safety_concerns") or []):
        return True
    return any(mentions_safety_risk(text) for text in _judge_strings(data))
