"""An OpenAI-compatible mock LLM server on 127.0.0.1, for end-to-end tests and benchmarks.

Replies come from ``council.testing.replies.FakeResponder``, the same responder as the in-process
``fake/`` provider, so a model name like ``mock-b+garbage`` behaves exactly like
``fake/mock-b+garbage`` (see that module for the ``+behaviour`` suffixes).

Endpoints: ``POST /v1/chat/completions`` (plain, ``response_format`` json_schema or json_object,
``stream: true`` as SSE ending with ``data: [DONE]``, a word a chunk, ``--stream-interval``
seconds apart; ``+cutoff`` streams half and then an error chunk; ``--tail-rate R --tail-factor F``: a
heavy tail, each request's delay drawn from its own body, seeded), ``GET /v1/models``, ``GET /health``, and
OpenAI's batch API: ``POST /v1/files`` (multipart, ``purpose=batch``), ``GET
/v1/files/{id}/content``, ``POST /v1/batches``, ``GET /v1/batches[/{id}]``. A batch is validated
(a malformed file fails it, with the reason), waits ``--batch-seconds``, then answers each line as
``/v1/chat/completions`` would; ``--batch-expire-after N`` expires it after N lines (the rest go
to its error file as ``batch_expired``), and ``--batch-reject REASON`` fails every file's
validation with that reason. ``--usage JSON`` replaces every reply's usage block with that object
(a hostile provider's: strings, negative or huge counts), in direct, streamed and batched replies
(Anthropic's ``input_tokens``/``output_tokens`` take its ``prompt_tokens``/``completion_tokens``).
Anthropic's Message Batches too: ``POST /v1/messages/batches``,
``GET /v1/messages/batches/{id}[/results]`` (the same delay and expiry). Batches live in
memory for the server's lifetime. Hostile results (both APIs): ``--batch-results-faults`` makes
the first line of the first results file served ``malformed`` (cut short), its second ``huge``
(1 MiB more), and/or every file ``endless`` (bytes without end after its lines); ``--batch-results-base URL``
names another server in each Message Batch's ``results_url``.
Errors use OpenAI's shape, ``{"error": {"message", "type", "code"}}``. The hostile behaviours
(``+echo``: a 400 quoting the Authorization header and the body; ``+leak``: replies quoting
that header; ``+markup``; ``+quote``) come
from the same responder; ``+endless`` (the mock's own) answers 200 with a body that never ends,
JSON or SSE, as fast as the client reads.

Run it as a script and it prints ``READY http://HOST:PORT`` once it is listening::

    python scripts/mock_llm_server.py --port 0 --latency 0.05 --fault-rate 0.1 --fault-kinds 500,429

or build the ASGI app in-process with ``make_app(latency=0.05, ...)`` (the same options as
keyword arguments). SIGTERM and SIGINT stop it cleanly, releasing requests that are hanging.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import os
import random
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

try:
    from council.errors import ConfigError, ProviderError
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from council.errors import ConfigError, ProviderError
from council.testing.replies import (
    FakeResponder,
    cutoff_error,
    parse_model_name,
    prompt_tokens,
    stream_pieces,
    truncate_to_tokens,
)

DEFAULT_MODELS = ("mock-alpha", "mock-beta", "mock-gamma", "mock-delta")
RESULTS_FAULTS = frozenset({"malformed", "huge", "endless"})
_STATUS_TYPE = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
                429: "rate_limit_error", 504: "timeout"}  # fmt: skip


def _error(status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None) -> Response:
    kind = _STATUS_TYPE.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=headers)


def _text(content: Any) -> str:
    """Message content as text (OpenAI also allows a list of typed parts)."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


class MockLLM:
    """The request handlers and their state (responder, fault RNGs, request log)."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        jitter: float = 0.0,
        fault_rate: float = 0.0,
        fault_kinds: Sequence[str] | str = ("500",),
        hang_seconds: float = 60.0,
        malformed_rate: float = 0.0,
        seed: int = 0,
        require_key: str | None = None,
        log_requests: str | os.PathLike[str] | None = None,
        slow_seconds: float = 1.0,
        retry_after: float = 1.0,
        models: Sequence[str] = DEFAULT_MODELS,
        batch_seconds: float = 0.2,
        batch_expire_after: int | None = None,
        batch_reject: str | None = None,
        batch_results_faults: Sequence[str] | str = (),
        batch_results_base: str | None = None,
        stream_interval: float = 0.0,
        usage: str | dict[str, Any] | None = None,
        tail_rate: float = 0.0,
        tail_factor: float = 10.0,
    ) -> None:
        kinds = [k.strip() for k in fault_kinds.split(",")] if isinstance(fault_kinds, str) else list(fault_kinds)
        for kind in kinds:
            if kind != "timeout" and not (kind.isdigit() and 400 <= int(kind) <= 599):
                raise ValueError(f"fault kind {kind!r}: use an HTTP status (500, 429, 503...) or 'timeout'")
        for name, rate in (("fault_rate", fault_rate), ("malformed_rate", malformed_rate), ("tail_rate", tail_rate)):
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {rate}")
        self.latency, self.jitter, self.slow_seconds = latency, jitter, slow_seconds
        self.tail_rate, self.tail_factor, self.seed = tail_rate, tail_factor, seed
        self.stream_interval = stream_interval
        self.usage = json.loads(usage) if isinstance(usage, str) else usage
        if self.usage is not None and not isinstance(self.usage, dict):
            raise ValueError("usage must be a JSON object")
        self.fault_rate, self.fault_kinds, self.hang_seconds = fault_rate, kinds or ["500"], hang_seconds
        self.malformed_rate, self.retry_after = malformed_rate, retry_after
        self.require_key = require_key
        self.models = list(models)
        self.responder = FakeResponder()
        # Separate streams, so turning one kind of fault on does not move the others.
        self._fault_rng = random.Random(f"{seed}:fault")
        self._malformed_rng = random.Random(f"{seed}:malformed")
        self._jitter_rng = random.Random(f"{seed}:jitter")
        self._ids = itertools.count(1)
        self._log_path = log_requests
        self._log: Any = None
        self._closing: asyncio.Event | None = None
        self._released = False
        self.batch_seconds, self.batch_expire_after = batch_seconds, batch_expire_after
        self.batch_reject = batch_reject
        faults = batch_results_faults.split(",") if isinstance(batch_results_faults, str) else batch_results_faults
        self.results_faults = {f.strip() for f in faults if f.strip()}
        if self.results_faults - RESULTS_FAULTS:
            raise ValueError(f"batch results faults: {', '.join(sorted(RESULTS_FAULTS))}")
        self.results_base = batch_results_base
        self._results_served = False
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # lifecycle
    def open(self) -> None:
        if self._log_path is not None and self._log is None:
            self._log = open(self._log_path, "a", buffering=1, encoding="utf-8")

    def release_hanging(self) -> None:
        """End every hanging ('timeout' fault) request now, and any later one at once."""
        self._released = True
        if self._closing is not None:
            self._closing.set()

    def close(self) -> None:
        """Release hanging requests and close the request log."""
        self.release_hanging()
        if self._log is not None:
            self._log.close()
            self._log = None

    def _record(self, model: str | None, status: int, fault: str | None, **extra: Any) -> None:
        if self._log is not None:
            entry = {"time": time.time(), "model": model, "status": status, "faulted": fault is not None}
            self._log.write(json.dumps({**entry, "fault": fault, **extra}) + "\n")

    def _authorised(self, request: Request) -> bool:
        return self.require_key is None or request.headers.get("authorization") == f"Bearer {self.require_key}"

    # endpoints
    async def health(self, request: Request) -> Response:
        return Response('{"status":"ok"}', media_type="application/json")

    async def list_models(self, request: Request) -> Response:
        if not self._authorised(request):
            return _error(401, "Incorrect API key provided.", "invalid_api_key")
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "mock"} for m in self.models]
        return Response(json.dumps({"object": "list", "data": data}), media_type="application/json")

    async def chat_completions(self, request: Request) -> Response:
        if not self._authorised(request):
            self._record(None, 401, None)
            return _error(401, "Incorrect API key provided.", "invalid_api_key")
        raw = await request.body()
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return _error(400, "The request body is not valid JSON.")
        if not isinstance(body, dict):
            return _error(400, "The request body must be a JSON object.")
        model, messages = body.get("model"), body.get("messages")
        if not isinstance(model, str) or not model:
            return _error(400, "you must provide a model parameter", "missing_model")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return _error(400, "'messages' must be a non-empty array of message objects", "invalid_messages")
        messages = [{"role": str(m.get("role", "user")), "content": _text(m.get("content"))} for m in messages]
        # +endless (the mock's own behaviour, not the responder's): a 200 whose body never ends.
        endless = "+endless" in model
        model = model.replace("+endless", "")
        try:
            _, behaviours = parse_model_name(model)
        except ConfigError as exc:
            return _error(404, str(exc), "model_not_found")
        schema, schema_name, json_mode = None, None, False
        response_format = body.get("response_format")
        response_format = response_format if isinstance(response_format, dict) else {}
        if response_format.get("type") == "json_schema":
            spec = response_format.get("json_schema")
            spec = spec if isinstance(spec, dict) else {}
            schema, schema_name = spec.get("schema") or {}, spec.get("name")
            if not isinstance(schema, dict):
                return _error(400, "response_format.json_schema.schema must be an object", "invalid_schema")
        elif response_format.get("type") == "json_object":
            json_mode = True
        stream = bool(body.get("stream"))

        if endless:
            self._record(model, 200, "endless", stream=stream)
            media = "text/event-stream" if stream else "application/json"
            return StreamingResponse(_endless(stream), media_type=media)
        fault = None
        if self.fault_rate and self._fault_rng.random() < self.fault_rate:
            fault = self._fault_rng.choice(self.fault_kinds)
        if self.tail_rate:
            delay = self._tail_delay(model, raw)
        else:
            delay = self.latency + (self.jitter * self._jitter_rng.random() if self.jitter else 0.0)
        if "slow" in behaviours:
            delay += self.slow_seconds
        if fault == "timeout":
            delay = self.hang_seconds
        if delay > 0:
            if fault == "timeout":
                await self._hang(delay)
            else:
                await asyncio.sleep(delay)

        if fault is not None:
            self._record(model, 504 if fault == "timeout" else int(fault), fault, stream=stream, schema=schema_name)
            if fault == "timeout":
                return _error(504, "mock: the request hung and timed out (injected fault)", "timeout")
            status = int(fault)
            if status == 429:
                headers = {"retry-after": f"{self.retry_after:g}"}
                return _error(429, "Rate limit reached (injected fault).", "rate_limit_exceeded", headers)
            return _error(status, f"The server had an error processing your request (injected {status}).")

        try:
            text = self.responder.reply(
                model,
                messages,
                json_schema=schema,
                schema_name=schema_name,
                seed=body.get("seed"),
                json_mode=json_mode,
                # +echo: what a careless provider or proxy quotes back in its error
                request_echo=f"Authorization: {request.headers.get('authorization', '')}; "
                f"request body: {raw.decode('utf-8', 'replace')}",
                credentials=f"Authorization: {request.headers.get('authorization', '')}",  # +leak
            )
        except ProviderError as exc:
            status = exc.status_code or 500
            self._record(model, status, "fail" if status >= 500 else "echo", stream=stream, schema=schema_name)
            return _error(status, exc.args[0])
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            return _error(400, f"unsupported JSON schema: {exc!r}", "invalid_schema")
        structured = schema is not None or json_mode
        if structured and self.malformed_rate and self._malformed_rng.random() < self.malformed_rate:
            self._record(model, 200, "malformed", stream=stream, schema=schema_name)
            text = text[: max(1, len(text) // 2)] + ' ,"…'
        else:
            self._record(model, 200, None, stream=stream, schema=schema_name)
        text, truncated = truncate_to_tokens(text, body.get("max_completion_tokens") or body.get("max_tokens"))
        finish = "length" if truncated else "stop"
        usage_in = prompt_tokens(messages)
        usage_out = len(text.split())
        usage = {"prompt_tokens": usage_in, "completion_tokens": usage_out, "total_tokens": usage_in + usage_out}
        if self.usage is not None:
            usage = dict(self.usage)
        ident, created = f"chatcmpl-mock-{os.getpid()}-{next(self._ids)}", int(time.time())
        if "cutoff" in behaviours and not stream:
            error = cutoff_error(model)
            return _error(error.status_code or 500, error.args[0])
        if stream:
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = self._chunks(
                ident, created, model, text, finish, usage if include_usage else None, "cutoff" in behaviours
            )
            return StreamingResponse(chunks, media_type="text/event-stream", headers={"cache-control": "no-cache"})
        completion = {
            "id": ident,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "system_fingerprint": "mock",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish,
                    "logprobs": None,
                }
            ],
            "usage": usage,
        }
        return Response(json.dumps(completion), media_type="application/json")

    # OpenAI's batch API (Files + Batches)
    async def upload_file(self, request: Request) -> Response:
        if not self._authorised(request):
            return _error(401, "Incorrect API key provided.", "invalid_api_key")
        form = await request.form()
        upload = form.get("file")
        if form.get("purpose") != "batch" or upload is None or isinstance(upload, str):
            return _error(400, "a 'file' and purpose=batch are required")
        content = await upload.read()
        ident = f"file-mock-{next(self._ids)}"
        self.files[ident] = content
        body = {"id": ident, "object": "file", "bytes": len(content), "purpose": "batch", "filename": upload.filename}
        return Response(json.dumps(body), media_type="application/json")

    async def file_content(self, request: Request) -> Response:
        content = self.files.get(request.path_params["file_id"])
        if content is None:
            return _error(404, "No such file.")
        return self._results(content, "application/jsonl")

    def _results(self, content: bytes, media: str) -> Response:
        """A results file, with ``--batch-results-faults`` (an input file is never given back)."""
        lines = content.splitlines(keepends=True)
        first, self._results_served = not self._results_served, True
        if "malformed" in self.results_faults and lines and first:
            lines[0] = lines[0][: len(lines[0]) // 2] + b"\n"
        if "huge" in self.results_faults and len(lines) > 1 and first:
            record = json.loads(lines[1])
            lines[1] = (json.dumps({**record, "padding": "x" * (1 << 20)}) + "\n").encode()
        if "endless" not in self.results_faults:
            return Response(b"".join(lines), media_type=media)

        async def endless() -> AsyncIterator[bytes]:
            yield b"".join(lines)
            while True:  # as fast as the client reads, until it hangs up
                yield b"x" * 65536
                await asyncio.sleep(0)

        return StreamingResponse(endless(), media_type=media)

    async def create_batch(self, request: Request) -> Response:
        if not self._authorised(request):
            return _error(401, "Incorrect API key provided.", "invalid_api_key")
        body = json.loads(await request.body())
        if body.get("input_file_id") not in self.files:
            return _error(400, "input_file_id does not name an uploaded file")
        ident = f"batch_mock_{next(self._ids)}"
        batch = {
            "id": ident, "object": "batch", "endpoint": body.get("endpoint"), "status": "validating",
            "input_file_id": body["input_file_id"], "completion_window": body.get("completion_window", "24h"),
            "created_at": int(time.time()), "output_file_id": None, "error_file_id": None, "errors": None,
            "metadata": body.get("metadata") or {}, "request_counts": {"total": 0, "completed": 0, "failed": 0},
        }  # fmt: skip
        self.batches[ident] = batch
        task = asyncio.create_task(self._run_batch(batch, request.headers))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return Response(json.dumps(batch), media_type="application/json")

    async def get_batch(self, request: Request) -> Response:
        batch = self.batches.get(request.path_params["batch_id"])
        if batch is None:
            return _error(404, "No such batch.")
        return Response(json.dumps(batch), media_type="application/json")

    async def list_batches(self, request: Request) -> Response:
        openai = [b for b in self.batches.values() if b.get("object") == "batch"]
        data = sorted(openai, key=lambda b: b["created_at"], reverse=True)
        return Response(json.dumps({"object": "list", "data": data, "has_more": False}), media_type="application/json")

    async def _run_batch(self, batch: dict[str, Any], headers: Any) -> None:
        try:
            lines = [json.loads(line) for line in self.files[batch["input_file_id"]].splitlines() if line.strip()]
            ids = [line["custom_id"] for line in lines]
            if len(set(ids)) != len(ids) or any(not isinstance(line.get("body"), dict) for line in lines):
                raise ValueError("custom_id values must be unique and every line needs a body")
            if self.batch_reject:
                raise ValueError(self.batch_reject)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            batch.update(
                status="failed", errors={"object": "list", "data": [{"code": "invalid_file", "message": str(exc)}]}
            )
            return
        batch["request_counts"]["total"] = len(lines)
        await asyncio.sleep(self.batch_seconds)
        batch["status"] = "in_progress"
        out, err = [], []
        for index, line in enumerate(lines):
            if self.batch_expire_after is not None and index >= self.batch_expire_after:
                error = {
                    "code": "batch_expired",
                    "message": "This request could not be executed before the completion window expired.",
                }
                err.append({"id": f"req_{index}", "custom_id": line["custom_id"], "response": None, "error": error})
                continue
            reply = await self.chat_completions(_BatchLine(line["body"], headers))
            record = {"id": f"req_{index}", "custom_id": line["custom_id"],
                      "response": {"status_code": reply.status_code, "request_id": f"req_{index}",
                                   "body": json.loads(bytes(reply.body))}, "error": None}  # fmt: skip
            (out if reply.status_code == 200 else err).append(record)
            batch["request_counts"]["completed" if reply.status_code == 200 else "failed"] += 1
        for name, records in (("output_file_id", out), ("error_file_id", err)):
            if records:
                ident = f"file-mock-{next(self._ids)}"
                self.files[ident] = "".join(json.dumps(r) + "\n" for r in records).encode()
                batch[name] = ident
        expired = self.batch_expire_after is not None and len(lines) > self.batch_expire_after
        batch["status"] = "expired" if expired else "completed"

    # Anthropic's Message Batches
    async def create_message_batch(self, request: Request) -> Response:
        body = json.loads(await request.body())
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            return _error(400, "requests: a non-empty list is required")
        ident = f"msgbatch_mock_{next(self._ids)}"
        batch = {
            "id": ident, "type": "message_batch", "processing_status": "in_progress",
            "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
            "created_at": time.time(), "ended_at": None, "results_url": None,
        }  # fmt: skip
        self.batches[ident] = batch
        task = asyncio.create_task(self._run_message_batch(batch, requests, request.headers, str(request.base_url)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return Response(json.dumps(batch), media_type="application/json")

    async def get_message_batch(self, request: Request) -> Response:
        batch = self.batches.get(request.path_params["batch_id"])
        if batch is None or batch.get("type") != "message_batch":
            return _error(404, "No such batch.")
        return Response(json.dumps(batch), media_type="application/json")

    async def message_batch_results(self, request: Request) -> Response:
        content = self.files.get("results-" + request.path_params["batch_id"])
        if content is None:
            return _error(404, "No results yet.")
        return self._results(content, "application/x-jsonl")

    async def _run_message_batch(self, batch: dict[str, Any], requests: list[Any], headers: Any, base: str) -> None:
        await asyncio.sleep(self.batch_seconds)
        counts, lines = batch["request_counts"], []
        for index, item in enumerate(requests):
            params = item.get("params") or {}
            counts["processing"] -= 1
            if self.batch_expire_after is not None and index >= self.batch_expire_after:
                counts["expired"] += 1
                lines.append({"custom_id": item.get("custom_id"), "result": {"type": "expired"}})
                continue
            messages = ([{"role": "system", "content": params["system"]}] if params.get("system") else []) + list(
                params.get("messages") or []
            )
            chat = {"model": params.get("model"), "messages": messages, "max_tokens": params.get("max_tokens")}
            tools = params.get("tools") or []
            if tools:  # a forced tool call: its input follows the tool's schema
                chat["response_format"] = {"type": "json_schema", "json_schema": {"name": tools[0].get("name"),
                                           "schema": tools[0].get("input_schema") or {}}}  # fmt: skip
            reply = await self.chat_completions(_BatchLine(chat, headers))
            data = json.loads(bytes(reply.body))
            if reply.status_code != 200:
                counts["errored"] += 1
                error = {"type": "error", "error": {"type": "api_error", "message": data["error"]["message"]}}
                lines.append({"custom_id": item.get("custom_id"), "result": {"type": "errored", "error": error}})
                continue
            counts["succeeded"] += 1
            usage = data["usage"]
            message = {
                "id": data["id"], "type": "message", "role": "assistant", "model": params.get("model"),
                "content": [_content(data["choices"][0]["message"]["content"], tools)],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": usage.get("prompt_tokens"), "output_tokens": usage.get("completion_tokens")},
            }  # fmt: skip
            lines.append({"custom_id": item.get("custom_id"), "result": {"type": "succeeded", "message": message}})
        self.files["results-" + batch["id"]] = "".join(json.dumps(line) + "\n" for line in lines).encode()
        base = self.results_base or base
        batch.update(processing_status="ended", ended_at=time.time(),
                     results_url=f"{base.rstrip('/')}/v1/messages/batches/{batch['id']}/results")  # fmt: skip

    def _tail_delay(self, model: str, body: bytes) -> float:
        """A heavy-tailed delay drawn from the request itself (seeded): ``latency`` plus up to
        ``jitter``, times ``tail_factor`` for a ``tail_rate`` share of requests. The same request
        waits as long in every run, whichever order requests come in."""
        draw = random.Random(f"{self.seed}:tail:{model}:{hashlib.sha256(body).hexdigest()}")
        delay = self.latency + self.jitter * draw.random()
        return delay * self.tail_factor if draw.random() < self.tail_rate else delay

    async def _hang(self, seconds: float) -> None:
        if self._released:
            return
        if self._closing is None:
            self._closing = asyncio.Event()
        try:
            await asyncio.wait_for(self._closing.wait(), timeout=seconds)
        except TimeoutError:
            pass

    async def _chunks(
        self, ident: str, created: int, model: str, text: str, finish: str, usage: dict[str, int] | None,
        cutoff: bool = False,
    ) -> AsyncIterator[str]:
        def event(delta: dict[str, Any], reason: str | None = None) -> str:
            choice = {"index": 0, "delta": delta, "finish_reason": reason, "logprobs": None}
            chunk = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                     "choices": [choice]}  # fmt: skip
            return f"data: {json.dumps(chunk)}\n\n"

        yield event({"role": "assistant", "content": ""})
        pieces = stream_pieces(text)
        for i, piece in enumerate(pieces[: len(pieces) // 2] if cutoff else pieces):
            if self.stream_interval and i:
                await asyncio.sleep(self.stream_interval)
            yield event({"content": piece})
        if cutoff:  # as OpenAI reports an error mid-stream: an error object in a data line
            error = cutoff_error(model)
            yield f"data: {json.dumps({'error': {'message': error.args[0], 'type': 'server_error', 'code': 500}})}\n\n"
            return
        yield event({}, finish)
        if usage is not None:
            chunk = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                     "choices": [], "usage": usage}  # fmt: skip
            yield f"data: {json.dumps(chunk)}\n\n"
        yield "data: [DONE]\n\n"


async def _endless(stream: bool) -> AsyncIterator[str]:
    """A reply that never ends, as fast as the client reads it (until it hangs up)."""
    piece = "endless " * 8192
    if stream:
        choice = {"index": 0, "delta": {"content": piece}}
        chunk = {"id": "endless", "object": "chat.completion.chunk", "choices": [choice]}
        line = f"data: {json.dumps(chunk)}\n\n"
        while True:
            yield line
            await asyncio.sleep(0)
    yield '{"id": "endless", "object": "chat.completion", "choices": [{"index": 0, "message": {"content": "'
    while True:
        yield piece
        await asyncio.sleep(0)


def _content(text: str, tools: list[Any]) -> dict[str, Any]:
    """An Anthropic content block: the forced tool's input, or the text."""
    if tools:
        try:
            return {"type": "tool_use", "id": "toolu_mock", "name": tools[0].get("name"), "input": json.loads(text)}
        except ValueError:
            pass
    return {"type": "text", "text": text}


class _BatchLine:
    """One line of a batch, handed to the chat endpoint as if it were a request."""

    def __init__(self, body: dict[str, Any], headers: Any) -> None:
        self._raw = json.dumps(body).encode()
        self.headers = headers

    async def body(self) -> bytes:
        return self._raw


def make_app(**options: Any) -> Starlette:
    """The ASGI app; ``options`` are ``MockLLM``'s keyword arguments (same names as the CLI flags).

    The ``MockLLM`` instance is ``app.state.mock`` (``.close()`` releases hanging requests).
    """
    mock = MockLLM(**options)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        mock.open()
        try:
            yield
        finally:
            mock.close()

    mock.open()  # also usable without lifespan events (e.g. under httpx.ASGITransport)
    app = Starlette(
        routes=[
            Route("/v1/chat/completions", mock.chat_completions, methods=["POST"]),
            Route("/chat/completions", mock.chat_completions, methods=["POST"]),
            Route("/v1/models", mock.list_models, methods=["GET"]),
            Route("/v1/files", mock.upload_file, methods=["POST"]),
            Route("/v1/files/{file_id}/content", mock.file_content, methods=["GET"]),
            Route("/v1/batches", mock.create_batch, methods=["POST"]),
            Route("/v1/batches", mock.list_batches, methods=["GET"]),
            Route("/v1/batches/{batch_id}", mock.get_batch, methods=["GET"]),
            Route("/v1/messages/batches", mock.create_message_batch, methods=["POST"]),
            Route("/v1/messages/batches/{batch_id}", mock.get_message_batch, methods=["GET"]),
            Route("/v1/messages/batches/{batch_id}/results", mock.message_batch_results, methods=["GET"]),
            Route("/health", mock.health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.mock = mock
    return app


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    p.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    p.add_argument("--jitter", type=float, default=0.0, help="up to this many extra seconds, uniformly")
    p.add_argument("--fault-rate", type=float, default=0.0, help="fraction of requests that fail")
    p.add_argument("--fault-kinds", default="500", help="comma-separated HTTP statuses (500, 429...) and/or timeout")
    p.add_argument("--hang-seconds", type=float, default=60.0, help="how long a 'timeout' fault hangs")
    p.add_argument("--malformed-rate", type=float, default=0.0, help="fraction of JSON requests given broken JSON")
    p.add_argument("--seed", type=int, default=0, help="seed of the fault, malformed and jitter RNGs")
    p.add_argument("--require-key", default=None, help="answer 401 unless 'Authorization: Bearer KEY'")
    p.add_argument("--log-requests", default=None, metavar="FILE", help="append one JSON line per chat request")
    p.add_argument("--tail-rate", type=float, default=0.0,
                   help="share of requests made --tail-factor times slower; each request's delay is then drawn "
                   "from its own body (seeded), the same in every run")  # fmt: skip
    p.add_argument("--tail-factor", type=float, default=10.0, help="how much slower a tail request is")
    p.add_argument("--slow-seconds", type=float, default=1.0, help="extra delay for '+slow' models")
    p.add_argument("--retry-after", type=float, default=1.0, help="retry-after header of 429 faults, in seconds")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated ids listed by /v1/models")
    p.add_argument("--batch-seconds", type=float, default=0.2, help="how long a batch waits before it runs")
    p.add_argument("--batch-expire-after", type=int, default=None, help="expire every batch after this many lines")
    p.add_argument("--batch-reject", default=None, metavar="REASON", help="fail every batch file's validation")
    faults = "malformed (first line cut), huge (second line + 1 MiB): the first results file; endless: every one"
    p.add_argument("--batch-results-faults", default="", metavar="KINDS", help=f"comma-separated: {faults}")
    p.add_argument("--batch-results-base", default=None, metavar="URL", help="the server results_url names")
    p.add_argument("--stream-interval", type=float, default=0.0, help="seconds between streamed chunks")
    p.add_argument("--usage", default=None, metavar="JSON", help="the usage block of every reply (a JSON object)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    import uvicorn

    args = _parse_args(argv)
    try:
        app = make_app(
            latency=args.latency,
            jitter=args.jitter,
            fault_rate=args.fault_rate,
            fault_kinds=args.fault_kinds,
            hang_seconds=args.hang_seconds,
            malformed_rate=args.malformed_rate,
            seed=args.seed,
            require_key=args.require_key,
            log_requests=args.log_requests,
            slow_seconds=args.slow_seconds,
            retry_after=args.retry_after,
            models=[m for m in args.models.split(",") if m],
            batch_seconds=args.batch_seconds,
            batch_expire_after=args.batch_expire_after,
            batch_reject=args.batch_reject,
            batch_results_faults=args.batch_results_faults,
            batch_results_base=args.batch_results_base,
            stream_interval=args.stream_interval,
            usage=args.usage,
            tail_rate=args.tail_rate,
            tail_factor=args.tail_factor,
        )
    except (ValueError, OSError) as exc:
        print(f"mock_llm_server: {exc}", file=sys.stderr)
        return 2
    mock: MockLLM = app.state.mock

    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio enables TCP_NODELAY only on sockets whose proto says TCP, and
    # without it every keep-alive response waits ~40 ms (Nagle against delayed ACKs).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        print(f"mock_llm_server: cannot bind {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if family == socket.AF_INET6 else args.host

    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=2, backlog=2048
    )
    server = uvicorn.Server(config)
    loop_box: list[asyncio.AbstractEventLoop] = []

    def request_exit(signum: int, frame: Any) -> None:
        # Active before uvicorn installs its own handlers and after it restores them.
        server.should_exit = True

    signal.signal(signal.SIGTERM, request_exit)
    signal.signal(signal.SIGINT, request_exit)
    uvicorn_exit = server.handle_exit

    def handle_exit(signum: int, frame: Any) -> None:
        uvicorn_exit(signum, frame)
        if loop_box:
            loop_box[0].call_soon_threadsafe(mock.release_hanging)

    server.handle_exit = handle_exit  # type: ignore[method-assign]

    async def serve() -> None:
        loop_box.append(asyncio.get_running_loop())
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.005)
        if server.started:
            print(f"READY http://{host}:{port}", flush=True)
        await task

    asyncio.run(serve())
    return 0 if server.started else 1


if __name__ == "__main__":
    sys.exit(main())
