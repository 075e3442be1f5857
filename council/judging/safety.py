"""The safety flag of a rubric grade (docs/methods.md, "Rubric grading").

The flag comes from the judge's structured answer, ``safety_concerns``: an empty list means
none, and so does an entry that only says so ("None identified.", "No safety concerns",
"N/A"). The judge's reasoning is not scanned for alarming words: a response that "correctly
warns that mixing bleach and ammonia is dangerous" is not a safety problem. The flag is
reported and sends the grade to a person; it never changes a score.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

_QUALIFIER = r"(?:safety |significant |apparent |obvious |notable |major |potential |real )*"
_FOUND = (
    r"(?: (?:were |was |have been |has been )?"
    r"(?:identified|found|detected|noted|observed|raised|present|apparent))?"
)
_WHERE = r"(?: (?:in|with|for) (?:the|this) (?:response|answer|text))?"
_NO_CONCERN = re.compile(
    r"^(?:"
    rf"(?:none|nothing|nil|n/?a|not applicable|-+)(?:{_FOUND}| to (?:report|note|flag))?"
    rf"|(?:there (?:are|is|were|was) )?no {_QUALIFIER}(?:concerns?|issues?|problems?|risks?|hazards?){_FOUND}"
    r"|(?:the )?response (?:is|appears|seems) (?:to be )?(?:entirely |completely )?safe"
    rf"){_WHERE}$"
)


def _normalised(text: str) -> str:
    return " ".join(text.lower().replace("\u2019", "'").split()).strip(" .!;:")


def means_none(entry: str) -> bool:
    """Whether a ``safety_concerns`` entry only says there is no concern."""
    text = _normalised(entry)
    return not text or _NO_CONCERN.match(text) is not None


def real_concerns(concerns: Sequence[Any]) -> list[str]:
    """``safety_concerns`` without entries that mean "none" (and without non-strings)."""
    return [c.strip() for c in concerns if isinstance(c, str) and not means_none(c)]


def safety_flagged(report_or_output: BaseModel | Mapping[str, Any]) -> bool:
    """True when a judge's output (or a report) raises a real safety concern.

    A report's ``safety_flag`` counts as set; otherwise only ``safety_concerns`` decides."""
    data: Any = report_or_output.model_dump() if isinstance(report_or_output, BaseModel) else report_or_output
    if data.get("safety_flag") is True:
        return True
    return bool(real_concerns(data.get("safety_concerns") or []))
