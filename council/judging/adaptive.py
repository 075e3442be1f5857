"""A jury that stops when it is sure (``council batch --combine dawid-skene --adaptive``): each pair's
annotators (one judge in one order) asked one at a time, most informative per dollar first, under
confusion matrices known beforehand (fitted by Dawid–Skene over an earlier batch), until the
posterior of the verdict reaches the confidence asked for (:mod:`council.methods.adaptive_jury`).

The matrices travel in the batch's settings (:class:`AdaptiveJury`), so every worker and every
resume of the batch judges with the same ones. docs/evaluation/batches.md ("Adaptive jury") says
what a user sees; docs/methods.md ("Adaptive jury") the method.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from council.errors import NotFoundError, UsageError
from council.judging.outcomes import (
    ComparisonOutcome,
    JudgeComparison,
    VoteSummary,
    comparison_fields,
    judge_failures,
)
from council.methods.adaptive_jury import SequentialJury, asking_order, expected_agreement
from council.methods.averaging import average_side_scores
from council.methods.swap import PassView, combine_passes, flip
from council.methods.verdicts import PairwiseMetadata, PairwiseResult

if TYPE_CHECKING:
    from council.providers.client import ModelClient
    from council.storage import Store

DEFAULT_CONFIDENCE = 0.95
#: The shape of a typical judging call, to put one model's price per call beside another's:
#: only the ratio between the judges' estimates matters (they all read the same prompt).
TYPICAL_PROMPT_TOKENS = 1000
TYPICAL_COMPLETION_TOKENS = 250


class AnnotatorReliability(BaseModel):
    """One annotator's confusion matrix: ``confusion[observed][true]``."""

    judge: str
    shown_first: Literal["A", "B"]
    confusion: dict[str, dict[str, float]]


class JuryReliabilities(BaseModel):
    """What the jury knows of its judges: where it was fitted (``source``), the class prior and
    each annotator's confusion matrix."""

    source: str
    prior: dict[str, float]
    annotators: list[AnnotatorReliability]

    def matrices(self) -> dict[tuple[str, str], dict[str, dict[str, float]]]:
        return {(a.judge, a.shown_first): a.confusion for a in self.annotators}


class AdaptiveJury(BaseModel):
    """A batch's adaptive jury: the posterior to reach, and the reliabilities it is computed with."""

    confidence: float = Field(DEFAULT_CONFIDENCE, gt=0.5, lt=1.0)
    reliabilities: JuryReliabilities


def check_confidence(confidence: float) -> float:
    if not 0.5 < confidence < 1.0:
        raise UsageError(f"--confidence must be between 0.5 and 1 (both excluded), got {confidence:g}")
    return confidence


def reliabilities_from_passes(passes: Iterable[Mapping[str, Any]], source: str) -> JuryReliabilities:
    """The Dawid–Skene fit over a batch's passes (``Store.batch_passes``; no label read): its class
    prior and every judge's confusion matrix in each order (of its first vote)."""
    from council.judging.jury import annotator
    from council.methods.dawid_skene import dawid_skene

    votes: dict[str, dict[tuple[str, str, int], str]] = {}
    for p in passes:
        votes.setdefault(p["item_id"], {})[annotator(p["judge"], p["shown_first"], p["vote"])] = p["winner"]
    if not votes:
        raise UsageError(f"{source} has no judged pair to fit the judges' reliabilities on")
    fit = dawid_skene(list(votes.values()))
    annotators = [
        AnnotatorReliability(judge=judge, shown_first=first, confusion=matrix)  # type: ignore[arg-type]
        for (judge, first, vote), matrix in fit.confusion.items()  # type: ignore[misc]
        if vote == 0
    ]
    return JuryReliabilities(source=source, prior=fit.priors, annotators=annotators)


def reliabilities_from_batch(store: Store, name: str) -> JuryReliabilities:
    """``--reliabilities-from NAME``: the Dawid–Skene fit over the stored batch ``NAME``'s passes,
    or, where no batch has that id, over the batch the calibration map ``NAME`` (``council
    calibrate``) was fitted on."""
    if store.batch_exists(name):
        return reliabilities_from_passes(store.batch_passes(name), f"batch {name}")
    from council.judging.calibrating import NAME

    found = store.calibration_map(name) if NAME.fullmatch(name) else None
    if found is None:
        raise NotFoundError(f"no batch or calibration map {name!r} in the store to take the judges' reliabilities from")
    batch_id = found["batch_id"]
    if not store.batch_exists(batch_id):
        raise NotFoundError(f"calibration map {name!r} was fitted on batch {batch_id}, which is no longer in the store")
    return reliabilities_from_passes(store.batch_passes(batch_id), f"batch {batch_id} (calibration map {name})")


def check_panel(jury: AdaptiveJury, judges: Sequence[str], *, swap: bool, votes: int | None) -> None:
    """Refuse, before any call, a panel the reliabilities do not cover."""
    if not swap:
        raise UsageError("--adaptive with --combine dawid-skene asks each judge in both orders: drop --no-swap")
    if votes not in (None, 1):
        raise UsageError("--adaptive with --combine dawid-skene asks each judge once per order: drop --votes")
    known = jury.reliabilities.matrices()
    for judge in judges:
        for first in ("A", "B"):
            if (judge, first) not in known:
                raise UsageError(
                    f"{jury.reliabilities.source} has no reliability for judge {judge} with {first} shown first: "
                    "fit them on a batch judged by the same judges"
                )


def call_costs(judges: Sequence[ModelClient]) -> dict[tuple[str, str], float | None]:
    """Each annotator's estimated price of one call, from its model's configured (or the price
    map's) prices per token; None where the price is unknown."""
    from council.providers.prices import call_price

    costs: dict[tuple[str, str], float | None] = {}
    for client in judges:
        price = call_price(client.resolved)
        cost = None if price is None else price.input * TYPICAL_PROMPT_TOKENS + price.output * TYPICAL_COMPLETION_TOKENS
        costs[(client.id, "A")] = costs[(client.id, "B")] = cost
    return costs


class AdaptiveRecord(BaseModel):
    """What the jury did on one pair, stored with its result: the annotators asked (judge and
    order, in the order asked), how many the full panel has, whether the posterior reached the
    confidence, the posterior, and the model's probability that the full panel would agree."""

    confidence: float
    asked: list[list[str]]
    panel: int
    sure: bool
    posterior: dict[str, float]
    expected_agreement: float | None
    cost_saved_usd: float | None


class AdaptiveComparisonOutcome(ComparisonOutcome):
    """A comparison judged by the adaptive jury: the verdict's posterior ``probability`` and what
    the jury did (``adaptive``)."""

    probability: float
    adaptive: AdaptiveRecord


def _a_first(view: PassView) -> PassView:
    """A pass that showed B first, as if it had shown A first (its slots swapped)."""
    from dataclasses import replace

    criteria = {
        name: replace(c, winner=flip(c.winner), a_score=c.b_score, b_score=c.a_score, a_strength=c.b_strength,
                      b_strength=c.a_strength)  # fmt: skip
        for name, c in view.criteria.items()
    }
    return replace(view, winner=flip(view.winner), criteria=criteria, a_advantages=view.b_advantages,
                   b_advantages=view.a_advantages, source=None)  # fmt: skip


async def ask_until_sure(
    job: Any, judges: Sequence[ModelClient], jury: AdaptiveJury, run_id: str
) -> ComparisonOutcome:
    """Judge ``job``'s pair by asking its annotators one at a time until the posterior is sure."""
    t0 = time.perf_counter()
    reliabilities = jury.reliabilities
    matrices = reliabilities.matrices()
    clients = {c.id: c for c in judges}
    costs = call_costs(judges)
    order = asking_order(reliabilities.prior, matrices, costs)
    sequence = SequentialJury(reliabilities.prior, matrices, order, jury.confidence)
    views: dict[tuple[str, str], PassView] = {}
    while (asked := sequence.next()) is not None:
        judge, first = asked  # type: ignore[misc]
        record, view = await job.one_pass(clients[judge], 0, 1 if first == "A" else 2)
        if view is not None:
            views[(judge, first)] = view  # as the judge saw it
        sequence.add(asked, record.winner if view is not None else None)
    per_judge = [_judge_result(job, c, views, [p for p in job.passes if p.judge == c.id]) for c in judges]
    per_judge = [j for j in per_judge if j is not None]
    winner, probability = sequence.verdict
    calls = list(job.sink)  # type: ignore[call-overload]  (the run's CallLog)
    record = AdaptiveRecord(
        confidence=jury.confidence,
        asked=[list(a) for a in sequence.asked],  # type: ignore[arg-type]
        panel=len(order),
        sure=sequence.sure,
        posterior=sequence.post,
        expected_agreement=expected_agreement(reliabilities.prior, matrices, sequence.votes, sequence.unasked),
        cost_saved_usd=_cost_saved(calls, sequence.unasked, judges),
    )
    ok = [j for j in per_judge if j.success]
    common = comparison_fields(job, per_judge, calls, run_id, time.perf_counter() - t0)
    common.update(calls_saved=len(sequence.unasked), probability=probability, adaptive=record)
    if not sequence.votes:
        return AdaptiveComparisonOutcome(success=False, error=judge_failures(per_judge) or "no judge gave a verdict",
                                         winner="TIE", confidence=0.0, confidence_level="low",
                                         flagged_for_review=True, unstable=False, **common)  # fmt: skip
    unstable = any(j.result.unstable for j in ok)
    return AdaptiveComparisonOutcome(
        success=True,
        winner=winner,  # type: ignore[arg-type]
        confidence=probability,
        confidence_level="high" if sequence.sure else "moderate" if probability > 0.5 else "low",
        flagged_for_review=not sequence.sure or unstable,
        unstable=unstable,
        scores=average_side_scores([j.result.scores for j in ok]) if ok else {},
        **common,
    )


def _judge_result(job: Any, client: ModelClient, views: Mapping[tuple[str, str], PassView],
                  passes: Sequence[Any]) -> JudgeComparison | None:  # fmt: skip
    """A judge's result from the passes it was asked: its two passes combined under the strategy,
    its one pass as it is; None when it was not asked."""
    if not passes:
        return None
    a, b = views.get((client.id, "A")), views.get((client.id, "B"))
    if a is None and b is None:
        error = f"{client.id}: {passes[0].problem or 'no valid pass'}"
        metadata = PairwiseMetadata(positions_swapped=False, judge_model=client.model)
        failed = PairwiseResult.failure(error, strategy=job.strategy, metadata=metadata)
        return JudgeComparison(judge=client.id, model=client.model, success=False, error=error, result=failed)
    calls = sum(p.attempts for p in passes)
    if a is not None and b is not None:
        result = combine_passes(a, b, strategy=job.strategy, scale=job.scale, tie_margin=job.tie_margin,
                                judge_model=client.model, calls=calls)  # fmt: skip
        consistency = result.position_consistency
        vote = VoteSummary(vote=0, winner=result.winner, confidence=result.confidence,
                           consistent=consistency.consistent if consistency else None,
                           a_total=result.scores["A"].total, b_total=result.scores["B"].total)  # fmt: skip
        return JudgeComparison(judge=client.id, model=client.model, success=True, result=result, votes=[vote])
    one = a if a is not None else _a_first(b)  # type: ignore[arg-type]
    result = combine_passes(one, scale=job.scale, tie_margin=job.tie_margin, judge_model=client.model,
                            calls=calls)  # fmt: skip
    return JudgeComparison(judge=client.id, model=client.model, success=True, result=result)


def _cost_saved(calls: Sequence[Any], unasked: Sequence[Any], judges: Sequence[ModelClient]) -> float | None:
    """What the unasked annotators' calls would have cost, estimated at their models' prices per
    token for calls the size of this pair's (its calls' mean prompt and completion tokens)."""
    if not unasked:
        return 0.0
    if not calls:
        return None
    from council.providers.prices import call_price

    prompt = sum(c.prompt_tokens for c in calls) / len(calls)
    completion = sum(c.completion_tokens for c in calls) / len(calls)
    prices = {c.id: call_price(c.resolved) for c in judges}
    total = 0.0
    for judge, _ in unasked:
        price = prices.get(judge)
        if price is None:
            return None
        total += price.input * prompt + price.output * completion
    return total


class AdaptiveSummary(BaseModel):
    """The summary's ``adaptive``: over the pairs the jury judged, how many it stopped before the
    full panel, the calls (one per annotator) and the estimated cost it saved against the full
    panel, and ``agreement_with_full_panel``: the mean over the pairs of the model's probability
    that asking every annotator would have given the same verdict (exact under the known matrices;
    null where a pair's could not be enumerated)."""

    confidence: float | None
    pairs: int
    sure: int
    stopped_early: int
    calls_full_panel: int
    calls_saved: int
    cost_saved_usd: float | None
    agreement_with_full_panel: float | None


class AdaptiveTally:
    """The adaptive jury's record of each judged pair, counted as a batch's rows are read."""

    def __init__(self) -> None:
        self.confidence: float | None = None
        self.pairs = self.sure = self.stopped = self.panel = self.saved = 0
        self.cost: float | None = 0.0
        self.agreement: float | None = 0.0

    def add(self, result: Mapping[str, Any]) -> None:
        record = result.get("adaptive")
        if not record:
            return
        self.confidence = record["confidence"]
        self.pairs += 1
        unasked = record["panel"] - len(record["asked"])
        self.sure += record["sure"]
        self.stopped += record["sure"] and unasked > 0
        self.panel += record["panel"]
        self.saved += unasked
        cost, agreement = record["cost_saved_usd"], record["expected_agreement"]
        self.cost = None if self.cost is None or cost is None else self.cost + cost
        self.agreement = None if self.agreement is None or agreement is None else self.agreement + agreement

    def result(self) -> AdaptiveSummary:
        return AdaptiveSummary(
            confidence=self.confidence,
            pairs=self.pairs,
            sure=self.sure,
            stopped_early=self.stopped,
            calls_full_panel=self.panel,
            calls_saved=self.saved,
            cost_saved_usd=self.cost,
            agreement_with_full_panel=None if self.agreement is None or not self.pairs else self.agreement / self.pairs,
        )
