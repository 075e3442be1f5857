"""The data directory, ``$COUNCIL_HOME``: where council.db, the salt and council.toml live."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def council_home(env: Mapping[str, str] | None = None) -> Path:
    """The data directory: ``$COUNCIL_HOME`` or the platform's user data dir."""
    value = (os.environ if env is None else env).get("COUNCIL_HOME")
    if value:
        return Path(value).expanduser()
    import platformdirs  # only needed when COUNCIL_HOME is unset

    return Path(platformdirs.user_data_dir("council", appauthor=False))


def ensure_home(env: Mapping[str, str] | None = None) -> Path:
    """The data directory, created private (0700) if it does not exist yet."""
    home = council_home(env)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    return home
