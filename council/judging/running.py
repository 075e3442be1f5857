"""What every judgment run shares: argument checks, asking a judge until its output
validates, the call log, and persisting the finished run."""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from council.config.loader import store_transcripts
from council.errors import InputError, ProviderError, UsageError
from council.judging.outcomes import JudgmentPass, Outcome, run_rows
from council.judging.prompts import retry_message
from council.providers.base import ChatRequest
from council.providers.client import CallRecord, CallSink, ModelClient
from council.storage.store import Store
from council.validation import validate_output

MAX_REPLY_ECHO = 4000  # characters of an invalid reply sent back with the re-request


@lru_cache(maxsize=256)
def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


class Reply(BaseModel):
    parsed: Any = None
    attempts: int
    problem: str | None = None


async def ask_valid(
    client: ModelClient,
    messages: list[dict[str, str]],
    model: type[BaseModel],
    *,
    schema_name: str,
    stage: str,
    seed: int,
    max_attempts: int,
    sink: CallSink,
) -> Reply:
    """Ask until the reply validates against ``model``, re-requesting with the reason; a
    provider failure (after the client's own retries) ends the pass as invalid."""
    problem = None
    for attempt in range(1, max_attempts + 1):
        request = ChatRequest(
            messages=messages, json_schema=schema_of(model), schema_name=schema_name, seed=seed, **client.defaults()
        )
        try:
            response = await client.complete(request, stage=stage, sink=sink)
        except ProviderError as exc:
            return Reply(attempts=attempt, problem=f"provider error: {exc}")
        parsed, problem = validate_output(model, response.text)
        if parsed is not None:
            return Reply(parsed=parsed, attempts=attempt)
        echo = {"role": "assistant", "content": response.text[:MAX_REPLY_ECHO]}
        messages = [*messages, echo, retry_message(problem or "invalid output")]
    return Reply(attempts=max_attempts, problem=f"invalid output after {max_attempts} attempts: {problem}")


async def judge_pass(
    client: ModelClient,
    messages: list[dict[str, str]],
    model: type[BaseModel],
    *,
    schema_name: str,
    stage: str,
    vote: int,
    pass_number: int = 1,
    shown_first: str | None = None,
    max_attempts: int,
    sink: CallSink,
) -> tuple[JudgmentPass, Any]:
    """One recorded pass: ask for valid output, and keep it with who judged and in which order."""
    # The vote number seeds the request: votes are distinct samples, reproducible where seeds are honoured.
    reply = await ask_valid(
        client, messages, model, schema_name=schema_name, stage=stage, seed=vote, max_attempts=max_attempts, sink=sink
    )
    record = JudgmentPass(
        judge=client.id,
        judge_model=client.model,
        vote=vote,
        pass_number=pass_number,
        shown_first=shown_first,
        valid=reply.parsed is not None,
        attempts=reply.attempts,
        problem=reply.problem,
        output=reply.parsed.model_dump(mode="json") if reply.parsed is not None else None,
    )
    return record, reply.parsed


def check_common(prompt: str, judges: Sequence[ModelClient], votes: int, max_attempts: int) -> None:
    if not prompt.strip():
        raise InputError("the prompt is empty")
    if not judges:
        raise UsageError("at least one judge is needed")
    if len({j.id for j in judges}) != len(judges):
        raise UsageError("each judge may be given once")
    if votes < 1:
        raise UsageError(f"votes must be at least 1, got {votes}")
    if max_attempts < 1:
        raise UsageError(f"max_attempts must be at least 1, got {max_attempts}")


def tee(calls: list[CallRecord], sink: CallSink | None) -> CallSink:
    if sink is None:
        return calls.append

    def both(record: CallRecord) -> None:
        calls.append(record)
        sink(record)

    return both


def open_store(store: Store | bool | None) -> tuple[Store | None, bool]:
    if store is True:
        return Store.open(), True
    return (store or None), False


def keeps_text(keep_text: bool | None) -> bool:
    """An explicit choice, else ``COUNCIL_STORE_TRANSCRIPTS`` (default: keep)."""
    return store_transcripts(None, os.environ) if keep_text is None else keep_text


def persist(
    store: Store | bool | None,
    kind: str,
    outcome: Outcome,
    calls: Sequence[CallRecord],
    keep_text: bool | None = None,
) -> None:
    from council.storage.judgments import record_run

    opened, owned = open_store(store)
    if opened is None:
        return
    try:
        record_run(opened, *run_rows(kind, outcome, calls, keep_text=keeps_text(keep_text)))
    finally:
        if owned:
            opened.close()
