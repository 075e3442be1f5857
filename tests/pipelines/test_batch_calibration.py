"""Calibrated confidence (issue 58): every combined verdict of a batch has a probability (the
Dawid–Skene posterior, or under the vote the share of the pair's passes naming the verdict); with
labels the summary reports its calibration (ECE over 10 equal-width bins, Brier, the reliability
table); ``council calibrate`` keeps an isotonic map fitted on a labelled batch and
``--calibration NAME`` reports calibrated probabilities beside the raw ones. The numbers are
counted by hand or computed by scikit-learn."""

from __future__ import annotations

import json
import random

import pytest
import sklearn.calibration as sklearn_calibration
import sklearn.metrics as sklearn_metrics
from batch_files import write_jsonl
from click.testing import CliRunner
from sklearn.isotonic import IsotonicRegression
from test_batch_dawid_skene import items, judged
from test_batch_panel import JUDGES, jury_file

from council.cli.main import cli
from council.judging.batch import BatchSettings, content_digest, parse_batch, run_batch

FOUR_BINS_BY_HAND = {0: (1, 0.0, 0.0), 6: (3, 4 / 6, 2 / 3), 8: (1, 5 / 6, 1.0)}  # bin: count, mean p, accuracy


async def test_the_votes_share_of_the_passes_is_calibrated_against_the_labels(tmp_path, store_backend):
    # test_batch_panel's hand-made jury: each pair's passes naming its combined verdict
    # i1 5/6 (A, right), i2 0/6 (TIE, no pass said TIE; wrong), i3 4/6 (B, wrong), i4 4/6 (B,
    # right), i5 4/6 (A, right); i6 has no label.
    text, judges = jury_file(tmp_path)
    output = tmp_path / "jury.results.jsonl"
    summary = await run_batch(parse_batch(text, "jury.jsonl"), settings=BatchSettings(judges=list(JUDGES)),
                              judges=judges, batch_id="jury", source="jury.jsonl", content_sha256=content_digest(text),
                              store=store_backend, output=output)  # fmt: skip
    calibration = summary.calibration
    assert calibration is not None
    assert calibration.brier == pytest.approx(((1 / 6) ** 2 + 0 + (4 / 6) ** 2 + 2 * (2 / 6) ** 2) / 5)
    assert calibration.ece == pytest.approx(1 / 5 * (1 - 5 / 6))
    filled = {i: (b.count, b.mean_probability, b.accuracy) for i, b in enumerate(calibration.bins) if b.count}
    assert filled.keys() == FOUR_BINS_BY_HAND.keys()
    for i, expected in FOUR_BINS_BY_HAND.items():
        assert filled[i] == pytest.approx(expected)
    shown = json.loads(summary.model_dump_json())["calibration"]
    assert set(shown) == {"ece", "brier", "bins"} and len(shown["bins"]) == 10
    assert set(shown["bins"][0]) == {"lo", "hi", "count", "mean_probability", "accuracy"}
    # Each judged pair's result line carries the probability of its verdict (SPEC.md, "Juries"):
    # under the vote, the share of its passes naming it.
    shares = {"i1": 5 / 6, "i2": 0.0, "i3": 4 / 6, "i4": 4 / 6, "i5": 4 / 6}
    lines = {line["id"]: line for line in map(json.loads, output.read_text().splitlines())}
    for item_id, share in shares.items():
        assert lines[item_id]["result"]["probability"] == pytest.approx(share)


async def test_the_posteriors_calibration_matches_scikit_learn(tmp_path, store_backend):
    labels = [random.Random(i).choice("AB") for i in range(30)]
    summary, lines = await judged(tmp_path, store_backend, items(30, labels), ["fake/x", "fake/y+first", "fake/z"])
    probabilities = [line["result"]["probability"] for line in lines]
    right = [line["result"]["winner"] == line["label"] for line in lines]
    calibration = summary.calibration
    assert calibration.brier == pytest.approx(sklearn_metrics.brier_score_loss(right, probabilities))
    accuracy, mean = sklearn_calibration.calibration_curve(right, probabilities, n_bins=10, strategy="uniform")
    filled = [b for b in calibration.bins if b.count]
    assert [b.accuracy for b in filled] == pytest.approx(list(accuracy))
    assert [b.mean_probability for b in filled] == pytest.approx(list(mean))


async def test_without_labels_there_is_no_calibration(tmp_path, store_backend):
    summary, _ = await judged(tmp_path, store_backend, items(6), ["fake/x", "fake/z"], combine="vote")
    assert summary.calibration is None
    assert "calibration" not in json.loads(summary.model_dump_json())
    assert "calibrated" not in json.loads(summary.model_dump_json())


def labelled_file(tmp_path, name, n, seed):
    labels = [random.Random(seed * 1000 + i).choice("AB") for i in range(n)]
    return write_jsonl(tmp_path / f"{name}.jsonl", items(n, labels))


JURY = ["--judge", "fake/x", "--judge", "fake/y+first", "--judge", "fake/z", "--combine", "dawid-skene"]


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_calibrate_keeps_an_isotonic_map_and_a_later_batch_reports_calibrated_probabilities(tmp_path, council_home):
    fitted = run("batch", labelled_file(tmp_path, "fit", 30, 1), *JURY, "--json")
    assert fitted.exit_code == 0, fitted.output
    fit_id = json.loads(fitted.stdout)["batch_id"]
    lines = [json.loads(line) for line in (tmp_path / "fit.results.jsonl").read_text().splitlines()]
    made = run("calibrate", fit_id, "--name", "my-jury", "--json")
    assert made.exit_code == 0, made.output
    kept = json.loads(made.stdout)
    assert (kept["name"], kept["batch_id"], kept["combine"], kept["items"]) == ("my-jury", fit_id, "dawid-skene", 30)
    # The map is scikit-learn's isotonic fit of the batch's right verdicts on its probabilities.
    probabilities = [line["result"]["probability"] for line in lines]
    right = [1.0 if line["result"]["winner"] == line["label"] else 0.0 for line in lines]
    reference = IsotonicRegression(out_of_bounds="clip").fit(probabilities, right)
    assert [p[0] for p in kept["points"]] == pytest.approx(list(reference.X_thresholds_))
    assert [p[1] for p in kept["points"]] == pytest.approx(list(reference.y_thresholds_))
    assert kept["ece_calibrated"] <= kept["ece"]  # in sample, the fit can only help
    text = run("calibrate", fit_id, "--name", "my-jury")
    assert text.exit_code == 0 and "my-jury" in text.stdout and "30 labelled pairs" in text.stdout

    later = run("batch", labelled_file(tmp_path, "later", 12, 2), *JURY, "--calibration", "my-jury", "--json")
    assert later.exit_code == 0, later.output
    summary = json.loads(later.stdout)
    new_lines = [json.loads(line) for line in (tmp_path / "later.results.jsonl").read_text().splitlines()]
    raw = [line["result"]["probability"] for line in new_lines]
    calibrated = [line["result"]["calibrated_probability"] for line in new_lines]
    assert calibrated == pytest.approx(list(reference.predict(raw)))
    applied = summary["calibrated"]
    assert (applied["name"], applied["fitted_on"]) == ("my-jury", fit_id)
    right_later = [line["result"]["winner"] == line["label"] for line in new_lines]
    assert applied["brier"] == pytest.approx(sklearn_metrics.brier_score_loss(right_later, calibrated))
    assert summary["calibration"]["brier"] == pytest.approx(sklearn_metrics.brier_score_loss(right_later, raw))
    # batch results shows the same, from the store.
    stored = run("batch", "results", summary["batch_id"], "--summary", "--json", "--calibration", "my-jury")
    assert stored.exit_code == 0, stored.output
    assert json.loads(stored.stdout)["calibrated"] == applied
    again = run("batch", "results", summary["batch_id"], "--calibration", "my-jury")
    assert again.exit_code == 0 and [json.loads(line) for line in again.stdout.splitlines()] == new_lines
    shown = run("batch", "results", summary["batch_id"], "--summary", "--calibration", "my-jury")
    assert shown.exit_code == 0
    for words in ("Calibration", "ECE", "Brier", "calibrated by my-jury"):
        assert words in shown.stdout


def test_calibration_errors_are_one_clear_line(tmp_path, council_home):
    unlabelled = run("batch", write_jsonl(tmp_path / "plain.jsonl", items(25)), *JURY, "--json")
    assert unlabelled.exit_code == 0, unlabelled.output
    no_labels = run("calibrate", json.loads(unlabelled.stdout)["batch_id"], "--name", "m")
    assert no_labels.exit_code == 2 and "no labelled pair" in no_labels.stderr
    assert len(no_labels.stderr.strip().splitlines()) == 1
    small = run("batch", labelled_file(tmp_path, "small", 5, 3), *JURY, "--json")
    few = run("calibrate", json.loads(small.stdout)["batch_id"], "--name", "m")
    assert few.exit_code == 2 and "5 labelled pairs" in few.stderr and "at least 20" in few.stderr
    missing = run("calibrate", "no-such-batch", "--name", "m")
    assert missing.exit_code == 2 and "no batch 'no-such-batch'" in missing.stderr
    bad_name = run("calibrate", json.loads(small.stdout)["batch_id"], "--name", "bad name\x1b[2J")
    assert bad_name.exit_code == 2 and "\x1b" not in bad_name.stderr
    unknown = run("batch", labelled_file(tmp_path, "u", 3, 4), *JURY, "--calibration", "nope")
    assert unknown.exit_code == 2 and "no calibration map 'nope'" in unknown.stderr
    assert not (tmp_path / "u.results.jsonl").exists()  # refused before any judging
    stored = run("batch", "results", json.loads(small.stdout)["batch_id"], "--calibration", "nope")
    assert stored.exit_code == 2 and "no calibration map 'nope'" in stored.stderr
    # A map fitted on posteriors says nothing about vote shares.
    fit = run("batch", labelled_file(tmp_path, "fit", 20, 5), *JURY, "--json")
    assert run("calibrate", json.loads(fit.stdout)["batch_id"], "--name", "ds").exit_code == 0
    vote = run("batch", labelled_file(tmp_path, "v", 3, 6), "--judge", "fake/x", "--judge", "fake/z",
               "--calibration", "ds")  # fmt: skip
    assert vote.exit_code == 2 and "dawid-skene" in vote.stderr and "vote" in vote.stderr
