"""What every judgment run shares: argument checks, one recorded judge pass (asked with
``council.providers.asking.ask_valid``), the call log, and persisting the finished run."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel

from council.accounting.usage import CallLog, CallRecord, CallSink
from council.config import PrivacySettings, resolve_privacy
from council.errors import InputError, UsageError
from council.judging.outcomes import JudgmentPass, Outcome
from council.judging.prompts import retry_message
from council.providers.asking import ask_valid
from council.providers.client import ModelClient
from council.storage import Store, using_store
from council.untrusted.redaction import private_scope

_T = TypeVar("_T")


async def gathered(awaitables: Iterable[Awaitable[_T]]) -> list[_T]:
    """``asyncio.gather``'s results, as a list; a single awaitable (a batch item's one judge) is
    awaited in place: a task of its own and the turn of the loop it adds would cost more than the
    rest of the bookkeeping of a fast judge's pass."""
    pending = list(awaitables)
    if len(pending) == 1:
        return [await pending[0]]
    return list(await asyncio.gather(*pending))


@lru_cache(maxsize=256)
def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


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
        client,
        messages,
        model,
        schema=schema_of(model),
        schema_name=schema_name,
        retry_message=retry_message,
        stage=stage,
        seed=vote,
        max_attempts=max_attempts,
        sink=sink,
    )
    record = JudgmentPass(
        judge=client.id,
        judge_model=client.model,
        vote=vote,
        pass_number=pass_number,
        shown_first=shown_first,
        valid=reply.parsed is not None,
        attempts=reply.attempts,
        problem=f"provider error: {reply.error}" if reply.error is not None else reply.problem,
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


def default_privacy() -> PrivacySettings:
    """The privacy settings of a judging function whose caller passed none (``keep_text=None``,
    ``hash_prompts=None``): those the CLI would use, the environment over the default config file
    (``$COUNCIL_CONFIG``, else ``$COUNCIL_HOME/council.toml``). This is the one place a judging
    function reads the user's config on its own; the front-ends pass theirs explicitly
    (:mod:`council.judging.facade`)."""
    return resolve_privacy()


def keeps_text(keep_text: bool | None) -> bool:
    """An explicit choice, else :func:`default_privacy`'s (default: keep)."""
    return default_privacy().store_transcripts if keep_text is None else keep_text


@dataclass
class JudgingRun:
    """One comparison or grade while it runs: its id, privacy, store and call log."""

    run_id: str
    keep_text: bool
    store: Store | None
    log: CallLog

    @property
    def calls(self) -> list[CallRecord]:
        return self.log.records


@contextmanager
def judging_run(
    store: Store | bool | None,
    keep_text: bool | None,
    run_id: str | None,
    sink: CallSink | None,
    private: Sequence[str | None],
) -> Iterator[JudgingRun]:
    """The frame of one run: its privacy scope (``private``: the texts judged, kept out of
    stored errors when transcripts are off), its call log (written to the store as each call
    starts and ends, then passed on to ``sink``) and the store (opened here for ``True``)."""
    keep = keeps_text(keep_text)
    run_id = run_id or str(uuid.uuid4())
    with using_store(store) as opened, private_scope(keep_text=keep, texts=private):
        journal = opened.journal(run_id) if opened is not None else None
        yield JudgingRun(run_id=run_id, keep_text=keep, store=opened, log=CallLog(journal, then=sink))


def persist(run: JudgingRun, kind: str, outcome: Outcome) -> None:
    if run.store is not None:
        run.store.save_judgment(kind, outcome, run.calls, keep_text=run.keep_text)
