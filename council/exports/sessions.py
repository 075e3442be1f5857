"""Session exports, shaped in one place (``council export`` and ``council sessions list`` only write them).

Shapes (``SHAPES``), each line's model and JSON Schema in :mod:`council.exports.shapes`
(the flat rows' in :mod:`council.exports.rows`):

- ``sessions``: one row per session. In JSONL, the whole stored result (``SessionLine``: maps
  keyed by member, model or position become lists of records; a session without a result has
  the same keys); in CSV, the flat ``SESSION_COLUMNS`` a user filters on (seed, status, council,
  members, winner, Kendall's W, tokens, cost, duration...).
- ``scores``: one row per review score (``SCORE_COLUMNS``), the long table for bias and agreement
  analyses.
- ``answers``: one row per answer (``ANSWER_COLUMNS``), with its consensus rank and the scores
  it received.

Flat rows carry every column, in this order, whatever the data, so a redacted export has the
same columns and types as the full one: a redacted text cell holds ``REDACTED`` (a text column
empty throughout would load as numbers in pandas), and the redacted JSON document keeps every
key of the full one, with nulls. Integers stay integers; booleans are ``true``/``false`` in
JSONL and in CSV alike. A redacted export also cuts the session's texts out of every other
field (errors that echoed the request), and CSV text cells never start a formula
(:mod:`council.untrusted.csv_cells`).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any

from council.errors import InputError
from council.exports.rows import AnswerRow, ScoreRow, SessionRow
from council.untrusted.csv_cells import csv_cell

if TYPE_CHECKING:
    from council.bias.records import SessionBiasMetadata
    from council.exports.shapes import SessionLine

REDACTED = "[redacted]"
FORMATS = ("jsonl", "csv")

SESSION_COLUMNS: tuple[str, ...] = tuple(SessionRow.model_fields)
"""``members`` is space-separated; ``winner``: the answers sharing first place, tied ones as
``a = b`` (``winner_tied`` true); ``kendall_w`` and its p-value are empty where agreement is
undefined (fewer than two ballots that rank a common pair)."""

SCORE_COLUMNS: tuple[str, ...] = tuple(ScoreRow.model_fields)
"""``position``: 0-based place in the reviewer's shuffled display order; ``rank``: 1-based place
in the reviewer's own ranking; ``label``: the anonymous label the reviewer saw."""

ANSWER_COLUMNS: tuple[str, ...] = tuple(AnswerRow.model_fields)
"""``consensus_rank``/``borda`` are empty when the session reached no consensus; ``mean_score``
and ``scores_received`` count valid reviews only."""

SHAPES: dict[str, tuple[str, ...]] = {"sessions": SESSION_COLUMNS, "scores": SCORE_COLUMNS, "answers": ANSWER_COLUMNS}


def _members(row: dict[str, Any]) -> list[str]:
    return json.loads(row["members"]) if row.get("members") else []


def session_listing(row: dict[str, Any]) -> dict[str, Any]:
    """A stored session as ``sessions list --json`` shows it (keys as in every other output)."""
    return {
        "session_id": row["id"],
        "created_at": row["created_at"],
        "finished_at": row.get("finished_at"),
        "status": row["status"],
        "kind": row.get("kind"),
        "council": row.get("council"),
        "question": row.get("question"),
        "members": _members(row),
        "error": row.get("error"),
    }


def stored_result(row: dict[str, Any]) -> dict[str, Any] | None:
    """A stored session's result document (None when it has none: it ran no stage), with the
    row's ``error`` added when there is one (why a session that stopped early stopped). A
    non-finite number an older version stored reads as null."""
    if not row.get("result"):
        return None
    doc: dict[str, Any] = json.loads(row["result"], parse_constant=lambda _: None)
    if row.get("error"):
        doc["error"] = row["error"]
    return doc


def session_line(row: dict[str, Any], calls: list[dict[str, Any]], redact: bool) -> SessionLine:
    """One session as the JSONL export writes it (its model's JSON): its stored result with
    every text nulled when ``redact``, or, for a session without one (failed or still
    running), its metadata with the same keys, ``calls`` (its call log) giving the usage."""
    from council.accounting.usage import CallRecord, Usage
    from council.exports.shapes import SessionLine

    row_meta = {
        "kind": row.get("kind") or "council",
        "session_id": row["id"],
        "council": row.get("council"),
        "status": row["status"],
        "error": row.get("error"),
        "created_at": row["created_at"],
        "finished_at": row.get("finished_at"),
    }
    if not row.get("result"):
        empty = {"reviewers": [], "models": [], "answers": [], "reviews": [], "flags": [], "failures": [],
                 "partial_reasons": [], "scale": None, "self_review": None, "consensus": None, "synthesis": None,
                 "bias": None, "offline_default": False, "notice": None, "config_source": None}  # fmt: skip
        line = {
            **row_meta,
            **empty,
            "question": None if redact else row.get("question"),
            "seed": row.get("seed"),
            "members": _members(row),
            "usage": Usage.of(CallRecord.model_validate(c) for c in calls),
            "duration_ms": _duration_ms(row),
        }
        return SessionLine.model_validate(line)
    from council.session import scrub_transcripts
    from council.session.results import SessionResult

    # The stored result is validated once: its fields (``vars``: the instances themselves) go into
    # the line as they are, and pydantic takes a model instance of the line's own type without
    # validating it again; only the maps the line holds as lists are rebuilt. A field the line
    # does not have is left out by its validation.
    result = SessionResult.model_validate_json(row["result"])
    shown = scrub_transcripts(result) if redact else result
    reviews = [
        {
            **vars(review),
            "labels": [{"label": label, "member": member} for label, member in review.labels.items()],
            "scores": [{"member": member, "score": score} for member, score in review.scores.items()],
            "reasoning": [
                {"member": member, "text": None if redact else text} for member, text in review.reasoning.items()
            ],
        }
        for review in result.reviews
    ]
    line = {
        **vars(shown),
        **row_meta,
        "created_at": result.created_at or row["created_at"],
        "models": [{"id": member, "model": model} for member, model in result.models.items()],
        "reviews": reviews,
        "bias": _bias_line(shown.bias),
        "duration_ms": result.duration_ms if result.duration_ms else _duration_ms(row),
    }
    return SessionLine.model_validate(line)


def _bias_line(bias: SessionBiasMetadata | None) -> dict[str, Any] | None:
    if bias is None:
        return None
    position = bias.position_bias
    positions = [
        {"position": p, "mean": mean, "count": position.counts.get(p, 0)} for p, mean in sorted(position.means.items())
    ]
    return {
        **vars(bias),
        "calibration": [{"reviewer": reviewer, **vars(c)} for reviewer, c in bias.calibration.items()],
        "position_bias": {**vars(position), "positions": positions},
    }


def _text(value: str | None, redact: bool) -> str | None:
    return REDACTED if redact and value is not None else value


def _duration_ms(row: dict[str, Any]) -> float | None:
    try:
        start = datetime.fromisoformat(row["created_at"])
        end = datetime.fromisoformat(row["finished_at"])
    except (TypeError, ValueError, KeyError):
        return None
    return round((end - start).total_seconds() * 1000, 3)


def session_row(row: dict[str, Any], calls: list[dict[str, Any]], redact: bool) -> dict[str, Any]:
    """The flat per-session row; ``calls`` (the session's call log) supplies the totals of a
    session that has no stored result."""
    from council.accounting.usage import CallRecord, Usage

    doc = json.loads(row["result"]) if row.get("result") else {}
    consensus = doc.get("consensus") or {}
    ranking = consensus.get("ranking") or []
    usage = doc.get("usage") or Usage.of(CallRecord.model_validate(c) for c in calls).model_dump()
    prompt, completion = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    firsts = [e["member"] for e in ranking if e.get("rank") == 1]
    return {
        "session_id": row["id"],
        "created_at": row["created_at"],
        "status": row["status"],
        "kind": row.get("kind") or "council",
        "council": row.get("council"),
        "seed": row.get("seed"),
        "members": " ".join(doc.get("members") or _members(row)),
        "winner": " = ".join(firsts) if firsts else None,
        "winner_tied": len(firsts) > 1,
        "kendall_w": consensus.get("kendall_w"),
        "kendall_w_p_value": consensus.get("kendall_w_p_value"),
        "answers": sum(1 for a in doc.get("answers") or [] if a.get("status") in ("ok", "candidate")),
        "valid_reviews": sum(1 for r in doc.get("reviews") or [] if r.get("valid")),
        "calls": usage.get("calls"),
        "failed_calls": usage.get("failed_calls"),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "cost_usd": usage.get("cost_usd"),
        "duration_ms": doc.get("duration_ms") or _duration_ms(row),
        "error": row.get("error"),
        "question": _text(row.get("question") if not doc else doc.get("question"), redact),
        "answer": _text((doc.get("synthesis") or {}).get("text"), redact),
        **_agreement_means(doc),
    }


def _agreement_means(doc: dict[str, Any]) -> dict[str, float | None]:
    """A session's reviewers against its consensus, in two numbers: the mean τ_b, the top-1 rate."""
    found = [a for a in (doc.get("bias") or {}).get("reviewer_agreement") or () if a.get("other") is None]
    taus = [a["kendall_tau"] for a in found if a.get("kendall_tau") is not None]
    tops = [bool(a["top1"]) for a in found if a.get("top1") is not None]
    return {"reviewer_agreement_tau": sum(taus) / len(taus) if taus else None,
            "reviewer_agreement_top1": sum(tops) / len(tops) if tops else None}  # fmt: skip


def _common(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "session_id": doc["session_id"],
        "created_at": doc.get("created_at"),
        "council": doc.get("council"),
        "session_status": doc.get("status"),
        "seed": doc.get("seed"),
    }


def score_rows(doc: dict[str, Any], redact: bool) -> Iterator[dict[str, Any]]:
    """One row per score of every valid review in a result document."""
    scale = doc.get("scale") or [None, None]
    models = doc.get("models") or {}
    common = _common(doc)
    for review in doc.get("reviews") or []:
        if not review.get("valid"):
            continue
        label_of = {member: label for label, member in (review.get("labels") or {}).items()}
        order, ranking = review.get("display_order") or [], review.get("ranking") or []
        reasoning = review.get("reasoning") or {}
        for member, score in review.get("scores", {}).items():
            yield {
                **common,
                "reviewer": review["reviewer"],
                "reviewer_model": review.get("model"),
                "member": member,
                "model": models.get(member),
                "label": label_of.get(member),
                "position": order.index(member) if member in order else None,
                "score": score,
                "scale_min": scale[0],
                "scale_max": scale[1],
                "rank": ranking.index(member) + 1 if member in ranking else None,
                "self_review": member == review["reviewer"],
                "reasoning": _text(reasoning.get(member), redact),
            }


def answer_rows(doc: dict[str, Any], redact: bool) -> Iterator[dict[str, Any]]:
    """One row per answer in a result document, with its place in the consensus."""
    entries = {e["member"]: e for e in (doc.get("consensus") or {}).get("ranking") or []}
    received: dict[str, list[int]] = {}
    for review in doc.get("reviews") or []:
        if review.get("valid"):
            for member, score in review.get("scores", {}).items():
                received.setdefault(member, []).append(score)
    common = _common(doc)
    for answer in doc.get("answers") or []:
        member = answer["member"]
        entry, scores = entries.get(member), received.get(member, [])
        yield {
            **common,
            "member": member,
            "model": answer.get("model"),
            "status": answer.get("status"),
            "length_chars": answer.get("length_chars"),
            "latency_ms": answer.get("latency_ms"),
            "truncated": bool(answer.get("truncated")),
            "consensus_rank": entry["rank"] if entry else None,
            "borda": entry["borda"] if entry else None,
            "mean_score": sum(scores) / len(scores) if scores else None,
            "scores_received": len(scores),
            "error": answer.get("error"),
            "text": _text(answer.get("text"), redact),
        }


def export_sessions(
    store: Any,
    out: IO[str],
    *,
    fmt: str = "jsonl",
    shape: str = "sessions",
    redact: bool = False,
    since: str | None = None,
) -> int:
    """Write the sessions of ``store`` (created at or after ``since``) in ``shape`` and ``fmt``
    to ``out``; return the number of sessions exported."""
    if fmt not in FORMATS:
        raise InputError(f"unknown export format {fmt!r} (choose {' or '.join(FORMATS)})")
    if shape not in SHAPES:
        raise InputError(f"unknown export shape {shape!r} (choose {', '.join(SHAPES)})")
    from council.untrusted.redaction import known_secrets, private_scope

    # Every key council knows is redacted from every row (rows written by older versions may hold one).
    secrets = frozenset(known_secrets())
    columns = SHAPES[shape]
    writer = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
    if writer is not None:
        writer.writerow(columns)
    count = 0
    for row in store.iter_sessions(since=since):
        count += 1
        # Redacted: the session's own texts are also cut from every other field (an error
        # that echoed the request quotes them), as redaction does with transcripts off.
        with private_scope(keep_text=not redact, texts=_private_texts(row) if redact else ()):
            _write_session(store, row, writer, out, columns, shape=shape, redact=redact, secrets=secrets)
    return count


def _private_texts(row: dict[str, Any]) -> list[str | None]:
    """The question, answers, reasoning and synthesis of a stored session."""
    doc = json.loads(row["result"]) if row.get("result") else {}
    texts = [row.get("question"), doc.get("question"), (doc.get("synthesis") or {}).get("text")]
    texts += [a.get("text") for a in doc.get("answers") or []]
    texts += [t for r in doc.get("reviews") or [] for t in (r.get("reasoning") or {}).values()]
    return texts


def _write_session(
    store: Any,
    row: dict[str, Any],
    writer: Any,
    out: IO[str],
    columns: tuple[str, ...],
    *,
    shape: str,
    redact: bool,
    secrets: frozenset[str],
) -> None:
    from council.untrusted.redaction import redact_document, redacted_model_json

    if shape == "sessions" and writer is None:
        calls = [] if row.get("result") else store.session_calls(row["id"])
        # Serialized once, for the redaction check and the file; the export's secrets cut, as in every shape.
        out.write(redacted_model_json(session_line(row, calls, redact), secrets) + "\n")
        return
    if shape == "sessions":
        rows: Any = [session_row(row, [] if row.get("result") else store.session_calls(row["id"]), redact)]
    else:
        doc = json.loads(row["result"]) if row.get("result") else None
        if doc is None:
            return
        rows = score_rows(doc, redact) if shape == "scores" else answer_rows(doc, redact)
    for flat in rows:
        flat = redact_document(flat, secrets)
        if writer is not None:
            writer.writerow([csv_cell(flat[c]) for c in columns])
        else:
            out.write(json.dumps({c: flat[c] for c in columns}, ensure_ascii=False) + "\n")
