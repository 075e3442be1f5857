"""A request too large for the council's token limits (``[models.X] tpm``): one clear error the
caller can act on (``PromptTooLarge``, exit 2), and the session kept as failed with the reason."""

from __future__ import annotations

import pytest

from council.api import Council
from council.errors import PromptTooLarge, QuorumError
from council.storage import SQLiteStore


def config(tpm: dict[str, int | None], quorum: int = 2) -> dict:
    models = {m: {"model": f"fake/{m}", **({"tpm": t, "max_tokens": 50} if t else {})} for m, t in tpm.items()}
    council = {"members": list(tpm), "chairman": "fake/chair", "quorum": quorum}
    return {"councils": {"default": council}, "models": models}


@pytest.fixture
def store(tmp_path):
    opened = SQLiteStore.open(tmp_path / "c.db")
    yield opened
    opened.close()


def test_a_question_too_large_for_every_member_is_refused_unsent_and_stored_failed(store):
    council = Council.from_config(config({"a": 2000, "b": 2000, "c": 3000}), store=store)
    with pytest.raises(PromptTooLarge) as refused:
        council.run_sync("Why? " + "x" * 3000)
    message = str(refused.value)
    assert refused.value.exit_code == 2 and "\n" not in message
    assert "too large" in message and "[models.a] tpm = 2000" in message and "[models.c] tpm = 3000" in message
    assert "a: a call of up to" in message and "a: a: " not in message  # member and model named once
    [listed] = store.list_sessions()
    session = store.get_session(listed["id"])
    assert session["status"] == "failed" and "[models.b] tpm = 2000" in session["error"]
    assert store.session_calls(listed["id"]) == []  # nothing went out


def test_a_question_that_fits_is_answered(store):
    # The reviews' prompts (every answer) need more room than the question: 20,000 holds them.
    result = Council.from_config(config({"a": 20_000, "b": 20_000, "c": 20_000}), store=store).run_sync("Why?")
    assert result.status == "complete"


def test_too_few_members_left_by_the_size_is_still_the_requests_fault(store):
    # c has no tpm and answers; a and b cannot take the question: quorum 2 is out of reach.
    with pytest.raises(PromptTooLarge):
        Council.from_config(config({"a": 2000, "b": 2000, "c": None}), store=store).run_sync("x" * 3000)


def test_members_failing_for_other_reasons_too_is_no_quorum_not_a_request_error(store):
    cfg = config({"a": 2000, "b": None, "c": None})
    cfg["models"]["b"]["model"], cfg["models"]["c"]["model"] = "fake/b+fail", "fake/c+fail"
    with pytest.raises(QuorumError) as failed:
        Council.from_config(cfg, store=store).run_sync("x" * 3000)
    assert not isinstance(failed.value, PromptTooLarge) and failed.value.exit_code == 1
