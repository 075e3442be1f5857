"""``council cache stats | clear [--older-than DAYS]`` — the call cache in the store."""

from __future__ import annotations

import json
import math

import click


@click.group()
def cache() -> None:
    """The call cache: replies kept for identical requests (run, compare, grade, batch --cache)."""


@cache.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def stats(as_json: bool) -> None:
    """Entries kept, per model, and the calls the cache answered and what they saved."""
    from council.api import cache_stats

    figures = cache_stats()
    if as_json:
        click.echo(json.dumps(figures, indent=2))
        return
    from council.untrusted.terminal import visible

    saved = "unknown" if figures["saved_usd"] is None else f"${figures['saved_usd']:.4f}"
    click.echo(f"{figures['entries']} entries ({figures['bytes']} bytes); oldest {figures['oldest'] or '-'}")
    click.echo(f"{figures['cached_calls']} calls answered from the cache, saving {saved}")
    for model, count in figures["models"].items():
        click.echo(visible(f"  {model}: {count}"))


def _days(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    from council.errors import UsageError

    try:
        days = float(value)
    except ValueError:
        days = math.nan
    if not 0 <= days <= MAX_DAYS:  # NaN too; more days than the calendar holds cannot be a date
        raise UsageError(f"--older-than must be a number of days from 0 to {MAX_DAYS}, got {value[:40]!r}")
    return days


MAX_DAYS = 3_000_000


@cache.command("clear")
@click.option(
    "--older-than", "older_than", metavar="DAYS", callback=_days, help="Only entries written more than DAYS ago."
)
def clear(older_than: float | None) -> None:
    """Delete the kept replies (all of them, or the old ones)."""
    from council.api import clear_cache
    from council.cli.common import status

    removed = clear_cache(older_than_days=older_than)
    status(f"removed {removed} cache entr{'y' if removed == 1 else 'ies'}")
