"""Honest degradation: whether a council was partial, and the one line that says so.

A partial council (a member that failed or was late, too few reviews, a fallback chairman)
must not present its answer with a whole council's authority. :func:`partial_line` is the one
place that decides it and words it; the synthesis stage puts the line first in the text every
interface shows (the CLI, a chat completion's content, the web app, MCP). Whatever makes a
session partial adds its reason to ``RunState.partial_reasons`` before the chairman writes: the
line is made from those reasons and from whether the fallback chairman writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PARTIAL_PREFIX = "Partial council:"
NO_SYNTHESIS = "no synthesis"
"""How the runner's reason for a failed synthesis begins (``no synthesis: <why>``)."""
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


def partial_line_of(result: Any) -> str | None:
    """The line for a finished session (a ``SessionResult``): every reason it was partial, and
    the fallback chairman if one wrote its answer. Views that show more than the answer put it
    first; a failed synthesis is named without its cause, which they tell as the error."""
    s = result.synthesis
    reasons = [NO_SYNTHESIS if r.startswith(NO_SYNTHESIS) else r for r in result.partial_reasons]
    return partial_line(reasons, fallback_chairman=s.chairman if s.fallback_used else None)


def with_partial_line(line: str | None, text: str) -> str:
    """``text`` after ``line`` and a blank line (``text`` itself when the council was whole)."""
    return text if line is None else f"{line}\n\n{text}"


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
