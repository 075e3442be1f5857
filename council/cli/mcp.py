"""``council mcp`` — the council's tools for MCP clients (editors, agents), over stdio."""

from __future__ import annotations

import math

import click


def _a_number(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if math.isnan(value):  # passes the range (comparisons with NaN are false); sleep(nan) would spin
        raise click.BadParameter(f"{value} is not a number of seconds")
    return value


@click.command("mcp")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="Council TOML file (default: $COUNCIL_CONFIG, $COUNCIL_HOME/council.toml, else the offline default).",
)
@click.option(
    "--heartbeat",
    type=click.FloatRange(0.05, 3600),
    callback=_a_number,
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="A long tool reports progress at least this often (clients reset their timeouts on it).",
)
def mcp(config_path: str | None, heartbeat: float) -> None:
    """Serve the Model Context Protocol over stdio: tools council_run, council_compare,
    council_grade, council_leaderboard, council_bias_report and council_sessions.

    Started by an MCP client (see the README for the client's config); needs the mcp extra.
    """
    from council.mcp import serve

    serve(config_path, heartbeat)
