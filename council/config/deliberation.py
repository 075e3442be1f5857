"""``[councils.X] deliberation``: when a council runs a second round (docs/methods.md, "Deliberation").

The keys are plain settings of the council's table (``deliberation``, ``deliberation_threshold``,
``deliberation_margin``, ``max_rounds``); :class:`DeliberationSettings` is what a resolved council
carries, checked once when the file is read.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DeliberationMode = Literal["off", "auto", "always"]

#: The most rounds a session may add: each is a call per member and per reviewer.
MAX_ROUNDS = 3


class DeliberationSettings(BaseModel):
    """When a session runs a deliberation round, and how many at most."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    mode: DeliberationMode = "off"
    threshold: float = Field(default=0.5, ge=0, le=1)
    """``auto``: a round when the reviewers' Kendall's W is below this."""
    margin: float | None = Field(default=None, ge=0, le=1)
    """``auto``: also a round when the top two answers' mean normalised Borda points differ by at most this."""
    max_rounds: int = Field(default=1, ge=1, le=MAX_ROUNDS)

    @property
    def enabled(self) -> bool:
        return self.mode != "off"
