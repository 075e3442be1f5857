"""What a session said, for people: the question, every answer, every review (the order the
reviewer saw, each score with its reasoning, the ranking), the consensus and the synthesis.

One view of the session's events (:mod:`council.session.events`) serves both ``council run
--show`` (events as they arrive) and ``council sessions show`` (the stored session replayed
as events). Long texts fold at the terminal's width; in a pipe every line is written whole
(no wrapping, no cropping), so nothing is lost. Every text goes through the literal console
(:mod:`council.cli.render`): markup and control characters are shown, never obeyed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from council.api import revision_line, w_text, without_prefix
from council.cli.render import consensus_table, heading, out, styled, text_block
from council.cli.show_parts import PARTS, parse_show, show_option_parts  # noqa: F401  # importable from here


class SessionView:
    """Prints the chosen parts of a session from its events, in the order they come."""

    def __init__(self, show: Iterable[str]) -> None:
        self.show = frozenset(show)
        self.models: dict[str, str] = {}
        self.out_of = ""
        self.scores: dict[str, list[int]] = {}

    def __call__(self, event: Any) -> None:
        handler = getattr(self, f"_on_{event.type}", None)
        if handler is not None:
            handler(event)

    def _on_session_started(self, e: Any) -> None:
        self.models = dict(e.models)
        self.out_of = f"/{e.scale[1]}"
        if "question" in self.show:
            heading(("Question", "bold"), f"  (council {e.council}, seed {e.seed})")
            text_block(e.question)

    def _on_answer(self, e: Any) -> None:
        if "answers" not in self.show:
            return
        if e.status == "failed":
            heading(
                ("Answer", "bold"),
                f" {e.member} ({e.model}) ",
                ("failed", "red"),
                f": {without_prefix(e.error, e.model)}",
            )
            return
        if e.status == "late" and e.text is None:  # still answering when its stage closed (stage_grace)
            heading(("Answer", "bold"), f" {e.member} ({e.model}) ", ("late", "yellow"), ": not reviewed")
            return
        latency = f", {e.latency_ms / 1000:.1f}s" if e.latency_ms is not None else ""
        late = ", arrived after its stage closed: not reviewed" if e.status == "late" else ""
        style = "yellow" if e.status == "late" else "green"
        heading(("Answer", "bold"), f" {e.member} ({e.model}) ", (e.status, style),
                f", {e.length_chars} chars{latency}{late}")  # fmt: skip
        text_block(e.text)

    def _on_review(self, e: Any) -> None:
        for member, score in e.scores.items():
            self.scores.setdefault(member, []).append(score)
        if "reviews" not in self.show:
            return
        if e.status == "late" and not e.ranking:  # still reviewing when its stage closed (stage_grace)
            heading(("Review", "bold"), f" by {e.reviewer} ({e.model}) ", ("late", "yellow"), ": not counted")
            return
        if e.status == "invalid":
            tries = f" after {e.attempts} attempt{'s' if e.attempts != 1 else ''}" if e.attempts else ""
            cause = without_prefix(e.error, e.model)
            heading(("Review", "bold"), f" by {e.reviewer} ({e.model}) ", ("invalid", "red"), f"{tries}: {cause}")
            return
        late = [("  late", "yellow"), ": arrived after its stage closed, not counted"] if e.status == "late" else []
        heading(("Review", "bold"), f" by {e.reviewer} ({e.model})", *late)
        seen = "  ".join(f"{label} = {member}" for label, member in e.labels.items())
        out.print(styled("  ", ("order seen:", "dim"), f" {seen}"), soft_wrap=not out.is_terminal)
        label_of = {member: label for label, member in e.labels.items()}
        for member in e.order:
            score = e.scores.get(member)
            shown = "-" if score is None else f"{score}{self.out_of}"
            out.print(
                styled("  ", (f"{label_of.get(member, '?')} {member}", "bold"), f": {shown}"),
                soft_wrap=not out.is_terminal,
            )
            reasoning = e.reasoning.get(member) if e.reasoning else None
            text_block(reasoning, indent=4)
        out.print(styled("  ", ("ranking:", "dim"), " " + " > ".join(e.ranking)), soft_wrap=not out.is_terminal)

    def _on_round_started(self, e: Any) -> None:
        self.scores = {}  # the consensus that follows is the last round's: so are its mean scores
        if self.show & {"answers", "reviews"}:
            w = "undefined" if e.kendall_w_before is None else f"{e.kendall_w_before:.3f}"
            heading(("Deliberation round", "bold"), f" {e.round} ({e.trigger}; Kendall's W before {w})")

    def _on_revision(self, e: Any) -> None:
        if "answers" not in self.show:
            return
        heading(("Revision", "bold"), f" round {e.round}: {revision_line(e)}")
        if e.reason:
            out.print(styled("  ", ("reason:", "dim"), f" {e.reason}"), soft_wrap=not out.is_terminal)
        if e.error:
            out.print(styled("  ", ("error:", "red"), f" {without_prefix(e.error, e.model)}"), soft_wrap=True)
        if e.changed:
            text_block(e.text)

    def _on_round(self, e: Any) -> None:
        if self.show & {"answers", "reviews"}:
            w = "undefined" if e.kendall_w_after is None else f"{e.kendall_w_after:.3f}"
            changed = ", ".join(e.changed) or "none"
            heading(("Round", "bold"), f" {e.round} done: Kendall's W after {w}, changed: {changed}")

    def _on_stage_closed(self, e: Any) -> None:
        if ("answers" if e.stage == "answer" else "reviews") not in self.show:
            return
        heading(
            (f"The {e.stage} stage closed", "bold"),
            f" {e.quorum_seconds:.1f}s in, at its quorum, after {e.grace_seconds:.1f}s of grace; late: ",
            ", ".join(e.late),
        )

    def _on_consensus(self, e: Any) -> None:
        if "consensus" not in self.show:
            return
        out.print()
        means = {m: sum(v) / len(v) for m, v in self.scores.items() if v}
        out.print(consensus_table(e.table, self.models, means, agreement=w_text(e.kendall_w, e.p), method=e.method))

    def _on_synthesis(self, e: Any) -> None:
        if "synthesis" not in self.show:
            return
        if e.status != "ok":
            heading(("Synthesis", "bold"), " ", ("missing", "red"), f": {e.error}")
            return
        fallback = ", the fallback chairman" if e.fallback_used else ""
        heading(("Synthesis", "bold"), f" by {e.chairman} ({e.model}{fallback})")
        text_block(e.text)
        if e.structure is not None:
            structure_blocks(e.structure)


def structure_blocks(structure: Any) -> None:
    """The structured synthesis's parts that its text leaves out (the disagreements are in it):
    what the answers agreed on, what only one saw (by member) and what none considered."""
    parts = (
        ("Agreements", list(structure.agreements)),
        ("Unique insights", [f"{i.member}: {i.insight}" for i in structure.unique_insights]),
        ("Blind spots", list(structure.blind_spots)),
    )
    for title, items in parts:
        if items:
            heading((title, "bold"))
            text_block("\n".join(f"- {item}" for item in items))
