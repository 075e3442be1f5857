"""A session's result in words, for every front-end that tells people or models about it: what
went wrong (each cause once), and the reviewers' agreement in one line. Pure: no rich, no I/O."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from council.session.results import SessionResult


def w_text(kendall_w: float | None, p: float | None) -> str:
    """Kendall's W and its p-value, as short as the consensus event carries them."""
    if kendall_w is None:
        return "Kendall's W undefined: too few ballots"
    verdict = "" if p is None else (", significant" if p < 0.05 else ", not significant: could be chance")
    return f"Kendall's W = {kendall_w:.3f}" + ("" if p is None else f", p = {p:.3g}") + verdict


def problems(result: SessionResult) -> tuple[list[str], str | None]:
    """What went wrong, each cause said once: warning lines, and the error that makes the
    run a failure (a synthesis that was asked for and is missing), or None."""
    causes: dict[str, list[str]] = {}
    for f in result.failures:
        causes.setdefault(f.stage, []).append(f"{f.member}: {without_prefix(f.error, f.member)}")
    warnings = []
    if causes.get("answer"):
        n, total = len(causes["answer"]), len(result.answers)
        warnings.append(f"{n} of {total} members failed to answer ({'; '.join(causes['answer'])})")
    if causes.get("review"):
        n, total = len(causes["review"]), len(result.reviews)
        warnings.append(f"{n} of {total} reviews invalid or failed ({'; '.join(causes['review'])})")
    if result.late_members:  # still running when their stage closed (stage_grace)
        warnings.append(f"late, not reviewed: {', '.join(result.late_members)}")
    if result.late_reviewers:
        warnings.append(f"late reviews, not counted: {', '.join(result.late_reviewers)}")
    for reason in result.partial_reasons:
        if reason.startswith("no consensus"):
            warnings.append(reason)
    error = None
    if result.synthesis.status == "failed":
        error = f"partial session {result.session_id}: no synthesis ({result.synthesis.error})"
    elif result.synthesis.fallback_used and causes.get("synthesis"):
        warnings.append(
            f"the chairman failed ({'; '.join(causes['synthesis'])}); "
            f"the fallback chairman {result.synthesis.chairman} wrote the answer"
        )
    return warnings, error


def without_prefix(error: str | None, name: str) -> str:
    """A provider's error starts with the model (``fake/x: ...``): where ``name`` is already
    said beside it, once is enough."""
    error = error or "unknown error"
    return error[len(name) + 2 :] if error.startswith(name + ": ") else error

