"""``council compare`` (one pair, position-swapped) and ``council grade`` (one response, a rubric)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from council.cli.common import WholeNumber, cache_options, max_cost_option
from council.errors import CouncilFailure, InputError
from council.untrusted.inputs import read_text_file

if TYPE_CHECKING:
    from council import ComparisonOutcome, GradeOutcome, JudgePanel

STRATEGIES = ("average", "conservative", "consistency")
T = TypeVar("T")

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="Council TOML file (judge aliases come from its [models]).",
)


def _judge_option(several: str) -> Callable[[Any], Any]:
    """``--judge`` (repeatable), its help saying what several judges do in this command."""
    return click.option(
        "--judge",
        "judge_refs",
        multiple=True,
        metavar="ALIAS_OR_MODEL",
        help=f"A judge: a [models] alias or a model string such as fake/judge (repeatable: {several}). "
        "Default: the default council's chairman.",
    )


judge_option = _judge_option("several judges are combined under --strategy")
batch_judge_option = _judge_option(
    "several judges are combined under --strategy for pairs, averaged per criterion for grades"
)
grade_judge_option = _judge_option("several judges' scores are averaged per criterion, each judge's kept")
votes_option = click.option(
    "--votes",
    type=WholeNumber(1, 25),
    default=None,
    help="Judgments per judge, by majority. Default: 3 for grading, 1 swap pair (2 passes) per comparison.",
)
adaptive_option = click.option(
    "--adaptive", is_flag=True, help="Stop voting as soon as the majority is decided (fewer calls, same winner)."
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
spend_cap_option = max_cost_option()


def run_with_judges(
    config_path: str | None,
    judge_refs: Sequence[str],
    work: Callable[[JudgePanel], Awaitable[T]],
    *,
    max_cost: str | None = None,
    cap_each_call: bool = True,
    use_cache: bool = False,
    refresh: bool = False,
    in_store: bool = False,
) -> T:
    """Set the judges up (:func:`council.judge_panel`: ``--config``'s judges, privacy settings, cap,
    call cache (``--cache``, else ``[cache] enabled``) and store), run ``work(panel)`` with them, and
    close their clients whatever happens.
    A cap that stopped a comparison or a grade is raised after it (``BudgetReached``, exit 1)."""
    import asyncio

    from council import judge_panel

    cache = use_cache or None  # not asked for: the config's [cache] enabled
    with judge_panel(
        config_path, judge_refs, max_cost=max_cost, cap_each_call=cap_each_call, cache=cache, refresh=refresh,
        in_store=in_store,
    ) as panel:  # fmt: skip
        result = asyncio.run(panel.run(work))
    panel.raise_if_capped()
    return result


def _finish(outcome: ComparisonOutcome | GradeOutcome, as_json: bool, render: Callable[[Any], None]) -> None:
    if as_json:
        click.echo(outcome.model_dump_json(indent=2))
    else:
        render(outcome)
    if not outcome.success:
        raise CouncilFailure(f"judging failed: {outcome.error}")
    if outcome.partial:
        raise CouncilFailure(f"judging partly failed (the result stands on the other judges): {outcome.error}")


@click.command()
@click.option("--prompt", required=True, help="The prompt both responses answer.")
@click.option("--a", "a_path", required=True, type=click.Path(dir_okay=False), help="File with response A.")
@click.option("--b", "b_path", required=True, type=click.Path(dir_okay=False), help="File with response B.")
@click.option("--context", help="Extra context for the judge.")
@click.option(
    "--criteria",
    multiple=True,
    metavar="NAME",
    help='A criterion to compare on (repeatable), or "depth" for the five depth dimensions '
    "(granularity, insight, critique, evidence, density). Default: accuracy, completeness, specificity, clarity.",
)
@judge_option
@click.option(
    "--strategy",
    type=click.Choice(STRATEGIES),
    default="consistency",
    show_default=True,
    help="How the two swapped passes combine.",
)
@click.option("--no-swap", is_flag=True, help="Judge once, A shown first (half the calls; position bias unchecked).")
@click.option("--no-tie", is_flag=True, help="The judge must pick A or B in each pass.")
@votes_option
@adaptive_option
@spend_cap_option
@cache_options
@config_option
@json_option
def compare(
    prompt: str,
    a_path: str,
    b_path: str,
    context: str | None,
    criteria: tuple[str, ...],
    judge_refs: tuple[str, ...],
    strategy: str,
    no_swap: bool,
    no_tie: bool,
    votes: int | None,
    adaptive: bool,
    max_cost: str | None,
    use_cache: bool,
    refresh: bool,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Compare two responses to PROMPT, judging them in both orders (position swap)."""
    from council import resolve_criteria

    if not prompt.strip():
        raise InputError("the prompt is empty")
    response_a = read_text_file(a_path, "response A file")
    response_b = read_text_file(b_path, "response B file")
    chosen = resolve_criteria(list(criteria) or None)

    outcome = run_with_judges(
        config_path,
        judge_refs,
        lambda panel: panel.compare(
            prompt,
            response_a,
            response_b,
            criteria=chosen,
            context=context,
            allow_tie=not no_tie,
            swap=not no_swap,
            strategy=strategy,
            votes=votes,
            adaptive=adaptive,
        ),
        max_cost=max_cost,
        use_cache=use_cache,
        refresh=refresh,
        in_store=True,
    )
    _finish(outcome, as_json, render_comparison)


@click.command()
@click.option("--prompt", required=True, help="The prompt the response answers.")
@click.option(
    "--response", "response_path", required=True, type=click.Path(dir_okay=False), help="File with the response."
)
@click.option(
    "--rubric",
    default="general",
    show_default=True,
    metavar="NAME_OR_FILE",
    help="A built-in rubric name or a rubric TOML file.",
)
@click.option(
    "--reference",
    "reference_path",
    type=click.Path(dir_okay=False),
    help="File with a reference answer: grade against it.",
)
@click.option("--context", help="Extra context for the judge.")
@grade_judge_option
@votes_option
@adaptive_option
@spend_cap_option
@cache_options
@config_option
@json_option
def grade(
    prompt: str,
    response_path: str,
    rubric: str,
    reference_path: str | None,
    context: str | None,
    judge_refs: tuple[str, ...],
    votes: int | None,
    adaptive: bool,
    max_cost: str | None,
    use_cache: bool,
    refresh: bool,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Grade one response against a rubric: reasoning before integer scores, votes per criterion."""
    from council import load_rubric

    if not prompt.strip():
        raise InputError("the prompt is empty")
    response = read_text_file(response_path, "response file")
    reference = read_text_file(reference_path, "reference file") if reference_path else None
    loaded_rubric = load_rubric(rubric)

    outcome = run_with_judges(
        config_path,
        judge_refs,
        lambda panel: panel.grade(
            prompt,
            response,
            rubric=loaded_rubric,
            reference=reference,
            context=context,
            votes=votes,
            adaptive=adaptive,
        ),
        max_cost=max_cost,
        use_cache=use_cache,
        refresh=refresh,
        in_store=True,
    )
    _finish(outcome, as_json, render_grade)


# ------------------------------------------------------------------------- rendering


def _usage_line(outcome: ComparisonOutcome | GradeOutcome) -> Any:
    u = outcome.usage
    cost = "unknown" if u.cost_usd is None else f"${u.cost_usd:.4f}"
    saved = f", {outcome.calls_saved} saved by adaptive voting" if outcome.calls_saved else ""
    from rich.text import Text

    from council.cli.render import cache_savings

    line = (
        f"{outcome.calls} calls{saved}, {u.prompt_tokens}+{u.completion_tokens} tokens, cost {cost}"
        f"{cache_savings(u)}, {outcome.elapsed_ms / 1000:.1f}s"
    )
    return Text(line, style="dim")


def render_comparison(outcome: ComparisonOutcome) -> None:
    from council.cli.render import out

    if outcome.success:
        _print_winner(outcome)
    for judge in outcome.judges:
        _print_judge(judge)
    _print_judges_combined(outcome)
    out.print(_passes_table(outcome))
    out.print(_usage_line(outcome))


def _print_winner(outcome: ComparisonOutcome) -> None:
    from council.api import verdict_measures
    from council.cli.render import out, styled

    consistency = (
        f"{outcome.swap_pairs - outcome.inconsistent_pairs}/{outcome.swap_pairs} swap pairs consistent"
        if outcome.swap
        else "no swap"
    )
    out.print(
        styled(
            (f"Winner: {outcome.winner}", "bold"),
            f"  {verdict_measures(outcome.judge_confidence, outcome.agreement_level)}  "
            f"strategy {outcome.strategy}, {consistency}",
        )
    )
    if outcome.unstable:
        out.print("unstable: the winner changed when the order was swapped (position bias)", style="yellow")
    if outcome.flagged_for_review:
        out.print("flagged for review", style="magenta")


def _print_judge(judge: Any) -> None:
    """One judge of a comparison: its criteria table and its votes, or why it failed."""
    from rich.table import Table
    from rich.text import Text

    from council.cli.render import out, styled
    from council.untrusted.terminal import visible

    if not judge.success:
        out.print(styled((f"judge {visible(judge.judge)} failed:", "red"), f" {judge.error}"))
        return
    r = judge.result
    name = judge.judge if judge.judge == judge.model else f"{judge.judge} ({judge.model})"
    table = Table(title=f"Judge {name}: {r.winner}, confidence {r.confidence:.2f}")
    for col in ("criterion", "winner", "A score", "B score", "both passes agree"):
        table.add_column(col, justify="left" if col == "criterion" else "right")
    for c in r.comparison:
        agree = "-" if c.consistent is None else ("yes" if c.consistent else "no")
        table.add_row(c.criterion, c.winner, f"{c.a_score:g}", f"{c.b_score:g}", agree)
    if r.scores:
        a_total, b_total = f"{r.scores['A'].total:g}", f"{r.scores['B'].total:g}"
        table.add_row(Text("total", style="bold"), r.winner, a_total, b_total, "")
    out.print(table)
    if judge.vote is not None and judge.vote.votes_planned > 1:
        counts = ", ".join(f"{k}: {v}" for k, v in judge.vote.counts.items())
        out.print(
            f"votes {judge.vote.votes_cast}/{judge.vote.votes_planned} ({counts}), "
            f"{judge.vote.confidence_level} confidence"
        )


def _print_judges_combined(outcome: ComparisonOutcome) -> None:
    """How several judges were combined (averaged, or their verdicts counted), and who was left out."""
    from council.cli.render import literal, out, styled
    from council.untrusted.terminal import visible

    if outcome.averaged is not None:
        avg = outcome.averaged
        out.print(
            f"Averaged over {len(avg.judges)} judges: A {avg.scores['A'].total:.2f}, "
            f"B {avg.scores['B'].total:.2f} -> {avg.winner} (judges agreeing: {avg.agreement:.0%})"
        )
        excluded = avg.excluded
    elif outcome.judges_verdict is not None:
        jv = outcome.judges_verdict
        counts = ", ".join(f"{k}: {v}" for k, v in jv.counts.items())
        out.print(
            literal(
                f"{len(jv.judges)} judges combined by {jv.rule} ({counts}) -> {jv.winner} "
                f"(judges naming it: {jv.agreement:.0%})"
            )
        )
        excluded = jv.excluded
    else:
        return
    for judge, error in excluded.items():
        out.print(styled((f"left out {visible(judge)}:", "yellow"), f" {error}"))


def _passes_table(outcome: ComparisonOutcome) -> Any:
    from rich.table import Table

    passes = Table(title="Passes (winner as the judge saw it, then in the original labels)")
    for col in ("judge", "vote", "pass", "shown first", "as seen", "winner", "A total", "B total", "attempts", "valid"):
        passes.add_column(col)
    for p in outcome.passes:
        passes.add_row(
            p.judge,
            str(p.vote + 1),
            str(p.pass_number),
            p.shown_first or "-",
            p.winner_as_seen or "-",
            p.winner or "-",
            "-" if p.a_total is None else f"{p.a_total:g}",
            "-" if p.b_total is None else f"{p.b_total:g}",
            str(p.attempts),
            "yes" if p.valid else f"no: {p.problem}",
        )
    return passes


def render_grade(outcome: GradeOutcome) -> None:
    from rich.table import Table

    from council.cli.render import out, styled
    from council.untrusted.terminal import visible

    report = outcome.report
    for judge in outcome.judges:
        if not judge.success:
            out.print(styled((f"judge {visible(judge.judge)} failed:", "red"), f" {judge.error}"))
    if report is not None:
        basis = "against the reference answer" if report.reference_used else "by the rubric alone"
        several = any(c.by_judge for c in report.criteria)
        title = f"Rubric {report.rubric!r}, graded {basis}" + (
            f", averaged over {len(report.criteria[0].by_judge)} judges" if several else ""
        )
        table = Table(title=title)
        for col in ("criterion", "score", "by judge" if several else "votes", "confidence", "reasoning"):
            table.add_column(col)
        for c in report.criteria:
            reasoning = c.reasoning if len(c.reasoning) <= 100 else c.reasoning[:99] + "…"
            votes = (
                " ".join(f"{visible(j)}: {v}" for j, v in c.by_judge.items())
                if several
                else " ".join(str(v) for v in c.votes)
            )
            table.add_row(c.criterion, f"{c.score:g}/{report.scale[1]}", votes, c.confidence_level, reasoning)
        out.print(table)
        if report.missing_votes:
            out.print(
                f"{report.missing_votes} of {report.votes_planned} votes missing (invalid or failed): "
                "confidence counts them against agreement",
                style="yellow",
            )
        out.print(
            styled(
                (f"Total {report.total:g}/{report.max_total}", "bold"),
                f"  weighted {report.weighted_total:g}/{report.weighted_max:g}  normalized {report.normalized:.2f}"
                f"  confidence {report.confidence_level}",
            )
        )
        detected = [b.id for b in report.bias_checklist if b.detected]
        out.print(f"bias checklist: {', '.join(detected) + ' noted by the judge' if detected else 'nothing noted'}")
        if report.safety_flag:
            concerns = "; ".join(report.safety_concerns) or "reported by the judge"
            out.print(styled(("safety flag:", "red"), f" {concerns} (needs human review)"))
        if report.flagged_for_review:
            out.print("flagged for review", style="magenta")
    for p in outcome.passes:
        if not p.valid:
            out.print(styled(("invalid grade", "yellow"), f" {p.judge} vote {p.vote + 1}: {p.problem}"))
    out.print(_usage_line(outcome))
