"""Rubric grading (docs/methods.md, "Rubric grading"): reasoning before every integer score,
reference-based when a reference is given, three votes per judge by default (optionally
adaptive) compiled per criterion, several judges averaged, a safety flag from the judges'
structured concerns, and an ``EvaluationReport``. Invalid output is re-requested, then
recorded invalid: never coerced."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from council.accounting.budget import together
from council.errors import InputError, InvalidOutputError
from council.judging.grade_report import combine_judge_reports, compile_evaluation_report
from council.judging.outcomes import GradeOutcome, JudgeGrade, JudgmentPass, judge_failures
from council.judging.prompts import evaluation_mode, grade_messages
from council.judging.rubrics import load_bias_checklist, load_rubric
from council.judging.running import check_common, gathered, judge_pass, judging_run, persist, schema_of
from council.judging.schemas import BiasChecklist, EvaluationReport, Rubric, rubric_grade_model
from council.methods.verdicts import criterion_items
from council.methods.voting import DEFAULT_VOTES, min_votes_for_decision
from council.providers.client import ModelClient
from council.storage import Store
from council.accounting.usage import CallSink, Usage

GRADE_SCHEMA = "rubric_grade"


def _grade_decided(grades: Sequence[BaseModel], total_n: int, names: Sequence[str]) -> bool:
    """Every criterion's final score is fixed: some score already has a majority of ``total_n``."""
    if not grades:
        return False
    by_criterion = [criterion_items(g, "criteria") for g in grades]
    for name in names:
        scores = [g[name]["score"] for g in by_criterion]
        if 2 * max(scores.count(s) for s in set(scores)) <= total_n:
            return False
    return True


def _invalid_attempts(passes: Sequence[JudgmentPass]) -> int:
    """Attempts that gave no valid output: every attempt of an invalid pass, all but the last of a valid one."""
    return sum(p.attempts - int(p.valid) for p in passes)


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
    checklist: BiasChecklist
    sink: CallSink
    passes: list[JudgmentPass] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.model = rubric_grade_model(self.rubric, self.checklist)

    async def one_vote(self, client: ModelClient, vote: int) -> BaseModel | None:
        messages = grade_messages(
            self.prompt,
            self.response,
            self.rubric,
            reference=self.reference,
            context=self.context,
            bias_checklist=self.checklist,
            schema=schema_of(self.model),
        )
        record, parsed = await judge_pass(
            client,
            messages,
            self.model,
            schema_name=GRADE_SCHEMA,
            stage="grade",
            vote=vote,
            max_attempts=self.max_attempts,
            sink=self.sink,
        )
        if parsed is not None:
            record.score_total = sum(item["score"] for item in criterion_items(parsed, "criteria").values())
        self.passes.append(record)
        return parsed

    async def judge(self, client: ModelClient) -> JudgeGrade:
        n = self.votes
        cast = min_votes_for_decision(n) if self.adaptive else n
        # Under a spend cap the votes asked for start together or not at all: compiled from the votes
        # that came back, a grade would otherwise be kept with one the cap refused (docs/methods.md).
        with together(client.budget, cast):
            replies = await gathered(self.one_vote(client, i) for i in range(cast))
        names = self.rubric.criterion_names
        while self.adaptive and cast < n and not _grade_decided([g for g in replies if g is not None], n, names):
            replies.append(await self.one_vote(client, cast))
            cast += 1
        grades = [g for g in replies if g is not None]
        mine = [p for p in self.passes if p.judge == client.id]
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
                votes_planned=cast,
                invalid_attempts=_invalid_attempts(mine),
                judge_model=client.model,
                bias_checklist=self.checklist,
            )
        except InvalidOutputError as exc:
            failed = [p for p in mine if not p.valid]
            reason = f"{client.id}: {exc}" + (f" ({failed[-1].problem})" if failed else "")
            return JudgeGrade(success=False, error=reason, **common)
        return JudgeGrade(success=True, report=report, **common)


async def grade(
    prompt: str,
    response: str,
    *,
    rubric: Rubric | str | Path = "general",
    judges: Sequence[ModelClient],
    reference: str | None = None,
    context: str | None = None,
    votes: int = DEFAULT_VOTES,
    adaptive: bool = False,
    max_attempts: int = 3,
    bias_checklist: BiasChecklist | None = None,
    sink: CallSink | None = None,
    store: Store | bool | None = True,
    keep_text: bool | None = None,
    run_id: str | None = None,
) -> GradeOutcome:
    """Grade ``response`` against ``rubric`` (a Rubric, a built-in name or a TOML file).

    Each judge votes ``votes`` times (3 by default; ``adaptive`` stops once every criterion's
    majority is decided) and its votes are compiled into its own report; several judges'
    reports are then averaged per criterion, each judge's kept in ``judges``. A judge that
    fails leaves a partial result (``partial``, flagged, with the cause in ``error``); with
    no judge left the grade fails. ``reference``: grade against it (it must not be blank).
    ``bias_checklist``: appended to every evaluation (default: the built-in one). ``store``
    and ``keep_text`` as in :func:`compare`. See docs/methods.md, "Rubric grading".
    """
    check_common(prompt, judges, votes, max_attempts)
    if reference is not None and not reference.strip():
        raise InputError("the reference answer is empty: give a reference, or grade without one")
    rubric = rubric if isinstance(rubric, Rubric) else load_rubric(rubric)
    mode = "reference" if evaluation_mode(reference=reference) == "reference" else "rubric"
    checklist = bias_checklist or load_bias_checklist()
    private = [prompt, response, reference, context]
    with judging_run(store, keep_text, run_id, sink, private) as run:
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
            checklist=checklist,
            sink=run.log,
        )
        t0 = time.perf_counter()
        per_judge = await gathered(job.judge(j) for j in judges)
        ok = {j.judge: j.report for j in per_judge if j.report is not None}
        failed = [j for j in per_judge if j.report is None]
        report: EvaluationReport | None = None
        if len(per_judge) == 1:
            report = per_judge[0].report
        elif ok:
            report = combine_judge_reports(
                rubric, ok, failed={j.judge: j.votes_cast for j in failed}, reference_used=mode == "reference"
            )
        outcome = GradeOutcome(
            run_id=run.run_id,
            success=report is not None,
            partial=report is not None and bool(failed),
            error=judge_failures(per_judge),
            mode=mode,
            rubric=rubric.name,
            report=report,
            judges=per_judge,
            passes=sorted(job.passes, key=lambda p: (p.judge, p.vote)),
            calls=len(run.calls),
            calls_saved=sum(j.calls_saved for j in per_judge),
            usage=Usage.of(run.calls),
            elapsed_ms=(time.perf_counter() - t0) * 1000,
        )
        persist(run, "grade", outcome)
    return outcome
