"""``council worker``: judge the queued items of stored batches (``council batch FILE --enqueue``)."""

from __future__ import annotations

import click

from council.cli.judge import config_option


@click.command()
@click.option("--batch-id", metavar="ID", help="Judge the items of this batch only (default: of any batch).")
@config_option
@click.option("--concurrency", type=click.IntRange(1, 1000), default=8, show_default=True, help="Items in flight.")
@click.option("--follow", is_flag=True, help="Keep waiting for new items when the queue is empty (stop with Ctrl-C).")
@click.option(
    "--lease-seconds",
    type=click.FloatRange(1, 3600),
    default=60.0,
    show_default=True,
    help="How long an item claimed by a worker that stopped answering stays held before another worker takes it "
    "(a live worker renews its claims every third of this).",
)
def worker(batch_id: str | None, config_path: str | None, concurrency: int, follow: bool, lease_seconds: float) -> None:
    """Claim queued batch items from the store and judge them until none are left.

    Any number of workers, on any machines sharing the store (COUNCIL_DATABASE_URL), judge
    one batch together; keys come from this machine's environment, and a judge reached
    through an api_base from --config. A worker that dies loses nothing: its items return
    to the queue when their lease passes (their calls may then be made again)."""
    import asyncio

    from council.cli.common import status
    from council.config import load_config, resolve_privacy
    from council.errors import CouncilFailure, NotFoundError
    from council.judging.worker import judges_from_spec, run_worker
    from council.storage import using_store

    loaded = load_config(config_path)
    keep_text = resolve_privacy(loaded).store_transcripts
    with using_store(True) as store:
        assert store is not None
        if batch_id is not None and store.batch_status(batch_id) is None:
            raise NotFoundError(f"no batch {batch_id!r} in the store")
        report = asyncio.run(
            run_worker(
                store,
                judges_for=lambda _id, spec: judges_from_spec(spec, loaded.config),
                batch_id=batch_id,
                concurrency=concurrency,
                follow=follow,
                lease_seconds=lease_seconds,
                keep_text=keep_text,
            )
        )
    dropped = f", {report.dropped} finished first by another worker" if report.dropped else ""
    status(f"worker {report.worker}: judged {report.judged} items ({report.failed} failed{dropped})")
    if report.failed:
        raise CouncilFailure(f"{report.failed} of {report.judged} items failed; see council batch status")
