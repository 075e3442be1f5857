"""A council session: answers -> shuffled anonymous peer review -> consensus -> synthesis.

- ``runner``: the session itself (:class:`SessionRunner`), where the pure pieces meet I/O;
- ``stages``: the stages it runs (answers, peer review, consensus, synthesis) and their state;
- ``prompts``: the three stages' prompts (untrusted text through :mod:`council.untrusted.slots`);
- ``schemas``: what a reviewer must return, built per review;
- ``results``: the result types (``SessionResult`` and its parts);
- ``candidates``: existing answers to review instead of asking the members;
- ``events``: what a running session tells the world, with content (``SessionEvent``).

The consensus and the reviewers' agreement are pure methods: :mod:`council.methods.ranking`,
:mod:`council.methods.concordance`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from council._util.lazy_exports import lazy_exports

# Imported when first asked for: a run's first call needs the runner and its events, not the
# result models (those are imported beside its first calls: council._util.speedups).
_EXPORTS = {
    "Consensus": "council.methods.ranking",
    "ConsensusEntry": "council.methods.ranking",
    "consensus_ranking": "council.methods.ranking",
    "Candidate": "council.session.candidates",
    "load_candidates": "council.session.candidates",
    "parse_candidates": "council.session.candidates",
    "SessionEvent": "council.session.events",
    "parse_event": "council.session.events",
    "Failure": "council.session.results",
    "MemberAnswer": "council.session.results",
    "Review": "council.session.results",
    "SessionResult": "council.session.results",
    "SessionStatus": "council.session.results",
    "Synthesis": "council.session.results",
    "OFFLINE_NOTICE": "council.session.runner",
    "EventSink": "council.session.stages",
    "SessionRunner": "council.session.runner",
    "reviewer_order": "council.session.stages",
    "scrub_transcripts": "council.session.runner",
}

if TYPE_CHECKING:  # pragma: no cover  # the lazy exports above, for type checkers
    from council.methods.ranking import Consensus, ConsensusEntry, consensus_ranking  # noqa: F401
    from council.session.candidates import Candidate, load_candidates, parse_candidates  # noqa: F401
    from council.session.events import SessionEvent, parse_event  # noqa: F401
    from council.session.results import (  # noqa: F401
        Failure,
        MemberAnswer,
        Review,
        SessionResult,
        SessionStatus,
        Synthesis,
    )
    from council.session.runner import OFFLINE_NOTICE, SessionRunner, scrub_transcripts  # noqa: F401
    from council.session.stages import EventSink, reviewer_order  # noqa: F401


__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = [
    "OFFLINE_NOTICE",
    "Candidate",
    "Consensus",
    "ConsensusEntry",
    "EventSink",
    "Failure",
    "MemberAnswer",
    "Review",
    "SessionEvent",
    "SessionResult",
    "SessionRunner",
    "SessionStatus",
    "Synthesis",
    "consensus_ranking",
    "load_candidates",
    "parse_event",
    "parse_candidates",
    "reviewer_order",
    "scrub_transcripts",
]
