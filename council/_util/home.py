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
    """The data directory, created private (0700) if it does not exist yet. A path that is
    a file (or lies under one) is a ``ConfigError``; a directory the machine will not create
    (read-only or full file system, no permission) an ``EnvironmentFailure``."""
    from council.errors import ConfigError, EnvironmentFailure

    home = council_home(env)
    name = "COUNCIL_HOME" if (os.environ if env is None else env).get("COUNCIL_HOME") else "the data directory"
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
    except (FileExistsError, NotADirectoryError):
        raise ConfigError(f"{name} {home} is not a directory") from None
    except OSError as exc:
        if home.is_dir():  # exists, but a parent's permissions or a read-only mount refused the check
            return home
        raise EnvironmentFailure(f"cannot create {name} {home}: {(exc.strerror or str(exc)).lower()}") from None
    return home
