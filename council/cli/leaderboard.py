"""``council leaderboard`` — which model wins across stored sessions and judged pairs."""

from __future__ import annotations

from pathlib import Path

import click

from council.cli.common import WholeNumber
from council.cli.reports import check_report_targets, write_report
from council.untrusted.inputs import MAX_SEED


@click.command("leaderboard")
@click.option("--council", "council_name", metavar="NAME", help="Only this council's sessions.")
@click.option(
    "--since", metavar="DATE", help="Only sessions and judgments on or after this ISO date or date-time (UTC)."
)
@click.option(
    "--source",
    type=click.Choice(["sessions", "judgments", "all"]),
    default="all",
    show_default=True,
    help="Peer-review rankings of council sessions, judged pairs (batch items naming model_a/model_b), or both.",
)
@click.option(
    "--bootstrap",
    type=WholeNumber(0, 100_000),
    default=200,  # = council.leaderboard.shape.DEFAULT_BOOTSTRAP (not imported: the help loads no pydantic)
    show_default=True,
    metavar="N",
    help="Bootstrap rounds for the 95% intervals (0: none; more: steadier interval ends, slower).",
)
@click.option("--seed", type=WholeNumber(0, MAX_SEED), default=0, show_default=True,
              help="Seed of the bootstrap draws.")
@click.option("--judgments", "judgments", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE", help="Rate the pairwise judgments in FILE (JSON Lines; repeatable) instead of the "
              "database.")
@click.option("--judgments-format", type=click.Choice(["council", "alpaca_eval"]), default="council",
              show_default=True, help="With --judgments: council's JSON Lines, or AlpacaEval's annotations.json.")
@click.option("--control", metavar="length[,markdown]",
              help="Hold these answer styles equal (Bradley–Terry with style covariates; judged pairs only).")
@click.option("--baseline", metavar="MODEL",
              help="Add each model's win rate against MODEL, raw and length-controlled.")
@click.option("--json", "as_json", is_flag=True, help="Print the leaderboard as JSON.")
@click.option("--html", "html", is_flag=False, flag_value="-", default=None, metavar="[FILE]",
              help="The leaderboard as a self-contained HTML page with its chart (to -o FILE or stdout); "
              "--html FILE writes the page to FILE and still prints the leaderboard.")
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False, allow_dash=True), metavar="FILE",
              help="Write the leaderboard (text, --json or --html) to FILE instead of stdout.")
def leaderboard(
    council_name: str | None,
    since: str | None,
    source: str,
    bootstrap: int,
    seed: int,
    judgments: tuple[Path, ...],
    judgments_format: str,
    control: str | None,
    baseline: str | None,
    as_json: bool,
    html: str | None,
    output: str | None,
) -> None:
    """Bradley–Terry ratings per model, with bootstrap intervals, from every stored ranking
    and judged pair (a tie is half a win)."""
    from council.api import leaderboard as build
    from council.api import render_leaderboard_text
    from council.errors import UsageError

    check_report_targets(output, html, as_json=as_json, what="leaderboard", inputs=judgments)
    if judgments:
        clash = [f"--{name.removesuffix('_name')}" for name in ("council_name", "since", "source")
                 if _given(name)]
        if clash:
            raise UsageError(f"{', '.join(clash)} select(s) stored data; --judgments rates the files instead")
        from council.api import judged_leaderboard, parse_control

        board = judged_leaderboard(judgments, judgments_format=judgments_format, control=parse_control(control),
                                   baseline=baseline, bootstrap=bootstrap, seed=seed)
    else:
        if _given("judgments_format"):
            raise UsageError("--judgments-format need(s) --judgments files")
        from council.api import parse_control

        board = build(council=council_name, since=since, source=source, bootstrap=bootstrap, seed=seed,
                      baseline=baseline, control=parse_control(control))

    def page() -> str:
        from council.api import render_leaderboard_html

        return render_leaderboard_html(board)

    write_report(
        output,
        html,
        as_json=as_json,
        page=page,
        json_text=lambda: board.model_dump_json(indent=2) + "\n",
        render_text=lambda console: render_leaderboard_text(board, console),
    )


def _given(name: str) -> bool:
    """The option was typed on the command line (not its default)."""
    from click.core import ParameterSource

    return click.get_current_context().get_parameter_source(name) is ParameterSource.COMMANDLINE
