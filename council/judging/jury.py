"""A batch judged by a jury, looked at as a whole (pure): its rows as the panel analysis's items
(:mod:`council.methods.panel`), and the Dawid–Skene combination over its passes
(:mod:`council.methods.dawid_skene`), which replaces each pair's verdict once every pass of the
batch is in. docs/evaluation/batches.md ("Juries") says what a user sees; docs/methods.md the methods.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from council.methods.adaptive_jury import posterior_verdict
from council.methods.panel import Panel, PanelItem, panel

#: How a jury's verdicts become one per pair: ``vote`` is the combination under the batch's
#: ``--strategy`` (council.methods.averaging.combine_judges), made as each item is judged.
COMBINATIONS = ("vote", "dawid-skene")
DEFAULT_COMBINATION = "vote"


# ------------------------------------------------------------------ the panel


def panel_item(row: Mapping[str, Any]) -> PanelItem | None:
    """A finished pair's row (``Store.batch_rows``) as the panel sees it; None for anything else."""
    result = row.get("result")
    if row["mode"] != "pairwise" or row["status"] != "ok" or not result:
        return None
    verdicts = {j["judge"]: j["result"]["winner"] if j["success"] else None for j in result["judges"]}
    passes = [
        (p["judge"], p["shown_first"], p["winner"])
        for p in result["passes"]
        if p["valid"] and p["shown_first"] and p["winner"]
    ]
    a, b = row.get("length_a"), row.get("length_b")
    longer = None if a is None or b is None or a == b else "A" if a > b else "B"
    return PanelItem(verdicts=verdicts, combined=row["winner"], passes=passes, longer=longer, label=row.get("label"))


class PanelTally:
    """The panel's items gathered from a batch's rows as they are read (a few values a pair)."""

    def __init__(self, judges: Sequence[str]) -> None:
        self.judges = list(judges)
        self.items: list[PanelItem] = []

    def add(self, row: Mapping[str, Any]) -> None:
        item = panel_item(row)
        if item is not None:
            self.items.append(item)

    def result(self) -> Panel | None:
        return panel(self.items, self.judges) if self.items else None


# ------------------------------------------------------------------ Dawid–Skene


@dataclass(frozen=True)
class Combined:
    """A pair's combined verdict and the posterior probability of it."""

    winner: str
    probability: float


def annotator(judge: str, shown_first: str, vote: int) -> tuple[str, str, int]:
    """One annotator: one judge in one order (and, with ``--votes``, one vote of it)."""
    return (judge, shown_first, vote)


def dawid_skene_verdicts(passes: Iterable[Mapping[str, Any]]) -> dict[str, Combined]:
    """Each item's verdict by Dawid–Skene over ``passes`` (``Store.batch_passes``: ``item_id,
    judge, vote, shown_first, winner``), every judge in every order an annotator; no label is read.

    The verdict is the posterior's most likely class: "A", "B", or "TIE" where passes said TIE
    (a class like the others). Where the two most likely classes are equally likely, the
    verdict is "TIE", with that shared probability."""
    from council.methods.dawid_skene import dawid_skene  # numpy: only a batch combined by it loads it

    votes: dict[str, dict[tuple[str, str, int], str]] = {}
    for p in passes:
        votes.setdefault(p["item_id"], {})[annotator(p["judge"], p["shown_first"], p["vote"])] = p["winner"]
    fit = dawid_skene(list(votes.values()))
    combined = {}
    for i, item_id in enumerate(votes):
        winner, top = posterior_verdict(fit.posteriors[i])
        combined[item_id] = Combined(winner, top)
    return combined


def combined_rows(rows: Iterable[dict[str, Any]], verdicts: Mapping[str, Combined]) -> Iterator[dict[str, Any]]:
    """``rows`` with each combined pair's verdict in place of the vote's: the row's ``winner``,
    its result's ``winner`` and ``confidence`` (the posterior probability), and the result gains
    ``combine`` and ``probability``; ``judges_verdict`` keeps the vote's, for comparison."""
    for row in rows:
        combined = verdicts.get(row["item_id"])
        result = row.get("result")
        if combined is not None and row["mode"] == "pairwise" and row["status"] == "ok" and result:
            row["winner"] = result["winner"] = combined.winner
            result["confidence"] = combined.probability
            result["combine"] = "dawid-skene"
            result["probability"] = combined.probability
        yield row
