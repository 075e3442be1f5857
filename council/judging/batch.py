"""Batch judging: a JSONL file of items, judged concurrently, resumable after a crash.

One item per line, pairwise ``{"id", "prompt", "a", "b", "context"?}`` or grading
``{"id", "prompt", "response", "reference"?, "rubric"?, "context"?}``; an optional
``"metadata"`` value is copied to the item's result line. The whole file is validated
before anything runs.

An item may carry a person's verdict to measure the judge against: ``"label"`` ("A", "B"
or "TIE") on a pair, ``"gold_score"`` (on the rubric's scale) on a graded response; the
summary then reports the judge's agreement (:mod:`council.methods.judge_agreement`). A pair may
name the models that wrote its responses (``"model_a"``, ``"model_b"``): its verdict then
counts towards ``council leaderboard``.

Each finished item is written with its passes and calls in one transaction (see
``Store.save_judgment``), so after a crash ``resume`` judges exactly the items
that are missing (and those that failed), never one twice. The results file is
written from the database in file order, without timing fields or run ids, so a batch
that was interrupted and resumed writes the same file as one that ran straight through.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from council.accounting.budget import Budget, Tranches
from council.errors import InputError, UsageError
from council.judging.adaptive import AdaptiveSummary, AdaptiveTally
from council.judging.batch_items import BatchItem, BatchSettings, Mode, item_digest  # noqa: F401  (found here too)
from council.judging.calibrating import (
    AppliedCalibration,
    CalibrationMap,
    CalibrationTally,
    calibrated_rows,
    load_map,
    with_probability,
)
from council.judging.rubrics import load_rubric
from council.judging.running import keeps_text
from council.judging.schemas import Rubric
from council.methods.calibration import Calibration
from council.methods.judge_agreement import GoldAgreement, LabelAgreement, LabelTally, gold_agreement
from council.methods.panel import Panel
from council.providers.client import ModelClient, cap_spending
from council.storage import Store, using_store
from council.untrusted.inputs import check_json_text, check_visible, parse_json_line

MODE_KEYS: dict[str, set[str]] = {"pairwise": {"a", "b"}, "grade": {"response"}}
OPTIONAL_KEYS: dict[str, set[str]] = {
    "pairwise": {"context", "label", "model_a", "model_b"},
    "grade": {"reference", "rubric", "context", "gold_score"},
}
NON_TEXT_KEYS = frozenset({"label", "gold_score"})
LABELS = ("A", "B", "TIE")
COMMON_KEYS = {"id", "prompt", "metadata"}
# Differ from run to run while the judges' decisions do not; left out of the results file.
RUN_SPECIFIC_KEYS = frozenset({"elapsed_ms", "evaluation_time_ms", "run_id"})
DEFAULT_CONCURRENCY = 8


# --------------------------------------------------------------------- the file


def _item_mode(keys: set[str], wanted: Mode | None, where: str) -> Mode:
    has = {mode for mode, needed in MODE_KEYS.items() if needed & keys}
    if wanted is not None:
        missing = MODE_KEYS[wanted] - keys
        if missing:
            needed = " and ".join(f'"{k}"' for k in sorted(missing))
            raise InputError(f"{where}: a {wanted} item needs {needed}")
        return wanted
    if len(has) != 1:
        raise InputError(f'{where}: say what to judge: "a" and "b" (pairwise) or "response" (grade), not both')
    mode: Mode = has.pop()  # type: ignore[assignment]
    missing = MODE_KEYS[mode] - keys
    if missing:
        raise InputError(f"{where}: a pairwise item needs both \"a\" and \"b\"")
    return mode


def _parse_line(raw: str, where: str, line: int, wanted: Mode | None) -> BatchItem:
    data = parse_json_line(raw, where)
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(data).__name__}")
    mode = _item_mode(set(data), wanted, where)
    unknown = set(data) - COMMON_KEYS - MODE_KEYS[mode] - OPTIONAL_KEYS[mode]
    if unknown:
        raise InputError(f"{where}: unknown key(s) for a {mode} item: {', '.join(sorted(unknown))}")
    item_id = data.get("id")
    if isinstance(item_id, bool) or not isinstance(item_id, str | int) or str(item_id).strip() == "":
        raise InputError(f'{where}: "id" must be a non-empty string or an integer')
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise InputError(f'{where}: "prompt" must be a non-empty string')
    check_visible(prompt, f'{where}: "prompt"')
    for key in (MODE_KEYS[mode] | OPTIONAL_KEYS[mode]) - NON_TEXT_KEYS:
        value = data.get(key)
        required = key in MODE_KEYS[mode]
        if not isinstance(value, str) and (required or value is not None):
            raise InputError(f'{where}: "{key}" must be a string')
    if isinstance(data.get("reference"), str) and not data["reference"].strip():
        raise InputError(f'{where}: "reference" is blank: give a reference, or leave the key out')
    for key in ("model_a", "model_b"):
        if key in data and not data[key].strip():
            raise InputError(f'{where}: "{key}" must be a non-empty model name')
    if "label" in data and data["label"] not in LABELS:
        raise InputError(f'{where}: "label" must be "A", "B" or "TIE", got {json.dumps(data["label"])[:40]}')
    gold = data.get("gold_score")
    if "gold_score" in data and (
        isinstance(gold, bool) or not isinstance(gold, int | float) or abs(gold) > 1e9 or not math.isfinite(gold)
    ):
        raise InputError(f'{where}: "gold_score" must be a number, got {json.dumps(gold)[:40]}')
    for key, value in data.items():
        check_json_text(value, f'{where}: "{key}"')
    fields = {k: v for k, v in data.items() if k != "id"}
    return BatchItem(id=str(item_id), mode=mode, line=line, **fields)


def parse_batch(text: str, source: str, mode: Mode | None = None) -> list[BatchItem]:
    """Every item of a JSONL batch file, or ``InputError`` naming the first bad line."""
    items: list[BatchItem] = []
    first_line: dict[str, int] = {}
    for line, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        item = _parse_line(raw, f"{source}:{line}", line, mode)
        if item.id in first_line:
            raise InputError(f"{source}:{line}: duplicate id {item.id!r} (first on line {first_line[item.id]})")
        first_line[item.id] = line
        items.append(item)
    if not items:
        raise InputError(f"{source}: no items (expected one JSON object per line)")
    return items


def load_rubrics(items: Sequence[BatchItem], default: str, source: str) -> dict[str, Rubric]:
    """Every rubric the grading items name (loaded once), so a bad one fails before any call;
    and every gold score checked against its rubric's scale."""
    rubrics: dict[str, Rubric] = {}
    for item in items:
        name = item.rubric or default
        if item.mode != "grade":
            continue
        if name not in rubrics:
            try:
                rubrics[name] = load_rubric(name)
            except UsageError as exc:
                raise type(exc)(f"{source}:{item.line}: {exc}") from None
        lo, hi = rubrics[name].scale
        if item.gold_score is not None and not lo <= item.gold_score <= hi:
            raise InputError(
                f'{source}:{item.line}: "gold_score" {item.gold_score:g} is outside the scale {lo}-{hi} '
                f"of rubric {name!r}"
            )
    return rubrics


def default_batch_id(content: str, settings: BatchSettings) -> str:
    """Same file and settings, same id: that is what makes ``--resume`` find the batch."""
    digest = hashlib.sha256(content.encode("utf-8"))
    digest.update(settings.model_dump_json().encode("utf-8"))
    return digest.hexdigest()[:16]


def content_digest(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


class BatchPlan(BaseModel):
    """What a run of a batch will do, told before it starts (``on_start``)."""

    batch_id: str
    items: int
    to_judge: int
    #: Finished before this run and unchanged: their results are kept.
    unchanged: int
    #: Finished before, but their content changed in the file since: judged again.
    changed: int = 0
    #: Recorded before, but no longer in the file: left out of this batch's results.
    removed: int = 0


# ------------------------------------------------------------------ the summary


class BatchSummary(BaseModel):
    batch_id: str
    source: str
    items: int
    finished: int
    failed: int
    #: Items of the file not recorded yet (an interrupted run).
    missing: int
    #: Items already finished before this run (``--resume``), not judged again.
    skipped: int
    judged_this_run: int
    #: ``--resume`` of an edited file: finished items whose content changed (judged again),
    #: and recorded items no longer in the file.
    changed: int = 0
    removed: int = 0
    pairwise: int = 0
    a_wins: int = 0
    b_wins: int = 0
    ties: int = 0
    a_win_rate: float | None = None
    b_win_rate: float | None = None
    tie_rate: float | None = None
    swap_pairs: int = 0
    inconsistent_pairs: int = 0
    #: Share of swap pairs whose two passes disagreed (position bias at work).
    inconsistency_rate: float | None = None
    graded: int = 0
    mean_normalized_score: float | None = None
    safety_flagged: int = 0
    flagged_for_review: int = 0
    calls: int = 0
    calls_saved: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    wall_time_s: float = 0.0
    output: str | None = None
    errors: dict[str, str] = Field(default_factory=dict)
    #: The batch's spend cap, what it counted as spent (all runs, every process), and whether
    #: the cap stopped this run.
    max_cost_usd: float | None = None
    spent_usd: float | None = None
    budget_reached: bool = False
    #: Calls of the recorded items answered from the call cache (all runs), and what they saved.
    cached_calls: int = 0
    saved_usd: float | None = 0.0
    #: With --provider-batch: the rounds this run sent, and every provider batch of the batch.
    provider_rounds: int = 0
    provider_batches: list[dict[str, Any]] = Field(default_factory=list)
    #: The judge against the items' labels (pairs) and gold scores (grades), when they carry them.
    labels: LabelAgreement | None = None
    gold_scores: GoldAgreement | None = None
    #: Two or more judges: the panel analysis; the key is left out otherwise.
    panel: Panel | None = None
    #: ``dawid-skene``: how the pairs' verdicts were combined (left out for the default, the vote).
    combine: str | None = None
    #: With labelled pairs: their verdicts' probabilities against the labels (left out otherwise);
    #: with ``--calibration NAME``: the map applied, and the calibrated probabilities' calibration.
    calibration: Calibration | None = None
    calibrated: AppliedCalibration | None = None
    #: ``--combine dawid-skene --adaptive``: what the adaptive jury saved (left out otherwise).
    adaptive: AdaptiveSummary | None = None

    @model_serializer(mode="wrap")
    def _without_absent_blocks(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A block added later is left out where it does not apply, so that a one-judge batch's
        # summary reads as it always has.
        data = handler(self)
        for key in OPTIONAL_BLOCKS:
            if data.get(key) is None:
                data.pop(key, None)
        return data


#: Summary keys present only where they apply: the panel with two or more judges (whose keys that
#: measure against labels the panel itself leaves out without labels; SPEC.md, "Juries"), the
#: calibration with labelled pairs, and the calibrated one with ``--calibration``.
OPTIONAL_BLOCKS = ("panel", "combine", "calibration", "calibrated", "adaptive")


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def judged_score(report: Mapping[str, Any]) -> float:
    """A grade on its rubric's scale: the weighted mean criterion score (what a gold score means)."""
    lo, hi = report["scale"]
    return lo + report["normalized"] * (hi - lo)


# Long by design: one pass over every recorded row with its counters in local variables, the end
# of every batch (benchmarks/bench_batch_summary.py); what needs more than a counter (labels, the
# panel, the probabilities) is a tally object of its own.
def summarize(
    rows: Iterable[Mapping[str, Any]],
    *,
    batch_id: str,
    source: str,
    items: int,
    skipped: int,
    judged: int,
    judges: Sequence[str] = (),
    calibration: CalibrationMap | None = None,
    adaptive: bool = False,
) -> BatchSummary:
    """The batch's numbers from its recorded rows (``Store.batch_rows``; a labelled pair's row
    carries its passes), in one pass: each row is let go once counted. With two or more
    ``judges`` (their ids, in the order reported) the summary has the panel analysis, for which
    a few values of each finished pair are kept; a labelled pair keeps its verdict's probability
    (raw and, with a ``calibration`` map, calibrated) and whether it was right."""
    recorded = ok = pairs = inconsistent = safety_flagged = flagged = 0
    calls = calls_saved = prompt_tokens = completion_tokens = 0
    winners = {"A": 0, "B": 0, "TIE": 0}
    normalized: list[float] = []
    cost: float | None = 0.0
    errors: dict[str, str] = {}
    any_label = any_gold = False
    labels = LabelTally()  # counts: nothing held per item
    gold: list[tuple[float, float]] = []  # two numbers per gold-scored grade (Spearman's ρ ranks them all)
    probabilities = CalibrationTally(calibration)
    jury = None
    if len(judges) >= 2:
        from council.judging.jury import PanelTally

        jury = PanelTally(judges)
    savings = AdaptiveTally() if adaptive else None
    for r in rows:
        recorded += 1
        calls += r["calls"]
        calls_saved += r["calls_saved"]
        prompt_tokens += r["prompt_tokens"]
        completion_tokens += r["completion_tokens"]
        cost = None if cost is None or r["cost_usd"] is None else cost + r["cost_usd"]
        any_label = any_label or bool(r.get("label"))
        any_gold = any_gold or r.get("gold_score") is not None
        if r["status"] != "ok":
            errors[r["item_id"]] = r["error"] or "failed"
            continue
        ok += 1
        flagged += 1 if r["flagged"] else 0
        if r["mode"] == "pairwise":
            winners[r["winner"]] = winners.get(r["winner"], 0) + 1
            pairs += r["result"]["swap_pairs"]
            inconsistent += r["result"]["inconsistent_pairs"]
            if r.get("label"):
                labels.add(r["label"], r["winner"], r.get("passes", ()))
                probabilities.add(r)
            if jury is not None:
                jury.add(r)
            if savings is not None:
                savings.add(r["result"])
        elif r["mode"] == "grade":
            report = r["result"]["report"]
            normalized.append(report["normalized"])
            safety_flagged += 1 if report["safety_flag"] else 0
            if r.get("gold_score") is not None:
                gold.append((r["gold_score"], judged_score(report)))
    pairwise = sum(winners.values())
    return BatchSummary(
        batch_id=batch_id,
        source=source,
        items=items,
        finished=ok,
        failed=recorded - ok,
        missing=items - recorded,
        skipped=skipped,
        judged_this_run=judged,
        pairwise=pairwise,
        a_wins=winners["A"],
        b_wins=winners["B"],
        ties=winners["TIE"],
        a_win_rate=_rate(winners["A"], pairwise),
        b_win_rate=_rate(winners["B"], pairwise),
        tie_rate=_rate(winners["TIE"], pairwise),
        swap_pairs=pairs,
        inconsistent_pairs=inconsistent,
        inconsistency_rate=_rate(inconsistent, pairs),
        graded=len(normalized),
        mean_normalized_score=sum(normalized) / len(normalized) if normalized else None,
        safety_flagged=safety_flagged,
        flagged_for_review=flagged,
        calls=calls,
        calls_saved=calls_saved,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=None if cost is None else round(cost, 8),
        errors=errors,
        labels=labels.result() if any_label else None,
        gold_scores=gold_agreement(gold) if any_gold else None,
        panel=None if jury is None else jury.result(),
        calibration=probabilities.result(),
        calibrated=probabilities.applied_result(),
        adaptive=None if savings is None else savings.result(),
    )


def summarize_batch(
    store: Store,
    batch_id: str,
    *,
    source: str,
    items: int,
    skipped: int,
    judged: int,
    output: Path | None = None,
    on_read: Callable[[int], None] | None = None,
    judges: Sequence[str] = (),
    combine: str = "vote",
    calibration: CalibrationMap | None = None,
) -> BatchSummary:
    """The batch's summary from the rows recorded in ``store``, and with ``output`` its results
    file, written whole or not at all from the same pass over the rows. The rows are read a page
    at a time and counted as they come: what is held grows only by two numbers per gold-scored
    grade (Spearman's ρ ranks them together) and, for a jury, by its verdicts and passes per pair
    (the panel) and with ``dawid-skene`` by the batch's passes (the fit). ``on_read(n)``: ``n``
    rows read so far, told every ``SUMMARY_EVERY`` rows and at the end. ``judges``: as in
    :func:`summarize`; ``combine``: as in :func:`judged_rows`; with a ``calibration`` map each
    pair's line gains its ``calibrated_probability``."""
    rows: Iterable[Mapping[str, Any]] = judged_rows(store, batch_id, combine)
    if calibration is not None:
        rows = calibrated_rows(rows, calibration)  # type: ignore[arg-type]
    if on_read is not None:
        rows = _telling(rows, on_read)
    common = {"batch_id": batch_id, "source": source, "items": items, "skipped": skipped, "judged": judged,
              "judges": judges, "calibration": calibration, "adaptive": combine == "adaptive"}  # fmt: skip
    if output is None:
        summary = summarize(rows, **common)
    else:
        from council._util.outputs import open_output

        with open_output(str(output), make_parents=True) as fh:
            summary = summarize(_written(rows, fh), **common)
        summary.output = str(output)
    summary.combine = None if combine == "vote" else "dawid-skene" if combine == "adaptive" else combine
    return summary


def judged_rows(store: Store, batch_id: str, combine: str = "vote") -> Iterator[dict[str, Any]]:
    """The batch's recorded rows (``Store.batch_rows``), each pair's verdict combined by
    ``combine``, with the probability of that verdict (``probability``): ``vote`` is the verdict
    recorded with the item, its probability the share of its passes naming it; ``dawid-skene`` reads every pass
    of the batch first and fits the combination over all of them (council.judging.jury); ``adaptive``: the
    adaptive jury's verdict recorded with the item, its probability the posterior (council.judging.adaptive)."""
    rows = store.batch_rows(batch_id)
    if combine in ("vote", "adaptive"):
        return with_probability(rows)
    from council.judging.jury import combined_rows, dawid_skene_verdicts

    return combined_rows(rows, dawid_skene_verdicts(store.batch_passes(batch_id)))


def stored_judging(store: Store, batch_id: str) -> tuple[list[str], str]:
    """The ids of the judges a stored batch is judged by, in their order, and how their
    verdicts are combined (a batch recorded before its settings were kept with it: no judges
    named, the vote)."""
    spec = store.batch_spec(batch_id)
    if spec is None:
        return [], "vote"
    return [j["id"] for j in spec["judges"]], BatchSettings.model_validate(spec["settings"]).combination


def stored_summary(
    store: Store, batch_id: str, *, output: Path | None = None, calibration: str | None = None
) -> BatchSummary:
    """The summary of a stored batch as it is now (nothing judged by this call), and with
    ``output`` its results file (``council batch results --summary``); ``calibration``: the name
    of a stored map to apply."""
    status = store.batch_status(batch_id) or {}
    recorded = store.batch_item_status(batch_id)
    judges, combine = stored_judging(store, batch_id)
    applied = None if calibration is None else load_map(store, calibration, combine)
    return summarize_batch(store, batch_id, source=batch_id, items=max(status.get("items", 0), len(recorded)),
                           skipped=0, judged=0, output=output, judges=judges, combine=combine,
                           calibration=applied)  # fmt: skip


#: How often a batch's summary tells how far it has read (a progress bar's update each time).
SUMMARY_EVERY = 500


def _telling(rows: Iterable[Mapping[str, Any]], on_read: Callable[[int], None]) -> Iterator[Mapping[str, Any]]:
    n = 0
    for n, row in enumerate(rows, 1):
        yield row
        if n % SUMMARY_EVERY == 0:
            on_read(n)
    on_read(n)


def _written(rows: Iterable[Mapping[str, Any]], fh: IO[str]) -> Iterator[Mapping[str, Any]]:
    for row in rows:
        fh.write(result_line(row) + "\n")
        yield row


def drop_run_specifics(value: Any) -> None:
    """Remove timing fields and run ids (``RUN_SPECIFIC_KEYS``) from ``value``, in place: a
    stored result is read once, and copying its values cost far more."""
    kind = type(value)
    if kind is dict:
        if not RUN_SPECIFIC_KEYS.isdisjoint(value):
            for key in RUN_SPECIFIC_KEYS.intersection(value):
                del value[key]
        children = value.values()
    elif kind is list:
        children = value
    else:
        return
    for child in children:
        if type(child) is dict or type(child) is list:
            drop_run_specifics(child)


def result_line(row: Mapping[str, Any]) -> str:
    """An item's line of the results file. Its ``result`` (parsed from the store for this
    line) loses its run-specific keys in place."""
    drop_run_specifics(row["result"])
    record = {
        "id": row["item_id"],
        "mode": row["mode"],
        "status": row["status"],
        "error": row["error"],
        "result": row["result"],
    }
    if row.get("metadata") is not None:
        record["metadata"] = json.loads(row["metadata"])
    for key in ("label", "gold_score"):  # beside the verdict, so a reader can compare them
        if row.get(key) is not None:
            record[key] = row[key]
    return json.dumps(record, ensure_ascii=False)


# ------------------------------------------------------------------------ running


ProgressSink = Callable[[BatchItem, bool], None]


async def run_batch(
    items: Sequence[BatchItem],
    *,
    settings: BatchSettings,
    judges: Sequence[ModelClient],
    batch_id: str,
    source: str,
    content_sha256: str,
    rubrics: Mapping[str, Rubric] | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    lease_seconds: float | None = None,
    resume: bool = False,
    output: Path | None = None,
    store: Store | bool = True,
    keep_text: bool | None = None,
    hash_prompts: bool | None = None,
    on_start: Callable[[BatchPlan], None] | None = None,
    on_item: ProgressSink | None = None,
    max_cost: float | None = None,
    provider_batch: bool = False,
    source_path: str | None = None,
    on_provider_progress: Callable[[str, str, int, int, int], None] | None = None,
    on_summary: Callable[[int], None] | None = None,
    named: bool = False,
    replace: bool = False,
    calibration: str | None = None,
) -> BatchSummary:
    """Judge every item not finished yet (at most ``concurrency`` at a time), then summarise
    from the database and write ``output`` (JSONL, one result per item, in file order).

    ``keep_text`` as in :func:`council.judging.engine.compare` (the results file is written
    from the database, so it then holds no judge reasoning either); ``hash_prompts`` as in
    :class:`council.judging.worker.Worker`.
    ``lease_seconds``: how long an item this process claimed stays held if it stops renewing
    the claim (killed): a ``resume`` waits that long for such items (default: the worker's).
    ``on_start(plan)`` and ``on_item(item, ok)`` report progress, and ``on_summary(n)`` the
    summary's and the results file's once the items are judged (``n`` rows read; see
    :func:`summarize_batch`). Without ``resume`` a batch id that already has recorded items is
    refused. With ``resume``, items are matched with
    the recorded ones by id and content: changed items are judged again, unchanged ones keep
    their results. ``source_path`` (the file's absolute path) is recorded as the batch's file:
    another file under its id is refused unless ``replace`` (then its changed items are judged
    again and it becomes the batch's file). With ``resume`` and no batch recorded under a
    ``batch_id`` the caller did not name (an id derived from the file, which changed), the
    latest batch of ``source_path`` with the same settings is the one continued.

    ``max_cost``: the batch's spend cap, kept with it in the store (replacing an earlier one);
    a batch with a cap keeps it when resumed without one. Every call of the batch, by any
    process, reserves against it; once it is reached no new item starts, and the summary
    says so (``budget_reached``): the batch resumes later with a new cap.

    ``provider_batch``: the judges' calls go through their providers' batch APIs, in rounds
    (``council.providers.provider_batch``), every item in flight at once; a rerun collects a
    round a killed process had submitted. ``on_provider_progress(id, status, done, failed,
    total)`` hears each poll of a provider batch.

    ``calibration``: the name of a stored calibration map (``council calibrate``), found before
    any item is judged; the summary and the result lines then report calibrated probabilities.
    """

    if concurrency < 1:
        raise UsageError(f"concurrency must be at least 1, got {concurrency}")
    rubrics = rubrics if rubrics is not None else load_rubrics(items, settings.rubric, source)
    keep_text = keeps_text(keep_text)
    with using_store(store) as opened:
        assert opened is not None, "a batch is recorded in a store"
        if resume and not named and source_path is not None and not opened.batch_exists(batch_id):
            batch_id = opened.find_batch(source_path, settings.model_dump(mode="json")) or batch_id
        applied = None if calibration is None else load_map(opened, calibration, settings.combination)
        return await _run_batch(
            items, settings, judges, batch_id, source, content_sha256, rubrics, concurrency, resume, output,
            opened, keep_text, on_start, on_item, source_path or source, max_cost, provider_batch,
            on_provider_progress, hash_prompts, lease_seconds, on_summary, replace, applied,
        )  # fmt: skip


# Long by its signature: one parameter per option of run_batch; the body is three steps (queue,
# work, summarize).
async def _run_batch(
    items: Sequence[BatchItem],
    settings: BatchSettings,
    judges: Sequence[ModelClient],
    batch_id: str,
    source: str,
    content_sha256: str,
    rubrics: Mapping[str, Rubric],
    concurrency: int,
    resume: bool,
    output: Path | None,
    store: Store,
    keep_text: bool,
    on_start: Callable[[BatchPlan], None] | None,
    on_item: ProgressSink | None,
    recorded_source: str,
    max_cost: float | None,
    provider_batch: bool,
    on_provider_progress: Callable[[str, str, int, int, int], None] | None,
    hash_prompts: bool | None,
    lease_seconds: float | None,
    on_summary: Callable[[int], None] | None,
    replace: bool,
    applied: CalibrationMap | None,
) -> BatchSummary:
    # The batch goes through the queue (council.judging.worker) like a distributed one: this
    # process is one worker of it, and any others started on it (``council worker``, or the
    # same command again) share its items.
    from council.judging import worker

    recorded = store.batch_item_status(batch_id)
    if recorded and not resume:
        raise UsageError(
            f"batch {batch_id} already has {len(recorded)} recorded item(s); "
            "add --resume to continue it, or give another --batch-id"
        )
    counts = worker.enqueue(store, items, batch_id=batch_id, settings=settings, judges=judges, rubrics=rubrics,
                            source=recorded_source, content_sha256=content_sha256, replace=replace)  # fmt: skip
    status = store.batch_status(batch_id) or {}
    to_judge = status.get("queued", 0) + status.get("running", 0)
    skipped = len(items) - to_judge
    changed, removed = counts["changed"], counts["removed"]
    budget = batch_budget(store, batch_id, max_cost, judges)
    rounds = None
    if provider_batch:
        from council.providers.provider_batch import BatchRounds, send_in_batches
        from council.storage import StoreBatchJournal

        rounds = BatchRounds(StoreBatchJournal(store, batch_id), on_progress=on_provider_progress)
        send_in_batches(judges, rounds)
        concurrency = max(concurrency, to_judge)  # every item's calls join the same rounds
    if on_start is not None:
        on_start(
            BatchPlan(batch_id=batch_id, items=len(items), to_judge=to_judge, unchanged=skipped, changed=changed,
                      removed=removed)  # fmt: skip
        )

    t0 = time.perf_counter()
    report = await worker.run_worker(
        store, judges_for=lambda _id, _spec: list(judges), batch_id=batch_id, concurrency=concurrency,
        keep_text=keep_text, on_item=on_item, keep_judges=judges, hash_prompts=hash_prompts,
        stop=None if budget is None else lambda: budget.reached is not None,
        lease_seconds=worker.DEFAULT_LEASE_SECONDS if lease_seconds is None else lease_seconds,
    )  # fmt: skip
    wall = time.perf_counter() - t0

    try:
        summary = summarize_batch(store, batch_id, source=source, items=len(items), skipped=skipped,
                                  judged=report.judged, output=output, on_read=on_summary,
                                  judges=[j.id for j in judges], combine=settings.combination,
                                  calibration=applied)  # fmt: skip
    except UsageError as exc:  # the results file: what was judged is stored
        raise UsageError(f"{exc}; every judged item is stored: rerun with --resume to write them") from None
    summary.wall_time_s = wall
    summary.changed, summary.removed = changed, removed
    summary.cached_calls, summary.saved_usd = store.batch_cache_savings(batch_id)
    if rounds is not None:
        summary.provider_rounds = rounds.rounds
        summary.provider_batches = store.provider_batches(batch_id)
    if budget is not None:
        summary.spent_usd, summary.max_cost_usd = budget.totals()
        summary.budget_reached = budget.reached is not None
    return summary


def store_batch_cap(
    store: Store, batch_id: str, max_cost: float | None, default: float | None = None
) -> float | None:
    """Keep ``max_cost`` as the batch's cap in the store (replacing an earlier one; None keeps
    it, or keeps ``default`` for a batch without one); the cap in force, None when the batch has none."""
    from council.storage import batch_key

    key = batch_key(batch_id)
    if max_cost is None and default is not None and store.open_budget(key, cap_usd=None) is None:
        max_cost = default
    spent = store.batch_spent(batch_id) if max_cost is not None else 0.0
    return store.open_budget(key, cap_usd=max_cost, spent_usd=spent)


def batch_budget(
    store: Store, batch_id: str, max_cost: float | None, judges: Sequence[ModelClient], default: float | None = None
) -> Budget | None:
    """The batch's budget in the store (``max_cost`` replaces its cap; ``default`` is the cap of a
    batch without one: the worker's config's), with the judges under it."""
    from council.storage import StoreLedger, batch_key

    key = batch_key(batch_id)
    if store_batch_cap(store, batch_id, max_cost, default) is None:
        return None
    # A worker refused while its own calls hold the room waits for them, rather than stopping.
    budget = Budget(Tranches(StoreLedger(store, key)), waits=True)
    cap_spending(judges, budget)
    return budget
