"""The local-judge benchmark's own counting (no model run): position-driven swap pairs and
valid passes against labels, from rows shaped as the database stores them."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

from bench_local_judge import pass_agreement, position_driven  # noqa: E402


def passes_of(run: str, a_first: str | None, b_first: str | None) -> list[dict]:
    """One judge's two passes; None for an invalid pass. Winners are in the original labels."""
    return [
        {"run_id": run, "judge": "j", "vote": 1, "shown_first": shown, "valid": int(w is not None), "winner": w}
        for shown, w in (("A", a_first), ("B", b_first))
    ]


ITEMS = [
    {"run_id": "first", "label": "A", "winner": "TIE"},  # A-first picks A, B-first picks B
    {"run_id": "second", "label": "B", "winner": "TIE"},  # A-first picks B, B-first picks A
    {"run_id": "steady", "label": "B", "winner": "B"},  # both pick B
    {"run_id": "half", "label": "A", "winner": None},  # one pass invalid: no swap pair
    {"run_id": "tied", "label": "A", "winner": "A"},  # A, then TIE: inconsistent, not position-driven
]
PASSES = [
    *passes_of("first", "A", "B"),
    *passes_of("second", "B", "A"),
    *passes_of("steady", "B", "B"),
    *passes_of("half", "A", None),
    *passes_of("tied", "A", "TIE"),
]


def test_position_driven_pairs_and_the_ties_they_became():
    assert position_driven(ITEMS, PASSES) == {
        "swap_pairs": 4,
        "agreeing_pairs": 1,
        "first_shown_both": 1,
        "second_shown_both": 1,
        "items_position_driven": 2,
        "position_driven_items_tied": 2,
    }


def test_valid_passes_of_every_item_against_the_label():
    assert pass_agreement(ITEMS, PASSES) == {
        "valid_passes": 9,
        # first: A; second: B; steady: B, B; half: A; tied: A
        "picked_label": 6,
        # first: both; steady: B shown first; half: A shown first; tied: A shown first
        "picked_first_shown": 5,
        "picked_tie": 1,
    }
