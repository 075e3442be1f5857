"""A session's progress as one line of text per event, for chat clients.

``POST /v1/chat/completions`` with ``stream: true`` sends these lines as ``reasoning_content``
deltas before the answer (Open WebUI and LibreChat show them as a collapsible "thinking" block;
clients that do not know the field skip it). On by default; ``stream_options.include_progress:
false`` turns them back into SSE comment lines. No line carries an answer, a reasoning or the
question: only who did what, rankings and the agreement.
"""

from __future__ import annotations

from typing import Any


def progress_line(event: Any) -> str | None:
    """One line for ``event`` (a council.session.events event), or None for events with no news."""
    kind = event.type
    if kind == "session_started":
        return f"Council {event.council}: {len(event.members)} members answer, {len(event.reviewers)} reviewers rank."
    if kind == "stage":
        return f"Stage {event.stage}: {event.detail}." if event.detail else f"Stage {event.stage}."
    if kind == "answer":
        if event.status == "failed":
            return f"{event.member} failed to answer: {event.error}"
        if event.status == "late":
            return f"{event.member} is late: its answer is not reviewed."
        return f"{event.member} answered ({event.length_chars} characters)."
    if kind == "review":
        if event.status == "late":
            return f"{event.reviewer} is late: its review is not counted."
        if event.status != "ok":
            return f"{event.reviewer}'s review was invalid: {event.error}"
        return f"{event.reviewer} ranked: {' > '.join(event.ranking)}."
    if kind == "stage_closed":
        return (f"Stage {event.stage} closed at its quorum ({event.quorum_seconds:.1f}s, then "
                f"{event.grace_seconds:.1f}s of grace); late: {', '.join(event.late)}.")  # fmt: skip
    if kind == "consensus":
        agreement = f" (Kendall's W = {event.kendall_w:.2f})" if event.kendall_w is not None else ""
        return f"Consensus: {' > '.join(event.order)}{agreement}."
    if kind == "notice":
        return f"Note: {event.text}"
    return None
