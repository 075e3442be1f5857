"""A council session: answers -> shuffled anonymous peer review -> consensus -> synthesis.

- ``runner``: the session itself (:class:`SessionRunner`), where the pure pieces meet I/O;
- ``prompts``: the three stages' prompts (untrusted text through :mod:`council.slots`);
- ``schemas``: what a reviewer must return, built per review;
- ``results``: the result types (``SessionResult`` and its parts);
- ``candidates``: existing answers to review instead of asking the members;
- ``events``: what a running session tells the world, with content (``SessionEvent``).

The consensus and the reviewers' agreement are pure methods: :mod:`council.methods.ranking`,
:mod:`council.methods.concordance`.
"""

from council.methods.ranking import Consensus, ConsensusEntry, consensus_ranking
from council.session.candidates import Candidate, load_candidates, parse_candidates
from council.session.events import SessionEvent, parse_event
from council.session.results import Failure, MemberAnswer, Review, SessionResult, SessionStatus, Synthesis
from council.session.runner import (
    OFFLINE_NOTICE,
    EventSink,
    SessionRunner,
    reviewer_order,
    scrub_transcripts,
)

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
