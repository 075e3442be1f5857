"""``council store copy --to URL`` — move a store (e.g. a council.db) into another database."""

from __future__ import annotations

import click


@click.group()
def store() -> None:
    """Move the stored sessions, judgments and bias records between databases."""


@store.command("copy")
@click.option(
    "--to",
    "to_url",
    required=True,
    metavar="URL",
    help="The store to copy into: postgresql://USER@HOST:PORT/DB, postgresql://USER@/DB?host=/DIR or sqlite:///PATH.",
)
@click.option(
    "--from",
    "from_url",
    metavar="URL",
    help="The store to copy from (default: the one COUNCIL_DATABASE_URL names, else $COUNCIL_HOME/council.db).",
)
def copy(to_url: str, from_url: str | None) -> None:
    """Copy every row into another store, resumably: run it again after an interruption and
    rows already copied are skipped (never written twice, never changed)."""
    from council.api import copy_store
    from council.cli.common import status

    results, source, target = copy_store(
        to_url,
        from_url,
        progress=lambda t: status(f"{t.table}: {t.copied} copied, {t.already_there} already there"),
    )
    status(f"copied {sum(t.copied for t in results)} rows from {source} into {target}")
