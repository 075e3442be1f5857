"""``council batch --combine dawid-skene --adaptive``: each pair's annotators (one judge in one order)
asked one at a time under reliabilities fitted on an earlier batch, until the posterior reaches
``--confidence``; what it saved in the summary; results, exports and resume as for any batch."""

from __future__ import annotations

import json

import pytest
from batch_files import LLMBAR_EVALUATORS, llmbar_jury, write_jsonl
from click.testing import CliRunner
from fake_judges import fake_client, replaying_judge

from council.cli.main import cli
from council.judging.adaptive import AdaptiveJury, reliabilities_from_batch
from council.judging.batch import BatchSettings, content_digest, parse_batch, run_batch
from council.methods.adaptive_jury import asking_order, posterior, posterior_verdict

JUDGES = [f"fake/{e.lower()}" for e in LLMBAR_EVALUATORS]


async def _run(tmp_path, store, rows, seen, settings, batch_id, *, resume=False):
    text = write_jsonl(tmp_path / f"{batch_id}.jsonl", rows).read_text()
    clients = [replaying_judge(j, seen[e], 6 * len(rows)) for j, e in zip(JUDGES, LLMBAR_EVALUATORS, strict=True)]
    output = tmp_path / f"{batch_id}.results.jsonl"
    summary = await run_batch(parse_batch(text, "llmbar.jsonl"), settings=settings, judges=clients, batch_id=batch_id,
                              source="llmbar.jsonl", content_sha256=content_digest(text), store=store, output=output,
                              resume=resume, named=True)  # fmt: skip
    asked = sum(len(c.api.history) for c in clients)
    return summary, [json.loads(line) for line in output.read_text().splitlines()], asked


@pytest.fixture
def llmbar():
    rows, seen = llmbar_jury()
    return rows[:60], rows[60:100], seen


async def _jury(tmp_path, store, fit_rows, seen, confidence=0.95):
    await _run(tmp_path, store, fit_rows, seen, BatchSettings(judges=JUDGES, combine="dawid-skene"), "fit")
    jury = AdaptiveJury(confidence=confidence, reliabilities=reliabilities_from_batch(store, "fit"))
    return jury, BatchSettings(judges=JUDGES, combine="dawid-skene", adaptive=True, jury=jury)


async def test_each_pair_stops_once_its_posterior_under_the_known_matrices_is_sure(tmp_path, store_backend, llmbar):
    fit_rows, rows, seen = llmbar
    jury, settings = await _jury(tmp_path, store_backend, fit_rows, seen)
    summary, lines, asked = await _run(tmp_path, store_backend, rows, seen, settings, "adaptive")
    r = jury.reliabilities
    matrices = r.matrices()
    order = asking_order(r.prior, matrices, dict.fromkeys(((j, f) for j in JUDGES for f in "AB"), 0.0))
    calls = 0
    for line in lines:
        result = line["result"]
        record = result["adaptive"]
        asked_here = [tuple(a) for a in record["asked"]]
        assert asked_here == order[: len(asked_here)]  # most informative first (the fake judges are free)
        votes = {(p["judge"], p["shown_first"]): p["winner"] for p in result["passes"] if p["valid"]}
        assert set(votes) <= set(asked_here) and len(result["passes"]) == len(asked_here)
        post = posterior(r.prior, matrices, votes)
        winner, p = posterior_verdict(post)
        assert (result["winner"], result["probability"]) == (winner, pytest.approx(p))
        # It stopped at the first vote that made it sure, and not before.
        earlier = posterior_verdict(posterior(r.prior, matrices, {a: votes[a] for a in asked_here[:-1] if a in votes}))
        assert earlier[1] < 0.95 or earlier[0] == "TIE"
        assert record["sure"] == (p >= 0.95 and winner != "TIE")
        assert record["sure"] or len(asked_here) == 10
        calls += len(asked_here)
    assert asked == calls == summary.calls  # nothing asked beyond what the results show
    a = summary.adaptive
    assert a.pairs == len(rows) and a.calls_full_panel == 10 * len(rows)
    assert a.calls_saved == summary.calls_saved == 10 * len(rows) - calls > 0
    assert a.cost_saved_usd == 0.0  # free models
    assert 0.9 < a.agreement_with_full_panel <= 1.0
    assert summary.combine == "dawid-skene"


async def test_a_resumed_batch_asks_no_judge_again(tmp_path, store_backend, llmbar):
    fit_rows, rows, seen = llmbar
    _, settings = await _jury(tmp_path, store_backend, fit_rows, seen)
    _, _, first = await _run(tmp_path, store_backend, rows[:15], seen, settings, "resumed")
    summary, lines, second = await _run(tmp_path, store_backend, rows, seen, settings, "resumed", resume=True)
    _, straight, _ = await _run(tmp_path, store_backend, rows, seen, settings, "straight")
    assert summary.skipped == 15 and summary.judged_this_run == len(rows) - 15
    assert first + second == sum(len(line["result"]["adaptive"]["asked"]) for line in lines)
    assert [line["result"]["winner"] for line in lines] == [line["result"]["winner"] for line in straight]
    assert summary.adaptive.pairs == len(rows)


def test_the_jury_travels_in_the_settings_and_only_when_asked_for():
    assert "jury" not in BatchSettings(judges=["fake/x"]).model_dump(mode="json")
    with pytest.raises(ValueError):
        AdaptiveJury(confidence=1.0, reliabilities={"source": "s", "prior": {}, "annotators": []})


def _items(n):
    return [{"id": f"i{i}", "prompt": f"Question {i}?", "a": f"answer {i} " + "detail " * (i % 5),
             "b": f"another answer {i} " + "word " * (i % 3)} for i in range(n)]  # fmt: skip


def test_the_cli_runs_it_and_refuses_what_it_cannot_do_in_one_line(tmp_path, council_home):
    judges = ["--judge", "fake/x", "--judge", "fake/y+first"]
    path = write_jsonl(tmp_path / "fit.jsonl", _items(20))
    fitted = CliRunner().invoke(cli, ["batch", str(path), *judges, "--combine", "dawid-skene", "--batch-id", "fit",
                                      "--json"])  # fmt: skip
    assert fitted.exit_code == 0, fitted.output
    later = write_jsonl(tmp_path / "later.jsonl", _items(12))
    adaptive = ["batch", str(later), *judges, "--combine", "dawid-skene", "--adaptive"]
    ran = CliRunner().invoke(cli, [*adaptive, "--reliabilities-from", "fit", "--confidence", "0.9", "--json"])
    assert ran.exit_code == 0, ran.output
    summary = json.loads(ran.stdout)
    assert summary["combine"] == "dawid-skene" and summary["adaptive"]["confidence"] == 0.9
    assert summary["calls_saved"] == summary["adaptive"]["calls_saved"] > 0
    written = (tmp_path / "later.results.jsonl").read_text()
    stored = CliRunner().invoke(cli, ["batch", "results", summary["batch_id"]])
    assert stored.exit_code == 0 and stored.stdout == written
    text = CliRunner().invoke(cli, ["batch", "results", summary["batch_id"], "--summary"])
    assert text.exit_code == 0 and "calls saved against the full panel" in text.stdout
    for extra, words in (
        ([], "--reliabilities-from"),
        (["--reliabilities-from", "fit", "--confidence", "1"], "--confidence"),
        (["--reliabilities-from", "fit", "--confidence", "0.5"], "--confidence"),
        (["--reliabilities-from", "nope"], "no batch or calibration map 'nope'"),
        (["--reliabilities-from", "fit", "--no-swap"], "--no-swap"),
        (["--reliabilities-from", "fit", "--judge", "fake/z"], "fake/z"),
    ):
        bad = CliRunner().invoke(cli, [*adaptive, *extra, "--batch-id", "bad"])
        assert bad.exit_code == 2 and words in bad.stderr and "Traceback" not in bad.output, (extra, bad.output)
        assert len(bad.stderr.strip().splitlines()) == 1
    # A calibration map names the batch it was fitted on: the same reliabilities.
    labelled = write_jsonl(tmp_path / "labelled.jsonl", [{**r, "label": "AB"[i % 2]} for i, r in enumerate(_items(24))])
    fitted = CliRunner().invoke(cli, ["batch", str(labelled), *judges, "--combine", "dawid-skene", "--batch-id",
                                      "lab"])  # fmt: skip
    assert fitted.exit_code == 0, fitted.output
    assert CliRunner().invoke(cli, ["calibrate", "lab", "--name", "my-jury"]).exit_code == 0
    by_map = CliRunner().invoke(cli, [*adaptive, "--reliabilities-from", "my-jury", "--batch-id", "m", "--json"])
    by_batch = CliRunner().invoke(cli, [*adaptive, "--reliabilities-from", "lab", "--batch-id", "b", "--json"])
    assert by_map.exit_code == by_batch.exit_code == 0, by_map.output
    assert json.loads(by_map.stdout)["adaptive"] == json.loads(by_batch.stdout)["adaptive"]
    for extra in (["--confidence", "0.9"], ["--reliabilities-from", "fit"]):
        bad = CliRunner().invoke(cli, ["batch", str(later), *judges, *extra, "--batch-id", "bad"])
        assert bad.exit_code == 2 and "--combine dawid-skene --adaptive" in bad.stderr


async def test_adaptive_voting_is_what_adaptive_means_under_the_vote(tmp_path, store_backend):
    settings = BatchSettings(judges=["fake/x", "fake/y"], adaptive=True)
    assert settings.jury is None and settings.combination == "vote"
    text = write_jsonl(tmp_path / "v.jsonl", _items(3)).read_text()
    summary = await run_batch(parse_batch(text, "v.jsonl"), settings=settings,
                              judges=[fake_client("fake/x"), fake_client("fake/y")], batch_id="v", source="v.jsonl",
                              content_sha256=content_digest(text), store=store_backend)  # fmt: skip
    assert summary.adaptive is None and "adaptive" not in summary.model_dump()
