"""Plain data that crosses the storage seam: what a query is asked, what it returns.

No SQL and no connection here: a backend fills these, callers read them. Statistics
are computed outside storage (council.bias, council.leaderboard.stored) from these sums.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

Pair = tuple[int, int]
Outcomes = dict[Pair, float]
#: (n, Σx, Σx²) of one group of scores.
Sums = tuple[int, float, float]
#: How many bad rows and reviews are described (the bias report quotes the first).
MAX_MESSAGES = 20


@dataclass
class ComparisonData:
    """Every unit's outcomes, grouped: ``sessions``/``judgments`` are ``(units, outcomes)``
    lists over indices into ``models`` (alphabetical, only models with a comparison)."""

    models: list[str] = field(default_factory=list)
    sessions: list[tuple[int, Outcomes]] = field(default_factory=list)
    judgments: list[tuple[int, Outcomes]] = field(default_factory=list)


def group_outcomes(keyed: Iterable[tuple[Iterable[tuple[Pair, float]], int]]) -> list[tuple[int, Outcomes]]:
    """Identical outcomes merged and sorted, so the same comparisons give the same groups (and
    the same bootstrap draws) whatever order they were stored or listed in: the store's judged
    pairs and the same pairs in a judgments file rate alike."""
    merged: dict[tuple[tuple[Pair, float], ...], int] = {}
    for outcomes, units in keyed:
        key = tuple(sorted(outcomes))
        merged[key] = merged.get(key, 0) + units
    return [(merged[key], dict(key)) for key in sorted(merged)]


@dataclass(frozen=True)
class BiasQuery:
    """Which bias records the report reads (docs/methods.md, "Bias audit").

    ``since``: stored-form UTC time; ``reviewers`` select whose scores count everywhere
    except the calibration baseline; ``reference_scale``: records without a scale are
    taken to be on it, and mixed scales are rescaled to it."""

    since: str | None = None
    reviewers: tuple[str, ...] = ()
    council: str | None = None
    length_unit: Literal["words", "chars"] | None = None
    """None: words, or characters when no answer selected has a word count."""
    max_points: int = 0
    skip_bad: bool = False
    reference_scale: tuple[int, int] = (1, 10)


@dataclass
class BadRecords:
    """What the record checks found (council.bias.validation turns it into messages).

    ``rows``: ids of rows listed invalid, with ``(id, problem, session, reviewer)`` for
    the first ``MAX_MESSAGES``; ``reviews``: (session, reviewer) of reviews whose
    positions are inconsistent, with the first ones' ``(position, id)`` pairs."""

    rows: list[int] = field(default_factory=list)
    row_details: list[tuple[int, str, str, str]] = field(default_factory=list)
    reviews: list[tuple[str, str]] = field(default_factory=list)
    review_positions: dict[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.rows or self.reviews)


@dataclass
class BiasSums:
    """Every per-group sum the bias report needs, read in one snapshot.

    When records are bad and ``skip_bad`` is off, only ``bad`` is filled (the report stops).
    ``sessions`` rows, in session id order: answers, records, then over the answers with a
    length: n, Σx, Σy, Σx², Σy², Σxy (x = length, y = mean score received).
    ``self_preference``: reviewer → (n, Σown, Σothers, Σd, Σd², then over the answers whose
    reviewer has gaps on the session's other answers n, Σg, Σc, Σc², g its mean gap there, c = d − g).
    ``reviewer_offsets``: every reviewer → (reviews with a gap to the other reviewers on shared
    answers, Σ and Σ² of those reviews' mean gaps). ``positions`` in ascending
    order (the report lists them so), over every selected reviewer; ``reviewer_positions`` the
    same per selected reviewer. ``review_blocks``: (reviewer, the positions a review has
    scores at) → (reviews, Σ of their totals, Σ of their totals²), every valid review of a
    selected reviewer; ``unblocked``: reviews whose positions could not be told (more than 53
    answers, some without a score). ``top_positions``: review size k → counts of the
    top-scored position. ``points``: (length, mean score) of the first ``max_points``
    answers in (session id, model) order. Sums of floats may differ in the last bits
    between backends; counts may not."""

    scales: list[tuple[int | None, int | None]] = field(default_factory=list)
    normalized: bool = False
    length_unit: Literal["words", "chars"] = "words"
    """What ``sessions`` and ``points`` measure lengths in (the query's, or the fallback)."""
    bad: BadRecords = field(default_factory=BadRecords)
    skipped_records: int = 0
    unscored: int = 0
    reviewers: dict[str, Sums] = field(default_factory=dict)
    positions: dict[int, Sums] = field(default_factory=dict)
    reviewer_positions: dict[str, dict[int, Sums]] = field(default_factory=dict)
    review_blocks: dict[tuple[str, tuple[int, ...]], Sums] = field(default_factory=dict)
    unblocked: int = 0
    orderings: int = 0
    left_out: int = 0
    top_positions: dict[int, list[int]] = field(default_factory=dict)
    sessions: list[tuple[int, int, int, float, float, float, float, float]] = field(default_factory=list)
    self_preference: dict[str, tuple[int, float, float, float, float, int, float, float, float]] = field(
        default_factory=dict
    )
    reviewer_offsets: dict[str, Sums] = field(default_factory=dict)
    points: list[tuple[float, float]] = field(default_factory=list)
