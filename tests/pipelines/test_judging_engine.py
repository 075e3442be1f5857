"""The judging engine against judge models: swap, strategies, votes, re-requests, averaging, grading."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest
from click.testing import CliRunner
from fake_judges import fake_client, grade_reply, pairwise_reply

from council.cli.main import cli
from council.errors import InputError, UsageError
from council.judging import DEPTH_CRITERIA, flip
from council.judging.engine import compare, grade, resolve_criteria
from council.judging.rubrics import load_rubric
from council.providers.base import ChatRequest
from council.providers.client import ModelClient
from council.storage import SQLiteStore
from council.testing.replies import answer_slots

PROMPT = "What is the capital of France?"
GOOD = "Paris is the capital of France; it has been since the 10th century."
WEAK = "I think it might be Lyon."


def scripted_judge(model: str, verdict_for_vote: Callable[[int], str], criteria: list[str]) -> ModelClient:
    """A position-fair judge whose verdict (in the original labels) for vote ``v`` is scripted."""

    def reply(request: ChatRequest) -> str:
        original = verdict_for_vote(request.seed or 0)
        a_first = answer_slots(request.messages)["A"] == GOOD  # pass 1 shows the original A first
        seen = original if a_first else flip(original)
        high, low = [4] * len(criteria), [2] * len(criteria)
        a, b = {"A": (high, low), "B": (low, high), "TIE": (high, high)}[seen]
        return pairwise_reply(criteria, a, b, seen)

    return fake_client(model, script=[reply] * 100)


# --------------------------------------------------------------------- strategies


@pytest.mark.parametrize("strategy", ["conservative", "consistency", "average"])
async def test_first_position_judge_gives_an_inconsistent_tie(strategy):
    client = fake_client("fake/x+first")
    outcome = await compare(PROMPT, GOOD, WEAK, judges=[client], strategy=strategy, store=None)
    assert outcome.success and outcome.winner == "TIE"
    assert outcome.unstable and outcome.flagged_for_review
    assert outcome.inconsistent_pairs == outcome.swap_pairs == 1
    consistency = outcome.judges[0].result.position_consistency
    assert consistency.first_pass_winner == "A" and consistency.second_pass_winner == "B"
    assert not consistency.consistent
    if strategy != "average":
        assert outcome.confidence == 0.5  # seed 001: inconsistent -> TIE at 0.5


@pytest.mark.parametrize("votes", [1, 3])
async def test_swap_takes_exactly_twice_the_calls(votes):
    swapped = fake_client("fake/x")
    swapped_api = swapped.api
    single = fake_client("fake/x")
    single_api = single.api
    with_swap = await compare(PROMPT, GOOD, WEAK, judges=[swapped], votes=votes, store=None)
    without = await compare(PROMPT, GOOD, WEAK, judges=[single], votes=votes, swap=False, store=None)
    assert len(single_api.history) == without.calls == votes
    assert len(swapped_api.history) == with_swap.calls == 2 * without.calls
    assert without.swap_pairs == 0 and without.judges[0].result.position_consistency is None
    # pass 2 shows B first
    assert answer_slots(swapped_api.history[1].messages)["A"] in (GOOD, WEAK)
    assert {answer_slots(r.messages)["A"] for r in swapped_api.history} == {GOOD, WEAK}


@pytest.mark.parametrize(("votes", "swap", "tasks"), [(1, True, 2), (1, False, 0), (3, True, 9), (3, False, 3)])
async def test_a_single_judge_or_vote_gets_no_task_of_its_own(votes, swap, tasks):
    # Tasks only where work runs side by side: a vote's two passes, several votes (a task each).
    created = []
    loop = asyncio.get_running_loop()

    def factory(loop, coro, **kwargs):
        created.append(coro.__qualname__)
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(factory)
    try:
        outcome = await compare(PROMPT, GOOD, WEAK, judges=[fake_client("fake/x")], votes=votes, swap=swap, store=None)
    finally:
        loop.set_task_factory(None)
    assert outcome.success and outcome.calls == votes * (2 if swap else 1)
    assert len(created) == tasks, created


async def test_seed_000_numbers_through_the_engine(council_home):
    names = [c.name for c in DEPTH_CRITERIA]
    model_report, reference_report = "MODEL REPORT text", "REFERENCE REPORT text"

    def seed_judge(request: ChatRequest) -> str:
        if answer_slots(request.messages)["A"] == model_report:  # comparison 1: Model as A, Reference as B
            return pairwise_reply(names, [4, 3, 4, 4, 3], [5, 5, 5, 5, 5], "B")
        return pairwise_reply(names, [5, 4, 5, 5, 4], [3, 3, 3, 4, 3], "A")  # comparison 2, swapped

    client = fake_client("fake/gpt", script=[seed_judge, seed_judge], strict=True)
    store = SQLiteStore.open()
    outcome = await compare(
        "Your research query",
        model_report,
        reference_report,
        judges=[client],
        criteria="depth",
        strategy="average",
        store=store,
    )
    assert outcome.scores["A"].total == 17.0  # Model: avg(18, 16)
    assert outcome.scores["B"].total == 24.0  # Reference: avg(25, 23)
    assert outcome.winner == "B" and outcome.judges[0].result.max_total == 25
    assert outcome.criteria == names
    passes = store.judgment_passes(outcome.run_id)
    assert [(p["pass"], p["shown_first"], p["a_total"], p["b_total"]) for p in passes] == [
        (1, "A", 18, 25),
        (2, "B", 16, 23),  # stored in the original labels
    ]
    assert [p["winner_as_seen"] for p in passes] == ["B", "A"] and {p["winner"] for p in passes} == {"B"}
    assert passes[1]["output"]["comparison"]["Granularity"]["a_score"] == 5  # raw output, as the judge saw it


@pytest.mark.parametrize("pattern", ["BBB", "BAB", "ABB", "AAB", "TAB", "TTA", "ABT"])
async def test_adaptive_votes_save_calls_and_keep_the_winner(pattern):
    names = [c.name for c in resolve_criteria(None)]
    full_client = scripted_judge("fake/full", lambda v: pattern[v].replace("T", "TIE"), names)
    adaptive_client = scripted_judge("fake/adaptive", lambda v: pattern[v].replace("T", "TIE"), names)
    full = await compare(PROMPT, GOOD, WEAK, judges=[full_client], votes=3, store=None)
    fast = await compare(PROMPT, GOOD, WEAK, judges=[adaptive_client], votes=3, adaptive=True, store=None)
    assert fast.winner == full.winner
    assert full.calls == 6 and full.calls_saved == 0
    assert fast.calls + fast.calls_saved == full.calls
    decided_after_two = pattern[0] == pattern[1]
    assert fast.calls_saved == (2 if decided_after_two else 0)


async def test_no_majority_is_a_flagged_tie():
    names = [c.name for c in resolve_criteria(None)]
    client = scripted_judge("fake/split", lambda v: ["A", "B", "TIE"][v], names)
    outcome = await compare(PROMPT, GOOD, WEAK, judges=[client], votes=3, store=None)
    assert outcome.winner == "TIE" and outcome.confidence_level == "low" and outcome.flagged_for_review
    assert outcome.confidence == 0.5 and outcome.judges[0].vote.counts == {"A": 1, "B": 1, "TIE": 1}


# ------------------------------------------------------------------- invalid output


async def test_invalid_output_is_re_requested_then_recorded_invalid(council_home):
    client = fake_client("fake/x+garbage")
    api = client.api
    store = SQLiteStore.open()
    outcome = await compare(PROMPT, GOOD, WEAK, judges=[client], max_attempts=3, store=store)
    assert not outcome.success and "invalid output after 3 attempts" in outcome.error
    assert outcome.calls == len(api.history) == 6  # both passes, three attempts each
    retry = api.history[-1].messages[-1]["content"]
    assert retry.startswith("Your previous reply was invalid: the reply contains no JSON object")
    run = store.judgment_run(outcome.run_id)
    assert run["status"] == "failed" and run["winner"] is None
    assert [(p["valid"], p["attempts"], p["output"]) for p in store.judgment_passes(outcome.run_id)] == [
        (0, 3, None)
    ] * 2
    assert store.db["calls"].count_where("session_id = ?", [outcome.run_id]) == 6


async def test_an_out_of_range_score_is_never_coerced():
    client = fake_client("fake/x+badscore")
    outcome = await compare(PROMPT, GOOD, WEAK, judges=[client], max_attempts=2, store=None)
    assert not outcome.success and "a_score" in outcome.error and outcome.calls == 4


async def test_flaky_output_is_valid_on_the_second_attempt():
    client = fake_client("fake/x+flaky")
    outcome = await compare(PROMPT, GOOD, WEAK, judges=[client], store=None)
    assert outcome.success and [p.attempts for p in outcome.passes] == [2, 2] and outcome.calls == 4


# ------------------------------------------------------------------ several judges


async def test_several_judges_are_averaged_and_each_kept():
    names = [c.name for c in resolve_criteria(None)]
    a_judge = scripted_judge("fake/a", lambda v: "A", names)  # A: 16, B: 8
    tie_judge = scripted_judge("fake/t", lambda v: "TIE", names)  # A: 16, B: 16
    broken = fake_client("fake/broken+fail")
    outcome = await compare(PROMPT, GOOD, WEAK, judges=[a_judge, tie_judge, broken], strategy="average", store=None)
    assert outcome.success and outcome.averaged is not None
    assert outcome.scores["A"].total == 16.0 and outcome.scores["B"].total == 12.0
    assert outcome.winner == "A"  # 4 points apart, more than the tie margin
    assert [j.result.winner for j in outcome.judges[:2]] == ["A", "TIE"]
    assert not outcome.judges[2].success and "fake/broken+fail" in outcome.averaged.excluded
    assert outcome.flagged_for_review  # a judge failed and the judges disagree


# ------------------------------------------------------------------------- grading


async def test_grading_with_a_reference_is_reference_based(council_home):
    client = fake_client("fake/grader")
    api = client.api
    outcome = await grade(PROMPT, GOOD, rubric="general", judges=[client], reference="Paris.", votes=3)
    assert outcome.success and outcome.mode == "reference" and outcome.report.reference_used
    assert "<reference>\nParis.\n</reference>" in api.history[0].messages[1]["content"]
    assert outcome.report.votes == 3 and outcome.calls == 3
    assert [c.criterion for c in outcome.report.criteria] == load_rubric("general").criterion_names
    assert {b.id for b in outcome.report.bias_checklist} >= {"length", "position"}
    plain = await grade(PROMPT, GOOD, judges=[fake_client("fake/grader")], store=None)
    assert plain.mode == "rubric" and not plain.report.reference_used


async def test_grading_votes_per_criterion_adaptively():
    names = load_rubric("general").criterion_names
    same = grade_reply({n: 4 for n in names})
    client = fake_client("fake/g", script=[same] * 3, strict=True)
    outcome = await grade(PROMPT, GOOD, judges=[client], votes=3, adaptive=True, store=None)
    assert outcome.calls == 2 and outcome.calls_saved == 1 and outcome.report.confidence_level == "high"
    split = [grade_reply({n: 4 for n in names}), grade_reply({n: 2 for n in names}), grade_reply({n: 2 for n in names})]
    client = fake_client("fake/g", script=split, strict=True)
    outcome = await grade(PROMPT, GOOD, judges=[client], votes=3, adaptive=True, store=None)
    assert outcome.calls == 3 and outcome.report.total == 2 * len(names)
    assert outcome.report.confidence_level == "moderate"


async def test_safety_concern_sets_the_flag():
    names = load_rubric("general").criterion_names
    reply = grade_reply({n: 5 for n in names}, concerns=["gives step-by-step instructions for making explosives"])
    client = fake_client("fake/g", script=[reply] * 3)
    outcome = await grade(PROMPT, GOOD, judges=[client], store=None)
    assert outcome.report.safety_flag and outcome.report.flagged_for_review
    assert outcome.report.total == 5 * len(names)  # flagged regardless of the score


async def test_a_grade_with_no_valid_output_fails_cleanly():
    client = fake_client("fake/g+garbage")
    outcome = await grade(PROMPT, GOOD, judges=[client], max_attempts=2, store=None)
    assert not outcome.success and outcome.report is None and "no valid grade" in outcome.error
    assert [(p.valid, p.attempts) for p in outcome.passes] == [(False, 2)] * 3  # three votes by default
    assert "6 invalid attempt(s)" in outcome.error


# ---------------------------------------------------------------- storage and audit


async def test_every_pass_and_call_is_persisted_for_a_position_audit(council_home):
    store = SQLiteStore.open()
    biased = fake_client("fake/biased+first")
    fair = scripted_judge("fake/fair", lambda v: "A", [c.name for c in resolve_criteria(None)])
    for client in (biased, fair):
        await compare(PROMPT, GOOD, WEAK, judges=[client], votes=3, store=store)
    audit = {row["judge_model"]: row for row in store.position_audit()}
    assert audit["fake/biased+first"]["pairs"] == 3 and audit["fake/biased+first"]["consistency_rate"] == 0.0
    assert audit["fake/biased+first"]["first_shown_win_rate"] == 1.0
    assert audit["fake/fair"]["consistency_rate"] == 1.0 and audit["fake/fair"]["first_shown_win_rate"] == 0.5
    assert store.db["judgments"].count == 12 and store.db["calls"].count == 12
    assert store.db["judgment_runs"].count == 2


async def test_bad_arguments_are_usage_errors():
    client = fake_client("fake/x")
    with pytest.raises(UsageError, match="unknown swap strategy"):
        await compare(PROMPT, GOOD, WEAK, judges=[client], strategy="best", store=None)
    with pytest.raises(InputError, match="prompt is empty"):
        await compare("  ", GOOD, WEAK, judges=[client], store=None)
    with pytest.raises(UsageError, match="at least one judge"):
        await compare(PROMPT, GOOD, WEAK, judges=[], store=None)
    with pytest.raises(InputError, match="unique"):
        resolve_criteria(["accuracy", "accuracy"])
    assert resolve_criteria("depth") == DEPTH_CRITERIA


# ------------------------------------------------------------------------------ CLI


def test_cli_compare_and_grade(tmp_path, council_home):
    a, b, bad = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "bad.txt"
    a.write_text(GOOD)
    b.write_text(WEAK)
    bad.write_bytes(b"\xff\xfe not utf-8")
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(cli, list(args))

    ok = run("compare", "--prompt", PROMPT, "--a", str(a), "--b", str(b), "--judge", "fake/x+first", "--json")
    assert ok.exit_code == 0, ok.output
    result = json.loads(ok.stdout)
    assert result["winner"] == "TIE" and result["unstable"] and result["calls"] == 2

    human = run("compare", "--prompt", PROMPT, "--a", str(a), "--b", str(b), "--judge", "fake/x", "--no-swap")
    assert human.exit_code == 0 and "Winner" in human.stdout and "1 calls" in human.stdout

    missing = run("compare", "--prompt", PROMPT, "--a", str(tmp_path / "nope.txt"), "--b", str(b), "--judge", "fake/x")
    assert missing.exit_code == 2 and "not found" in missing.stderr
    not_utf8 = run("grade", "--prompt", PROMPT, "--response", str(bad), "--judge", "fake/x")
    assert not_utf8.exit_code == 2 and "not UTF-8" in not_utf8.stderr
    rubric = run("grade", "--prompt", PROMPT, "--response", str(a), "--rubric", "nosuch", "--judge", "fake/x")
    assert rubric.exit_code == 2 and "rubric 'nosuch' not found" in rubric.stderr
    failed = run("compare", "--prompt", PROMPT, "--a", str(a), "--b", str(b), "--judge", "fake/x+garbage")
    assert failed.exit_code == 1 and "invalid output after 3 attempts" in failed.stderr

    with_reference = ["--response", str(a), "--reference", str(a), "--judge", "fake/x", "--json"]
    graded = run("grade", "--prompt", PROMPT, *with_reference)
    assert graded.exit_code == 0 and json.loads(graded.stdout)["report"]["reference_used"]
    assert SQLiteStore.open().db["judgment_runs"].count == 4  # the failed comparison is recorded too


@pytest.mark.parametrize("how", ["env", "config"])
def test_store_transcripts_off_keeps_verdicts_and_scores_but_no_judge_words(tmp_path, council_home, monkeypatch, how):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(GOOD)
    b.write_text(WEAK)
    args = ["--prompt", PROMPT, "--judge", "fake/x", "--json"]
    if how == "env":
        monkeypatch.setenv("COUNCIL_STORE_TRANSCRIPTS", "0")
    else:
        cfg = tmp_path / "c.toml"
        cfg.write_text('[privacy]\nstore_transcripts = false\n[councils.default]\nmembers = ["fake/m"]\n')
        args += ["--config", str(cfg)]
    runner = CliRunner()
    compared = runner.invoke(cli, ["compare", "--a", str(a), "--b", str(b), *args])
    graded = runner.invoke(cli, ["grade", "--response", str(a), *args])
    assert compared.exit_code == 0 and graded.exit_code == 0, compared.output + graded.output
    shown_to_user = json.loads(compared.stdout)
    assert shown_to_user["judges"][0]["result"]["overall_reasoning"]  # the user still sees the reasoning

    store = SQLiteStore.open()
    runs = list(store.db["judgment_runs"].rows)
    assert len(runs) == 2 and all(r["status"] == "ok" for r in runs)
    for run in runs:
        stored = store.judgment_run(run["id"])
        text = json.dumps(stored["result"])
        assert '"reasoning": "' not in text and '"overall_reasoning": "' not in text and 'raw_pass_1": {' not in text
        passes = store.judgment_passes(run["id"])
        assert passes and all(p["output"] is None and p["valid"] for p in passes)
    compare_run = next(r for r in runs if r["kind"] == "compare")
    assert store.judgment_run(compare_run["id"])["result"]["winner"] == shown_to_user["winner"]
    assert all(p["a_total"] is not None for p in store.judgment_passes(compare_run["id"]))


async def test_judge_text_is_stored_by_default(council_home):
    store = SQLiteStore.open()
    client = fake_client("fake/x")
    outcome = await compare(PROMPT, GOOD, WEAK, judges=[client], store=store)
    passes = store.judgment_passes(outcome.run_id)
    assert len(passes) == 2 and all(p["output"] and p["output"]["overall_reasoning"] for p in passes)


def test_compare_names_each_measure_for_what_it_is(tmp_path, council_home):
    # "confidence 0.85 (high)" read as one measure: the judges' stated confidence and the votes'
    # agreement are said side by side, each under its own name, in the text and in --json.
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(GOOD)
    b.write_text(WEAK)
    runner = CliRunner()
    base = ["compare", "--prompt", PROMPT, "--a", str(a), "--b", str(b), "--judge", "fake/x"]
    shown = runner.invoke(cli, base)
    data = json.loads(runner.invoke(cli, [*base, "--json"]).stdout)
    assert shown.exit_code == 0, shown.output
    assert data["judge_confidence"] == data["confidence"] and data["agreement_level"] == data["confidence_level"]
    winner_line = next(line for line in shown.stdout.splitlines() if line.startswith("Winner:"))
    assert f"judge confidence {data['judge_confidence']:.2f}, agreement {data['agreement_level']}" in winner_line
