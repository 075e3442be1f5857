"""Human output for the CLI (rich), kept apart from the commands' logic."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

if TYPE_CHECKING:
    from council.api import Council
    from council.session import SessionEvent
    from council.session.results import SessionResult

# Piped output gets a fixed, readable width instead of rich's 80-column fallback.
out = Console(width=None if Console().is_terminal else 120)
err = Console(stderr=True)


class ProgressDisplay:
    """A live progress line on stderr while a session runs (off when not a terminal)."""

    def __init__(self, council: Council, enabled: bool = True) -> None:
        r = council.resolved
        self.total = {"answer": len(r.members), "review": len(r.reviewers), "synthesis": 1}
        self.done = {"answer": 0, "review": 0, "synthesis": 0}
        self.enabled = enabled and err.is_terminal
        self._progress: Any = None
        self._task: Any = None
        if enabled and r.offline_default:
            err.print("[yellow]No configuration found: running the small offline default (local models).[/]")

    def __enter__(self) -> ProgressDisplay:
        if self.enabled:
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=err, transient=True
            )
            self._progress.__enter__()
            self._task = self._progress.add_task("starting", total=sum(self.total.values()))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def on_event(self, event: SessionEvent) -> None:
        if self._progress is None:
            return
        if event.kind in self.done:
            self.done[event.kind] += 1
            self._progress.advance(self._task)
        stage = event.stage
        if stage in self.total:
            desc = f"{stage}: {self.done[stage]}/{self.total[stage]}"
            if event.kind == "stage" and event.detail:
                desc = f"{event.detail} ({self.done[stage]}/{self.total[stage]})"
            self._progress.update(self._task, description=desc)


def _agreement_text(consensus: Any) -> str:
    """Kendall's W with its test, saying when the agreement could be chance."""
    a = consensus.agreement
    if a is None:
        return "Kendall's W undefined: too few ballots"
    verdict = "significant" if a.p_value < 0.05 else "not significant: could be chance"
    return f"Kendall's W = {a.w:.3f}, {a.test} p = {a.p_value:.3g} ({a.p_method}), {verdict}"


def render_result(result: SessionResult) -> None:
    if result.notice:
        out.print(Panel(result.notice, title="offline default", style="yellow"))
    status_style = {"complete": "green", "partial": "yellow", "failed": "red"}.get(result.status, "white")
    out.print(
        f"[bold]Session[/] {result.session_id}  council [bold]{result.council}[/]  "
        f"status [{status_style}]{result.status}[/]  seed {result.seed}"
    )
    if result.consensus is not None:
        c = result.consensus
        table = Table(title=f"Consensus ranking (Borda, normalised per ballot; {_agreement_text(c)})")
        for col in ("rank", "member", "model", "score", "Borda", "mean rank", "1st places", "ballots", "mean score"):
            table.add_column(col, justify="right" if col not in ("member", "model") else "left")
        scores = _mean_scores(result)
        for e in c.ranking:
            table.add_row(
                str(e.rank) + ("=" if e.tied else ""),
                e.member,
                result.models.get(e.member, ""),
                _fmt(e.score),
                f"{e.borda:g}",
                _fmt(e.mean_rank),
                str(e.first_places),
                str(e.ballots),
                _fmt(scores.get(e.member)),
            )
        out.print(table)
    reviews = Table(title="Reviews (each reviewer's own shuffled order)")
    for col in ("reviewer", "order seen", "ranking", "valid", "attempts"):
        reviews.add_column(col)
    for r in result.reviews:
        reviews.add_row(r.reviewer, " ".join(r.display_order), " > ".join(r.ranking) or "-", "yes" if r.valid else f"no: {r.error}", str(r.attempts))
    out.print(reviews)
    if result.bias is not None:
        render_session_bias(result.bias)
    if result.synthesis.status == "ok":
        title = f"Chairman's answer ({result.synthesis.chairman}{', fallback' if result.synthesis.fallback_used else ''})"
        out.print(Panel(result.synthesis.text or "", title=title))
    elif result.synthesis.status == "failed":
        out.print(f"[red]No synthesis:[/] {result.synthesis.error}")
    for f in result.failures:
        out.print(f"[red]failed[/] {f.stage} {f.member}: {f.error}")
    for reason in result.partial_reasons:
        out.print(f"[yellow]partial:[/] {reason}")
    for flag in result.flags:
        out.print(f"[magenta]flag:[/] {flag}")
    u = result.usage
    cost = "unknown" if u.cost_usd is None else f"${u.cost_usd:.4f}"
    out.print(
        f"[dim]{u.calls} calls ({u.failed_calls} failed), {u.prompt_tokens}+{u.completion_tokens} tokens, "
        f"cost {cost}, {result.duration_ms / 1000:.1f}s[/]"
    )


def render_session_bias(bias: Any) -> None:
    """This session's bias indicators (seed 004), with their sample-size caveat."""
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
        table.add_row(f"calibration {reviewer}", f"mean {c.mean:.2f}, z {c.z_score:+.2f} ({c.classification})", str(c.samples), status("reviewer_calibration"))
    ct = bias.calibration_test
    if ct is not None and ct.p_value is not None:
        verdict = "reviewers differ" if ct.significant else "differences not significant"
        table.add_row("calibration across reviewers", f"ANOVA p = {ct.p_value:.3g}: {verdict}",
                      points("reviewer_calibration"), status("reviewer_calibration"))
    lc = bias.length_correlation
    table.add_row(f"length ({lc.unit}) vs score", f"r = {lc.r:+.3f} ({lc.interpretation})",
                  points("length_correlation"), status("length_correlation"))
    pb = bias.position_bias
    means = ", ".join(f"{p}: {m:.2f}" for p, m in sorted(pb.means.items()))
    table.add_row("score by position", f"{means}; variance {pb.variance:.3f}", points("position_bias"), status("position_bias"))
    out.print(table)
    if bias.note:
        out.print(f"[dim]{bias.note}[/]")


def _mean_scores(result: SessionResult) -> dict[str, float]:
    totals: dict[str, list[int]] = {}
    for r in result.reviews:
        for m, s in r.scores.items():
            totals.setdefault(m, []).append(s)
    return {m: sum(v) / len(v) for m, v in totals.items()}


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"
