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
    from council.cli.common import status
    from council.storage import location
    from council.storage.copying import copy_store, open_location

    target_location = location.parse(to_url, source="--to")
    source_location = location.parse(from_url, source="--from") if from_url else location.configured()
    source = open_location(source_location)
    try:
        target = open_location(target_location)
        try:
            results = copy_store(
                source,
                target,
                progress=lambda t: status(f"{t.table}: {t.copied} copied, {t.already_there} already there"),
            )
        finally:
            target.close()
    finally:
        source.close()
    total = sum(t.copied for t in results)
    status(f"copied {total} rows from {source_location.display} into {target_location.display}")
