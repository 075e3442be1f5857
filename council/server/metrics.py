"""``GET /metrics``: the server's Prometheus metrics (text format, through ``prometheus-client``;
every name prefixed ``council_``; behind the bearer token like the API, :mod:`.auth`), and the
same metrics on an address of their own (:func:`serve_metrics`: ``council serve
--metrics-address``, ``council worker --metrics-address``), through prometheus-client's server.

Where the numbers come from: HTTP requests from :class:`RequestMetrics` (the outermost
middleware, by route template, so a path's ids never become labels); sessions and their stages
from the events every session the server runs already passes to its ``EventLog``
(:mod:`.background`); provider calls, tokens, cost, cache hits and spend-cap refusals from the
library's one hook, :mod:`council.accounting.observers` (``council.api.observe_calls``),
registered while the server runs, as are rate-budget waits and a queue worker's claims and items;
the queue's depth from the store at each scrape (:class:`QueueDepth`). Only this module imports
``prometheus_client``: the library never does.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from council._util.logs import get_logger
from council._util.ops_log import emit
from council.api import CallObserver, observe_calls

log = get_logger("council.server")

#: Seconds: sessions and stages take from well under a second (the mock, the cache) to minutes.
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
SESSION_HEADER = b"x-council-session-id"  # as council.server.protocol.session_headers names it
UNMATCHED = "unmatched"  # the route label of a request no route took (404s, refused by the guard)


OUTCOMES = ("ok", "failed", "cancelled", "cached")


@dataclass(frozen=True)
class _ModelCounters:
    calls: dict[str, Any]
    prompt_tokens: Any
    completion_tokens: Any
    cost: Any
    cache_hits: Any


def _outcome(record: Any) -> str:
    if record.cached:
        return "cached"
    if record.ok:
        return "ok"
    return "cancelled" if record.error == "cancelled" else "failed"


class ServerMetrics(CallObserver):
    """One registry per server (an app made twice in one process counts twice, apart) or queue
    worker: the same families, those a process does not have (a worker's HTTP requests) empty."""

    def __init__(self, open_store: Callable[[], Any] | None = None) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("council_http_requests", "HTTP requests answered, by route template, method and status",
                                ["route", "method", "status"], registry=r)  # fmt: skip
        self.sessions = Counter("council_sessions", "Sessions finished, by status", ["status"], registry=r)
        self.session_seconds = Histogram("council_session_duration_seconds", "Duration of finished sessions",
                                         buckets=DURATION_BUCKETS, registry=r)  # fmt: skip
        self.stage_seconds = Histogram("council_stage_duration_seconds", "Duration of each stage of a session",
                                       ["stage"], buckets=DURATION_BUCKETS, registry=r)  # fmt: skip
        self.calls = Counter("council_provider_calls", "Provider call attempts, by model and outcome",
                             ["model", "outcome"], registry=r)  # fmt: skip
        self.tokens = Counter("council_tokens", "Tokens of the calls sent to providers, by model and kind",
                              ["model", "kind"], registry=r)  # fmt: skip
        self.cost = Counter("council_cost_usd", "Dollars the calls sent to providers cost, by model",
                            ["model"], registry=r)  # fmt: skip
        self.cache_hits = Counter("council_cache_hits", "Calls answered from the call cache, by model",
                                  ["model"], registry=r)  # fmt: skip
        self.refusals = Counter("council_spend_cap_refusals", "Calls a spend cap refused to start", registry=r)
        self.rate_waits = Counter("council_rate_limit_waits", "Calls that waited for their model's rpm/tpm budget",
                                  ["model"], registry=r)  # fmt: skip
        self.rate_wait_seconds = Counter("council_rate_limit_wait_seconds", "Seconds calls waited for their rpm/tpm "
                                         "budget", ["model"], registry=r)  # fmt: skip
        self.claims = Counter("council_worker_claimed_items", "Batch items a queue worker claimed", registry=r)
        self.items = Counter("council_worker_items", "Batch items a queue worker is done with, by status",
                             ["status"], registry=r)  # fmt: skip
        self.item_seconds = Histogram("council_worker_item_duration_seconds", "How long a queue worker took per item",
                                      buckets=DURATION_BUCKETS, registry=r)  # fmt: skip
        self.queue = QueueDepth(open_store) if open_store is not None else None
        if self.queue is not None:
            r.register(self.queue)
        self._models: dict[str, _ModelCounters] = {}

    # -- the library's hook (council.accounting.observers) -------------------------------
    def call_finished(self, record: Any) -> None:
        # Every call passes here: each model's label children are looked up once, not per call.
        model = self._models.get(record.model) or self._model(record.model)
        outcome = _outcome(record)
        model.calls[outcome].inc()
        if outcome == "cached":  # nothing was sent: no tokens spent, nothing paid
            model.cache_hits.inc()
            return
        model.prompt_tokens.inc(record.prompt_tokens)
        model.completion_tokens.inc(record.completion_tokens)
        if record.cost_usd:
            model.cost.inc(record.cost_usd)

    def _model(self, name: str) -> _ModelCounters:
        self._models[name] = counters = _ModelCounters(
            calls={o: self.calls.labels(name, o) for o in OUTCOMES},
            prompt_tokens=self.tokens.labels(name, "prompt"),
            completion_tokens=self.tokens.labels(name, "completion"),
            cost=self.cost.labels(name),
            cache_hits=self.cache_hits.labels(name),
        )
        return counters

    def spend_refused(self) -> None:
        self.refusals.inc()

    def rate_waited(self, model: str, seconds: float) -> None:
        self.rate_waits.labels(model).inc()
        self.rate_wait_seconds.labels(model).inc(seconds)

    def items_claimed(self, batch_ids: list[str]) -> None:
        self.claims.inc(len(batch_ids))

    def item_finished(self, batch_id: str, item_id: str, status: str, seconds: float) -> None:
        self.items.labels(status).inc()
        self.item_seconds.observe(seconds)

    def observe_library(self) -> Callable[[], None]:
        """Start counting the library's calls and refusals; the function that stops it."""
        return observe_calls(self)

    def session(self) -> SessionWatch:
        return SessionWatch(self)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def close(self) -> None:
        if self.queue is not None:
            self.queue.close()


class QueueDepth:
    """``council_queue_items{state}``: the batch items queued and running in the store, every
    batch, read at each scrape. Through a store of its own, opened at the first scrape and used
    by one scrape at a time: scrapes come from prometheus-client's threads as well as the
    server's (off its event loop), and the server's store belongs to its loop. A store that does
    not answer leaves the family out of that scrape (the rest is still served)."""

    def __init__(self, open_store: Callable[[], Any]) -> None:
        self._open = open_store
        self._store: Any = None
        self._lock = threading.Lock()

    def describe(self) -> list[Any]:
        return []  # registering must not query the store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            try:
                if self._store is None:
                    self._store = self._open()
                counts = self._store.queue_depth()
            except Exception as exc:
                log.warning("metrics: the store did not say the queue's depth", error=" ".join(str(exc).split()))
                return
        family = GaugeMetricFamily("council_queue_items", "Batch items in the store's queue, by state (every batch)",
                                   labels=["state"])  # fmt: skip
        for state, count in counts.items():
            family.add_metric([state], count)
        yield family

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


def serve_metrics(metrics: ServerMetrics, host: str, port: int) -> tuple[str, Callable[[], None]]:
    """Serve ``metrics`` at ``http://HOST:PORT/metrics`` (any path answers them) with
    prometheus-client's own server, in a thread; its address (port 0: the one picked) and the
    function that stops it. No token: an address of its own is the operator's way to keep it apart."""
    from prometheus_client import start_http_server

    server, thread = start_http_server(port, addr=host.strip("[]"), registry=metrics.registry)
    bound = server.server_address[1]

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(5)

    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{bound}/metrics", stop


class SessionWatch:
    """One session's stages timed from its events, as the server's ``EventLog`` passes them on;
    its start and finish logged (:mod:`council._util.ops_log`) with counts, never its text."""

    __slots__ = ("metrics", "stage", "since", "council")

    def __init__(self, metrics: ServerMetrics) -> None:
        self.metrics = metrics
        self.stage: str | None = None
        self.since = 0.0
        self.council: str | None = None

    def event(self, event: Any) -> None:
        kind = event.type
        if kind == "stage":
            self._stage_ended()
            self.stage, self.since = event.stage, time.monotonic()
        elif kind == "session_started":
            self.council = event.council
            emit("session_started", {"session_id": event.session_id, "council": event.council})
        elif kind == "session_finished":
            self._stage_ended()
            self.metrics.sessions.labels(event.status).inc()
            self.metrics.session_seconds.observe(event.duration_ms / 1000)
            emit("session_finished", {
                "session_id": event.session_id, "council": self.council, "status": event.status,
                "calls": event.usage.calls, "failed_calls": event.usage.failed_calls,
                "prompt_tokens": event.usage.prompt_tokens, "completion_tokens": event.usage.completion_tokens,
                "cost_usd": event.cost_usd, "duration_ms": round(event.duration_ms, 2),
            })  # fmt: skip

    def _stage_ended(self) -> None:
        if self.stage is not None:
            self.metrics.stage_seconds.labels(self.stage).observe(time.monotonic() - self.since)
            self.stage = None


class RequestMetrics:
    """Counts every HTTP request by the template of the route that took it and its status, and
    logs it (:mod:`council._util.ops_log`): method, route template, status, duration and the
    session the response names (its ``x-council-session-id``, set by the server, never read
    from the request). Never the raw path or its query string: they may carry ids or secrets."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # what the client meets if the app fails before it starts a response
        session_id = None
        started = time.perf_counter()

        async def sending(message: Message) -> None:
            nonlocal status, session_id
            if message["type"] == "http.response.start":
                status = message["status"]
                for name, value in message.get("headers", ()):
                    if name == SESSION_HEADER:
                        session_id = value.decode("latin-1")
                        break
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None) or UNMATCHED
            method = scope["method"]
            self.metrics.requests.labels(route, method, str(status)).inc()
            duration_ms = round((time.perf_counter() - started) * 1000, 2)
            fields = {"method": method, "route": route, "status": status, "duration_ms": duration_ms}
            if session_id is not None:
                fields["session_id"] = session_id
            emit("http_request", fields)


async def metrics(request: Request) -> Response:
    # Off the event loop: the queue's depth is a query (QueueDepth).
    body = await asyncio.to_thread(request.app.state.council_metrics.render)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
