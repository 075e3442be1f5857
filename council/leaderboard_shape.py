"""The leaderboard's shape: what every output prints (text, JSON, HTML, the server, MCP).

Kept apart from the ratings (:mod:`council.leaderboard.ratings`, which fits them with numpy), so that a
program that only describes a leaderboard (the MCP server publishing its tools' output
schemas at start-up) does not import numpy. docs/methods.md, "Leaderboard".
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

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
    #: None where the games cannot determine it (``lc_reason`` says why), never a diverged fit's number.
    lc_win_rate: float | None = None
    #: How ``lc_win_rate`` was estimated: "own length slope" (AlpacaEval's per-model fit) or
    #: "pooled length slope" (the other models' length effect, where its own games cannot tell
    #: quality from length); None without one.
    lc_method: str | None = None
    #: Why ``lc_win_rate`` is null, or why the pooled slope was used.
    lc_reason: str | None = None
    #: With style control (``--control``): False when the judgments cannot determine this model's
    #: rating with the style held equal (``not_identified`` says why; the rating then rests on the
    #: prior). docs/methods.md, "Style control".
    identified: bool = True
    not_identified: str | None = None


class StyleCoefficient(BaseModel):
    """A style covariate's coefficient (log-odds per standard deviation) and its 95 % Wald
    interval; all null when the judgments cannot determine it (constant, collinear, or separated:
    the favoured side always won), ``identified`` false and ``not_estimable`` saying why."""

    estimate: float | None
    ci: tuple[float, float] | None
    standard_error: float | None
    not_estimable: str | None = None
    identified: bool = True
    #: "wald": one fit's observed information (not the bootstrap the ratings' intervals use).
    ci_method: Literal["wald"] = "wald"


class Leaderboard(BaseModel):
    method: Literal["bradley-terry"] = "bradley-terry"
    bootstrap: int
    seed: int
    #: The intervals' level and the virtual tied games per model against a fixed reference (keeps
    #: every rating finite): the fit's (council.methods.bradley_terry), given by who builds the board.
    confidence: float
    prior_games: float
    scale: str = SCALE
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
