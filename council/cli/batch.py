"""``council batch FILE.jsonl``: judge a file of pairs or responses, resumably, with a summary;
``--enqueue`` only queues it for ``council worker``s; ``council batch status|results ID`` read a
stored batch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from council._util.outputs import check_output
from council.cli.common import WholeNumber, cache_options, lease_seconds_option, max_cost_option, output_option, quiet
from council.cli.judge import STRATEGIES, batch_judge_option, config_option, votes_option
from council.errors import CouncilFailure, UsageError
from council.untrusted.inputs import MAX_BATCH_BYTES, read_text_file

if TYPE_CHECKING:
    from council import BatchFile, BatchItem, BatchPlan, BatchSummary, JudgePanel


class BatchProgress:
    """A progress bar on stderr while items finish (plain start/end lines when not a terminal)."""

    def __init__(self, batch_id: str, total: int, *, quiet: bool = False) -> None:
        from council.cli.render import err

        self.err = err
        self.quiet = quiet
        self.batch_id = batch_id
        self.total = total
        self._progress: Any = None
        self._summarising = False
        self._task: Any = None
        self._last_line: str | None = None

    def on_start(self, plan: BatchPlan) -> None:
        self.batch_id = plan.batch_id  # --resume of an edited file continues the file's earlier batch
        if self.quiet:
            return
        resumed = f", {plan.unchanged} already finished" if plan.unchanged else ""
        if plan.changed or plan.removed:
            resumed += f" and kept, {plan.changed} changed since (judged again), {plan.removed} no longer in the file"
        self.err.print(f"batch {plan.batch_id}: {self.total} items{resumed}; judging {plan.to_judge}")
        if self.err.is_terminal and plan.to_judge:
            self._bar("judging", plan.to_judge)

    def on_item(self, item: BatchItem, ok: bool) -> None:
        if self._progress is not None:
            self._progress.advance(self._task)

    def on_summary(self, read: int) -> None:
        """The summary and the results file, read from the store once the items are judged (long
        for a large batch): a bar in place of the judging one."""
        if self.quiet or not self.err.is_terminal:
            return
        if not self._summarising:
            self.stop()
            self._bar("summarising", self.total)
            self._summarising = True
        self._progress.update(self._task, completed=read)

    def _bar(self, label: str, total: int) -> None:
        """A transient progress bar on stderr: ``label``, the bar, done of ``total``, time left."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        self._progress = Progress(*columns, console=self.err, transient=True)
        self._progress.start()
        self._task = self._progress.add_task(label, total=total)

    def on_provider_batch(self, batch_id: str, status: str, done: int, failed: int, total: int) -> None:
        """A provider batch polled: one line when its status or counts change."""
        line = f"provider batch {batch_id}: {status}, {done} done, {failed} failed of {total}"
        if not self.quiet and line != self._last_line:
            self._last_line = line
            from council.untrusted.terminal import visible

            self.err.print(visible(line), markup=False, highlight=False)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()


class BatchGroup(click.Group):
    """``council batch FILE [OPTIONS]`` judges a file; ``council batch status|results ID`` read a
    stored batch. A subcommand name wins over a file name (a file called ``status`` is ``./status``)."""

    DEFAULT = "file"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or args[0] not in self.commands or args[0] == self.DEFAULT:
            args = [self.DEFAULT, *args]
        return super().parse_args(ctx, args)


class _FileCommand(click.Command):
    """The group's default command: its usage reads ``council batch [OPTIONS] FILE``."""

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        path = ctx.parent.command_path if ctx.parent is not None else ctx.command_path
        formatter.write_usage(path, " ".join(self.collect_usage_pieces(ctx)))


calibration_option = click.option(
    "--calibration",
    metavar="NAME",
    help="Report calibrated probabilities beside the raw ones, by the map NAME (made by council calibrate).",
)


@click.group(cls=BatchGroup)
def batch() -> None:
    """Judge a batch file, or look at a stored batch."""


@batch.command("file", cls=_FileCommand, hidden=True, epilog=(
    "Also: council batch status ID [--json]; council batch results ID [-o FILE]; "
    "council worker [--batch-id ID] (judges queued items)."
))  # fmt: skip
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--mode",
    type=click.Choice(["pairwise", "grade"]),
    help='What every item is; default: from each line\'s keys ("a"/"b" or "response").',
)
@click.option("--concurrency", type=WholeNumber(1, 1000), default=8, show_default=True, help="Items in flight.")
@click.option(
    "--resume",
    is_flag=True,
    help="Continue this batch: keep finished items, judge the rest and any item edited since (matched by id).",
)
@click.option("--batch-id", help="Name the batch (default: a hash of the file and the settings).")
@click.option(
    "--replace",
    is_flag=True,
    help="Let this file take over a --batch-id that holds another file's items: items are matched by id and "
    "content, changed ones judged again, the others keep their results.",
)
@lease_seconds_option
@output_option("Results JSONL, one line per item in file order (default: FILE with .results.jsonl).", allow_dash=False)
@batch_judge_option
@click.option(
    "--strategy",
    type=click.Choice(STRATEGIES),
    default="consistency",
    show_default=True,
    help="How each pair's two swapped passes combine.",
)
@click.option(
    "--combine",
    type=click.Choice(["vote", "dawid-skene"]),
    default="vote",
    show_default=True,
    help="How several judges' verdicts become one per pair: vote (under --strategy, as each pair is judged), "
    "or dawid-skene (every judge in every order weighed by how it agrees with the others over the whole batch, "
    "once all its pairs are judged; no labels used).",
)
@calibration_option
@click.option(
    "--confidence",
    type=float,
    metavar="P",
    help="With --combine dawid-skene --adaptive: stop asking a pair's judges once the posterior of its verdict "
    "reaches P (0.5 < P < 1; default 0.95).",
)
@click.option(
    "--reliabilities-from",
    metavar="BATCH_ID|MAP",
    help="With --combine dawid-skene --adaptive: the judges' reliabilities, fitted by Dawid–Skene over this earlier "
    "batch (judged by the same judges), or over the batch the calibration map MAP was fitted on.",
)
@click.option("--criteria", multiple=True, metavar="NAME", help='Pairwise criteria (repeatable), or "depth".')
@click.option(
    "--rubric", default="general", show_default=True, metavar="NAME_OR_FILE", help="Default rubric for grading items."
)
@votes_option
@click.option(
    "--adaptive",
    is_flag=True,
    help="Stop voting as soon as the majority is decided (fewer calls, same winner); with --combine dawid-skene, "
    "ask the judges one at a time, most informative per dollar first, until the pair's posterior reaches "
    "--confidence (needs --reliabilities-from).",
)
@click.option("--no-swap", is_flag=True, help="Judge each pair once, A shown first.")
@max_cost_option()
@cache_options
@click.option(
    "--provider-batch",
    is_flag=True,
    help="Send the calls through the providers' batch APIs (OpenAI-protocol models: Files + Batches), "
    "in rounds, at the batch price; slower (up to 24 h), about half the cost.",
)
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (the results go to --output).")
@click.option(
    "--enqueue",
    is_flag=True,
    help="Only store the items and judging settings in the store and print the batch id; "
    "`council worker`s judge them (a changed file under the same id: changed items are judged again).",
)
def judge_file(
    file: str,
    mode: str | None,
    concurrency: int,
    resume: bool,
    batch_id: str | None,
    replace: bool,
    lease_seconds: float,
    output: str | None,
    judge_refs: tuple[str, ...],
    strategy: str,
    combine: str,
    calibration: str | None,
    confidence: float | None,
    reliabilities_from: str | None,
    criteria: tuple[str, ...],
    rubric: str,
    votes: int,
    adaptive: bool,
    no_swap: bool,
    max_cost: str | None,
    use_cache: bool,
    refresh: bool,
    provider_batch: bool,
    config_path: str | None,
    as_json: bool,
    enqueue: bool,
) -> None:
    """Judge every item of FILE.jsonl (pairwise or rubric grading), resumably.

    Also: `council batch status ID`, `council batch results ID`, and `council worker`.
    --max-cost is kept with the batch: it counts every run of it, and a later --max-cost
    replaces it (a batch stopped by its cap resumes with --resume and a higher one)."""
    from council.cli.judge import run_with_judges

    batch_file, output_path = _read_input(file, output, mode, rubric, criteria)
    silent = quiet()
    settings = dict(mode=mode, strategy=strategy, swap=not no_swap, criteria=criteria, rubric=rubric, votes=votes,
                    adaptive=adaptive, combine=combine, confidence=confidence,
                    reliabilities_from=reliabilities_from)  # fmt: skip

    async def enqueue_file(panel: JudgePanel) -> None:
        from council.cli.common import status

        chosen = panel.batch_settings(**settings)  # type: ignore[arg-type]
        the_id = batch_id or batch_file.batch_id(chosen)
        counts = panel.enqueue(batch_file, chosen, the_id, replace=replace)
        click.echo(the_id)
        status(f"batch {the_id}: {len(batch_file.items)} items queued: " + enqueued_text(counts))

    async def work(panel: JudgePanel) -> BatchSummary:
        chosen = panel.batch_settings(**settings)  # type: ignore[arg-type]
        the_id = batch_id or batch_file.batch_id(chosen)
        progress = BatchProgress(the_id, len(batch_file.items), quiet=silent)
        try:
            return await panel.run_batch(
                batch_file,
                chosen,
                the_id,
                concurrency=concurrency,
                lease_seconds=lease_seconds,
                resume=resume,
                output=output_path,
                on_start=progress.on_start,
                on_item=progress.on_item,
                provider_batch=provider_batch,
                on_provider_progress=progress.on_provider_batch,
                on_summary=progress.on_summary,
                named=batch_id is not None,
                replace=replace,
                calibration=calibration,
            )
        finally:
            progress.stop()

    if enqueue:
        run_with_judges(config_path, judge_refs, enqueue_file, max_cost=max_cost, cap_each_call=False)
        return
    summary = run_with_judges(
        config_path, judge_refs, work, max_cost=max_cost, cap_each_call=False, use_cache=use_cache, refresh=refresh
    )
    _finish(summary, as_json)


def _read_input(
    file: str, output: str | None, mode: str | None, rubric: str, criteria: tuple[str, ...]
) -> tuple[BatchFile, Path]:
    """The batch file read and checked, and where its results go: every mistake found here,
    before any call, not after the judging."""
    from council import read_batch_file

    content = read_text_file(file, "batch file", max_bytes=MAX_BATCH_BYTES)
    batch_file = read_batch_file(content, file, mode=mode, rubric=rubric, criteria=criteria)
    output_path = Path(output) if output else Path(file).with_suffix(".results.jsonl")
    check_output(str(output_path), [file])
    blocked = next((p for p in output_path.parents if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise UsageError(f"cannot write the results to {output_path}: {blocked} is a file")
    return batch_file, output_path


def _finish(summary: BatchSummary, as_json: bool) -> None:
    """The summary printed, then the exit status: the cap that stopped the batch, or its failed items."""
    if as_json:
        click.echo(summary.model_dump_json(indent=2))
    else:
        render_summary(summary)
    if summary.budget_reached:
        from council import BudgetReached

        assert summary.spent_usd is not None and summary.max_cost_usd is not None
        raise BudgetReached(summary.spent_usd, summary.max_cost_usd)
    if summary.failed:
        raise CouncilFailure(f"{summary.failed} of {summary.items} items failed; see {summary.output}")


def enqueued_text(counts: dict[str, int]) -> str:
    return (
        f"{counts['new']} new, {counts['changed']} changed (judged again), {counts['unchanged']} unchanged (kept), "
        f"{counts['retried']} failed before (judged again), {counts['removed']} removed"
    )


@batch.command("status")
@click.argument("batch_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def batch_status(batch_id: str, as_json: bool) -> None:
    """How far a stored batch is: items queued, running, done and failed, its cost, and the
    rounds it sent through providers' batch APIs (--provider-batch)."""
    import json

    from council import batch_status as stored_status

    found = stored_status(batch_id)
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    from council.untrusted.terminal import visible

    cost = "unknown" if found["cost_usd"] is None else f"${found['cost_usd']:.4f}"
    click.echo(
        f"batch {found['batch_id']}: {found['items']} items, {found['queued']} queued, {found['running']} running, "
        f"{found['done']} done, {found['failed']} failed; cost {cost}"
    )
    for b in found["provider_batches"]:  # the provider's own words (id, status): shown as text, never as controls
        collected = f", collected {b['collected_at']}" if b["collected_at"] else ""
        click.echo(visible(
            f"  {b['provider']} batch {b['id'] or '(not submitted)'}: {b['status']}, {b['done']} done, "
            f"{b['failed']} failed of {b['requests']}; submitted {b['submitted_at'] or '-'}{collected}"
        ))  # fmt: skip


@batch.command("results")
@click.argument("batch_id", metavar="ID")
@output_option("Results JSONL, one line per item in file order (default: stdout; with --summary: none).")
@click.option(
    "--summary",
    "with_summary",
    is_flag=True,
    help="Print the batch's summary as it is now (with two or more judges, its panel) instead of the lines.",
)
@click.option("--json", "as_json", is_flag=True, help="With --summary: print it as JSON.")
@click.option("--html", "html", metavar="FILE",
              help="With --summary: also write it as a self-contained HTML page (its panel, a reliability plot "
              "of its calibration) to FILE; '-' prints the page instead of the summary.")
@calibration_option
def batch_results(
    batch_id: str, output: str | None, with_summary: bool, as_json: bool, html: str | None, calibration: str | None
) -> None:
    """The results of a stored batch: the lines `council batch --output` writes, or its summary."""
    from council import batch_results as stored_results
    from council.cli.common import open_output, status

    if as_json and not with_summary:
        raise UsageError("--json goes with --summary (the result lines are JSON already)")
    if html is not None and not with_summary:
        raise UsageError("--html goes with --summary (the page shows the batch's summary)")
    if html == "-" and as_json:
        raise UsageError("--json and --html - are two formats of the summary: choose one")
    if with_summary:
        from council import batch_summary

        for target in (output, html):
            if target is not None and target != "-":
                check_output(target, [])
        summary = batch_summary(batch_id, output=None if output in (None, "-") else Path(output),
                                calibration=calibration)  # fmt: skip
        if html is not None:
            from council.api import render_batch_html
            from council.cli.common import write_output

            write_output(html, render_batch_html(summary))
            if html == "-":
                return
        if as_json:
            click.echo(summary.model_dump_json(indent=2))
        else:
            render_summary(summary)
        return
    with stored_results(batch_id, calibration=calibration) as lines:
        written = 0
        with open_output(output) as fh:
            for line in lines:  # a page at a time, however big the batch
                fh.write(line + "\n")
                written += 1
    if output and output != "-":
        status(f"wrote {written} results to {output}")


@click.command("calibrate")
@click.argument("batch_id", metavar="BATCH_ID")
@click.option("--name", required=True, help="The map's name (letters, digits, '.', '_', '-'); a new fit replaces it.")
@click.option("--json", "as_json", is_flag=True, help="Print the map kept as JSON.")
def calibrate(batch_id: str, name: str, as_json: bool) -> None:
    """Fit a monotone (isotonic) map from a labelled batch's verdict probabilities to how often they were right."""
    from council import calibrate_batch

    fitted = calibrate_batch(batch_id, name)
    if as_json:
        click.echo(fitted.model_dump_json(indent=2))
        return
    click.echo(
        f"calibration map {fitted.name}: fitted on {fitted.items} labelled pairs of batch {fitted.batch_id} "
        f"({fitted.combine} probabilities), {len(fitted.points)} breakpoints; on those pairs ECE "
        f"{_num(fitted.ece)} -> {_num(fitted.ece_calibrated)}, Brier {_num(fitted.brier)} -> "
        f"{_num(fitted.brier_calibrated)}. Apply it with --calibration {fitted.name}."
    )


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def render_summary(s: BatchSummary) -> None:
    from rich.table import Table

    from council.cli.render import out, styled

    table = Table(title=f"Batch {s.batch_id}")
    table.add_column("")
    table.add_column("value", justify="right")
    rows = [
        ("items", f"{s.items} ({s.finished} finished, {s.failed} failed, {s.missing} missing)"),
        ("judged this run", str(s.judged_this_run)),
        ("already finished (resumed)", str(s.skipped)),
    ]
    if s.changed or s.removed:
        rows += [("changed since (judged again)", str(s.changed)), ("no longer in the file", str(s.removed))]
    if s.combine is not None:
        rows.append(("verdicts combined by", s.combine))
    if s.pairwise:
        rows += [
            ("A wins / B wins / ties", f"{_pct(s.a_win_rate)} / {_pct(s.b_win_rate)} / {_pct(s.tie_rate)}"),
            ("inconsistent swap pairs", f"{_pct(s.inconsistency_rate)} ({s.inconsistent_pairs} of {s.swap_pairs})"),
        ]
    if s.graded:
        rows += [
            ("graded items", str(s.graded)),
            ("mean normalized score", "-" if s.mean_normalized_score is None else f"{s.mean_normalized_score:.3f}"),
            ("safety flagged", str(s.safety_flagged)),
        ]
    if s.labels is not None:
        lab = s.labels
        kappa = "-" if lab.cohen_kappa is None else f"{lab.cohen_kappa:.3f}"
        order = lab.per_order_accuracy
        rows += [
            ("labelled items: verdict = label", f"{lab.agree} of {lab.labelled} ({_pct(lab.accuracy)}), κ = {kappa}"),
            ("labelled items the judge tied", str(lab.ties)),
            ("pass picked the label, A / B shown first", f"{_pct(order.a_first)} / {_pct(order.b_first)}"),
            ("position consistency (labelled)", f"{_pct(lab.position_consistency)} of {lab.swap_pairs} swap pairs"),
        ]
    if s.gold_scores is not None:
        g = s.gold_scores
        mae = "-" if g.mean_absolute_error is None else f"{g.mean_absolute_error:.3f}"
        rho = "-" if g.spearman_rho is None else f"{g.spearman_rho:.3f}"
        rows.append(("gold scores: MAE, Spearman ρ", f"{mae}, {rho} ({g.scored} items)"))
    cost = "unknown" if s.cost_usd is None else f"${s.cost_usd:.4f}"
    rows += [
        ("flagged for review", str(s.flagged_for_review)),
        ("calls made", str(s.calls)),
        ("calls saved (adaptive)", str(s.calls_saved)),
        *_adaptive_rows(s),
        ("tokens", f"{s.prompt_tokens} + {s.completion_tokens}"),
        ("cost", cost),
        *_cache_rows(s),
        *_provider_rows(s),
        *_budget_rows(s),
        ("wall time (this run)", f"{s.wall_time_s:.1f}s"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    out.print(table)
    if s.panel is not None:
        render_panel(s)
    if s.calibration is not None or s.calibrated is not None:
        render_calibration(s)
    for item_id, error in list(s.errors.items())[:10]:
        out.print(styled(("failed", "red"), f" {item_id}: {error}"))
    if s.output:
        out.print(f"results: {s.output}")


def _adaptive_rows(s: BatchSummary) -> list[tuple[str, str]]:
    a = s.adaptive
    if a is None:
        return []
    from council._util.money import usd

    saved = "unknown" if a.cost_saved_usd is None else usd(a.cost_saved_usd)
    return [
        (f"adaptive jury (posterior ≥ {a.confidence})", f"{a.sure} of {a.pairs} pairs sure, {a.stopped_early} "
         f"before the full panel"),
        ("calls saved against the full panel", f"{a.calls_saved} of {a.calls_full_panel} "
         f"({_pct(a.calls_saved / a.calls_full_panel if a.calls_full_panel else None)}), about {saved}"),
        ("agreement with the full panel (expected)", _pct(a.agreement_with_full_panel)),
    ]  # fmt: skip


def _budget_rows(s: BatchSummary) -> list[tuple[str, str]]:
    if s.max_cost_usd is None or s.spent_usd is None:
        return []
    from council._util.money import usd

    reached = " (reached: resume with a higher --max-cost)" if s.budget_reached else ""
    return [("spend cap (all runs)", f"{usd(s.spent_usd)} of {usd(s.max_cost_usd)}{reached}")]


def _cache_rows(s: BatchSummary) -> list[tuple[str, str]]:
    if not s.cached_calls:
        return []
    saved = "unknown" if s.saved_usd is None else f"${s.saved_usd:.4f}"
    return [("calls from the cache (all runs)", f"{s.cached_calls}, saved {saved}")]


def _provider_rows(s: BatchSummary) -> list[tuple[str, str]]:
    if not s.provider_batches:
        return []
    lines = [f"{b['id'] or '(not submitted)'}: {b['status']}, {b['done']}/{b['requests']}" for b in s.provider_batches]
    return [(f"provider batches (this run: {s.provider_rounds} rounds)", "\n".join(lines))]


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def render_calibration(s: BatchSummary) -> None:
    """The labelled verdicts' probabilities against how often they were right: ECE and Brier, and
    the reliability table (raw, and calibrated beside it with --calibration)."""
    from rich.table import Table

    from council.cli.render import out

    raw, applied = s.calibration, s.calibrated
    title = "Calibration of the verdicts' probabilities (labelled pairs)"
    if applied is not None:
        title += f", calibrated by {applied.name} (fitted on {applied.fitted_on})"
    table = Table(title=title)
    for i, header in enumerate(["probability", "pairs", "mean probability", "right"]):
        table.add_column(header, justify="left" if i == 0 else "right")
    if applied is not None:
        table.add_column("calibrated: pairs", justify="right")
        table.add_column("mean", justify="right")
        table.add_column("right", justify="right")
    bins = raw.bins if raw is not None else applied.bins if applied is not None else []
    for i, b in enumerate(bins):
        row = [f"{b.lo:.1f}-{b.hi:.1f}", str(b.count), _num(b.mean_probability), _pct(b.accuracy)]
        if applied is not None:
            c = applied.bins[i]
            row += [str(c.count), _num(c.mean_probability), _pct(c.accuracy)]
        table.add_row(*row)
    out.print(table)
    lines = []
    if raw is not None:
        lines.append(f"ECE {_num(raw.ece)}, Brier {_num(raw.brier)}")
    if applied is not None:
        lines.append(f"calibrated by {applied.name}: ECE {_num(applied.ece)}, Brier {_num(applied.brier)}")
    out.print("; ".join(lines))


def render_panel(s: BatchSummary) -> None:
    """The panel analysis of a jury's batch: one row per judge, the judges' agreement (and, with labels, the
    correlation of their errors) as matrices, then the panel's numbers."""
    from rich.table import Table

    from council.api import panel_judge_rows, panel_numbers
    from council.cli.render import out

    p = s.panel
    assert p is not None
    judges = Table(title="Panel: the judges")
    headers, judge_rows = panel_judge_rows(p)
    for i, header in enumerate(headers):
        judges.add_column(header, justify="left" if i == 0 else "right")
    for row in judge_rows:
        judges.add_row(*row)
    out.print(judges)
    names = [j.judge for j in p.judges]
    matrices = [("Panel: agreement between judges", p.agreement, _pct)]
    if p.error_correlation is not None:
        matrices.append(("Panel: correlation of the judges' errors", p.error_correlation, _num))
    for title, matrix, shown in matrices:
        table = Table(title=title)
        table.add_column("")
        for name in names:
            table.add_column(name, justify="right")
        for a in names:
            table.add_row(a, *(shown(matrix[a][b]) for b in names))
        out.print(table)
    rows = panel_numbers(p)
    table = Table(title="Panel")
    table.add_column("")
    table.add_column("value", justify="right")
    for name, value in rows:
        table.add_row(name, value)
    out.print(table)
