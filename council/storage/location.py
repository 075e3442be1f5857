"""Where the store lives: ``COUNCIL_DATABASE_URL`` (else ``[storage] url``), parsed without a driver.

- unset or empty: SQLite at ``$COUNCIL_HOME/council.db`` (the embedded default);
- ``sqlite:///PATH``: SQLite at PATH (``sqlite:///rel.db`` is relative to the working
  directory, ``sqlite:////abs/council.db`` absolute, ``~`` expanded);
- ``postgresql://USER@HOST:PORT/DB`` or ``postgresql://USER@/DB?host=/DIR`` (a unix socket):
  a libpq URL, handed to psycopg as it is.

A malformed URL is a ``ConfigError`` (exit 2) whose one line never shows the password:
messages name the URL through :func:`display_url` only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

from council.errors import ConfigError

ENV = "COUNCIL_DATABASE_URL"
_POSTGRES_SCHEMES = ("postgresql", "postgres")
_FORMS = "sqlite:///PATH, postgresql://USER@HOST:PORT/DB or postgresql://USER@/DB?host=/DIR"


@dataclass(frozen=True)
class StoreLocation:
    """``kind`` is ``sqlite`` (``path`` set; None = the default file) or ``postgresql`` (``url`` set)."""

    kind: str
    path: Path | None = None
    url: str | None = None

    @property
    def display(self) -> str:
        if self.kind == "postgresql":
            return display_url(self.url or "")
        return f"sqlite:///{self.path}" if self.path is not None else "the default council.db"


def display_url(url: str) -> str:
    """The URL without its password (and without any query parameter that could hold one)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:
        return "(an unparsable URL)"
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{hostport}" if ":" in userinfo else f"{user}@{hostport}"
    query = "&".join(
        f"{k}=***" if k.lower() in ("password", "passfile", "sslpassword") else f"{k}={v}"
        for k, _, v in (item.partition("=") for item in parts.query.split("&") if item)
    )
    return SplitResult(parts.scheme, netloc, parts.path, query, "").geturl()


def parse(url: str | None, *, source: str = ENV) -> StoreLocation:
    """The location a URL names; ``source`` names the setting in error messages."""
    url = (url or "").strip()
    if not url:
        return StoreLocation("sqlite")
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise ConfigError(f"{source}: {display_url(url)!r} is not a URL (use {_FORMS})")
    if scheme == "sqlite":
        if not rest.startswith("/") or rest == "/":
            raise ConfigError(f"{source}: a SQLite URL is sqlite:///PATH (three slashes, then the file)")
        path = rest[1:]
        if "?" in path or "#" in path:
            raise ConfigError(f"{source}: a SQLite URL takes no query string (sqlite:///PATH)")
        return StoreLocation("sqlite", path=Path(path).expanduser())
    if scheme in _POSTGRES_SCHEMES:
        _check_postgres(url, source)
        return StoreLocation("postgresql", url=url)
    shown = scheme if scheme.isprintable() and len(scheme) < 40 else "?"
    raise ConfigError(f"{source}: unsupported database {shown!r} (use {_FORMS})")


def _check_postgres(url: str, source: str) -> None:
    """What can be checked without the driver (psycopg checks the rest when it connects)."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise ConfigError(f"{source}: malformed PostgreSQL URL {display_url(url)!r} ({exc})") from None
    del port
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        raise ConfigError(f"{source}: the PostgreSQL URL contains spaces or control characters")
    database = parts.path.lstrip("/")
    if not database or "/" in database:
        raise ConfigError(f"{source}: the PostgreSQL URL names no database ({display_url(url)!r}; use {_FORMS})")
    if parts.fragment:
        raise ConfigError(f"{source}: the PostgreSQL URL has a '#' part (percent-encode it as %23)")


def configured(env: Mapping[str, str] | None = None, file_url: str | None = None) -> StoreLocation:
    """The environment's ``COUNCIL_DATABASE_URL``, else ``file_url``, else the ``[storage] url``
    of the council file every command reads (``$COUNCIL_CONFIG``, else ``$COUNCIL_HOME/council.toml``)."""
    env = os.environ if env is None else env
    if env.get(ENV, "").strip():
        return parse(env[ENV], source=ENV)
    if file_url is None:
        file_url = _file_url(env)
    return parse(file_url, source="[storage] url")


def _file_url(env: Mapping[str, str]) -> str | None:
    """Only the ``[storage]`` table is read here (the rest is checked by the commands that use
    it), so a command that only reads the store is not stopped by an unrelated setting."""
    import tomllib

    from council._util.home import council_home

    path = Path(env["COUNCIL_CONFIG"]).expanduser() if env.get("COUNCIL_CONFIG") else council_home(env) / "council.toml"
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None  # missing or unreadable: the commands that read the whole file say so
    storage = data.get("storage")
    url = storage.get("url") if isinstance(storage, dict) else None
    if url is not None and not isinstance(url, str):
        raise ConfigError(f"{path}: [storage] url must be a string (a database URL)")
    return url
