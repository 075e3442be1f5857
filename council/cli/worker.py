"""``council worker``: judge the queued items of stored batches (``council batch FILE --enqueue``)."""

from __future__ import annotations

from collections.abc import Callable

import click

from council.cli.common import (
    WholeNumber,
    lease_seconds_option,
    log_format_option,
    max_cost_option,
    metrics_address_option,
)
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
@log_format_option
@metrics_address_option("while the worker runs")
def worker(
    batch_id: str | None,
    config_path: str | None,
    concurrency: int,
    follow: bool,
    lease_seconds: float,
    max_cost: str | None,
    log_format: str,
    metrics_address: tuple[str, int] | None,
) -> None:
    """Claim queued batch items from the store and judge them until none are left.

    Any number of workers, on any machines sharing the store (COUNCIL_DATABASE_URL), judge
    one batch together; keys come from this machine's environment, and a judge reached
    through an api_base from --config. A worker that dies loses nothing: its items return
    to the queue when their lease passes (their calls may then be made again)."""
    from council import run_queue_worker
    from council._util.ops_log import WorkerLines, configure_ops_log, unconfigure_ops_log
    from council.api import observe_calls
    from council.cli.common import status
    from council.errors import CouncilFailure

    configure_ops_log(log_format)
    stops = [observe_calls(WorkerLines()), unconfigure_ops_log]
    if metrics_address is not None:
        stops += _serve_metrics(*metrics_address)
    try:
        done = run_queue_worker(config_path, batch_id=batch_id, concurrency=concurrency, follow=follow,
                                lease_seconds=lease_seconds, max_cost=max_cost)  # fmt: skip
    finally:
        for stop in reversed(stops):
            stop()
    report = done.report
    dropped = f", {report.dropped} finished first by another worker" if report.dropped else ""
    stopped = f", {report.stopped} left in the queue at the cap" if report.stopped else ""
    status(f"worker {report.worker}: judged {report.judged} items ({report.failed} failed{dropped}{stopped})")
    done.raise_if_capped()
    if report.failed:
        raise CouncilFailure(f"{report.failed} of {report.judged} items failed; see council batch status")



def _serve_metrics(host: str, port: int) -> list[Callable[[], None]]:
    """The worker's metrics at ``http://HOST:PORT/metrics`` (its address told on stderr); what stops them."""
    from council.api import observe_calls, open_store
    from council.errors import UsageError
    from council.server import ServerMetrics, serve_metrics
    from council.untrusted.terminal import visible

    metrics = ServerMetrics(open_store)
    try:
        url, stop_serving = serve_metrics(metrics, host, port)
    except OSError as exc:
        raise UsageError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
    click.echo(visible(f"council worker: metrics: {url}"), err=True)
    return [metrics.close, stop_serving, observe_calls(metrics)]
