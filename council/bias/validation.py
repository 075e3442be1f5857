"""Checks on stored bias records that one record alone cannot show.

A record is validated on its own by :class:`council.bias.records.BiasRecord` (strict
types, a score within its scale) when it is read from a file, and by the database's
CHECK constraint when it is written (m005's rules; a constraint since m017); rows stored
before m005 were checked once by that migration and the invalid ones listed in
``bias_records_invalid``.

Here, at report time:

* the listed invalid rows (only a database from before m005 can have any);
* reviews — the records of one (session, reviewer) — whose positions are not one
  answer per position within the answers of that review: a position at or beyond
  the review's number of records, or two answers at one position.

The store finds them (``Store.bias_sums``, in the same pass as the report's top-position
test); here they become messages.

Problems stop the report with their location (``FILE:LINE`` for records files, the
record id for the database), or with ``skip_bad`` the offending rows and reviews are
left out of every statistic and counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from council.errors import InputError
from council.storage.data import MAX_MESSAGES, BadRecords


@dataclass
class Problems:
    """What the checks found: messages (the first few), and what to leave out."""

    messages: list[str] = field(default_factory=list)
    bad_rows: list[int] = field(default_factory=list)
    bad_reviews: list[tuple[str, str]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.bad_rows or self.bad_reviews)


def review_problem(positions: Sequence[tuple[int, int]]) -> tuple[int, str] | None:
    """(record id, reason) for the first bad record of one review's (position, id) pairs."""
    k = len(positions)
    seen: set[int] = set()
    for pos, rid in sorted(positions):
        if pos >= k:
            return rid, f"position {pos} is beyond the {k} answers of this review"
        if pos in seen:
            return rid, f"two answers at position {pos} in one review"
        seen.add(pos)
    return None


def problems_of(bad: BadRecords, locate: Callable[[int], str]) -> Problems:
    """The store's findings as messages: invalid rows first, then bad reviews (their first bad record)."""
    found = Problems(bad_rows=list(bad.rows), bad_reviews=list(bad.reviews))
    for rid, problem, session, reviewer in bad.row_details:
        if len(found.messages) < MAX_MESSAGES:
            found.messages.append(f"{locate(rid)}: {problem} (session {session}, reviewer {reviewer})")
    for session, reviewer in bad.reviews[:MAX_MESSAGES]:
        first = review_problem(bad.review_positions.get((session, reviewer), []))
        if first is not None and len(found.messages) < MAX_MESSAGES:
            found.messages.append(f"{locate(first[0])}: {first[1]} (session {session}, reviewer {reviewer})")
    return found


def raise_first(problems: Problems, hint: str) -> None:
    more = len(problems.bad_rows) + len(problems.bad_reviews) - 1
    extra = f" ({more} more problems)" if more > 0 else ""
    first = problems.messages[0] if problems.messages else "invalid bias records"
    raise InputError(f"{first}{extra}; {hint}")
