"""OpenTelemetry traces, with the ``otel`` extra and the standard ``OTEL_*`` variables only.

Off (no ``OTEL_EXPORTER_OTLP_ENDPOINT``/``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_TRACES_EXPORTER``
unset or ``none``, or ``OTEL_SDK_DISABLED=true``), nothing of OpenTelemetry is imported and a
session pays one test of :data:`ACTIVE`. On, one trace per session (``council.session``: a span
per stage, a span per provider call under its stage, a ``gen_ai.evaluation.result`` event per
review score and for the consensus) and one per queue worker's batch item (``council.batch_item``,
its calls under it). Spans are made from what the session already tells (:func:`traced` wraps its
event sink, inside the session's task, so the calls made in that task and the ones it starts find
their stage as the current span) and from the library's observer hook (each call's record): no
other code of the session knows of tracing. A caller's W3C trace context (an HTTP request's
``traceparent``/``tracestate``, the CLI's ``TRACEPARENT``/``TRACESTATE`` variables) is continued:
:func:`continue_trace` makes it the parent of the sessions and batch submissions started under
it; anything that is not a valid trace context is ignored (OpenTelemetry's own W3C propagator
reads it). A batch keeps its submitting span's ``traceparent`` with its judging settings, and
each item's span links to it (:func:`batch_submitted`, :func:`batch_item`): an item stays a trace
of its own. Provider-call spans follow the GenAI semantic conventions (``gen_ai.operation.name``,
``gen_ai.request.model``, ``gen_ai.provider.name``, ``gen_ai.usage.input_tokens``/``output_tokens``)
with ``council.cost_usd``. No span or event
carries a question, an answer, a reviewer's reasoning or an error text: ids, names, numbers and
statuses only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from datetime import datetime
from typing import Any

from council._util.logs import get_logger
from council.accounting.observers import Observer, observe

log = get_logger("council.tracing")


def configured(env: Any = os.environ) -> bool:
    """Whether the ``OTEL_*`` variables ask for traces."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return bool(exporter or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


ACTIVE = False
"""Traces are being made (the one test a session pays when they are not)."""

_tracer: Any = None
_trace: Any = None  # opentelemetry.trace
_context: Any = None  # opentelemetry.context
_stop_observing: Callable[[], None] | None = None
_propagator: Any = None  # the W3C trace-context propagator

_caller: ContextVar[Any] = ContextVar("council_trace_caller", default=None)
"""The context a caller's trace context gave (None: none, or not a valid one): the parent of the
sessions and batch submissions started under it."""


def start(provider: Any = None) -> bool:
    """Make traces from now on, with ``provider`` (a test's) or one built from the ``OTEL_*``
    variables (only if they ask for traces). False when they do not, or the extra is missing
    (said once, in a warning)."""
    global ACTIVE, _tracer, _trace, _context, _stop_observing, _propagator
    if provider is None and not configured():
        return False
    try:
        from opentelemetry import context, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        if provider is None:
            provider = _provider()
    except ImportError as exc:
        log.warning(f"OTEL_* variables ask for traces but the otel extra is not installed ({exc.name}): "
                    "pip install 'council[otel]'")  # fmt: skip
        return False
    stop()
    _trace, _context, _propagator = trace, context, TraceContextTextMapPropagator()
    # A caller's malformed tracestate is dropped; the SDK's warning would copy it into the log.
    logging.getLogger("opentelemetry.trace.span").setLevel(logging.ERROR)
    _tracer = provider.get_tracer("council")
    _stop_observing = observe(_CallSpans())
    ACTIVE = True
    return True


def stop() -> None:
    global ACTIVE, _stop_observing
    ACTIVE = False
    if _stop_observing is not None:
        _stop_observing()
        _stop_observing = None


def _provider() -> Any:
    """A provider exporting over OTLP as the ``OTEL_*`` variables say (endpoint, headers, protocol,
    service name, sampler: the SDK reads them itself)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip() == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "council"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


# -- a caller's trace context ------------------------------------------------------------------


def _extracted(carrier: Mapping[str, list[str]]) -> Any:
    """The context ``carrier``'s W3C trace context gives (``traceparent``: exactly one value), or
    None when it holds none that is valid."""
    if len(carrier.get("traceparent") or ()) != 1:
        return None
    found = _propagator.extract(carrier)
    return found if _trace.get_current_span(found).get_span_context().is_valid else None


def continue_trace(carrier: Mapping[str, list[str]]) -> Token[Any]:
    """Make ``carrier``'s trace context (header name → its values) the parent of what starts in
    this context from now on (nothing, when it holds no valid one); the token that ends it."""
    try:
        found = _extracted(carrier)
    except Exception:  # a hostile header must never fail the request
        found = None
    return _caller.set(found)


def end_continuing(token: Token[Any]) -> None:
    _caller.reset(token)


def continue_environment(env: Mapping[str, str] = os.environ) -> None:
    """The CLI's caller's trace context, from the ``TRACEPARENT``/``TRACESTATE`` variables (the
    OpenTelemetry convention for processes), when tracing is on."""
    if ACTIVE and env.get("TRACEPARENT"):
        continue_trace({name: [env[name.upper()]] for name in ("traceparent", "tracestate") if env.get(name.upper())})


def _parent() -> Any:
    return _caller.get() or _context.Context()  # never whatever span happens to be current


def _ns(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1e9)


# -- a session: its events, as they are told ---------------------------------------------------


def traced(sink: Callable[[Any], None] | None) -> Callable[[Any], None]:
    """``sink`` (a session's event sink, or None), with the session's spans made from its events."""
    session = _SessionSpans()

    def on_event(event: Any) -> None:
        session.event(event)
        if sink is not None:
            sink(event)

    return on_event


class _SessionSpans:
    def __init__(self) -> None:
        self.session: Any = None
        self.stage: Any = None
        self.tokens: list[Any] = []  # contexts attached in the session's task, detached in turn

    def event(self, event: Any) -> None:
        try:
            handler = getattr(self, f"on_{event.type}", None)
            if handler is not None:
                handler(event)
        except Exception as exc:  # a trace must never break a session
            log.warning("tracing failed", error=f"{type(exc).__name__}")

    def on_session_started(self, event: Any) -> None:
        self.session = _tracer.start_span(f"council.session {event.council}", context=_parent(), attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": event.council,
            "council.session_id": event.session_id, "council.council": event.council,
            "council.members": len(event.members), "council.reviewers": len(event.reviewers),
        })  # fmt: skip
        self.tokens.append(_context.attach(_trace.set_span_in_context(self.session)))

    def on_stage(self, event: Any) -> None:
        if self.session is None:
            return
        self._end_stage()
        self.stage = _tracer.start_span(f"council.stage {event.stage}",
                                        context=_trace.set_span_in_context(self.session),
                                        attributes={"council.stage": event.stage,
                                                    "council.session_id": event.session_id})  # fmt: skip
        self.tokens.append(_context.attach(_trace.set_span_in_context(self.stage)))

    def on_review(self, event: Any) -> None:
        target = self.stage or self.session
        if target is None:
            return
        ranks = {member: i + 1 for i, member in enumerate(event.ranking)}
        for member, score in event.scores.items():
            target.add_event("gen_ai.evaluation.result", {
                "gen_ai.evaluation.name": "council.review", "gen_ai.evaluation.score.value": score,
                "council.reviewer": event.reviewer, "council.member": member, "council.rank": ranks.get(member, 0),
                "council.status": event.status,
            })  # fmt: skip
        if not event.scores:
            target.add_event("gen_ai.evaluation.result", {"gen_ai.evaluation.name": "council.review",
                                                          "council.reviewer": event.reviewer,
                                                          "council.status": event.status})  # fmt: skip

    def on_consensus(self, event: Any) -> None:
        target = self.stage or self.session
        if target is None:
            return
        attributes = {"gen_ai.evaluation.name": "council.consensus", "council.method": event.method,
                      "council.order": list(event.order), "council.ballots": event.ballots}  # fmt: skip
        if event.kendall_w is not None:
            attributes["gen_ai.evaluation.score.value"] = event.kendall_w
        target.add_event("gen_ai.evaluation.result", attributes)

    def on_session_finished(self, event: Any) -> None:
        if self.session is None:
            return
        self._end_stage()
        span = self.session
        span.set_attribute("council.status", event.status)
        span.set_attribute("council.calls", event.usage.calls)
        span.set_attribute("gen_ai.usage.input_tokens", event.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", event.usage.completion_tokens)
        if event.cost_usd is not None:
            span.set_attribute("council.cost_usd", event.cost_usd)
        if event.status == "failed":
            span.set_status(_trace.StatusCode.ERROR)
        span.end()
        self.session = None
        self._detach()

    def _end_stage(self) -> None:
        if self.stage is not None:
            self.stage.end()
            self.stage = None
            self._detach(keep=1)

    def _detach(self, keep: int = 0) -> None:
        while len(self.tokens) > keep:
            try:
                _context.detach(self.tokens.pop())
            except Exception:  # told in another context (a stream's consumer): nothing to undo there
                pass


# -- provider calls and batch items ------------------------------------------------------------


class _CallSpans(Observer):
    """Each provider call's attempt as a span under the current one (its stage, its batch item)."""

    def call_finished(self, record: Any) -> None:
        try:
            start = _ns(record.started_at) if record.started_at else None
        except ValueError:
            start = None
        attributes = {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": record.model,
            "gen_ai.provider.name": record.model.split("/", 1)[0] if "/" in record.model else "openai",
            "gen_ai.usage.input_tokens": record.prompt_tokens, "gen_ai.usage.output_tokens": record.completion_tokens,
            "council.stage": record.stage, "council.member": record.member, "council.attempt": record.attempt,
            "council.cached": record.cached,
        }  # fmt: skip
        if record.cost_usd is not None:
            attributes["council.cost_usd"] = record.cost_usd
        span = _tracer.start_span(f"chat {record.model}", start_time=start, attributes=attributes)
        if not record.ok:
            span.set_attribute("error.type", "cancelled" if record.error == "cancelled" else "provider_error")
            span.set_status(_trace.StatusCode.ERROR)
        span.end(end_time=None if start is None else start + int(record.latency_ms * 1e6))


@contextmanager
def batch_submitted(batch_id: str, items: int) -> Iterator[str | None]:
    """A batch's submission span (under the caller's trace context, if any), open while its items
    are queued; yields its ``traceparent``, which the batch keeps for its items' links."""
    span = _tracer.start_span("council.batch_submit", context=_parent(),
                              attributes={"council.batch_id": batch_id, "council.items": items})  # fmt: skip
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=_trace.set_span_in_context(span))
    try:
        yield carrier.get("traceparent")
    finally:
        span.end()


def _links(traceparent: Any) -> list[Any]:
    """A link to the span of ``traceparent`` (as a batch stored it; not valid: none)."""
    try:
        found = _extracted({"traceparent": [traceparent]}) if isinstance(traceparent, str) else None
    except Exception:  # whatever wrote the store: never a reason to fail the item
        found = None
    return [] if found is None else [_trace.Link(_trace.get_current_span(found).get_span_context())]


@contextmanager
def batch_item(batch_id: str, item_id: str, submitted: str | None = None) -> Iterator[Callable[[str, Any], None]]:
    """A batch item's span, current while it is judged (its calls' spans go under it), a trace of
    its own linked to the span that ``submitted`` the batch (its ``traceparent``); yields the
    function that sets its final status and tells its verdicts (``outcome``: the item's
    comparison or grade, or None), each a ``gen_ai.evaluation.result`` event."""
    span = _tracer.start_span("council.batch_item", context=_context.Context(), links=_links(submitted),
                              attributes={"gen_ai.operation.name": "council.judge", "council.batch_id": batch_id,
                                          "council.item_id": item_id})  # fmt: skip
    token = _context.attach(_trace.set_span_in_context(span))

    def finished(status: str, outcome: Any) -> None:
        span.set_attribute("council.status", status)
        for judged in getattr(outcome, "passes", None) or ():  # each judgment: a judge, a vote, an order
            span.add_event("gen_ai.evaluation.result", _fields(
                {"gen_ai.evaluation.name": "council.judgment", "council.judge": judged.judge,
                 "council.vote": judged.vote, "council.pass": judged.pass_number, "council.valid": judged.valid},
                label=getattr(judged, "winner", None), value=getattr(judged, "score_total", None)))  # fmt: skip
        if outcome is not None:
            span.add_event("gen_ai.evaluation.result", _fields(
                {"gen_ai.evaluation.name": "council.verdict", "council.success": bool(outcome.success)},
                label=getattr(outcome, "winner", None), value=getattr(outcome, "confidence", None)))  # fmt: skip

    try:
        yield finished
    finally:
        _context.detach(token)
        span.end()


def _fields(attributes: dict[str, Any], *, label: Any, value: Any) -> dict[str, Any]:
    """``attributes`` with the evaluation's label and value, where there are some (never None: OTLP has no null)."""
    if label is not None:
        attributes["gen_ai.evaluation.score.label"] = str(label)
    if isinstance(value, int | float):
        attributes["gen_ai.evaluation.score.value"] = value
    return attributes
