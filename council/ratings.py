"""The leaderboard's ratings from counted comparisons (pure: no I/O).

:class:`Leaderboard` (its shape, :mod:`council.leaderboard.shape`) is what every output prints
(text, JSON, HTML, the server, MCP); :func:`build_leaderboard` fills it from
:class:`~council.storage.ComparisonData` with the Bradley–Terry fit and intervals of
:mod:`council.methods.bradley_terry`. Reading the store is :mod:`council.leaderboard.stored`,
judgment files and style control :mod:`council.leaderboard.judged`. docs/methods.md,
"Leaderboard".
"""

from __future__ import annotations

import numpy as np

from council.errors import UsageError
from council.leaderboard.shape import (  # noqa: F401  (the leaderboard's names, found here too)
    DEFAULT_BOOTSTRAP,
    MAX_BOOTSTRAP,
    SCALE,
    SOURCES,
    Leaderboard,
    ModelRating,
    Source,
    StyleCoefficient,
)
from council.methods.bradley_terry import CI_LEVEL, PRIOR_GAMES, Stratum, components, rate, win_matrix
from council.storage import ComparisonData


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
        confidence=CI_LEVEL,
        prior_games=PRIOR_GAMES,
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
