"""A session's deliberation rounds in words, the same in every front-end (CLI, MCP, web text)."""

from __future__ import annotations

from typing import Any


def _w(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def deliberation_lines(deliberation: Any) -> list[str]:
    """One line per round (why it ran, Kendall's W before → after, who changed, who adopted a
    peer's answer and whether the capitulation guard flagged it), then why no further round ran."""
    if deliberation is None:
        return []
    lines = []
    for r in deliberation.rounds:
        changed = [m.member for m in r.members if m.changed]
        failed = [m.member for m in r.members if m.status == "failed"]
        parts = [f"changed: {', '.join(changed) or 'none'}"]
        for m in r.members:
            if m.adopted_from:
                guard = " with no reason given (capitulation)" if m.capitulation else ""
                parts.append(f"{m.member} adopted {m.adopted_from}'s answer{guard}")
        if failed:
            parts.append(f"no valid reply, kept: {', '.join(failed)}")
        lines.append(
            f"Round {r.round} ({r.trigger}): Kendall's W {_w(r.kendall_w_before)} -> {_w(r.kendall_w_after)}; "
            + "; ".join(parts)
        )
    if deliberation.stopped:
        lines.append(f"Deliberation {'ended' if deliberation.rounds else 'not needed'}: {deliberation.stopped}")
    return lines


def revision_line(member: Any) -> str:
    """One member's reply in a round: changed or kept, similarity to its own earlier answer, adoption."""
    what = "revised its answer" if member.changed else "kept its answer"
    if member.status == "failed":
        what = "gave no valid reply (kept its answer)"
    adopted = f", adopted {member.adopted_from}'s answer" if member.adopted_from else ""
    guard = " with no reason given (capitulation)" if member.capitulation else ""
    return f"{member.member} {what} (similarity to its own {member.similarity_to_own:.2f}{adopted}{guard})"
