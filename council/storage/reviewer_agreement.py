"""Each council session's reviewers' agreement with its consensus and with each other (rows of
``reviewer_agreement``, written with the session), and their sums over sessions for the bias
report (council.methods.consensus_agreement; docs/methods.md, "Reviewer agreement")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from council.storage.comparisons import session_filter

if TYPE_CHECKING:
    from council.methods.consensus_agreement import AgreementSums
    from council.storage.connection import Backend

#: ``other`` of a row of agreement with the consensus (a primary key column is never NULL).
CONSENSUS = ""


def agreement_rows(result: Any) -> list[dict[str, Any]]:
    """A ``SessionResult``'s agreements (its bias metadata's ``reviewer_agreement``) as rows."""
    bias = getattr(result, "bias", None)
    found = getattr(bias, "reviewer_agreement", None) or ()
    return [
        {"session_id": result.session_id, "reviewer": a.reviewer, "other": a.other or CONSENSUS,
         "kendall_tau": a.kendall_tau, "top1": None if a.top1 is None else int(a.top1), "items": a.items}
        for a in found
    ]  # fmt: skip


def reviewer_agreement_sums(
    store: Backend, *, since: str | None = None, council: str | None = None, reviewers: Sequence[str] = ()
) -> list[AgreementSums]:
    """Per (reviewer, other) over the stored sessions (created since ``since``, of ``council``;
    ``reviewers``: only rows between them and with the consensus): the sums of their agreement."""
    from council.methods.consensus_agreement import AgreementSums  # pydantic: only a report loads it

    where, values = session_filter(since, council)
    if reviewers:
        marks = ", ".join("?" for _ in reviewers)
        where.append(f"a.reviewer IN ({marks}) AND (a.other = ? OR a.other IN ({marks}))")
        values += [*reviewers, CONSENSUS, *reviewers]
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    rows = store.db.execute(
        "SELECT a.reviewer, a.other, COUNT(*), COUNT(a.kendall_tau), COALESCE(SUM(a.kendall_tau), 0),"
        " COUNT(a.top1), COALESCE(SUM(a.top1), 0) FROM reviewer_agreement a JOIN sessions s ON s.id = a.session_id"
        f"{clause} GROUP BY a.reviewer, a.other ORDER BY a.reviewer, a.other",
        values,
    ).fetchall()
    return [
        AgreementSums(reviewer, other or None, sessions=int(n), tau_n=int(tau_n), tau_sum=float(tau_sum),
                      top1_n=int(top1_n), top1=int(top1))  # fmt: skip
        for reviewer, other, n, tau_n, tau_sum, top1_n, top1 in rows
    ]
