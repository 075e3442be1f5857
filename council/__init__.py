"""council: a multi-model LLM council orchestrator.

The public surface is imported lazily so ``import council`` (and ``council --help``)
stays fast; nothing here configures logging or touches the network.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from council._util.lazy_exports import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "Council": "council.api",
    "SessionResult": "council.session",
    "SessionEvent": "council.session",
    "Candidate": "council.session",
    "Consensus": "council.session",
    "JsonFormat": "council.providers.asking",
    "load_config": "council.config",
    "BudgetReached": "council.errors",
    "ConfigError": "council.errors",
    "CouncilError": "council.errors",
    "CouncilFailure": "council.errors",
    "EnvironmentFailure": "council.errors",
    "InputError": "council.errors",
    "InvalidOutputError": "council.errors",
    "ItemAlreadyRecorded": "council.errors",
    "ItemRefused": "council.errors",
    "NotFoundError": "council.errors",
    "PrerequisiteError": "council.errors",
    "PromptTooLarge": "council.errors",
    "ProviderError": "council.errors",
    "QuorumError": "council.errors",
    "RequestTooLarge": "council.errors",
    "StoreRefused": "council.errors",
    "StoreWentAway": "council.errors",
    "TransactionConflict": "council.errors",
    "UsageError": "council.errors",
    # judging: council.judging.facade (the names council.api.JUDGING re-exports)
    "BatchFile": "council.judging.facade",
    "BatchItem": "council.judging.facade",
    "BatchPlan": "council.judging.facade",
    "BatchSettings": "council.judging.facade",
    "BatchSummary": "council.judging.facade",
    "ComparisonOutcome": "council.judging.facade",
    "DEFAULT_LEASE_SECONDS": "council.judging.facade",
    "GRADE_VOTES": "council.judging.facade",
    "GradeOutcome": "council.judging.facade",
    "JudgePanel": "council.judging.facade",
    "JudgingConfig": "council.judging.facade",
    "PAIRWISE_VOTES": "council.judging.facade",
    "QueueWork": "council.judging.facade",
    "SWAP_STRATEGIES": "council.judging.facade",
    "WorkerReport": "council.judging.facade",
    "batch_results": "council.judging.facade",
    "batch_status": "council.judging.facade",
    "batch_summary": "council.judging.facade",
    "calibrate_batch": "council.judging.facade",
    "builtin_rubrics": "council.judging.facade",
    "judge_panel": "council.judging.facade",
    "judging_config": "council.judging.facade",
    "load_rubric": "council.judging.facade",
    "read_batch_file": "council.judging.facade",
    "resolve_criteria": "council.judging.facade",
    "run_queue_worker": "council.judging.facade",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # pragma: no cover  # the lazy exports above, for type checkers
    from council.api import Council  # noqa: F401
    from council.config import load_config  # noqa: F401
    from council.errors import (  # noqa: F401
        BudgetReached,
        ConfigError,
        CouncilError,
        CouncilFailure,
        EnvironmentFailure,
        InputError,
        InvalidOutputError,
        ItemAlreadyRecorded,
        ItemRefused,
        NotFoundError,
        PrerequisiteError,
        PromptTooLarge,
        ProviderError,
        QuorumError,
        RequestTooLarge,
        StoreRefused,
        StoreWentAway,
        TransactionConflict,
        UsageError,
    )
    from council.judging.facade import (  # noqa: F401
        DEFAULT_LEASE_SECONDS,
        GRADE_VOTES,
        PAIRWISE_VOTES,
        SWAP_STRATEGIES,
        BatchFile,
        BatchItem,
        BatchPlan,
        BatchSettings,
        BatchSummary,
        ComparisonOutcome,
        GradeOutcome,
        JudgePanel,
        JudgingConfig,
        QueueWork,
        WorkerReport,
        batch_results,
        batch_status,
        batch_summary,
        builtin_rubrics,
        calibrate_batch,
        judge_panel,
        judging_config,
        load_rubric,
        read_batch_file,
        resolve_criteria,
        run_queue_worker,
    )
    from council.methods.ranking import Consensus  # noqa: F401
    from council.providers.asking import JsonFormat  # noqa: F401
    from council.session import Candidate, SessionEvent  # noqa: F401
    from council.session.results import SessionResult  # noqa: F401


__getattr__ = lazy_exports(__name__, _EXPORTS)
