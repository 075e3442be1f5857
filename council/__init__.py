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
    "CouncilError": "council.errors",
    "UsageError": "council.errors",
    "ConfigError": "council.errors",
    "InputError": "council.errors",
    "CouncilFailure": "council.errors",
    "QuorumError": "council.errors",
    "ProviderError": "council.errors",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # pragma: no cover  # the lazy exports above, for type checkers
    from council.api import Council  # noqa: F401
    from council.providers.asking import JsonFormat  # noqa: F401
    from council.config import load_config  # noqa: F401
    from council.errors import (  # noqa: F401
        ConfigError,
        CouncilError,
        CouncilFailure,
        InputError,
        ProviderError,
        QuorumError,
        UsageError,
    )
    from council.methods.ranking import Consensus  # noqa: F401
    from council.session import Candidate, SessionEvent  # noqa: F401
    from council.session.results import SessionResult  # noqa: F401


__getattr__ = lazy_exports(__name__, _EXPORTS)
