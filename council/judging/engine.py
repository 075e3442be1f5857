"""The judging engine: pairwise comparison with position swap, and rubric grading.

This is where the pure judging logic (strategies, voting, averaging, prompts, rubrics)
meets I/O: judge clients, the call log and the store.

* :func:`compare` — per judge, each vote is one swap pair (pass 1 shows A first,
  pass 2 shows B first; the two run concurrently), combined by the swap strategy;
  votes are aggregated by majority (:func:`run_votes`, optionally adaptive); several
  judges are averaged as in seed 000, and each judge's own result is kept.
* :func:`grade` — seed 003: reference-based when a reference is given, reasoning
  before every integer score, ensemble voting per criterion, safety flag, bias
  checklist, an ``EvaluationReport``.

Invalid judge output is re-requested up to ``max_attempts`` times with the reason,
then the pass is recorded invalid and the judgment fails with that reason: nothing is
coerced. Every pass and every call is persisted with the run, in one transaction.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from council.config import LoadedConfig, resolve_council, resolve_model
from council.errors import InputError, InvalidOutputError, ProviderError, UsageError
from council.judging.averaging import MultiJudgeVerdict, average_across_judges, average_side_scores
from council.judging.prompts import evaluation_mode, grade_messages, pairwise_messages, retry_message
from council.judging.rubrics import DEPTH_CRITERIA, compile_evaluation_report, load_rubric
from council.judging.schemas import (
    ConfidenceLevel,
    Criterion,
    EvaluationReport,
    PairwiseMetadata,
    PairwiseResult,
    Rubric,
    Scale,
    Side,
    SideScores,
    Verdict,
    check_scale,
    criterion_names,
    pairwise_pass_model,
    rubric_grade_model,
)
from council.judging.strategies import (
    DEFAULT_STRATEGY,
    DEFAULT_TIE_MARGIN,
    INCONSISTENT_CONFIDENCE,
    combine_passes,
    flip,
    get_strategy,
    read_pass,
)
from council.judging.voting import VoteResult, majority_vote, min_votes_for_decision, run_votes
from council.providers.base import ChatRequest
from council.providers.client import CallRecord, CallSink, ModelClient
from council.results import Usage
from council.storage.store import Store
from council.validation import validate_output

#: The default comparison criteria (seed 001's example dimensions, in English).
GENERAL_CRITERIA: tuple[Criterion, ...] = (
    Criterion(name="accuracy", description="Facts and claims are correct; nothing is invented."),
    Criterion(name="completeness", description="Addresses every part of the prompt, with the important caveats."),
    Criterion(name="specificity", description="Concrete, specific and useful rather than vague or generic."),
    Criterion(name="clarity", description="Clear and well organised, without unnecessary wordiness."),
)
NAMED_CRITERIA: dict[str, tuple[Criterion, ...]] = {"general": GENERAL_CRITERIA, "depth": DEPTH_CRITERIA}
PAIRWISE_SCHEMA = "pairwise_pass"
GRADE_SCHEMA = "rubric_grade"
MAX_REPLY_ECHO = 4000  # characters of an invalid reply sent back with the re-request


def resolve_criteria(criteria: str | Sequence[str | Criterion] | None) -> tuple[Criterion, ...]:
    """None -> the general set; ``"depth"`` (or ``["depth"]``) -> seed 000's five dimensions."""
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
    return tuple(c if isinstance(c, Criterion) else Criterion(name=name) for c, name in zip(criteria, names))


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


# ----------------------------------------------------------------------- results


class JudgmentPass(BaseModel):
    """One judge pass as recorded: who judged, in which order, and whether the output was valid."""

    judge: str
    judge_model: str
    vote: int
    pass_number: int  # pairwise: 1 = A shown first, 2 = B shown first; grades: 1
    shown_first: Literal["A", "B"] | None = None
    valid: bool
    attempts: int
    winner_as_seen: Verdict | None = None
    winner: Verdict | None = None  # in the original labels
    a_total: float | None = None
    b_total: float | None = None
    score_total: int | None = None
    problem: str | None = None
    output: dict[str, Any] | None = Field(default=None, exclude=True)  # stored with the pass, not repeated here


class VoteSummary(BaseModel):
    vote: int
    winner: Verdict
    confidence: float
    consistent: bool | None
    a_total: float
    b_total: float


class JudgeComparison(BaseModel):
    """One judge's comparison: its votes merged into one result."""

    judge: str
    model: str
    success: bool
    error: str | None = None
    result: PairwiseResult
    votes: list[VoteSummary] = Field(default_factory=list)
    vote: VoteResult | None = None
    calls_saved: int = 0


class ComparisonOutcome(BaseModel):
    run_id: str
    success: bool
    error: str | None = None
    winner: Verdict
    confidence: float
    #: How far the votes (one judge) or the judges (several) agree.
    confidence_level: ConfidenceLevel
    flagged_for_review: bool
    #: Some swap pair changed its winner when the order was swapped (seed 003 step 5).
    unstable: bool
    strategy: str
    swap: bool
    criteria: list[str]
    scale: Scale
    scores: dict[Side, SideScores] = Field(default_factory=dict)
    judges: list[JudgeComparison]
    averaged: MultiJudgeVerdict | None = None
    passes: list[JudgmentPass]
    swap_pairs: int
    inconsistent_pairs: int
    calls: int
    calls_saved: int
    usage: Usage
    elapsed_ms: float


class JudgeGrade(BaseModel):
    judge: str
    model: str
    success: bool
    error: str | None = None
    report: EvaluationReport | None = None
    votes_cast: int
    votes_planned: int
    calls_saved: int = 0


class GradeOutcome(BaseModel):
    run_id: str
    success: bool
    error: str | None = None
    mode: Literal["reference", "rubric"]
    rubric: str
    #: The ensemble's report: every valid vote of every judge, voted per criterion.
    report: EvaluationReport | None
    judges: list[JudgeGrade]
    passes: list[JudgmentPass]
    calls: int
    calls_saved: int
    usage: Usage
    elapsed_ms: float


# ------------------------------------------------------------ asking for valid output


@lru_cache(maxsize=256)
def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


class _Reply(BaseModel):
    parsed: Any = None
    attempts: int
    problem: str | None = None


async def ask_valid(
    client: ModelClient,
    messages: list[dict[str, str]],
    model: type[BaseModel],
    *,
    schema_name: str,
    stage: str,
    seed: int,
    max_attempts: int,
    sink: CallSink,
) -> _Reply:
    """Ask until the reply validates against ``model``, re-requesting with the reason; a
    provider failure (after the client's own retries) ends the pass as invalid."""
    problem = None
    for attempt in range(1, max_attempts + 1):
        request = ChatRequest(
            messages=messages, json_schema=_schema_of(model), schema_name=schema_name, seed=seed, **client.defaults()
        )
        try:
            response = await client.complete(request, stage=stage, sink=sink)
        except ProviderError as exc:
            return _Reply(attempts=attempt, problem=f"provider error: {exc}")
        parsed, problem = validate_output(model, response.text)
        if parsed is not None:
            return _Reply(parsed=parsed, attempts=attempt)
        echo = {"role": "assistant", "content": response.text[:MAX_REPLY_ECHO]}
        messages = [*messages, echo, retry_message(problem or "invalid output")]
    return _Reply(attempts=max_attempts, problem=f"invalid output after {max_attempts} attempts: {problem}")


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
    sink: CallSink
    passes: list[JudgmentPass] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.names = list(criterion_names(self.criteria))
        self.model = pairwise_pass_model(self.criteria, self.scale, self.allow_tie)

    async def one_pass(self, client: ModelClient, vote: int, pass_number: int) -> tuple[JudgmentPass, Any]:
        first, second = (self.response_a, self.response_b) if pass_number == 1 else (self.response_b, self.response_a)
        messages = pairwise_messages(
            self.prompt,
            first,
            second,
            self.criteria,
            scale=self.scale,
            allow_tie=self.allow_tie,
            context=self.context,
            schema=_schema_of(self.model),
        )
        # The vote number seeds the request: votes are distinct samples, reproducible where seeds are honoured.
        reply = await ask_valid(
            client,
            messages,
            self.model,
            schema_name=PAIRWISE_SCHEMA,
            stage="compare",
            seed=vote,
            max_attempts=self.max_attempts,
            sink=self.sink,
        )
        record = JudgmentPass(
            judge=client.id,
            judge_model=client.model,
            vote=vote,
            pass_number=pass_number,
            shown_first="A" if pass_number == 1 else "B",
            valid=reply.parsed is not None,
            attempts=reply.attempts,
            problem=reply.problem,
        )
        if reply.parsed is not None:
            view = read_pass(reply.parsed)
            swapped = pass_number == 2
            record.output = reply.parsed.model_dump(mode="json")
            record.winner_as_seen = view.winner
            record.winner = flip(view.winner) if swapped else view.winner
            record.a_total, record.b_total = (view.b_total, view.a_total) if swapped else (view.a_total, view.b_total)
        self.passes.append(record)
        return record, reply.parsed

    async def one_vote(self, client: ModelClient, vote: int) -> PairwiseResult:
        t0 = time.perf_counter()
        numbers = (1, 2) if self.swap else (1,)
        done = await asyncio.gather(*(self.one_pass(client, vote, n) for n in numbers))
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

        try:
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
            calls_saved=votes_saved * (2 if self.swap else 1),
        )


def merge_votes(votes: Sequence[PairwiseResult], vote: VoteResult, *, evaluation_time_ms: float) -> PairwiseResult:
    """One judge's votes as one result: the majority winner, scores averaged over the votes,
    and the reasoning of the first vote that chose the winner (of the first vote when there
    is no majority). One vote is returned as is."""
    if len(votes) == 1:
        metadata = votes[0].metadata.model_copy(update={"evaluation_time_ms": evaluation_time_ms})
        return votes[0].model_copy(update={"metadata": metadata})
    # With no majority the votes could not settle it: a TIE at seed 001's inconsistent confidence.
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


def _check_common(prompt: str, judges: Sequence[ModelClient], votes: int, max_attempts: int) -> None:
    if not prompt.strip():
        raise InputError("the prompt is empty")
    if not judges:
        raise UsageError("at least one judge is needed")
    if len({j.id for j in judges}) != len(judges):
        raise UsageError("each judge may be given once")
    if votes < 1:
        raise UsageError(f"votes must be at least 1, got {votes}")
    if max_attempts < 1:
        raise UsageError(f"max_attempts must be at least 1, got {max_attempts}")


def _tee(calls: list[CallRecord], sink: CallSink | None) -> CallSink:
    if sink is None:
        return calls.append

    def both(record: CallRecord) -> None:
        calls.append(record)
        sink(record)

    return both


def _open_store(store: Store | bool | None) -> tuple[Store | None, bool]:
    if store is True:
        return Store.open(), True
    return (store or None), False


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
    votes: int = 1,
    adaptive: bool = False,
    scale: Sequence[int] = (1, 5),
    tie_margin: float = DEFAULT_TIE_MARGIN,
    max_attempts: int = 3,
    sink: CallSink | None = None,
    store: Store | bool | None = True,
    run_id: str | None = None,
) -> ComparisonOutcome:
    """Compare two responses to ``prompt`` (A = ``response_a``) with every judge.

    ``store``: True opens ``$COUNCIL_HOME/council.db``; a ``Store`` is used as is; None
    keeps the run in memory (the caller persists it, as ``batch`` does). Judge failures
    are reported in the outcome (``success=False`` when no judge succeeded), not raised.
    """
    _check_common(prompt, judges, votes, max_attempts)
    get_strategy(strategy)
    if tie_margin < 0:
        raise UsageError(f"tie_margin must be >= 0, got {tie_margin}")
    try:
        scale = check_scale(scale)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    calls: list[CallRecord] = []
    job = _Comparison(
        prompt=prompt,
        response_a=response_a,
        response_b=response_b,
        criteria=resolve_criteria(criteria),
        context=context,
        allow_tie=allow_tie,
        swap=swap,
        strategy=strategy,
        votes=votes,
        adaptive=adaptive,
        scale=scale,
        tie_margin=tie_margin,
        max_attempts=max_attempts,
        sink=_tee(calls, sink),
    )
    t0 = time.perf_counter()
    per_judge = list(await asyncio.gather(*(job.judge(j) for j in judges)))
    outcome = _comparison_outcome(job, per_judge, calls, run_id or str(uuid.uuid4()), time.perf_counter() - t0)
    _persist(store, "compare", outcome, calls)
    return outcome


def _comparison_outcome(
    job: _Comparison, per_judge: list[JudgeComparison], calls: list[CallRecord], run_id: str, elapsed_s: float
) -> ComparisonOutcome:
    ok = [j for j in per_judge if j.success]
    pairs = [v.consistent for j in ok for v in j.votes if v.consistent is not None]
    common: dict[str, Any] = {
        "run_id": run_id,
        "strategy": job.strategy,
        "swap": job.swap,
        "criteria": job.names,
        "scale": job.scale,
        "judges": per_judge,
        "passes": sorted(job.passes, key=lambda p: (p.judge, p.vote, p.pass_number)),
        "swap_pairs": len(pairs),
        "inconsistent_pairs": pairs.count(False),
        "calls": len(calls),
        "calls_saved": sum(j.calls_saved for j in per_judge),
        "usage": Usage.of(calls),
        "elapsed_ms": elapsed_s * 1000,
    }
    if not ok:
        error = "; ".join(j.error or "failed" for j in per_judge)
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
    averaged = average_across_judges({j.judge: j.result for j in per_judge}, tie_margin=job.tie_margin)
    judges_agree = majority_vote([j.result.winner for j in ok])
    unstable = any(j.result.unstable for j in ok)
    return ComparisonOutcome(
        success=True,
        winner=averaged.winner,
        confidence=averaged.confidence,
        confidence_level=judges_agree.confidence_level,
        flagged_for_review=judges_agree.flagged_for_review or unstable or len(ok) < len(per_judge),
        unstable=unstable,
        scores=averaged.scores,
        averaged=averaged,
        **common,
    )


# -------------------------------------------------------------------------- grade


def _grade_decided(grades: Sequence[BaseModel], total_n: int, names: Sequence[str]) -> bool:
    """Every criterion's final score is fixed: some score already has a majority of ``total_n``."""
    if not grades:
        return False
    by_criterion = [{c.criterion: c.score for c in g.criteria} for g in grades]  # type: ignore[attr-defined]
    for name in names:
        scores = [g[name] for g in by_criterion]
        if 2 * max(scores.count(s) for s in set(scores)) <= total_n:
            return False
    return True


@dataclass
class _Grading:
    prompt: str
    response: str
    rubric: Rubric
    reference: str | None
    context: str | None
    votes: int
    adaptive: bool
    max_attempts: int
    mode: str
    sink: CallSink
    passes: list[JudgmentPass] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.model = rubric_grade_model(self.rubric)

    async def one_vote(self, client: ModelClient, vote: int) -> BaseModel | None:
        messages = grade_messages(
            self.prompt,
            self.response,
            self.rubric,
            reference=self.reference,
            context=self.context,
            schema=_schema_of(self.model),
        )
        reply = await ask_valid(
            client,
            messages,
            self.model,
            schema_name=GRADE_SCHEMA,
            stage="grade",
            seed=vote,
            max_attempts=self.max_attempts,
            sink=self.sink,
        )
        record = JudgmentPass(
            judge=client.id,
            judge_model=client.model,
            vote=vote,
            pass_number=1,
            valid=reply.parsed is not None,
            attempts=reply.attempts,
            problem=reply.problem,
        )
        if reply.parsed is not None:
            record.output = reply.parsed.model_dump(mode="json")
            record.score_total = sum(c.score for c in reply.parsed.criteria)
        self.passes.append(record)
        return reply.parsed

    async def judge(self, client: ModelClient) -> tuple[JudgeGrade, list[BaseModel]]:
        n = self.votes
        cast = min_votes_for_decision(n) if self.adaptive else n
        replies = list(await asyncio.gather(*(self.one_vote(client, i) for i in range(cast))))
        names = self.rubric.criterion_names
        while self.adaptive and cast < n and not _grade_decided([g for g in replies if g is not None], n, names):
            replies.append(await self.one_vote(client, cast))
            cast += 1
        grades = [g for g in replies if g is not None]
        invalid = len(replies) - len(grades)
        common: dict[str, Any] = {
            "judge": client.id,
            "model": client.model,
            "votes_cast": cast,
            "votes_planned": n,
            "calls_saved": n - cast,
        }
        try:
            report = compile_evaluation_report(
                self.rubric,
                grades,
                reference_used=self.mode == "reference",
                invalid_attempts=invalid,
                judge_model=client.model,
            )
        except InvalidOutputError as exc:
            mine = [p for p in self.passes if p.judge == client.id and not p.valid]
            reason = f"{client.id}: {exc}" + (f" ({mine[-1].problem})" if mine else "")
            return JudgeGrade(success=False, error=reason, **common), []
        return JudgeGrade(success=True, report=report, **common), grades


async def grade(
    prompt: str,
    response: str,
    *,
    rubric: Rubric | str | Path = "general",
    judges: Sequence[ModelClient],
    reference: str | None = None,
    context: str | None = None,
    votes: int = 1,
    adaptive: bool = False,
    max_attempts: int = 3,
    sink: CallSink | None = None,
    store: Store | bool | None = True,
    run_id: str | None = None,
) -> GradeOutcome:
    """Grade ``response`` against ``rubric`` (a Rubric, a built-in name or a TOML file).

    With several judges (or votes) the ensemble report votes per criterion over every
    valid grade. ``store`` as in :func:`compare`.
    """
    _check_common(prompt, judges, votes, max_attempts)
    rubric = rubric if isinstance(rubric, Rubric) else load_rubric(rubric)
    mode = "reference" if evaluation_mode(reference=reference) == "reference" else "rubric"
    calls: list[CallRecord] = []
    job = _Grading(
        prompt=prompt,
        response=response,
        rubric=rubric,
        reference=reference if mode == "reference" else None,
        context=context,
        votes=votes,
        adaptive=adaptive,
        max_attempts=max_attempts,
        mode=mode,
        sink=_tee(calls, sink),
    )
    t0 = time.perf_counter()
    judged = await asyncio.gather(*(job.judge(j) for j in judges))
    per_judge = [j for j, _ in judged]
    grades = [g for _, gs in judged for g in gs]
    report, error = None, None
    if len(per_judge) == 1:
        report, error = per_judge[0].report, per_judge[0].error
    elif grades:
        report = compile_evaluation_report(
            rubric,
            grades,
            reference_used=mode == "reference",
            invalid_attempts=sum(1 for p in job.passes if not p.valid),
            judge_model=", ".join(j.model for j in per_judge if j.success),
        )
    else:
        error = "; ".join(j.error or "failed" for j in per_judge)
    outcome = GradeOutcome(
        run_id=run_id or str(uuid.uuid4()),
        success=report is not None,
        error=error,
        mode=mode,
        rubric=rubric.name,
        report=report,
        judges=per_judge,
        passes=sorted(job.passes, key=lambda p: (p.judge, p.vote)),
        calls=len(calls),
        calls_saved=sum(j.calls_saved for j in per_judge),
        usage=Usage.of(calls),
        elapsed_ms=(time.perf_counter() - t0) * 1000,
    )
    _persist(store, "grade", outcome, calls)
    return outcome


# ---------------------------------------------------------------------- persisting


Outcome = ComparisonOutcome | GradeOutcome


def run_rows(
    kind: str, outcome: Outcome, calls: Sequence[CallRecord]
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``judgment_runs`` row, ``judgments`` rows and call-log rows of a finished run."""
    is_compare = isinstance(outcome, ComparisonOutcome)
    flagged = outcome.flagged_for_review if is_compare else bool(outcome.report and outcome.report.flagged_for_review)
    run = {
        "id": outcome.run_id,
        "kind": kind,
        "status": "ok" if outcome.success else "failed",
        "error": outcome.error,
        "judges": [j.model for j in outcome.judges],
        "winner": outcome.winner if is_compare and outcome.success else None,
        "unstable": int(outcome.unstable) if is_compare else 0,
        "flagged": int(flagged),
        "calls": outcome.calls,
        "calls_saved": outcome.calls_saved,
        "prompt_tokens": outcome.usage.prompt_tokens,
        "completion_tokens": outcome.usage.completion_tokens,
        "cost_usd": outcome.usage.cost_usd,
        "elapsed_ms": outcome.elapsed_ms,
        "result": outcome.model_dump(mode="json"),
    }
    passes = [
        {
            "kind": "pairwise" if is_compare else "grade",
            **p.model_dump(exclude={"pass_number", "output"}),
            "pass": p.pass_number,
            "valid": int(p.valid),
            "output": p.output,
        }
        for p in outcome.passes
    ]
    return run, passes, [c.model_dump() for c in calls]


def _persist(store: Store | bool | None, kind: str, outcome: Outcome, calls: Sequence[CallRecord]) -> None:
    from council.storage.judgments import record_run

    opened, owned = _open_store(store)
    if opened is None:
        return
    try:
        record_run(opened, *run_rows(kind, outcome, calls))
    finally:
        if owned:
            opened.close()
