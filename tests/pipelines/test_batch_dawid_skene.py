"""``council batch --combine dawid-skene``: a jury's verdicts combined by Dawid–Skene over every
pass (one judge in one order is one annotator), checked against crowd-kit's ``DawidSkene`` on the
same votes; no label is read (shuffled labels, same verdicts); ``vote`` stays the default and
leaves a batch's settings, id and outputs as they were."""

from __future__ import annotations

import json
import random

import crowdkit.aggregation as crowdkit
import pandas as pd
import pytest
from batch_files import LLMBAR_EVALUATORS, llmbar_jury, write_jsonl
from click.testing import CliRunner
from fake_judges import fake_client, replaying_judge

from council.cli.main import cli
from council.judging.batch import BatchSettings, content_digest, parse_batch, run_batch


def items(n: int, labels: list[str] | None = None) -> list[dict]:
    rows = [{"id": f"i{i}", "prompt": f"Question {i}?", "a": f"answer {i} " + "detail " * (i % 5),
             "b": f"another answer {i} " + "word " * (i % 3)} for i in range(n)]  # fmt: skip
    return rows if labels is None else [{**r, "label": label} for r, label in zip(rows, labels, strict=True)]


async def judged(tmp_path, store, rows, judges, *, combine="dawid-skene", batch_id="ds"):
    text = write_jsonl(tmp_path / f"{batch_id}.jsonl", rows).read_text()
    output = tmp_path / f"{batch_id}.results.jsonl"
    summary = await run_batch(parse_batch(text, "ds.jsonl"), settings=BatchSettings(judges=judges, combine=combine),
                              judges=[fake_client(j) for j in judges], batch_id=batch_id, source="ds.jsonl",
                              content_sha256=content_digest(text), store=store, output=output)  # fmt: skip
    return summary, [json.loads(line) for line in output.read_text().splitlines()]


async def test_the_combined_verdicts_are_crowd_kits_dawid_skene_over_the_passes(tmp_path, store_backend):
    judges = ["fake/x", "fake/y+first", "fake/z"]
    summary, lines = await judged(tmp_path, store_backend, items(24), judges)
    assert summary.finished == 24
    votes = [
        (line["id"], f"{p['judge']}|{p['shown_first']}|{p['vote']}", p["winner"])
        for line in lines
        for p in line["result"]["passes"]
        if p["valid"]
    ]
    fit = crowdkit.DawidSkene(n_iter=100, tol=1e-5).fit(pd.DataFrame(votes, columns=["task", "worker", "label"]))
    for line in lines:
        result = line["result"]
        posterior = fit.probas_.loc[line["id"]]
        assert result["combine"] == "dawid-skene"
        assert result["probability"] == pytest.approx(posterior.max(), abs=1e-9)
        assert result["confidence"] == result["probability"]
        assert result["winner"] == fit.labels_.loc[line["id"]]  # no two classes are equally likely here
    # The summary counts the combined verdicts.
    winners = [line["result"]["winner"] for line in lines]
    assert (summary.a_wins, summary.b_wins, summary.ties) == tuple(winners.count(w) for w in ("A", "B", "TIE"))


async def test_the_labels_are_never_read(tmp_path, store_backend):
    judges = ["fake/x", "fake/y+first", "fake/z"]
    labels = [random.Random(i).choice("AB") for i in range(20)]
    shuffled = labels[:]
    random.Random(58).shuffle(shuffled)
    assert shuffled != labels
    _, first = await judged(tmp_path, store_backend, items(20, labels), judges, batch_id="one")
    _, second = await judged(tmp_path, store_backend, items(20, shuffled), judges, batch_id="two")
    assert [line["label"] for line in second] == shuffled
    combined = [(line["id"], line["result"]["winner"], line["result"]["probability"]) for line in first]
    assert [(line["id"], line["result"]["winner"], line["result"]["probability"]) for line in second] == combined


async def test_it_trusts_the_judge_that_is_not_position_biased(tmp_path, store_backend):
    # Two judges that pick whatever is shown first call every pair a TIE under the consistency
    # strategy, and outvote the third: the vote is all ties. Their passes say nothing about the
    # pair (A when A is first, B when B is), and Dawid–Skene finds so: it follows the third.
    judges = ["fake/x", "fake/y+first", "fake/w+first"]
    rows = items(16)
    vote, vote_lines = await judged(tmp_path, store_backend, rows, judges, combine="vote", batch_id="vote")
    assert vote.ties == 16
    own = [
        next(j["result"]["winner"] for j in line["result"]["judges"] if j["judge"] == "fake/x") for line in vote_lines
    ]
    labelled = [{**row, "label": verdict} for row, verdict in zip(rows, own, strict=True)]
    summary, lines = await judged(tmp_path, store_backend, labelled, judges)
    assert [line["result"]["winner"] for line in lines] == own
    # The plain majority of each order's passes is the answer shown first (two of three judges
    # always pick it): right with A first where x's verdict is A, with B first where it is B.
    assert summary.panel.combined_accuracy == 1.0
    by_order = summary.panel.majority_accuracy_per_order
    assert (by_order.a_first, by_order.b_first) == pytest.approx((own.count("A") / 16, own.count("B") / 16))
    assert summary.panel.majority_accuracy == pytest.approx((own.count("A") + own.count("B")) / 32)
    assert summary.labels.accuracy == 1.0
    # The vote's verdict stays on record beside it.
    assert {line["result"]["judges_verdict"]["winner"] for line in lines} == {"TIE"}


def test_vote_stays_the_default_and_keeps_the_batch_id():
    plain = BatchSettings(judges=["fake/x", "fake/y"])
    assert "combine" not in plain.model_dump(mode="json") and plain.combine == "vote"
    assert BatchSettings(judges=["fake/x", "fake/y"], combine="vote").model_dump_json() == plain.model_dump_json()
    ds = BatchSettings(judges=["fake/x", "fake/y"], combine="dawid-skene")
    assert ds.model_dump(mode="json")["combine"] == "dawid-skene"
    assert BatchSettings.model_validate(ds.model_dump(mode="json")) == ds


def test_the_cli_combines_by_dawid_skene_and_batch_results_gives_the_same_lines(tmp_path, council_home):
    path = write_jsonl(tmp_path / "c.jsonl", items(8))
    args = ["batch", str(path), "--judge", "fake/x", "--judge", "fake/y+first", "--combine", "dawid-skene", "--json"]
    ran = CliRunner().invoke(cli, args)
    assert ran.exit_code == 0, ran.output
    written = (tmp_path / "c.results.jsonl").read_text()
    assert all(json.loads(line)["result"]["combine"] == "dawid-skene" for line in written.splitlines())
    assert json.loads(ran.stdout)["combine"] == "dawid-skene"
    stored = CliRunner().invoke(cli, ["batch", "results", json.loads(ran.stdout)["batch_id"]])
    assert stored.exit_code == 0 and stored.stdout == written
    text = CliRunner().invoke(cli, ["batch", "results", json.loads(ran.stdout)["batch_id"], "--summary"])
    assert text.exit_code == 0 and "verdicts combined by" in text.stdout and "dawid-skene" in text.stdout
    bad = CliRunner().invoke(cli, ["batch", str(path), "--judge", "fake/x", "--combine", "mean"])
    assert bad.exit_code == 2 and "--combine" in bad.stderr


def test_equally_likely_verdicts_are_a_tie_and_a_tie_said_is_a_class():
    from council.judging.jury import dawid_skene_verdicts

    def passes(item, *verdicts):  # one judge, A shown first then B shown first
        return [{"item_id": item, "judge": "j", "vote": 1, "shown_first": first, "winner": v}
                for first, v in zip("AB", verdicts, strict=True)]  # fmt: skip

    # Each order always contradicts the other: nothing tells A from B.
    combined = dawid_skene_verdicts([*passes("x", "A", "B"), *passes("y", "B", "A")])
    assert {c.winner for c in combined.values()} == {"TIE"}
    assert [c.probability for c in combined.values()] == pytest.approx([0.5, 0.5])
    # Passes that say TIE make TIE a class like A and B.
    said = dawid_skene_verdicts([*passes("x", "TIE", "TIE"), *passes("y", "A", "A"), *passes("z", "B", "B")])
    assert {k: c.winner for k, c in said.items()} == {"x": "TIE", "y": "A", "z": "B"}


async def test_llmbars_jury_replayed_through_the_batch_beats_its_best_judge(tmp_path):
    # LLMBar's five evaluators (tests/data/llmbar), each a judge giving its published verdict for
    # the order it is shown (a pass LLMBar could not parse: an invalid reply, every attempt).
    from council.storage import SQLiteStore

    rows, seen = llmbar_jury()
    text = write_jsonl(tmp_path / "llmbar.jsonl", rows).read_text()
    output = tmp_path / "llmbar.results.jsonl"
    judges = [f"fake/{e.lower()}" for e in LLMBAR_EVALUATORS]
    clients = [replaying_judge(j, seen[e], 6 * len(rows)) for j, e in zip(judges, LLMBAR_EVALUATORS, strict=True)]
    summary = await run_batch(parse_batch(text, "llmbar.jsonl"), judges=clients,
                              settings=BatchSettings(judges=judges, combine="dawid-skene"), batch_id="llmbar",
                              source="llmbar.jsonl", content_sha256=content_digest(text), output=output,
                              store=SQLiteStore.open(tmp_path / "llmbar.db"), concurrency=32)  # fmt: skip
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert summary.finished == 419
    combined = sum(line["result"]["winner"] == line["label"] for line in lines)
    vote = sum(line["result"]["judges_verdict"]["winner"] == line["label"] for line in lines)
    # The same counts as the methods on the extract (tests/methods/test_methods_llmbar_jury.py):
    # Dawid–Skene 351 of 419 without labels, GPT-4 339 in both orders, today's vote 155.
    assert (combined, vote) == (351, 155)
    assert summary.panel.combined_accuracy == pytest.approx(351 / 419)
    assert summary.panel.best_single_accuracy == pytest.approx(339 / 419)
