"""What the server accepts from browsers: checked once, for every request, before anything else.

A web page can make a browser send "simple" cross-origin requests (``text/plain`` bodies,
no preflight), and DNS rebinding can make a page's own name resolve to 127.0.0.1. So:

* ``Host`` must name this server: ``localhost``, a loopback address, the bound address, a
  name given with ``--allowed-host`` (for proxies), or, when bound to every interface, any IP
  address. A rebinding page's name is none of these: 403.
* ``Origin``, when a browser sends one, must be this server's own (the ``Host`` header's name
  and port, by either scheme: behind a TLS proxy the page is ``https://NAME``) or a
  ``--cors-origin`` (scheme, host and port; case does not matter): anything else, ``null``
  included, 403.
* A request body, whatever the method, must be declared JSON (``application/json`` or
  ``…+json``): 415.
* The URL may not hold U+0000 (``%00`` in its path or query): 400, as text with it is refused
  wherever it comes in (council.untrusted.inputs), on every store alike.

Clients that are not browsers send no ``Origin`` and are held to every rule but the second.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from council.errors import UsageError
from council.untrusted.inputs import NUL_REFUSED
from council.server.errors import openai_error

LOCAL_NAMES = frozenset({"localhost"})
_WILDCARDS = frozenset({"0.0.0.0", "::"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return None


def split_host(value: str) -> tuple[str, int | None]:
    """``Host`` header → (lower-case name without brackets or trailing dot, port or None)."""
    try:
        parts = urlsplit("//" + value.strip())
        name, port = parts.hostname or "", parts.port
    except ValueError:
        return "", None
    return name.rstrip("."), port


def normalise_origin(value: str) -> tuple[str, str, int] | None:
    """``scheme://host[:port]`` → (scheme, host, port) in lower case; None if it is no origin."""
    try:
        parts = urlsplit(value.strip())
        scheme, name, port = parts.scheme.lower(), (parts.hostname or "").rstrip("."), parts.port
    except ValueError:
        return None
    if scheme not in _DEFAULT_PORTS or not name:
        return None
    return scheme, name, port if port is not None else _DEFAULT_PORTS[scheme]


class RequestGuardMiddleware:
    def __init__(
        self, app: ASGIApp, *, bound_host: str, allowed_hosts: Iterable[str] = (), cors_origins: Iterable[str] = ()
    ) -> None:
        self.app = app
        self.bound = bound_host.strip("[]").lower()
        self.hosts = {h.lower().rstrip(".") for h in allowed_hosts} | LOCAL_NAMES | {self.bound}
        self.origins = {o for o in map(normalise_origin, cors_origins) if o is not None}

    def host_allowed(self, name: str) -> bool:
        if name in self.hosts:
            return True
        ip = _ip(name)
        return ip is not None and (ip.is_loopback or self.bound in _WILDCARDS)

    def origin_allowed(self, origin: str, host: str) -> bool:
        parsed = normalise_origin(origin)
        if parsed is None:
            return False  # "null" (sandboxed frames, file: pages) and anything malformed
        if parsed in self.origins:
            return True
        scheme, name, port = parsed
        host_name, host_port = split_host(host)
        return name == host_name and port == (host_port if host_port is not None else _DEFAULT_PORTS[scheme])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        wanted = (b"host", b"origin", b"content-type", b"content-length", b"transfer-encoding")
        headers = {k.decode(): v.decode("latin-1") for k, v in scope["headers"] if k in wanted}
        host = headers.get("host")
        denied = None
        if host is not None and not self.host_allowed(split_host(host)[0]):
            shown = host[:100]
            denied = openai_error(
                403,
                f"Host {shown!r} is not served here (DNS rebinding guard); behind a proxy, start the server "
                f"with --allowed-host {split_host(host)[0] or 'NAME'}",
                code="host_not_allowed",
            )
        elif "origin" in headers and not self.origin_allowed(headers["origin"], host or ""):
            denied = openai_error(
                403,
                f"browser origin {headers['origin'][:100]!r} is not allowed; allow it with --cors-origin",
                code="origin_not_allowed",
            )
        elif "\x00" in scope["path"] or b"%00" in scope.get("query_string", b""):
            denied = openai_error(400, f"the URL {NUL_REFUSED}")
        elif _has_body(headers) and not _is_json(headers.get("content-type", "")):
            denied = openai_error(
                415,
                "the request body must be JSON, sent with Content-Type: application/json",
                code="unsupported_media_type",
            )
        if denied is not None:
            await denied(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _has_body(headers: dict[str, str]) -> bool:
    return "transfer-encoding" in headers or headers.get("content-length", "0").strip() not in ("", "0")


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def check_allowed_host(value: str) -> str:
    """``--allowed-host NAME``: a host name or IP address as a ``Host`` header carries it (no scheme, port or path)."""
    name, port = split_host(value)
    if not name or port is not None or name != value.strip().lower().strip("[]").rstrip("."):
        raise UsageError(f"--allowed-host {value!r} is not a host name (e.g. council.example.com, no scheme or port)")
    return name
