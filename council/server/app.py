"""``council serve``: an OpenAI-compatible chat-completions server over councils
(``model`` = a council name).

This module assembles the app: the routes (chat completions in :mod:`.chat`, models in
:mod:`.models_routes`, stored sessions in :mod:`.sessions_routes`, sessions started over HTTP
and their events in :mod:`.live`, the web app in :mod:`.web`) behind the middleware every
request goes through (:mod:`.guard`: what browsers may send; :mod:`.auth`: the bearer token).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Route

from council._util import tracing
from council.api import LoadedConfig
from council.errors import CouncilFailure
from council.server import MAX_SESSIONS
from council.server.auth import BearerTokenMiddleware
from council.server.chat import chat_completions
from council.server.errors import http_error, server_error
from council.server.guard import RequestGuardMiddleware
from council.server.live import list_sessions, session_events, start_session
from council.server.metrics import RequestMetrics, ServerMetrics, metrics
from council.server.models_routes import get_model, list_models
from council.server.probes import livez, readyz
from council.server.sessions_routes import get_batch, get_bias_report, get_leaderboard, get_session
from council.server.state import CouncilServer
from council.server.web import web_routes
from council.untrusted.redaction import register_secret

MAX_BODY_BYTES = 1_000_000


def create_app(
    loaded: LoadedConfig,
    *,
    token: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    cors_origins: Sequence[str] = (),
    host: str = "127.0.0.1",
    allowed_hosts: Sequence[str] = (),
    max_sessions: int = MAX_SESSIONS,
) -> Starlette:
    """``cors_origins``: browser origins allowed to call the server (none by default); ``host``: the
    bound address; ``allowed_hosts``: other names the ``Host`` header may carry (see :mod:`.guard`);
    ``max_sessions``: sessions run at once, of every route (see :mod:`.limits`)."""
    register_secret(token)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.council_server = CouncilServer(
            loaded, max_body_bytes=max_body_bytes, max_sessions=max_sessions, metrics=server_metrics
        )
        stop_observing = server_metrics.observe_library()
        try:
            yield
        finally:
            stop_observing()
            await app.state.council_server.aclose()
            server_metrics.close()

    from council.api import open_store

    server_metrics = ServerMetrics(open_store)
    # Outermost first: every request is counted; a request refused by the guard reaches nothing else.
    guard = Middleware(RequestGuardMiddleware, bound_host=host, allowed_hosts=allowed_hosts, cors_origins=cors_origins)
    middleware = [Middleware(RequestMetrics, metrics=server_metrics), guard]
    if cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["*"],
                max_age=600,
            )
        )
    if token:
        middleware.append(Middleware(BearerTokenMiddleware, token=token))
    if tracing.ACTIVE:  # a caller's trace context, continued (only when traces are made)
        from council.server.tracecontext import TraceContextMiddleware

        middleware.append(Middleware(TraceContextMiddleware))
    app = Starlette(
        routes=[
            Route("/health", livez),
            Route("/livez", livez),
            Route("/readyz", readyz),
            Route("/metrics", metrics),
            Route("/v1/models", list_models),
            Route("/v1/models/{model_id:path}", get_model),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/sessions", list_sessions, methods=["GET"]),
            Route("/v1/sessions", start_session, methods=["POST"]),
            Route("/v1/sessions/{session_id}/events", session_events),
            Route("/v1/sessions/{session_id}", get_session),
            Route("/v1/bias-report", get_bias_report),
            Route("/v1/leaderboard", get_leaderboard),
            Route("/v1/batches/{batch_id}", get_batch),
            *web_routes(),
        ],
        middleware=middleware,
        exception_handlers={HTTPException: http_error, Exception: server_error},
        lifespan=lifespan,
    )
    app.state.council_metrics = server_metrics
    return app


def is_loopback(host: str) -> bool:
    import ipaddress

    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


__all__ = ["CouncilFailure", "create_app", "is_loopback"]
