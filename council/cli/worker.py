"""``council worker``: judge the queued items of stored batches (``council batch FILE --enqueue``)."""

from __future__ import annotations

import click

from council.cli.common import WholeNumber, lease_seconds_option, max_cost_option
from council.cli.judge import config_option


@click.command()
@click.option("--batch-id", metavar="ID", help="Judge the items of this batch only (default: of any batch).")
@config_option
@click.option("--concurrency", type=WholeNumber(1, 1000), default=8, show_default=True, help="Items in flight.")
@click.option("--follow", is_flag=True, help="Keep waiting for new items when the queue is empty (stop with Ctrl-C).")
@lease_seconds_option
@max_cost_option(
    "Replace the batch's stored spend cap (needs --batch-id); every worker of the batch honours the stored cap "
    "(a batch without one takes [budget] max_cost_usd)."
)
def worker(
    batch_id: str | None,
    config_path: str | None,
    concurrency: int,
    follow: bool,
    lease_seconds: float,
    max_cost: str | None,
) -> None:
    """Claim queued batch items from the store and judge them until none are left.

    Any number of workers, on any machines sharing the store (COUNCIL_DATABASE_URL), judge
    one batch together; keys come from this machine's environment, and a judge reached
    through an api_base from --config. A worker that dies loses nothing: its items return
    to the queue when their lease passes (their calls may then be made again)."""
    import asyncio

    from council.accounting.budget import Budget, BudgetReached, cap_in_force, check_cap
    from council.cli.common import config_and_privacy, status
    from council.errors import CouncilFailure, NotFoundError, UsageError
    from council.judging.batch import batch_budget
    from council.judging.worker import BatchSpec, judges_from_spec, run_worker
    from council.providers.client import ModelClient
    from council.storage import using_store

    cap = None if max_cost is None else check_cap(max_cost)
    if cap is not None and batch_id is None:
        raise UsageError("--max-cost needs --batch-id: a cap is kept with one batch")
    loaded, privacy = config_and_privacy(config_path)
    configured = cap_in_force(None, loaded)  # the cap of a batch that has none of its own
    keep_text = privacy.store_transcripts
    budgets: list[Budget] = []
    with using_store(True) as store:
        assert store is not None
        if batch_id is not None and store.batch_status(batch_id) is None:
            raise NotFoundError(f"no batch {batch_id!r} in the store")

        def judges_for(the_id: str, spec: BatchSpec) -> list[ModelClient]:
            # Each batch's judges under its stored cap (replaced first by --max-cost), shared by
            # every worker of it: docs/methods.md, "Spend caps".
            judges = judges_from_spec(spec, loaded.config)
            budget = batch_budget(store, the_id, cap if the_id == batch_id else None, judges, configured)
            if budget is not None:
                budgets.append(budget)
            return judges

        report = asyncio.run(
            run_worker(
                store,
                judges_for=judges_for,
                batch_id=batch_id,
                concurrency=concurrency,
                follow=follow,
                lease_seconds=lease_seconds,
                keep_text=keep_text,
                hash_prompts=privacy.hash_queries,
                stop=lambda: any(b.reached is not None for b in budgets),
            )
        )
        reached = next((b.totals() for b in budgets if b.reached is not None), None)
    dropped = f", {report.dropped} finished first by another worker" if report.dropped else ""
    stopped = f", {report.stopped} left in the queue at the cap" if report.stopped else ""
    status(f"worker {report.worker}: judged {report.judged} items ({report.failed} failed{dropped}{stopped})")
    if reached is not None:
        raise BudgetReached(*reached)
    if report.failed:
        raise CouncilFailure(f"{report.failed} of {report.judged} items failed; see council batch status")
