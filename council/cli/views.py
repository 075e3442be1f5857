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

from council.cli.render import consensus_table, heading, out, styled, text_block, w_text, without_prefix

#: What ``--show`` can name.
PARTS = ("question", "answers", "reviews", "consensus", "synthesis")


def parse_show(value: str | None) -> frozenset[str]:
    """``answers,reviews`` → the parts; ``all`` → every part; None (not given) → none. Unknown
    names, or none named (``""``): a ValueError saying so."""
    if value is None:
        return frozenset()
    names = {n.strip().lower() for n in value.split(",") if n.strip()}
    if not names:
        raise ValueError(f"no part named; choose from {', '.join(PARTS)}, all")
    if "all" in names:
        return frozenset(PARTS)
    unknown = sorted(names - set(PARTS))
    if unknown:
        raise ValueError(f"unknown part(s) {', '.join(map(repr, unknown))}; choose from {', '.join(PARTS)}, all")
    return frozenset(names)


def show_option_parts(show: str | None, as_json: bool) -> frozenset[str]:
    """``--show`` of ``run`` and ``sessions show`` checked alike: a bad value, or parts to print
    together with ``--json`` (which prints the whole session), is a ``UsageError``."""
    from council.errors import UsageError

    try:
        parts = parse_show(show)
    except ValueError as exc:
        raise UsageError(f"--show: {exc}") from None
    if parts and as_json:
        raise UsageError("--show prints for people; --json prints the whole result: choose one")
    return parts


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
        latency = f", {e.latency_ms / 1000:.1f}s" if e.latency_ms is not None else ""
        heading(
            ("Answer", "bold"), f" {e.member} ({e.model}) ", (e.status, "green"), f", {e.length_chars} chars{latency}"
        )
        text_block(e.text)

    def _on_review(self, e: Any) -> None:
        for member, score in e.scores.items():
            self.scores.setdefault(member, []).append(score)
        if "reviews" not in self.show:
            return
        if e.status != "ok":
            tries = f" after {e.attempts} attempt{'s' if e.attempts != 1 else ''}" if e.attempts else ""
            cause = without_prefix(e.error, e.model)
            heading(("Review", "bold"), f" by {e.reviewer} ({e.model}) ", ("invalid", "red"), f"{tries}: {cause}")
            return
        heading(("Review", "bold"), f" by {e.reviewer} ({e.model})")
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
