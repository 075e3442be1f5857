"""The rows of a deliberating session's rounds (``round_answers``, ``round_reviews``; migration m027).

Round 0 is the first answers and reviews; round r ≥ 1 the answers after deliberation round r,
each with its member's log of that round, and the reviews of them. A round in which no member
changed its answer has answer rows (the same answers, each logged) and no reviews (none ran).
The ``answers`` and ``reviews`` tables keep the last round's, as the session's result does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

Rows = dict[str, list[dict[str, Any]]]


def round_rows(result: Any, keep_text: bool, rows_of: Callable[[Any, bool], Rows]) -> Rows:
    """``round_answers`` and ``round_reviews`` rows of ``result`` (a ``SessionResult``; none
    when it did not deliberate); ``rows_of`` makes answer and review rows as the session's own
    tables hold them (council.storage.sql_store)."""
    d = getattr(result, "deliberation", None)
    if d is None or not d.rounds:
        return {"round_answers": [], "round_reviews": []}
    answers = {e.round: e.answers for e in d.earlier}
    reviews = {e.round: e.reviews for e in d.earlier}
    last = len(d.earlier)  # the round whose answers were reviewed last
    answers[last], reviews[last] = result.answers, result.reviews
    for r in d.rounds:
        answers.setdefault(r.round, result.answers)  # a round nobody changed in: the same answers
    logs = {r.round: {m.member: m for m in r.members} for r in d.rounds}
    answer_rows, review_rows = [], []
    for number in sorted(answers):
        shown = SimpleNamespace(session_id=result.session_id, answers=answers[number], reviews=reviews.get(number, []))
        rows = rows_of(shown, keep_text)
        for row in rows["answers"]:
            log = logs.get(number, {}).get(row["member"])
            answer_rows.append({**row, "round": number, **_log_columns(log, keep_text)})
        review_rows += [{**row, "round": number} for row in rows["reviews"]]
    return {"round_answers": answer_rows, "round_reviews": review_rows}


def _log_columns(log: Any, keep_text: bool) -> dict[str, Any]:
    if log is None:
        return {}
    return {
        "changed": int(log.changed),
        "similarity_to_own": log.similarity_to_own,
        "similarity_to_peers": json.dumps(log.similarity_to_peers),
        "adopted_from": log.adopted_from,
        "reason": log.reason if keep_text else None,
        "capitulation": int(log.capitulation),
        **({"error": log.error} if log.error else {}),  # its revision failed: it kept its answer
    }
