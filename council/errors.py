"""The exception tree, in one place.

The CLI maps these to one clear line and an exit code: ``UsageError`` and its
children exit 2 (bad usage or bad input), ``CouncilFailure`` and its children
exit 1 (a council or judging failure). Anything else is a bug and shows a traceback
only with ``--debug``.
"""

from __future__ import annotations

from council._util.money import usd

__all__ = [
    "BudgetReached",
    "ConfigError",
    "CouncilError",
    "CouncilFailure",
    "EnvironmentFailure",
    "InputError",
    "InvalidOutputError",
    "ItemAlreadyRecorded",
    "ItemRefused",
    "NotFoundError",
    "PrerequisiteError",
    "PromptTooLarge",
    "ProviderError",
    "QuorumError",
    "RequestTooLarge",
    "StoreRefused",
    "StoreWentAway",
    "TransactionConflict",
    "UsageError",
]


class CouncilError(Exception):
    """Base class for every error council raises on purpose."""

    exit_code = 1


class UsageError(CouncilError):
    """Bad usage or bad input: exit code 2, nothing written."""

    exit_code = 2


class ConfigError(UsageError):
    """The configuration file or environment is invalid."""


class InputError(UsageError):
    """A question, candidates file, rubric or batch file is unusable."""


class NotFoundError(UsageError):
    """A session, council or rubric that was asked for does not exist."""


class PrerequisiteError(UsageError):
    """An optional dependency needed for this path is not installed."""


class CouncilFailure(CouncilError):
    """The council could not produce a result: exit code 1."""

    exit_code = 1


class ItemAlreadyRecorded(CouncilFailure):
    """A batch item's result was recorded already (another worker finished it first)."""


class ItemRefused(CouncilFailure):
    """The database refused a value of a batch item's result (that item's data, not the database
    failing): the item was recorded as failed instead, with this reason."""


class StoreRefused(CouncilFailure):
    """The database refused a row or a value written (a key already there, a constraint, a value
    it cannot hold): the data written, not the database failing or going away."""


class TransactionConflict(CouncilFailure):
    """The database rolled a write transaction back to break a deadlock with another one (or a
    serialization conflict): nothing of it was written, and it may be run again as it was."""


class StoreWentAway(CouncilFailure):
    """The database server went away (stopped, restarted, unreachable) while an operation ran: it
    may or may not have been done (a commit whose reply was lost). The store waits for the server
    to come back within its outage grace (council.storage.postgres.OUTAGE_GRACE_S)."""


class EnvironmentFailure(CouncilFailure):
    """The machine refused: a full disk, a read-only file system, an unusable database file."""


class QuorumError(CouncilFailure):
    """Too few members or reviewers answered to go on."""


class PromptTooLarge(QuorumError):
    """The request itself is too large for the council: too few members could answer because
    every member that failed was refused as ``RequestTooLarge`` (its call could never fit its
    model's ``tpm``). Exit 2, a 400 from the server: the prompt or a setting has to change."""

    exit_code = 2


class ProviderError(CouncilFailure):
    """A model call failed; ``message`` carries the provider's own error text."""

    def __init__(
        self,
        message: str,
        *,
        model: str = "",
        status_code: int | None = None,
        retryable: bool = False,
        unsent: bool = False,
    ) -> None:
        super().__init__(message)
        self.model = model
        self.status_code = status_code
        self.retryable = retryable
        self.unsent = unsent
        """The request provably never reached the provider (its connection was refused, or never
        made, before any byte was sent): it cost nothing."""

    def __str__(self) -> str:
        prefix = f"{self.model}: " if self.model else ""
        code = f" (HTTP {self.status_code})" if self.status_code else ""
        return f"{prefix}{self.args[0]}{code}"


class BudgetReached(ProviderError):
    """A call was not started: its worst case could take the spending past the cap (a spend cap:
    ``--max-cost``, ``[budget] max_cost_usd``, a batch's stored cap). Exit 1."""

    def __init__(self, spent: float, cap: float) -> None:
        super().__init__(f"budget reached: {usd(spent)} of {usd(cap)}", retryable=False)
        self.spent = spent
        self.cap = cap


class RequestTooLarge(ProviderError):
    """A call whose tokens could never fit in its model's ``tpm``: refused before it is sent,
    never retried. Where it ends a command, the command exits 2 (a setting to change)."""

    exit_code = 2


class InvalidOutputError(CouncilFailure):
    """A judge's output did not validate after every allowed re-request."""
