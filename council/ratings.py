"""The leaderboard's shape and its ratings from counted comparisons (pure: no I/O).

:class:`Leaderboard` is what every output prints (text, JSON, HTML, the server, MCP);
:func:`build_leaderboard` fills it from :class:`~council.storage.ComparisonData` with the
Bradley–Terry fit and intervals of :mod:`council.methods.bradley_terry`. Reading the store is
:mod:`council.leaderboard`, judgment files and style control :mod:`council.judged_leaderboard`.
docs/methods.md, "Leaderboard".
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from council.errors import UsageError
from council.methods.bradley_terry import CI_LEVEL, PRIOR_GAMES, Stratum, components, rate, win_matrix
from council.storage import ComparisonData

Source = Literal["sessions", "judgments", "all"]
SOURCES: tuple[str, ...] = ("sessions", "judgments", "all")
DEFAULT_BOOTSTRAP = 200  # Chatbot Arena's FastChat tools default to 100; more rounds, steadier interval ends
MAX_BOOTSTRAP = 100_000
SCALE = "rating = 1000 + 400·log10(strength / geometric mean of the strengths): the mean rating is 1000"


class ModelRating(BaseModel):
    model: str
    #: Elo-style: a 400-point gap means 10:1 odds of winning a comparison.
    rating: float
    #: Percentile bootstrap interval (``confidence``); None without bootstrap.
    ci: tuple[float, float] | None
    #: Pairwise comparisons this model took part in (a tie counts once).
    comparisons: int
    #: Comparisons won, a tie as half.
    wins: float
    win_rate: float | None
    #: The connected group (1-based, as in ``Leaderboard.groups``; 1 when every model was compared).
    group: int = 1
    #: Rank within the group; exact ties share one, as "1=".
    rank: str = ""
    #: With a baseline (``--baseline``): percent of this model's games against it won, ties
    #: half, and the same length-controlled (docs/methods.md, "Length-controlled win rate").
    baseline_win_rate: float | None = None
    lc_win_rate: float | None = None


class StyleCoefficient(BaseModel):
    """A style covariate's coefficient (log-odds per standard deviation) and its 95 % Wald
    interval; all null when the judgments cannot determine it, ``not_estimable`` saying why."""

    estimate: float | None
    ci: tuple[float, float] | None
    standard_error: float | None
    not_estimable: str | None = None
    #: "wald": one fit's observed information (not the bootstrap the ratings' intervals use).
    ci_method: Literal["wald"] = "wald"


class Leaderboard(BaseModel):
    method: Literal["bradley-terry"] = "bradley-terry"
    bootstrap: int
    seed: int
    confidence: float = CI_LEVEL
    scale: str = SCALE
    #: Virtual tied games per model against a fixed reference (keeps every rating finite).
    prior_games: float = PRIOR_GAMES
    source: Source
    filters: dict[str, str | None] = Field(default_factory=dict)
    #: Units behind the ratings (the bootstrap resamples them): sessions and judged pairs.
    sessions: int = 0
    judgments: int = 0
    comparisons: int = 0
    #: Group by group (most comparisons first), best first within each group.
    models: list[ModelRating] = Field(default_factory=list)
    #: Style covariates held equal (``--control``; docs/methods.md, "Style control") and their coefficients.
    control: list[str] = Field(default_factory=list)
    coefficients: dict[str, StyleCoefficient] = Field(default_factory=dict)
    baseline: str | None = None
    #: Judgment files rated instead of the database (``--judgments``).
    files: list[str] = Field(default_factory=list)
    #: Groups of models never compared with any model of another group (only when > 1).
    groups: list[list[str]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def build_leaderboard(
    data: ComparisonData,
    *,
    source: Source = "all",
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    filters: dict[str, str | None] | None = None,
    baseline: str | None = None,
) -> Leaderboard:
    """The leaderboard of ``data`` (pure: no I/O); with ``baseline``, each model's win rate against it."""
    strata = [Stratum("sessions", data.sessions), Stratum("judgments", data.judgments)]
    n = len(data.models)
    board = Leaderboard(
        bootstrap=bootstrap,
        seed=seed,
        source=source,
        filters=filters or {},
        sessions=strata[0].units,
        judgments=strata[1].units,
    )
    if n < 2:
        where = "match these filters" if any((filters or {}).values()) else "on record"
        board.notes.append(
            f"No pairwise comparisons {where}: they come from sessions with valid reviews and from "
            'judged pairs whose batch items name "model_a" and "model_b".'
        )
        return board
    wins = win_matrix(strata, n)
    board.comparisons = round(wins.sum())
    against = None
    if baseline is not None:
        if baseline not in data.models:
            raise UsageError(f"--baseline {baseline!r}: no comparison names this model")
        from council.methods.length_controlled import win_rates_against

        board.baseline = baseline
        against = win_rates_against(wins, data.models.index(baseline))
    ratings = rate(strata, n, bootstrap=bootstrap, seed=seed)
    parts = sorted(components(wins), key=lambda part: (-wins[np.ix_(part, part)].sum(), min(part)))
    group_of = {i: g for g, part in enumerate(parts, 1) for i in part}
    board.models = sorted(
        (
            ModelRating(
                model=data.models[r.index],
                rating=r.rating,
                ci=r.ci,
                comparisons=round(r.comparisons),
                wins=r.wins,
                win_rate=r.win_rate,
                group=group_of[r.index],
                baseline_win_rate=None if against is None else _percent(against[r.index]),
            )
            for r in ratings
        ),
        key=lambda m: (m.group, -m.rating, m.model),
    )
    rank_within_groups(board.models)
    if len(parts) > 1:
        board.groups = [[data.models[i] for i in part] for part in parts]
        board.notes.append(
            f"The models fall into {len(parts)} groups never compared with each other: ratings and ranks compare "
            "within a group only (across groups they rest on the prior alone)."
        )
    return board


TIE_POINTS = 1e-6
"""Ratings closer than this (Elo-style points) are an exact tie: the same data, the same rating."""


def rank_within_groups(models: list[ModelRating]) -> None:
    """Competition ranks inside each group (docs/methods.md, "Leaderboard"): 1, 2, 2 is shown 1, 2=, 2=."""
    for i, m in enumerate(models):
        first = i
        while first > 0 and models[first - 1].group == m.group and \
                abs(models[first - 1].rating - m.rating) < TIE_POINTS:
            first -= 1
        start = next(j for j in range(len(models)) if models[j].group == m.group)
        tied = (first < i) or (i + 1 < len(models) and models[i + 1].group == m.group
                               and abs(models[i + 1].rating - m.rating) < TIE_POINTS)
        m.rank = f"{first - start + 1}{'=' if tied else ''}"


def _percent(value: float) -> float | None:
    return None if value != value else float(value)  # NaN: never met the baseline
