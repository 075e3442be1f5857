"""Which model wins, across every stored ranking and judged pair: Bradley–Terry ratings with
bootstrap intervals (``council leaderboard``).

A model is its model string, so one model pools across councils and members. The data
come from :mod:`council.storage.comparisons`, the board from :mod:`council.leaderboard.ratings`; this module
reads the store and says what the numbers can and cannot tell. With ``control`` or a
baseline, council's judged pairs (``Store.judged_pairs``, with their answers' lengths and
markdown counts) are rated as a judgments file of them would be
(:mod:`council.leaderboard.judged`). docs/methods.md, "Leaderboard" and "Style control".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from council.errors import UsageError
from council.leaderboard.ratings import (  # noqa: F401  (the leaderboard's names, found here too)
    DEFAULT_BOOTSTRAP,
    MAX_BOOTSTRAP,
    SCALE,
    SOURCES,
    TIE_POINTS,
    Leaderboard,
    ModelRating,
    Source,
    StyleCoefficient,
    build_leaderboard,
    rank_within_groups,
)
from council.storage import Store, using_store

if TYPE_CHECKING:
    from council.leaderboard.judgment_files import Judgment


def leaderboard(
    store: Store | bool = True,
    *,
    council: str | None = None,
    since: str | None = None,
    source: str = "all",
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    baseline: str | None = None,
    control: Sequence[str] = (),
) -> Leaderboard:
    """Ratings from the database (``store``; True: ``$COUNCIL_HOME/council.db``).

    ``since``: a date or ISO date-time as a user gives it; ``council`` keeps that council's
    sessions only (judged pairs belong to no council); ``source`` picks sessions,
    judgments or both; ``bootstrap`` rounds (0: no intervals) drawn with ``seed``.
    ``control``: hold these styles equal (``length``, ``markdown``): the judged pairs are rated
    as a judgments file of them would be (docs/methods.md, "Style control").
    """
    from council._util.clock import parse_since

    if source not in SOURCES:
        raise UsageError(f"--source must be one of {', '.join(SOURCES)}, got {source!r}")
    if not 0 <= bootstrap <= MAX_BOOTSTRAP:
        raise UsageError(f"--bootstrap must be between 0 and {MAX_BOOTSTRAP}, got {bootstrap}")
    if council is not None and source == "judgments":
        raise UsageError("--council selects sessions; judged pairs belong to no council (use --source sessions or all)")
    if control and (source == "sessions" or council is not None):
        raise UsageError("--control holds style equal in judged pairs, which belong to no council: "
                         "use it without --council and --source sessions")  # fmt: skip
    stored_since = parse_since(since) if since is not None else None
    pairs: list[Judgment] | None = None
    with using_store(store) as opened:
        assert opened is not None, "the leaderboard reads a store"
        if control or (baseline is not None and source != "sessions" and council is None):
            from council.leaderboard.judged import stored_judgments

            # The fit needs them all: read as judgments, each row let go once converted.
            pairs = stored_judgments(opened.judged_pairs(since=stored_since))
        if not control:
            data = opened.comparisons(
                since=stored_since,
                council=council,
                sessions=source in ("sessions", "all"),
                judgments=source in ("judgments", "all") and council is None,
            )
    if control:
        assert pairs is not None
        return _controlled(pairs, source, control, baseline, bootstrap, seed, stored_since)
    board = build_leaderboard(
        data,
        source=source,  # type: ignore[arg-type]
        bootstrap=bootstrap,
        seed=seed,
        filters={"council": council, "since": stored_since},
        baseline=baseline,
    )
    if baseline is not None and board.models and pairs is None:
        board.notes.append("lc_win_rate comes from judged pairs, which --source sessions and --council leave out.")
    elif baseline is not None and board.models:
        _stored_lc(board, pairs or [], baseline)
    if council is not None and source == "all":
        board.notes.append("--council keeps that council's sessions only: judged pairs belong to no council.")
    return board


def _styled(pairs: Sequence[Judgment], control: Sequence[str]) -> tuple[list[Judgment], int]:
    """The pairs that carry every style ``control`` needs, and how many do not (recorded before
    council kept them: left out, never counted as 0)."""
    sides = {"length": ("length_a", "length_b"), "markdown": ("markdown_a", "markdown_b")}
    need = [key for name in control for key in sides[name]]
    kept = [j for j in pairs if all(getattr(j, k) is not None for k in need)]
    return kept, len(pairs) - len(kept)


def _controlled(
    pairs: list[Judgment],
    source: str,
    control: Sequence[str],
    baseline: str | None,
    bootstrap: int,
    seed: int,
    since: str | None,
) -> Leaderboard:
    from council.leaderboard.judged import rate_judgments

    kept, left = _styled(pairs, [*control, "length"] if baseline else control)
    board = rate_judgments(kept, control=control, baseline=baseline, bootstrap=bootstrap, seed=seed)
    board.filters = {"council": None, "since": since}
    if left:
        board.notes.append(f"{left} judged pairs recorded without their answers' lengths and markdown counts "
                           "(before council kept them) are left out.")  # fmt: skip
    if source == "all":
        board.notes.append("--control rates judged pairs only: sessions' peer-review rankings are left out "
                           "(style control compares two answers at a time).")  # fmt: skip
    return board


def _stored_lc(board: Leaderboard, pairs: list[Judgment], baseline: str) -> None:
    """Each model's ``lc_win_rate`` from the judged pairs against ``baseline`` that carry lengths."""
    from council.leaderboard.judged import length_controlled

    games = [j for j in pairs if baseline in (j.model_a, j.model_b)]
    kept, left = _styled(games, ["length"])
    if not kept:
        board.notes.append("lc_win_rate needs judged pairs against the baseline with their answers' lengths: "
                           f"none on record{f' ({left} recorded before council kept lengths)' if left else ''}.")
        return
    length_controlled(board, kept, {m.model: i for i, m in enumerate(board.models)}, baseline)
    if left:
        board.notes.append(f"{left} judged pairs against the baseline recorded without their answers' lengths "
                           "(before council kept them) are left out of lc_win_rate.")  # fmt: skip
