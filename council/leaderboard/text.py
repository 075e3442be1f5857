"""The leaderboard as text for people and models: ``council leaderboard``, and the MCP tool's
text, both print it through here."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from council.leaderboard.shape import Leaderboard


def render_leaderboard_text(board: Leaderboard, console: Console) -> None:
    """The table, then what it rests on: style coefficients, the baseline, the scale and notes."""
    from rich.table import Table
    from rich.text import Text

    from council.untrusted.terminal import visible

    units = f"{board.sessions} sessions, {board.judgments} judged pairs, {board.comparisons} comparisons"
    if not board.models:
        for note in board.notes:
            console.print(visible(note), markup=False, highlight=False)
        return
    intervals = f"{board.confidence:.0%} CI, {board.bootstrap} bootstrap rounds" if board.bootstrap else "no bootstrap"
    table = Table(title=f"Leaderboard: Bradley–Terry ({units}; {intervals})")
    several = len(board.groups) > 1  # ranks are within a group: groups never compared have no order
    columns = ["group"] if several else []
    columns += ["rank", "model", "rating", "95% CI", "comparisons", "win rate"]
    if board.baseline is not None:
        columns += ["vs baseline", "LC vs baseline"]
    for col in columns:
        table.add_column(col, justify="left" if col == "model" else "right")
    for m in board.models:
        ci = "-" if m.ci is None else f"{m.ci[0]:.0f} – {m.ci[1]:.0f}"
        rate = "-" if m.win_rate is None else f"{m.win_rate:.1%}"
        row = [str(m.group)] if several else []
        rating = f"{m.rating:.0f}" + ("" if m.identified else " *")
        row += [m.rank, Text(visible(m.model)), rating, ci, str(m.comparisons), rate]
        if board.baseline is not None:
            row += ["-" if v is None else f"{v:.1f}%" for v in (m.baseline_win_rate, m.lc_win_rate)]
        table.add_row(*row)
    console.print(table)
    for m in board.models:
        if not m.identified:  # the style decides its comparisons: say so beside the number
            console.print(f"* {visible(m.model)}: rating {m.not_identified or 'not identified'}",
                          markup=False, highlight=False)  # fmt: skip
    if board.control:
        console.print(f"Style held equal: {', '.join(board.control)}. Coefficients (log-odds per sd, 95% Wald CI):",
                      markup=False, highlight=False)
        for name, c in board.coefficients.items():
            line = (f"{c.estimate:+.3f} ({c.ci[0]:+.3f} to {c.ci[1]:+.3f})" if c.estimate is not None and c.ci
                    else c.not_estimable or "not estimable")  # fmt: skip
            console.print(f"  {name}: {line}", markup=False, highlight=False)
    if board.baseline is not None:
        console.print(f"Baseline: {visible(board.baseline)} (win rates in percent of games against it, ties half).",
                      markup=False, highlight=False)
        for m in board.models:
            if m.lc_reason is not None:  # null, or the other models' length slope: say why
                console.print(f"LC {visible(m.model)}: {visible(m.lc_reason)}", markup=False, highlight=False)
    console.print(
        "Scale: Elo-style, mean rating 1000; a 400-point gap means 10:1 odds of winning a comparison.",
        markup=False,
        highlight=False,
    )
    for note in board.notes:
        console.print(f"note: {visible(note)}", markup=False, highlight=False)
    for i, group in enumerate(board.groups, 1):
        console.print(f"group {i}: {visible(', '.join(group))}", markup=False, highlight=False)
