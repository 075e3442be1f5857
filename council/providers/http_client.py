"""aiohttp, imported without loading the system's CA certificates until a TLS handshake needs them.

aiohttp builds two TLS contexts as it is imported (verified and unverified), and each loads the
system's CA certificates: start-up time of every ``council run``, whose models may all be
reached over plain ``http://`` (a local server; the mock in the benchmarks; measured by
``benchmarks/bench_critical_path.py``, part 2). While aiohttp is imported
here, a context that asks for the default certificates gets them at its first handshake instead
(``wrap_bio``, what asyncio's TLS transport calls, or ``wrap_socket``): until then it holds none,
so no handshake can pass unverified. ``ssl.SSLContext`` itself is left as it is (aiohttp keeps
references to the class). Every council module imports aiohttp from here.
"""

from __future__ import annotations

import ssl
import sys
from typing import Any


def _load_on_first_handshake(context: ssl.SSLContext) -> None:
    """Record ``context`` as wanting the default certificates; they load before its first handshake."""

    def load() -> None:
        vars(context).pop("wrap_bio", None)
        vars(context).pop("wrap_socket", None)
        _set_default_verify_paths(context)

    def wrap_bio(*args: Any, **kwargs: Any) -> ssl.SSLObject:
        load()
        return context.wrap_bio(*args, **kwargs)

    def wrap_socket(*args: Any, **kwargs: Any) -> ssl.SSLSocket:
        load()
        return context.wrap_socket(*args, **kwargs)

    context.wrap_bio = wrap_bio  # type: ignore[method-assign]  # this instance only
    context.wrap_socket = wrap_socket  # type: ignore[method-assign]


_set_default_verify_paths = ssl.SSLContext.set_default_verify_paths

if "aiohttp" not in sys.modules:
    ssl.SSLContext.set_default_verify_paths = _load_on_first_handshake  # type: ignore[method-assign]
    try:
        import aiohttp
    finally:
        ssl.SSLContext.set_default_verify_paths = _set_default_verify_paths  # type: ignore[method-assign]
else:
    import aiohttp

__all__ = ["aiohttp"]
