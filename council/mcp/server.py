"""``council mcp``: the council as Model Context Protocol tools, over stdio (the official SDK).

A thin layer: each tool validates its input (the SDK, from the annotated signature, which is
also the tool's published input schema), makes one library call and returns the result as
text for the model to read plus the whole result as structured content. A tool that fails
returns one line with ``isError``; nothing is printed on stdout, which carries the protocol.
In the text, what a model, a provider or a user wrote can never pose as the tool's own words
(a member answering "Synthesis by m1: ..."): a text of several lines is quoted, each of its
lines beginning with "> " (:func:`quoted`), and one inside a line of the tool's own is made one
line (:func:`one_line`).
Long tools report progress: ``council_run`` from the session's events, ``council_compare``
and ``council_grade`` per model call, so that clients do not time out.

The SDK is an optional dependency (the ``mcp`` extra), imported only here and only when the
server is built.
"""

# No ``from __future__ import annotations``: the SDK reads the tools' annotations at runtime.

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from council.api import SessionResult
from council.errors import CouncilError, InputError, PrerequisiteError
from council.untrusted.inputs import check_json_text
from council.untrusted.terminal import visible

SERVER_NAME = "council"
INSTALL_HINT = "council mcp needs the MCP SDK: pip install 'council-orchestrator[mcp]'"

Show = Literal["answers", "reviews"]


def _sdk() -> Any:
    try:
        import mcp.server.mcpserver as sdk
    except ImportError:
        raise PrerequisiteError(INSTALL_HINT) from None
    return sdk


def one_line(message: str) -> str:
    """``message`` on one line (any line break, Unicode's too, is a space), redacted as error text."""
    from council.untrusted.redaction import redact

    return " ".join(redact(message).split())


def quoted(text: str) -> str:
    """``text`` as a quote: each of its lines (split at every kind of line break a reader sees
    as one) begins with "> ", so none can be read as a line of the tool's own."""
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines() or [""])


class Tools:
    """What the tools share: the config, and one ``Council`` per council name (its model
    clients and limits are reused by every call)."""

    def __init__(self, config: str | None, heartbeat: float = 10.0) -> None:
        from council.api import load_config, resolve_council, session_cap

        self.config = config
        self.heartbeat = heartbeat
        self.loaded = load_config(config)
        session_cap(self.loaded, resolve_council(self.loaded, None))  # a bad config fails now, in one line
        if self.loaded.config.budget.max_cost_usd is not None:  # as a council a configured cap cannot bound
            for name in self.loaded.config.councils:
                session_cap(self.loaded, resolve_council(self.loaded, name))
        self.councils: dict[str | None, Any] = {}

    def council(self, name: str | None) -> Any:
        from council.api import Council

        if name not in self.councils:
            self.councils[name] = Council(self.loaded, council=name)
        return self.councils[name]

    async def aclose(self) -> None:
        for council in self.councils.values():
            await council.aclose()
        self.councils.clear()


class _Progress:
    """Progress notifications from synchronous callbacks (events, call records), in order, and
    a heartbeat while nothing happens (a chairman writing for a minute): a client that resets
    its request timeout on progress then never times out while the council works. Every value
    is larger than the one before, as the protocol requires: a heartbeat adds half of what is
    left to the next whole step."""

    def __init__(self, ctx: Any, every: float, total: float | None = None) -> None:
        self.ctx = ctx
        self.total = total
        self.done = 0
        self.doing = "starting"
        self._last: asyncio.Future[None] | None = None
        self._beat = asyncio.ensure_future(self._heartbeat(every))

    def tick(self, message: str) -> None:
        self.done += 1
        self._send(self.done, message)

    def _send(self, value: float, message: str) -> None:
        total = max(self.total, value) if self.total is not None else None
        self._last = asyncio.ensure_future(self._after(self._last, value, total, message))

    async def _after(self, before: Any, value: float, total: float | None, message: str) -> None:
        if before is not None:
            await before
        await self.ctx.report_progress(value, total, message)

    async def _heartbeat(self, every: float) -> None:
        seen, fraction = -1, 1.0
        while True:
            await asyncio.sleep(every)
            if self.done != seen:
                seen, fraction = self.done, 1.0
            fraction /= 2
            if self.total is None or self.done + 1 <= self.total:
                self._send(self.done + 1 - fraction, f"still working: {self.doing}")

    async def flush(self) -> None:
        self._beat.cancel()
        if self._last is not None:
            await self._last


def _result(text: str, structured: dict[str, Any] | None, *, error: bool = False) -> Any:
    """Every tool's reply. The text, which clients show to people too, gets control characters
    as escapes (:func:`council.untrusted.terminal.visible`); the structured content keeps them as written."""
    from mcp_types import CallToolResult, TextContent

    content = [TextContent(type="text", text=visible(text))]
    return CallToolResult(content=content, structured_content=structured, is_error=error)


async def _guard(work: Callable[[], Awaitable[Any]]) -> Any:
    """A council error as the tool's one-line error result."""
    try:
        return await work()
    except CouncilError as exc:
        return _result(f"error: {one_line(str(exc))}", None, error=True)


# -- text for the model to read ----------------------------------------------------------------


def session_text(result: SessionResult, show: frozenset[str] = frozenset()) -> str:
    from council.api import deliberation_lines, partial_line_of, problems, w_text

    warnings, error = problems(result)
    # First, what a partial council lacks: the error when there is one ("partial session …: no
    # synthesis"), then the partial line with every reason.
    lines = [one_line(error)] if error else []
    if (partial := partial_line_of(result)) is not None:
        lines.append(partial)
    lines.append(f"council {result.council}: status {result.status}, session {result.session_id}, seed {result.seed}")
    if result.question is not None:
        lines += ["", "Question:", quoted(result.question)]
    if "answers" in show:
        for a in result.answers:
            status = a.status if a.status != "failed" else f"failed: {one_line(a.error or '')}"
            lines += ["", f"Answer of {a.member} ({a.model}, {status}):", quoted(a.text or "(no text)")]
    if "reviews" in show:
        for r in result.reviews:
            if not r.valid:
                lines += ["", f"Review by {r.reviewer}: invalid ({one_line(r.error or '')})"]
                continue
            seen = ", ".join(f"{label} = {member}" for label, member in r.labels.items())
            lines += ["", f"Review by {r.reviewer} (order seen: {seen}):"]
            for member in r.display_order:
                reasoning = r.reasoning.get(member)
                lines.append(f"- {member}: {r.scores.get(member, '-')}" + (", reasoning:" if reasoning else ""))
                if reasoning:
                    lines.append(quoted(reasoning))
            lines.append("ranking: " + " > ".join(r.ranking))
    c = result.consensus
    if c is not None:
        ranked = ", ".join(
            f"{e.rank}{'=' if e.tied else ''}. {e.member}" + (f" ({e.score:.2f})" if e.score is not None else "")
            for e in c.ranking
        )
        lines += ["", f"Consensus (Borda): {ranked}; {w_text(c.kendall_w, c.kendall_w_p_value)}"]
    if result.deliberation is not None:  # the consensus above is the last round's
        lines += ["", "Deliberation:", *(one_line(line) for line in deliberation_lines(result.deliberation))]
    s = result.synthesis
    if s.status == "ok":
        by = f"{s.chairman}, the fallback chairman" if s.fallback_used else s.chairman
        lines += ["", f"Synthesis by {by}:", quoted(s.text or "(text not kept)")]
    lines += [f"warning: {one_line(w)}" for w in warnings]
    return "\n".join(lines)


def grade_text(report: Any) -> str:
    """A grade's report for the model to read: each criterion's score, its votes and agreement
    and the judge's reasoning (quoted: a judge's words), then the totals."""
    if report is None:
        return "no report"
    basis = "against the reference answer" if report.reference_used else "by the rubric alone"
    lines = [f"rubric {one_line(report.rubric)}, graded {basis}, scale {report.scale[0]}-{report.scale[1]}"]
    for c in report.criteria:
        votes = " ".join(str(v) for v in c.votes)
        lines += ["", f"{one_line(c.criterion)}: {c.score:g} (votes {votes or '-'}; agreement {c.confidence_level})"]
        if c.reasoning:
            lines.append(quoted(c.reasoning))
    lines += [
        "",
        f"total {report.total:g}/{report.max_total}, weighted {report.weighted_total:g}/{report.weighted_max:g}, "
        f"normalized {report.normalized:.2f}, agreement {report.confidence_level}",
    ]
    if report.missing_votes:
        lines.append(f"{report.missing_votes} of {report.votes_planned} votes missing (invalid or failed)")
    if report.safety_flag:
        lines.append("safety flag: " + "; ".join(one_line(s) for s in report.safety_concerns))
    if report.flagged_for_review:
        lines.append("flagged for review")
    return "\n".join(lines)


def batch_text(s: Any) -> str:
    """A stored batch's summary for the model to read: its verdicts, its labels' agreement, and
    with a jury its panel (each judge, α, n_eff), with labels its calibration."""
    from council.api import num, panel_judge_rows, panel_numbers, pct

    lines = [f"batch {one_line(s.batch_id)}: {s.items} items ({s.finished} finished, {s.failed} failed, "
             f"{s.missing} missing); verdicts combined by {s.combine or 'vote'}"]  # fmt: skip
    if s.pairwise:
        lines.append(f"A wins / B wins / ties: {pct(s.a_win_rate)} / {pct(s.b_win_rate)} / {pct(s.tie_rate)}; "
                     f"inconsistent swap pairs {s.inconsistent_pairs} of {s.swap_pairs}")  # fmt: skip
    if s.graded:
        lines.append(f"graded items: {s.graded}, mean normalized score {num(s.mean_normalized_score)}")
    if s.labels is not None:
        lines.append(f"labelled items: verdict = label in {s.labels.agree} of {s.labels.labelled} "
                     f"({pct(s.labels.accuracy)})")  # fmt: skip
    p = s.panel
    if p is not None:
        lines += ["", "Panel:"]
        headers, rows = panel_judge_rows(p)
        for row in rows:
            named = ", ".join(f"{h} {v}" for h, v in zip(headers[1:], row[1:], strict=True))
            lines.append(f"- {one_line(row[0])}: {named}")
        lines += [f"{name}: {one_line(value)}" for name, value in panel_numbers(p)]
    for name, c in (("calibration", s.calibration), ("calibrated", s.calibrated)):
        if c is not None:
            by = f" by {one_line(c.name)}" if name == "calibrated" else ""
            lines += ["", f"{name}{by} (labelled pairs): ECE {num(c.ece)}, Brier {num(c.brier)}"]
            lines += [f"- {b.lo:.1f}-{b.hi:.1f}: {b.count} pairs, mean probability {num(b.mean_probability)}, "
                      f"right {pct(b.accuracy)}" for b in c.bins if b.count]  # fmt: skip
    return "\n".join(lines)


def _render(render: Callable[[Any, Any], None], value: Any) -> str:
    """A text rendering of the library's (bias report, leaderboard) as plain text."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    render(value, Console(file=buffer, width=100, no_color=True, highlight=False, markup=False, emoji=False))
    return buffer.getvalue()


def _event_message(event: Any) -> str | None:
    kind = event.type
    if kind == "answer":
        return f"answer from {event.member}: {event.status}"
    if kind == "review":
        return f"review by {event.reviewer}: {event.status}"
    if kind == "consensus":
        return "consensus: " + " > ".join(event.order)
    if kind == "round_started":
        return f"deliberation round {event.round}: {event.trigger}"
    if kind == "revision":
        from council.api import revision_line

        return f"round {event.round}: {revision_line(event)}"
    if kind == "synthesis":
        return f"synthesis: {event.status}"
    return None


# -- the server ---------------------------------------------------------------------------------


def build_server(tools: Tools) -> Any:
    """The MCP server with council's seven tools."""
    sdk = _sdk()

    class CheckedServer(sdk.MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            """Every argument's text checked before any tool sees it (U+0000, lone surrogates:
            council.untrusted.inputs), as text is wherever it comes in: a one-line tool error."""
            try:
                for key, value in arguments.items():
                    check_json_text(value, f"argument {key!r}")
            except InputError as exc:
                return _result(f"error: {one_line(str(exc))}", None, error=True)
            return await super().call_tool(name, arguments, context)

    # ``Annotated[CallToolResult, Model]``: the tool publishes Model's JSON Schema as its output
    # schema, and the SDK checks each successful result's structured content against it.
    from council import __version__

    server = CheckedServer(
        SERVER_NAME,
        version=__version__,
        instructions=(
            "A council of language models: several models answer, review each other's anonymised answers "
            "in shuffled orders, a consensus ranking is formed and a chairman writes the answer."
        ),
    )

    _add_run_tool(server, tools, sdk)
    _add_compare_tool(server, tools, sdk)
    _add_grade_tool(server, tools, sdk)
    _add_read_tools(server, tools)
    _add_batch_tool(server)
    return server


def _add_compare_tool(server: Any, tools: Tools, sdk: Any) -> None:
    """``council_compare``: two responses to one prompt, judged by a panel (in both orders unless told)."""
    Context = sdk.Context  # noqa: N806 - the SDK's class, used as an annotation below
    from mcp_types import CallToolResult

    from council import ComparisonOutcome

    @server.tool(title="Compare two responses")
    async def council_compare(
        prompt: Annotated[str, Field(description="The prompt both responses answer.", min_length=1)],
        response_a: Annotated[str, Field(description="Response A.")],
        response_b: Annotated[str, Field(description="Response B.")],
        ctx: Context,
        criteria: Annotated[
            list[str] | None,
            Field(description='Criteria (default: accuracy, completeness, specificity, clarity; "depth").'),
        ] = None,
        judges: Annotated[
            list[str] | None, Field(description="Judges: [models] aliases or model strings (default: the chairman).")
        ] = None,
        strategy: Annotated[
            Literal["average", "conservative", "consistency"], Field(description="How the swapped passes combine.")
        ] = "consistency",
        swap: Annotated[bool, Field(description="Judge both orders (position swap).")] = True,
        votes: Annotated[int | None, Field(description="Judgments per judge, by majority.", ge=1, le=25)] = None,
    ) -> Annotated[CallToolResult, ComparisonOutcome]:
        """Compare two responses to a prompt with position swap (each judge sees both orders);
        returns the winner, the judges' confidence in it, how far they agree, and every pass."""
        from council import resolve_criteria
        from council.api import verdict_measures

        async def go() -> Any:
            chosen = resolve_criteria(criteria or None)
            outcome = await _judging(
                tools,
                judges,
                ctx,
                lambda panel, sink: panel.compare(
                    prompt,
                    response_a,
                    response_b,
                    criteria=chosen,
                    swap=swap,
                    strategy=strategy,
                    votes=votes,
                    sink=sink,
                ),
            )
            measures = verdict_measures(outcome.judge_confidence, outcome.agreement_level)
            text = f"winner: {outcome.winner} ({measures})"
            if outcome.unstable:
                text += "\nunstable: a swap pair changed its winner when the order was swapped"
            return _outcome_result(outcome, text)

        return await _guard(go)


def _add_grade_tool(server: Any, tools: Tools, sdk: Any) -> None:
    """``council_grade``: one response graded against a built-in rubric by a panel."""
    Context = sdk.Context  # noqa: N806 - the SDK's class, used as an annotation below
    from mcp_types import CallToolResult

    from council import GradeOutcome

    @server.tool(title="Grade a response")
    async def council_grade(
        prompt: Annotated[str, Field(description="The prompt the response answers.", min_length=1)],
        response: Annotated[str, Field(description="The response to grade.")],
        ctx: Context,
        rubric: Annotated[str, Field(description="A built-in rubric's name.")] = "general",
        reference: Annotated[str | None, Field(description="A reference answer to grade against.")] = None,
        judges: Annotated[
            list[str] | None, Field(description="Judges: [models] aliases or model strings (default: the chairman).")
        ] = None,
        votes: Annotated[int | None, Field(description="Judgments per judge, by majority.", ge=1, le=25)] = None,
    ) -> Annotated[CallToolResult, GradeOutcome]:
        """Grade one response against a rubric: reasoning before integer scores per criterion,
        several votes per judge; returns the scores and the evaluation report."""
        from council import builtin_rubrics, load_rubric

        async def go() -> Any:
            # Names only: a path chosen by the model could make the tool read any local file.
            if rubric not in builtin_rubrics():
                raise InputError(f"rubric {rubric!r} is not a built-in rubric ({', '.join(builtin_rubrics())})")
            loaded_rubric = load_rubric(rubric)
            outcome = await _judging(
                tools,
                judges,
                ctx,
                lambda panel, sink: panel.grade(
                    prompt, response, rubric=loaded_rubric, reference=reference, votes=votes, sink=sink
                ),
            )
            return _outcome_result(outcome, grade_text(outcome.report))

        return await _guard(go)


def _add_run_tool(server: Any, tools: Tools, sdk: Any) -> None:
    """``council_run``: a session, its progress reported from its events."""
    Context = sdk.Context  # noqa: N806 - the SDK's class, used as an annotation below
    from mcp_types import CallToolResult

    @server.tool(title="Ask the council")
    async def council_run(
        question: Annotated[str, Field(description="The question for the council.", min_length=1)],
        ctx: Context,
        council: Annotated[str | None, Field(description="Which council of the config (default: its default).")] = None,
        seed: Annotated[int | None, Field(description="Seed for the reviewers' shuffles.", ge=0)] = None,
        synthesis: Annotated[bool, Field(description="Ask the chairman for a synthesis.")] = True,
        show: Annotated[
            list[Show], Field(description="Also put these in the text: each member's answer, each review.")
        ] = [],  # noqa: B006 - the SDK copies defaults into the schema; never mutated
    ) -> Annotated[CallToolResult, SessionResult]:
        """Run a council session: every member answers, every reviewer scores and ranks the others'
        anonymised answers (each in its own shuffled order), a consensus ranking is formed by Borda
        count and the chairman writes the answer. Returns the answer, the ranking and the session."""

        async def go() -> Any:
            c = tools.council(council)
            progress = _Progress(ctx, tools.heartbeat)
            result, reviewers = None, 0
            try:
                async for item in c.stream(question, seed=seed, synthesis=synthesis):
                    if isinstance(item, SessionResult):
                        result = item
                        continue
                    if item.type == "session_started":
                        progress.total = len(item.members) + len(item.reviewers) + 1 + int(item.synthesis)
                        reviewers = len(item.reviewers)
                    elif item.type == "round_started" and progress.total is not None:  # its revisions and reviews
                        progress.total += item.expected + reviewers
                    elif item.type == "stage":
                        progress.doing = item.detail
                    message = _event_message(item)
                    if message is not None:
                        progress.tick(message)
            finally:
                await progress.flush()
            assert result is not None
            missing = result.synthesis.status == "failed"
            structured = result.model_dump(mode="json")
            return _result(session_text(result, frozenset(show)), structured, error=missing)

        return await _guard(go)


class StoredSessions(BaseModel):
    """``council_sessions``' structured content: the listing (``sessions``), or one stored
    session's result document (its keys as ``council sessions show --json`` writes them)."""

    model_config = ConfigDict(extra="allow")

    sessions: list[dict[str, Any]] | None = Field(default=None, description="The sessions listed, newest first.")


def _add_read_tools(server: Any, tools: Tools) -> None:
    """The tools that read the store: the leaderboard, the bias report, the stored sessions."""
    from mcp_types import CallToolResult

    from council.api import BiasReport, Leaderboard  # their shapes only: the reports import numpy

    @server.tool(title="Leaderboard")
    async def council_leaderboard(
        council: Annotated[str | None, Field(description="Only this council's sessions.")] = None,
        since: Annotated[str | None, Field(description="Only data on or after this ISO date.")] = None,
        source: Annotated[Literal["sessions", "judgments", "all"], Field(description="Which data rates.")] = "all",
        bootstrap: Annotated[int, Field(description="Bootstrap rounds for the intervals.", ge=0, le=10000)] = 200,
        control: Annotated[
            list[Literal["length", "markdown"]] | None,
            Field(description="Answer styles held equal (style control; rates the judged pairs)."),
        ] = None,
        baseline: Annotated[
            str | None, Field(description="Each model's win rate against this model, raw and length-controlled.")
        ] = None,
    ) -> Annotated[CallToolResult, Leaderboard]:
        """Bradley–Terry ratings per model, with bootstrap intervals, from the stored sessions and judged pairs."""
        from council.api import leaderboard, parse_control, render_leaderboard_text

        async def go() -> Any:
            board = await asyncio.to_thread(
                leaderboard,
                council=council,
                since=since,
                source=source,
                bootstrap=bootstrap,
                baseline=baseline,
                control=parse_control(",".join(control)) if control else [],
            )
            return _result(_render(render_leaderboard_text, board), board.model_dump(mode="json"))

        return await _guard(go)

    @server.tool(title="Bias report")
    async def council_bias_report(
        since: Annotated[str | None, Field(description="Only records on or after this ISO date.")] = None,
        reviewers: Annotated[list[str] | None, Field(description="Only these reviewers.")] = None,
        council: Annotated[str | None, Field(description="Only this council's records.")] = None,
    ) -> Annotated[CallToolResult, BiasReport]:
        """The cross-session bias audit of the stored reviews: reviewer calibration, length–score
        correlation, position bias, self-preference (reported, never corrected)."""
        from council.api import render_bias_report_text

        async def go() -> Any:
            report = await asyncio.to_thread(_bias_report, since, reviewers or [], council)
            # Whole: built with max_points=0, it has no scatter points (they belong to the HTML page).
            structured = report.model_dump(mode="json")
            return _result(_render(render_bias_report_text, report), structured)

        return await _guard(go)

    @server.tool(title="Stored sessions")
    async def council_sessions(
        session_id: Annotated[
            str | None, Field(description="Show this session (an id or a unique prefix); without it, list sessions.")
        ] = None,
        limit: Annotated[int, Field(description="How many sessions to list, newest first.", ge=1, le=500)] = 20,
        council: Annotated[str | None, Field(description="Only this council's sessions.")] = None,
        since: Annotated[str | None, Field(description="Only sessions on or after this ISO date.")] = None,
    ) -> Annotated[CallToolResult, StoredSessions]:
        """List the stored sessions, or show one: its question, every answer, every review (order
        seen, scores with reasoning, ranking), the consensus and the synthesis."""

        async def go() -> Any:
            return await asyncio.to_thread(_sessions, session_id, limit, council, since)

        return await _guard(go)


def _add_batch_tool(server: Any) -> None:
    """``council_batch``: a stored batch's summary, its panel and calibration included."""
    from mcp_types import CallToolResult

    from council import BatchSummary

    @server.tool(title="Batch summary")
    async def council_batch(
        batch_id: Annotated[str, Field(description="The batch's id (council batch --batch-id).", min_length=1)],
        calibration: Annotated[
            str | None, Field(description="A stored calibration map to apply to its probabilities (council calibrate).")
        ] = None,
    ) -> Annotated[CallToolResult, BatchSummary]:
        """The summary of a stored batch as it is now: its verdicts, agreement with the labels, and
        with two or more judges the panel (each judge's habits and accuracy, Krippendorff's alpha,
        the effective number of independent judges), with labels the calibration of its probabilities."""
        from council.api import batch_summary

        async def go() -> Any:
            summary = await asyncio.to_thread(batch_summary, batch_id, calibration=calibration)
            return _result(batch_text(summary), json.loads(summary.model_dump_json()))

        return await _guard(go)


async def _judging(tools: Tools, refs: list[str] | None, ctx: Any, work: Callable[..., Awaitable[Any]]) -> Any:
    """``work(panel, on_call)`` with the judges ``refs`` set up by :func:`council.judge_panel`: each
    tool call under the config's cap, as ``council compare``; the run recorded in the store, whose
    rate budgets the judges' rpm/tpm share with every process on it; ``on_call`` reports progress."""
    from council import judge_panel

    with judge_panel(tools.loaded, refs or (), in_store=True) as panel:
        progress = _Progress(ctx, tools.heartbeat)
        progress.doing = "judging"

        def on_call(record: Any) -> None:
            progress.tick(f"{record.stage} by {record.member}: {'ok' if record.ok else 'failed'}")

        try:
            return await panel.run(lambda p: work(p, on_call))
        finally:
            await progress.flush()


def _outcome_result(outcome: Any, text: str) -> Any:
    """A comparison's or grade's result; a failed or partly failed one says so first."""
    if not outcome.success or outcome.partial:
        how = "failed" if not outcome.success else "partly failed"
        text = f"judging {how}: {one_line(outcome.error or '')}\n{text}"
    return _result(text, outcome.model_dump(mode="json"), error=not outcome.success)


def _bias_report(since: str | None, reviewers: list[str], council: str | None) -> Any:
    from council.api import stored_bias_report

    return stored_bias_report(since=since, reviewers=reviewers, council=council, max_points=0, length_unit=None,
                              skip_bad=False)  # fmt: skip


def _sessions(session_id: str | None, limit: int, council: str | None, since: str | None) -> Any:
    from council.api import get_session, list_sessions, session_listing, stored_result

    if session_id is None:
        rows = [session_listing(r) for r in list_sessions(limit=limit, since=since, council=council)]
        text = "\n".join(
            f"{r['session_id']}  {r['created_at'][:19]}  {r['status']}  {r['council'] or ''}  "
            + (one_line(r["question"]) if r["question"] else "(not stored)")
            for r in rows
        )
        return _result(text or "no sessions", {"sessions": rows})
    row = get_session(session_id)
    doc = stored_result(row)
    if doc is None:
        listing = session_listing(row)
        return _result(f"session {row['id']}: status {row['status']}, error: {one_line(row.get('error') or '')}",
                       listing)  # fmt: skip
    text = session_text(SessionResult.model_validate(doc), frozenset({"answers", "reviews"}))
    if row.get("error"):  # a session that stopped early, with what it had done: why it stopped
        text += f"\nerror: session {row['status']}: {one_line(row['error'])}"
    return _result(text, doc)


def serve(config: str | None, heartbeat: float = 10.0) -> None:
    """Serve the tools over stdio until the client closes the connection; a long tool reports
    progress at least every ``heartbeat`` seconds."""
    _sdk()  # missing SDK: one line, before anything else
    tools = Tools(config, heartbeat)
    server = build_server(tools)

    async def go() -> None:
        try:
            await server.run_stdio_async()
        finally:
            await tools.aclose()

    asyncio.run(go())
