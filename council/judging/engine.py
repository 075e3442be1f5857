"""The judging engine: pairwise comparison with position swap, and rubric grading.

This is where the pure judging logic (strategies, voting, averaging, prompts, rubrics)
meets I/O: judge clients, the call log and the store.

* :func:`compare` — per judge, each vote is one swap pair (pass 1 shows A first,
  pass 2 shows B first; the two run concurrently), combined by the swap strategy;
  votes are aggregated by majority (:func:`run_votes`, optionally adaptive); several
  judges are combined under the same strategy (``average``: their scores averaged,
  docs/methods.md, "Multi-judge averaging"; ``consistency``: majority of their
  verdicts; ``conservative``: only a unanimous verdict wins), and each judge's own
  result is kept.
* :func:`grade` — docs/methods.md, "Rubric grading": reference-based when a reference
  is given, reasoning before every integer score, three votes per judge voted per
  criterion, several judges averaged, safety flag, bias checklist, an ``EvaluationReport``.

Result types live in :mod:`council.judging.outcomes`, grading in
:mod:`council.judging.grading`, what both share (asking for valid output, persisting) in
:mod:`council.judging.running`; ``compare`` and ``grade`` are both importable from here.

Invalid judge output is re-requested up to ``max_attempts`` times with the reason,
then the pass is recorded invalid and the judgment fails with that reason: nothing is
coerced. Every pass and every call is persisted with the run, in one transaction.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from council.accounting.budget import together
from council.accounting.usage import CallRecord, CallSink
from council.config import LoadedConfig, resolve_council, resolve_model
from council.errors import InputError, UsageError
from council.judging.grading import grade
from council.judging.outcomes import (
    ComparisonOutcome,
    GradeOutcome,
    JudgeComparison,
    JudgeGrade,
    JudgmentPass,
    Outcome,
    VoteSummary,
    comparison_fields,
    judge_failures,
)
from council.judging.prompts import PairwiseTemplate, pairwise_template
from council.judging.rubrics import DEPTH_CRITERIA, load_bias_checklist
from council.judging.running import check_common, gathered, judge_pass, judging_run, persist, schema_of
from council.judging.schemas import BiasChecklist, Criterion, criterion_names, pairwise_pass_model
from council.methods.averaging import average_side_scores, combine_judges
from council.methods.swap import (
    DEFAULT_STRATEGY,
    DEFAULT_TIE_MARGIN,
    INCONSISTENT_CONFIDENCE,
    PassView,
    combine_passes,
    flip,
    get_strategy,
    read_pass,
)
from council.methods.verdicts import PairwiseMetadata, PairwiseResult, Scale, check_scale
from council.methods.voting import PAIRWISE_VOTES, VoteResult, min_votes_for_decision, run_votes
from council.providers.client import ModelClient
from council.storage import Store

if TYPE_CHECKING:
    from council.judging.adaptive import AdaptiveJury

__all__ = [
    "ComparisonOutcome",
    "GradeOutcome",
    "JudgeComparison",
    "JudgeGrade",
    "JudgmentPass",
    "Outcome",
    "VoteSummary",
    "compare",
    "grade",
    "make_judges",
    "resolve_criteria",
]

#: The default comparison criteria (docs/methods.md, "Criteria sets").
GENERAL_CRITERIA: tuple[Criterion, ...] = (
    Criterion(name="accuracy", description="Facts and claims are correct; nothing is invented."),
    Criterion(name="completeness", description="Addresses every part of the prompt, with the important caveats."),
    Criterion(name="specificity", description="Concrete, specific and useful rather than vague or generic."),
    Criterion(name="clarity", description="Clear and well organised, without unnecessary wordiness."),
)
NAMED_CRITERIA: dict[str, tuple[Criterion, ...]] = {"general": GENERAL_CRITERIA, "depth": DEPTH_CRITERIA}
PAIRWISE_SCHEMA = "pairwise_pass"


def resolve_criteria(criteria: str | Sequence[str | Criterion] | None) -> tuple[Criterion, ...]:
    """None -> the general set; ``"depth"`` (or ``["depth"]``) -> the five depth dimensions."""
    if criteria is None:
        return GENERAL_CRITERIA
    if isinstance(criteria, str):
        criteria = [criteria]
    if len(criteria) == 1 and isinstance(criteria[0], str) and criteria[0] in NAMED_CRITERIA:
        return NAMED_CRITERIA[criteria[0]]
    try:
        names = criterion_names(criteria)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    pairs = zip(criteria, names, strict=True)
    return tuple(c if isinstance(c, Criterion) else Criterion(name=name) for c, name in pairs)


def make_judges(
    loaded: LoadedConfig, refs: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> list[ModelClient]:
    """Judge clients for aliases from [models] or model strings; default: the default council's chairman."""
    from council.providers.registry import make_api

    env = os.environ if env is None else env
    if refs:
        resolved = [resolve_model(ref, loaded.config, env, "--judge") for ref in refs]
    else:
        chairman = resolve_council(loaded, None, env).chairman
        if chairman is None:
            raise UsageError("no judge given and the default council has no chairman; use --judge")
        resolved = [chairman]
    ids = [r.id for r in resolved]
    if len(set(ids)) != len(ids):
        raise UsageError(f"each judge may be given once (got {', '.join(ids)})")
    return [ModelClient(r, make_api(r)) for r in resolved]


#: The prompt template of each judging setting (criteria, scale, ties, checklist, pass model),
#: built once for a batch's passes rather than once per pass.
_TEMPLATES: dict[tuple[Any, ...], PairwiseTemplate] = {}


def _template(
    criteria: Sequence[Criterion], scale: Scale, allow_tie: bool, checklist: BiasChecklist, model: type[Any]
) -> PairwiseTemplate:
    # Keyed by content, not identity: criteria and checklists are mutable models.
    key = (
        tuple((c.name, c.description, c.weight, tuple(sorted(c.levels.items()))) for c in criteria),
        tuple(scale),
        allow_tie,
        tuple((i.id, i.question, i.guidance) for i in checklist.items),
        model,
    )
    template = _TEMPLATES.get(key)
    if template is None:
        if len(_TEMPLATES) >= 256:
            _TEMPLATES.clear()
        template = _TEMPLATES[key] = pairwise_template(
            criteria, scale=scale, allow_tie=allow_tie, bias_checklist=checklist, schema=schema_of(model)
        )
    return template


class _JudgeFailed(Exception):
    """A vote's pass could not be judged; ends that judge's vote with the reason."""


# ------------------------------------------------------------------------ compare


@dataclass
class _Comparison:
    """The shared inputs of one comparison, and the passes it collects."""

    prompt: str
    response_a: str
    response_b: str
    criteria: tuple[Criterion, ...]
    context: str | None
    allow_tie: bool
    swap: bool
    strategy: str
    votes: int
    adaptive: bool
    scale: Scale
    tie_margin: float
    max_attempts: int
    checklist: BiasChecklist
    sink: CallSink
    passes: list[JudgmentPass] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.names = list(criterion_names(self.criteria))
        self.model = pairwise_pass_model(self.criteria, self.scale, self.allow_tie)
        self.template = _template(self.criteria, self.scale, self.allow_tie, self.checklist, self.model)
        self.pass_numbers = (1, 2) if self.swap else (1,)  # a vote's passes: both orders with swap

    async def one_pass(self, client: ModelClient, vote: int, pass_number: int) -> tuple[JudgmentPass, PassView | None]:
        first, second = (self.response_a, self.response_b) if pass_number == 1 else (self.response_b, self.response_a)
        messages = self.template.messages(self.prompt, first, second, self.context)
        record, parsed = await judge_pass(
            client,
            messages,
            self.model,
            schema_name=PAIRWISE_SCHEMA,
            stage="compare",
            vote=vote,
            pass_number=pass_number,
            shown_first="A" if pass_number == 1 else "B",
            max_attempts=self.max_attempts,
            sink=self.sink,
        )
        view = None
        if parsed is not None:
            # Read once, from the output dumped for the record; combined as it is (read_pass).
            view = read_pass(record.output or parsed)
            swapped = pass_number == 2
            record.winner_as_seen = view.winner
            record.winner = flip(view.winner) if swapped else view.winner
            record.a_total, record.b_total = (view.b_total, view.a_total) if swapped else (view.a_total, view.b_total)
        self.passes.append(record)
        return record, view

    async def one_vote(self, client: ModelClient, vote: int) -> PairwiseResult:
        t0 = time.perf_counter()
        # A vote needs both of its passes: under a spend cap they start together or not at all.
        with together(client.budget, len(self.pass_numbers)):
            done = await gathered(self.one_pass(client, vote, n) for n in self.pass_numbers)
        invalid = [r for r, parsed in done if parsed is None]
        if invalid:
            raise _JudgeFailed(f"{client.id}: pass {invalid[0].pass_number} of vote {vote + 1}: {invalid[0].problem}")
        parsed = [p for _, p in done]
        return combine_passes(
            parsed[0],
            parsed[1] if self.swap else None,
            strategy=self.strategy,
            scale=self.scale,
            tie_margin=self.tie_margin,
            judge_model=client.model,
            evaluation_time_ms=(time.perf_counter() - t0) * 1000,
            calls=sum(r.attempts for r, _ in done),
        )

    async def judge(self, client: ModelClient) -> JudgeComparison:
        t0 = time.perf_counter()
        results: dict[int, PairwiseResult] = {}

        async def judge_once(vote: int) -> str:
            results[vote] = await self.one_vote(client, vote)
            return results[vote].winner

        # The votes the verdict needs start together or not at all under a spend cap: all of them,
        # or an adaptive vote's first round (each later vote's passes are grouped in one_vote).
        needed = min_votes_for_decision(self.votes) if self.adaptive else self.votes
        try:
            with together(client.budget, needed * len(self.pass_numbers)):
                vote, _, votes_saved = await run_votes(judge_once, self.votes, self.adaptive)
        except _JudgeFailed as exc:
            metadata = PairwiseMetadata(positions_swapped=self.swap, judge_model=client.model)
            failed = PairwiseResult.failure(str(exc), strategy=self.strategy, metadata=metadata)
            return JudgeComparison(judge=client.id, model=client.model, success=False, error=str(exc), result=failed)
        ordered = [results[i] for i in sorted(results)]
        merged = merge_votes(ordered, vote, evaluation_time_ms=(time.perf_counter() - t0) * 1000)
        summaries = [
            VoteSummary(
                vote=i,
                winner=r.winner,
                confidence=r.confidence,
                consistent=r.position_consistency.consistent if r.position_consistency else None,
                a_total=r.scores["A"].total,
                b_total=r.scores["B"].total,
            )
            for i, r in zip(sorted(results), ordered, strict=True)
        ]
        return JudgeComparison(
            judge=client.id,
            model=client.model,
            success=True,
            result=merged,
            votes=summaries,
            vote=vote,
            calls_saved=votes_saved * len(self.pass_numbers),
        )


def merge_votes(votes: Sequence[PairwiseResult], vote: VoteResult, *, evaluation_time_ms: float) -> PairwiseResult:
    """One judge's votes as one result: the majority winner, scores averaged over the votes,
    and the reasoning of the first vote that chose the winner (of the first vote when there
    is no majority). One vote is returned as is."""
    if len(votes) == 1:
        metadata = votes[0].metadata.model_copy(update={"evaluation_time_ms": evaluation_time_ms})
        return votes[0].model_copy(update={"metadata": metadata})
    # With no majority the votes could not settle it: a TIE at the inconsistent confidence
    # (docs/methods.md, "Merging one judge's votes").
    decided = not vote.flagged_for_review
    agreeing = [v for v in votes if v.winner == vote.winner] if decided else []
    representative = agreeing[0] if agreeing else votes[0]
    scores = average_side_scores([v.scores for v in votes])
    comparison = [
        c.model_copy(
            update={"a_score": scores["A"].criteria[c.criterion], "b_score": scores["B"].criteria[c.criterion]}
        )
        for c in representative.comparison
    ]
    metadata = representative.metadata.model_copy(
        update={"evaluation_time_ms": evaluation_time_ms, "calls": sum(v.metadata.calls for v in votes)}
    )
    return representative.model_copy(
        update={
            "winner": vote.winner,
            "confidence": statistics.fmean(v.confidence for v in agreeing) if agreeing else INCONSISTENT_CONFIDENCE,
            "scores": scores,
            "comparison": comparison,
            "unstable": any(v.unstable for v in votes),
            "metadata": metadata,
        }
    )


async def compare(
    prompt: str,
    response_a: str,
    response_b: str,
    *,
    judges: Sequence[ModelClient],
    criteria: str | Sequence[str | Criterion] | None = None,
    context: str | None = None,
    allow_tie: bool = True,
    swap: bool = True,
    strategy: str = DEFAULT_STRATEGY,
    votes: int = PAIRWISE_VOTES,
    adaptive: bool = False,
    scale: Sequence[int] = (1, 5),
    tie_margin: float = DEFAULT_TIE_MARGIN,
    max_attempts: int = 3,
    bias_checklist: BiasChecklist | None = None,
    sink: CallSink | None = None,
    store: Store | bool | None = True,
    keep_text: bool | None = None,
    run_id: str | None = None,
    jury: AdaptiveJury | None = None,
) -> ComparisonOutcome:
    """Compare two responses to ``prompt`` (A = ``response_a``) with every judge.

    ``store``: True opens ``$COUNCIL_HOME/council.db``; a ``Store`` is used as is; None
    keeps the run in memory (the caller persists it, as ``batch`` does). ``keep_text=False``
    stores no judge reasoning; None: the user's setting (``store_transcripts`` of
    :func:`council.judging.running.default_privacy`, read from the environment and the default
    config file). Pass it to judge under another config's settings (``council.judging.facade`` does). Judge failures
    are reported in the outcome (``success=False`` when no judge succeeded), not raised. ``jury``: an
    adaptive jury (council.judging.adaptive) asks the judges one pass at a time until it is sure.
    """
    check_common(prompt, judges, votes, max_attempts)
    get_strategy(strategy)
    if tie_margin < 0:
        raise UsageError(f"tie_margin must be >= 0, got {tie_margin}")
    try:
        scale = check_scale(scale)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    chosen = resolve_criteria(criteria)
    checklist = bias_checklist or load_bias_checklist()
    with judging_run(store, keep_text, run_id, sink, [prompt, response_a, response_b, context]) as run:
        job = _Comparison(
            prompt=prompt,
            response_a=response_a,
            response_b=response_b,
            criteria=chosen,
            context=context,
            allow_tie=allow_tie,
            swap=swap,
            strategy=strategy,
            votes=votes,
            adaptive=adaptive,
            scale=scale,
            tie_margin=tie_margin,
            max_attempts=max_attempts,
            checklist=checklist,
            sink=run.log,
        )
        if jury is not None:
            from council.judging.adaptive import ask_until_sure

            outcome = await ask_until_sure(job, judges, jury, run.run_id)
        else:
            t0 = time.perf_counter()
            per_judge = await gathered(job.judge(j) for j in judges)
            outcome = _comparison_outcome(job, per_judge, run.calls, run.run_id, time.perf_counter() - t0)
        persist(run, "compare", outcome)
    return outcome


def _comparison_outcome(
    job: _Comparison, per_judge: list[JudgeComparison], calls: list[CallRecord], run_id: str, elapsed_s: float
) -> ComparisonOutcome:
    ok = [j for j in per_judge if j.success]
    common = comparison_fields(job, per_judge, calls, run_id, elapsed_s)
    if not ok:
        error = judge_failures(per_judge)
        return ComparisonOutcome(
            success=False,
            error=error,
            winner="TIE",
            confidence=0.0,
            confidence_level="low",
            flagged_for_review=True,
            unstable=False,
            **common,
        )
    if len(per_judge) == 1:
        result, vote = ok[0].result, ok[0].vote
        assert vote is not None
        return ComparisonOutcome(
            success=True,
            winner=result.winner,
            confidence=result.confidence,
            confidence_level=vote.confidence_level,
            flagged_for_review=vote.flagged_for_review or result.unstable,
            unstable=result.unstable,
            scores=result.scores,
            **common,
        )
    if len(ok) < len(per_judge):
        common["partial"] = True
        common["error"] = judge_failures(per_judge)
    combined, averaged = combine_judges(
        {j.judge: j.result for j in per_judge}, strategy=job.strategy, tie_margin=job.tie_margin
    )
    unstable = any(j.result.unstable for j in ok)
    return ComparisonOutcome(
        success=True,
        winner=combined.winner,
        confidence=combined.confidence,
        confidence_level=combined.confidence_level,
        flagged_for_review=combined.flagged_for_review or unstable or len(ok) < len(per_judge),
        unstable=unstable,
        # scores are averaged over the judges under every strategy; only ``average`` decides by them
        scores=average_side_scores([j.result.scores for j in ok]),
        averaged=averaged,
        judges_verdict=combined,
        **common,
    )
