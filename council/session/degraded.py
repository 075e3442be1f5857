"""Honest degradation: whether a council was partial, and the one line that says so.

A partial council (a member that failed or was late, too few reviews, a fallback chairman)
must not present its answer with a whole council's authority. :func:`partial_line` is the one
place that decides it and words it; the synthesis stage puts the line first in the text every
interface shows (the CLI, a chat completion's content, the web app, MCP). Whatever makes a
session partial adds its reason to ``RunState.partial_reasons`` before the chairman writes: the
line is made from those reasons and from whether the fallback chairman writes. A reason that comes
only while or after the chairman writes (the spend cap reached by another call) makes the runner
restate the line (:func:`restated`); without a synthesis, :func:`reader_text` puts the line in
front of the member's answer that stands in for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from council.session.results import SessionResult, Synthesis

PARTIAL_PREFIX = "Partial council:"
NO_SYNTHESIS = "no synthesis"
"""How the runner's reason for a failed synthesis begins (``no synthesis: <why>``)."""
_NO_SYNTHESIS_SAID = f"{NO_SYNTHESIS} (the chairman failed)"
_MAX_CHARS = 400


def partial_line(reasons: Sequence[str], *, fallback_chairman: str | None = None) -> str | None:
    """The first line of a partial council's answer, or None when the council was whole.

    ``reasons``: why the session is partial so far, in words (``RunState.partial_reasons``);
    ``fallback_chairman``: the id of the fallback chairman when it writes the answer."""
    parts = [" ".join(r.split()) for r in reasons if r.strip()]
    if fallback_chairman is not None:
        parts.append(f"the chairman failed, so the fallback chairman {fallback_chairman} wrote this answer")
    if not parts:
        return None
    line = f"{PARTIAL_PREFIX} {'; '.join(parts)}."
    return line if len(line) <= _MAX_CHARS else line[: _MAX_CHARS - 1] + "…"


def partial_line_of(result: SessionResult) -> str | None:
    """The line for a finished session (a ``SessionResult``): every reason it was partial, and
    the fallback chairman if one wrote its answer. Views that show more than the answer put it
    first; a failed synthesis is named without its cause, which they tell as the error."""
    s = result.synthesis
    reasons = [_NO_SYNTHESIS_SAID if r.startswith(NO_SYNTHESIS) else r for r in result.partial_reasons]
    return partial_line(reasons, fallback_chairman=s.chairman if s.fallback_used else None)


def with_partial_line(line: str | None, text: str) -> str:
    """``text`` after ``line`` and a blank line (``text`` itself when the council was whole)."""
    return text if line is None else f"{line}\n\n{text}"


def restated(synthesis: Synthesis, reasons: Sequence[str], known: int) -> tuple[Synthesis, str | None]:
    """``synthesis`` with the first line that all ``reasons`` make, when more came after the first
    ``known`` (those the chairman's line was made from) while or after it wrote; and that line,
    which the answer already told did not start with (None: the text was right)."""
    if len(reasons) == known or synthesis.status != "ok" or not synthesis.text:
        return synthesis, None
    fallback = synthesis.chairman if synthesis.fallback_used else None
    told = partial_line(reasons[:known], fallback_chairman=fallback)
    line = partial_line(reasons, fallback_chairman=fallback)
    if line == told:
        return synthesis, None
    text = synthesis.text
    if told is not None and text.startswith(told + "\n\n"):
        text = text[len(told) + 2 :]
    return synthesis.model_copy(update={"text": with_partial_line(line, text)}), line


def reader_text(result: SessionResult) -> str | None:
    """The text a user reads as the council's answer: the synthesis's (its first line says when
    the council was partial); without one, the partial line, a notice naming the top-ranked
    member's answer, and that answer (the line alone when none answered). None when no synthesis
    was asked for."""
    s = result.synthesis
    if s.text:
        return s.text
    if s.status == "skipped":
        return None
    by_member = {a.member: a.text for a in result.answers if a.text}
    order = result.consensus.order if result.consensus else list(by_member)
    best = next((m for m in order if m in by_member), None)
    line = partial_line_of(result)
    if best is None:
        return line or ""
    why = " ".join((s.error or "no synthesis was written").split())[:200]
    notice = (
        f"[Partial answer: the chairman's synthesis failed ({why}); below is the top-ranked member's "
        f"answer ({best}). Session {result.session_id}.]"
    )
    return with_partial_line(line, f"{notice}\n\n{by_member[best]}")


class Lead:
    """Puts the partial line in front of the first text a streamed answer shows."""

    def __init__(self, line: str | None) -> None:
        self.line = line
        self.shown = line is None

    def first(self, text: str) -> str:
        if self.shown or not text:
            return text
        self.shown = True
        return with_partial_line(self.line, text)
