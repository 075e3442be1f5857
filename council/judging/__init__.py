"""The judging API's pure parts: schemas, prompts, rubrics, and the judging methods.

The swap strategies, voting, several judges' averaging and the verdict types live in
:mod:`council.methods` (``swap``, ``voting``, ``averaging``, ``verdicts``) and are re-exported
here as the judging API. Nothing re-exported here calls a model or does I/O beyond reading
rubric files; the
async engine (:func:`council.judging.engine.compare` and
:func:`council.judging.engine.grade`) builds on these functions:

1. build the pass model (``pairwise_pass_model``) and the messages (``pairwise_messages``),
   call the judge for pass 1 (A first) and pass 2 (B first), validate each reply
   with the model, re-requesting with ``retry_message`` when invalid;
2. ``combine_passes(pass_1, pass_2, strategy=...)`` -> ``PairwiseResult``;
3. optionally vote over several judgments (``run_votes``) or average several judges
   (``average_across_judges``);
4. for rubric grading: ``load_rubric``, ``rubric_grade_model``, ``grade_messages``,
   then ``compile_evaluation_report``.
"""

from council.judging.grade_report import compile_evaluation_report
from council.judging.prompts import (
    bias_checklist_prompt,
    evaluation_mode,
    grade_messages,
    judge_system_prompt,
    pairwise_messages,
    retry_message,
)
from council.judging.rubrics import DEPTH_CRITERIA, builtin_rubrics, load_bias_checklist, load_rubric
from council.judging.safety import safety_flagged
from council.judging.schemas import (
    BiasChecklist,
    Criterion,
    EvaluationReport,
    Rubric,
    pairwise_pass_model,
    rubric_grade_model,
)
from council.methods.averaging import MultiJudgeVerdict, average_across_judges, average_side_scores
from council.methods.swap import (
    DEFAULT_STRATEGY,
    DEFAULT_TIE_MARGIN,
    SWAP_STRATEGIES,
    combine_passes,
    flip,
    get_strategy,
    no_swap,
    swap_average,
    swap_conservative,
    swap_consistency,
)
from council.methods.verdicts import (
    DEFAULT_PAIRWISE_SCALE,
    CriterionVerdict,
    PairwiseMetadata,
    PairwiseResult,
    PositionConsistency,
    SideScores,
    SwapVerdict,
    Verdict,
)
from council.methods.voting import (
    DEFAULT_VOTES,
    VoteResult,
    decided_winner,
    majority_decided,
    majority_vote,
    run_votes,
)

__all__ = [
    "DEFAULT_PAIRWISE_SCALE",
    "DEFAULT_STRATEGY",
    "DEFAULT_TIE_MARGIN",
    "DEFAULT_VOTES",
    "DEPTH_CRITERIA",
    "SWAP_STRATEGIES",
    "BiasChecklist",
    "Criterion",
    "CriterionVerdict",
    "EvaluationReport",
    "MultiJudgeVerdict",
    "PairwiseMetadata",
    "PairwiseResult",
    "PositionConsistency",
    "Rubric",
    "SideScores",
    "SwapVerdict",
    "Verdict",
    "VoteResult",
    "average_across_judges",
    "average_side_scores",
    "bias_checklist_prompt",
    "builtin_rubrics",
    "combine_passes",
    "compile_evaluation_report",
    "decided_winner",
    "evaluation_mode",
    "flip",
    "get_strategy",
    "grade_messages",
    "judge_system_prompt",
    "load_bias_checklist",
    "load_rubric",
    "majority_decided",
    "majority_vote",
    "no_swap",
    "pairwise_messages",
    "pairwise_pass_model",
    "retry_message",
    "rubric_grade_model",
    "run_votes",
    "safety_flagged",
    "swap_average",
    "swap_conservative",
    "swap_consistency",
]
