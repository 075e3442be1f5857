"""Human output for the CLI (rich), kept apart from the commands' logic.

Every string a user, a file or a model supplied is data, printed as written: council's
consoles never read markup (``[/]`` or ``[link=...]`` in an answer is shown, not obeyed)
and show control characters as escapes (:mod:`council.untrusted.terminal`). Council's own styling
is passed as styles: :func:`styled` builds a line of styled words and literal values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.measure import Measurement
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from council.api import deliberation_lines, partial_line_of, problems
from council.untrusted.terminal import literal, visible  # noqa: F401  # literal: importable from here

if TYPE_CHECKING:
    from council.api import SessionResult


class LiteralConsole(Console):
    """A console on which no string is markup, emoji code or highlight, and control characters
    are visible: every ``str`` it prints (lines, table cells, titles) goes through here."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(markup=False, emoji=False, highlight=False, **kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        kwargs["markup"] = False
        kwargs["emoji"] = False
        return super().render_str(visible(text), **kwargs)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(_fitted(o, self) for o in objects), **kwargs)


def _fitted(value: Any, console: Console) -> Any:
    """A table too wide for even its shortest layout on this console, as one block of
    ``header: value`` lines per row: rich would shrink every column to nothing."""
    if not isinstance(value, Table) or not value.columns:
        return value
    if Measurement.get(console, console.options.update_width(10_000), value).minimum <= console.width:
        return value
    blocks: list[Any] = [value.title] if value.title else []
    for row in range(value.row_count):
        lines = []
        for column in value.columns:
            cell = list(column.cells)[row]
            cell = console.render_str(cell) if isinstance(cell, str) else cell
            lines.append(Text.assemble((f"{column.header}: ", "bold"), cell if isinstance(cell, Text) else str(cell)))
        blocks += [Text(""), *lines]
    return Group(*blocks)


def styled(*parts: object) -> Text:
    """One line: ``(words, style)`` tuples are council's own styled words; anything else is
    data, shown as written."""
    return Text.assemble(*(p if isinstance(p, tuple) else visible(str(p)) for p in parts))


NOT_STORED = "(text not kept: transcripts are off)"

# Piped output gets a fixed, readable width instead of rich's 80-column fallback.
out = LiteralConsole(width=None if Console().is_terminal else 120)
err = LiteralConsole(stderr=True)


def text_block(text: str | None, indent: int = 2) -> None:
    """A long text: folded at the terminal's width, or every line whole in a pipe."""
    if text is None:
        out.print(Padding(Text(NOT_STORED, style="dim"), (0, 0, 0, indent)))
        return
    if out.is_terminal:
        out.print(Padding(Text(visible(text)), (0, 0, 0, indent)))
        return
    pad = " " * indent
    for line in text.split("\n"):
        out.print(Text(pad + visible(line)), soft_wrap=True)


def heading(*parts: object) -> None:
    out.print()
    out.print(styled(*parts), soft_wrap=not out.is_terminal)


def _agreement_text(consensus: Any) -> str:
    """Kendall's W with its test, saying when the agreement could be chance."""
    a = consensus.agreement
    if a is None:
        return "Kendall's W undefined: too few ballots"
    verdict = "significant" if a.p_value < 0.05 else "not significant: could be chance"
    error = getattr(a, "p_standard_error", None)
    method = a.p_method if error is None else f"{a.p_method}, {a.p_draws} draws, ± {error:.2g}"
    return f"Kendall's W = {a.w:.3f}, {a.test} p = {a.p_value:.3g} ({method}), {verdict}"


def consensus_table(
    ranking: Any, models: dict[str, str], mean_scores: dict[str, float], *, agreement: str, method: str = "borda"
) -> Table:
    """The consensus ranking: one row per member, best first (docs/methods.md, "Borda count", "Copeland")."""
    from council.api import method_title  # with its pydantic models: not a listing's

    table = Table(title=f"Consensus ranking ({method_title(method)}; {agreement})")
    for col in ("rank", "member", "model", "score", "Borda", "mean rank", "1st places", "ballots", "mean score"):
        table.add_column(col, justify="right" if col not in ("member", "model") else "left", overflow="fold")
    for e in ranking:
        table.add_row(
            str(e.rank) + ("=" if e.tied else ""),
            e.member,
            models.get(e.member, ""),
            _fmt(e.score),
            f"{e.borda:g}",
            _fmt(e.mean_rank),
            str(e.first_places),
            str(e.ballots),
            _fmt(mean_scores.get(e.member)),
        )
    return table


def render_header(result: SessionResult) -> None:
    if (partial := partial_line_of(result)) is not None:  # before anything else: a partial council says so
        head, _, rest = partial.partition(":")  # the reasons name members: data, shown as written
        out.print(styled((head + ":", "yellow"), rest), soft_wrap=True)
    if result.notice:
        out.print(Panel(result.notice, title="offline default", style="yellow"))
    status_style = {"complete": "green", "partial": "yellow", "failed": "red", "interrupted": "red"}
    out.print(
        styled(
            ("Session", "bold"),
            f" {result.session_id}  council ",
            (visible(result.council), "bold"),
            "  status ",
            (result.status, status_style.get(result.status, "white")),
            f"  seed {result.seed}",
        )  # fmt: skip
    )


def render_result(result: SessionResult, *, shown: frozenset[str] = frozenset()) -> None:
    """The session's summary: header, consensus table, reviews table, bias indicators, the
    synthesis, flags and usage; ``shown``: parts already printed in full (not repeated).
    What went wrong is not printed here: :func:`problems` words it once."""
    if "header" not in shown:
        render_header(result)
    if result.consensus is not None and "consensus" not in shown:
        c = result.consensus
        ranked = consensus_table(
            c.ranking, result.models, _mean_scores(result), agreement=_agreement_text(c), method=c.method
        )
        out.print(ranked)
    if "reviews" not in shown:
        reviews = Table(title="Reviews (each reviewer's own shuffled order)")
        for col in ("reviewer", "order seen", "ranking", "valid", "attempts"):
            reviews.add_column(col, overflow="fold")
        for r in result.reviews:
            valid = "late (not counted)" if r.late else "yes" if r.valid else "no"
            reviews.add_row(r.reviewer, " ".join(r.display_order), " > ".join(r.ranking) or "-", valid, str(r.attempts))
        out.print(reviews)
    if result.deliberation is not None:
        d = result.deliberation
        heading(("Deliberation", "bold"), f" ({d.mode}, at most {d.max_rounds} round{'s' if d.max_rounds > 1 else ''})")
        for line in deliberation_lines(d):
            out.print(f"  {line}", soft_wrap=not out.is_terminal)
    if result.bias is not None:
        render_session_bias(result.bias)
    if result.synthesis.status == "ok" and "synthesis" not in shown:
        fallback = ", fallback" if result.synthesis.fallback_used else ""
        heading(("Chairman's answer", "bold"), f" ({result.synthesis.chairman}{fallback})")
        text_block(result.synthesis.text)
        out.print()
    for flag in result.flags:
        out.print(styled(("flag:", "magenta"), f" {flag}"))
    u = result.usage
    cost = "unknown" if u.cost_usd is None else f"${u.cost_usd:.4f}"
    out.print(
        f"{u.calls} calls ({u.failed_calls} failed), {u.prompt_tokens}+{u.completion_tokens} tokens, "
        f"cost {cost}{cache_savings(u)}, {result.duration_ms / 1000:.1f}s",
        style="dim",
    )


def cache_savings(usage: Any) -> str:
    """The suffix ', N from the cache (saved $X)' when the call cache answered some calls."""
    if not usage.cached_calls:
        return ""
    saved = "an unknown amount" if usage.saved_usd is None else f"${usage.saved_usd:.4f}"
    return f", {usage.cached_calls} from the cache (saved {saved})"


def report_problems(result: SessionResult) -> None:
    """Warnings on stderr, one line each; a missing synthesis that was asked for is the
    command's failure (exit 1, one line)."""
    from council.errors import CouncilFailure

    warnings, error = problems(result)
    for warning in warnings:
        err.print(styled(("warning:", "yellow"), f" {warning}"), soft_wrap=True)
    if error is not None:
        raise CouncilFailure(error)


def render_session_bias(bias: Any) -> None:
    """This session's bias indicators, with their sample-size caveat (docs/methods.md, "Bias audit")."""
    from council.api import p_text  # with pydantic's models: not a listing's

    table = Table(title="Bias indicators, this session (reported, never corrected)")
    for col in ("indicator", "value", "data points", "status"):
        table.add_column(col)
    honesty = {h.metric: h for h in bias.honesty}

    def status(metric: str) -> str:
        h = honesty.get(metric)
        return "-" if h is None else f"{h.status} (min {h.minimum})"

    def points(metric: str) -> str:
        h = honesty.get(metric)
        return "-" if h is None else str(h.data_points)

    for reviewer, c in bias.calibration.items():
        value = f"mean {c.mean:.2f}, z {c.z_score:+.2f} ({c.classification})"
        table.add_row(f"calibration {reviewer}", value, str(c.samples), status("reviewer_calibration"))
    ct = bias.calibration_test
    if ct is not None and ct.p_value is not None:
        verdict = "reviewers differ" if ct.significant else "differences not significant"
        value = f"ANOVA {p_text(ct.p_value)}: {verdict}"
        table.add_row(
            "calibration across reviewers", value, points("reviewer_calibration"), status("reviewer_calibration")
        )
    lc = bias.length_correlation
    value = f"r = {lc.r:+.3f} ({lc.interpretation})"
    if lc.interpretation == "insufficient_data":  # r is a placeholder 0.0 here, not a measured zero
        value = "not computed: fewer than 3 answers with a length"
    table.add_row(f"length ({lc.unit}) vs score", value, points("length_correlation"), status("length_correlation"))
    pb = bias.position_bias
    means = ", ".join(f"{p}: {m:.2f}" for p, m in sorted(pb.means.items()))
    value = f"{means}; variance {pb.variance:.3f}"
    table.add_row("score by position", value, points("position_bias"), status("position_bias"))
    out.print(table)
    if bias.note:
        out.print(bias.note, style="dim")


def _mean_scores(result: SessionResult) -> dict[str, float]:
    totals: dict[str, list[int]] = {}
    for r in result.reviews:
        for m, s in r.scores.items():
            totals.setdefault(m, []).append(s)
    return {m: sum(v) / len(v) for m, v in totals.items()}


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"
