"""Labelled batches: labels and gold scores validated on parse, stored with the item, and the
judge's agreement with them in the summary — checked against tables computed by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
from batch_files import write_jsonl
from click.testing import CliRunner
from fake_judges import fake_client, first_shown_judge
from scipy.stats import spearmanr
from sqlite_utils import Database

from council.cli.main import cli
from council.errors import InputError
from council.judging.batch import BatchSettings, content_digest, load_rubrics, parse_batch, run_batch
from council.storage import SQLiteStore
from council.storage.migrations import migrations


def pair(i: int, **extra: object) -> dict:
    return {"id": f"i{i}", "prompt": f"Question {i}?", "a": f"answer {i} from A", "b": f"answer {i} from B", **extra}


# ------------------------------------------------------------------------ parsing


def test_labels_gold_scores_and_model_names_are_parsed():
    text = "\n".join(
        [
            json.dumps(pair(1, label="TIE", model_a="openai/x", model_b="fake/y")),
            json.dumps({"id": "g", "prompt": "Q?", "response": "R", "gold_score": 4}),
            json.dumps(pair(2)),
        ]
    )
    items = parse_batch(text, "f.jsonl")
    assert (items[0].label, items[0].model_a, items[0].model_b) == ("TIE", "openai/x", "fake/y")
    assert items[1].gold_score == 4.0 and items[2].label is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"label": "a"}, '"label" must be "A", "B" or "TIE", got "a"'),
        ({"label": "WIN"}, '"label" must be "A", "B" or "TIE"'),
        ({"label": 1}, '"label" must be "A", "B" or "TIE", got 1'),
        ({"label": None}, '"label" must be "A", "B" or "TIE", got null'),
        ({"model_a": ""}, '"model_a" must be a non-empty model name'),
        ({"model_b": 3}, '"model_b" must be a string'),
        ({"gold_score": 3}, "unknown key(s) for a pairwise item: gold_score"),
    ],
)
def test_a_bad_label_names_its_line(extra, message):
    text = json.dumps(pair(1)) + "\n" + json.dumps(pair(2, **extra)) + "\n"
    with pytest.raises(InputError) as err:
        parse_batch(text, "f.jsonl")
    assert str(err.value).startswith("f.jsonl:2: ") and message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"gold_score": "4"}, '"gold_score" must be a number, got "4"'),
        ({"gold_score": True}, '"gold_score" must be a number, got true'),
        ({"label": "A"}, "unknown key(s) for a grade item: label"),
    ],
)
def test_a_bad_gold_score_names_its_line(extra, message):
    text = json.dumps({"id": "g", "prompt": "Q?", "response": "R", **extra})
    with pytest.raises(InputError, match="^f.jsonl:1: ") as err:
        parse_batch(text, "f.jsonl")
    assert message in str(err.value)


def test_a_gold_score_off_the_rubric_scale_is_refused_before_any_call():
    items = parse_batch(json.dumps({"id": "g", "prompt": "Q?", "response": "R", "gold_score": 7}), "f.jsonl")
    with pytest.raises(InputError, match=r'^f.jsonl:1: "gold_score" 7 is outside the scale 1-5 of rubric'):
        load_rubrics(items, "general", "f.jsonl")


def test_the_cli_refuses_a_bad_label_with_exit_2_and_writes_nothing(tmp_path, council_home):
    bad = write_jsonl(tmp_path / "b.jsonl", [pair(1, label="A"), pair(2, label="maybe")])
    result = CliRunner().invoke(cli, ["batch", str(bad), "--judge", "fake/j"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [f'error: {bad}:2: "label" must be "A", "B" or "TIE", got "maybe"']
    assert not (council_home / "council.db").exists()


def test_the_migration_adds_the_label_columns():
    assert "m006_batch_labels" in [m.name for m in migrations.pending(Database(memory=True))]
    store = SQLiteStore.memory()
    assert {"label", "gold_score"} <= set(store.db["batch_items"].columns_dict)
    assert {"model_a", "model_b"} <= set(store.db["judgment_runs"].columns_dict)


# ------------------------------------------------------- a judge that follows a script


# item: label, the verdict as seen with A shown first, the verdict as seen with B shown first
SCRIPT = {
    "i1": ("A", "A", "B"),  # picks A in both orders: A
    "i2": ("B", "B", "A"),  # picks B in both orders: B
    "i3": ("A", "A", "A"),  # picks whatever is shown first: inconsistent, TIE
    "i4": ("TIE", "TIE", "TIE"),  # TIE both times: TIE
    "i5": ("B", "A", "B"),  # picks A in both orders: A (against the label)
    "i6": ("TIE", "A", "A"),  # picks the first shown: TIE
    "i7": (None, "A", "B"),  # unlabelled: in no agreement number
}


async def test_a_labelled_batch_reproduces_the_hand_computed_table(tmp_path, council_home):
    rows = []
    script: dict[str, str] = {}
    for n, (key, (label, seen_a_first, seen_b_first)) in enumerate(SCRIPT.items(), 1):
        item = pair(n) if label is None else pair(n, label=label)
        rows.append(item)
        script[item["a"]] = seen_a_first  # pass 1 shows A in the first slot
        script[item["b"]] = seen_b_first  # pass 2 shows B there
        assert item["id"] == key
    text = write_jsonl(tmp_path / "labelled.jsonl", rows).read_text()
    items = parse_batch(text, "labelled.jsonl")
    settings = BatchSettings(judges=["fake/script"], strategy="consistency")
    summary = await run_batch(
        items,
        settings=settings,
        judges=[first_shown_judge("fake/script", script, calls=2 * len(rows))],
        batch_id="lab",
        source="labelled.jsonl",
        content_sha256=content_digest(text),
        output=tmp_path / "out.jsonl",
        store=SQLiteStore.open(),
    )
    assert summary.finished == 7 and summary.failed == 0
    # Final verdicts: i1 A, i2 B, i3 TIE, i4 TIE, i5 A, i6 TIE (i7 unlabelled).
    labels = summary.labels
    assert labels is not None
    assert (labels.labelled, labels.agree, labels.ties) == (6, 4, 3)  # agree: i1 i2 i4 i6
    assert labels.accuracy == pytest.approx(4 / 6)
    # A shown first, the pass picked the label in i1 i2 i3 i4; B shown first, in i1 i2 i4.
    assert labels.per_order_correct == {"a_first": 4, "b_first": 3}
    assert labels.per_order_accuracy.a_first == pytest.approx(4 / 6)
    assert labels.per_order_accuracy.b_first == pytest.approx(3 / 6)
    # Both passes chose the same response in i1 i2 i4 i5.
    assert labels.position_consistency == pytest.approx(4 / 6)
    # Labels A 2, B 2, TIE 2; verdicts A 2, B 1, TIE 3: p_o = 4/6, p_e = 12/36, κ = 0.5.
    assert labels.cohen_kappa == pytest.approx(0.5)
    assert labels.confusion == {
        "A": {"A": 1, "B": 0, "TIE": 1},
        "B": {"A": 1, "B": 1, "TIE": 0},
        "TIE": {"A": 0, "B": 0, "TIE": 2},
    }
    assert summary.gold_scores is None
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [line.get("label") for line in lines] == [v[0] for v in SCRIPT.values()]


def test_the_cli_json_summary_carries_the_labels_of_a_first_shown_judge(tmp_path, council_home):
    # `+first` picks the response shown first in every pass: every swap pair disagrees, so the
    # consistency strategy calls every item a TIE.
    rows = [pair(1, label="A"), pair(2, label="B"), pair(3, label="TIE"), pair(4, label="A"), pair(5)]
    path = write_jsonl(tmp_path / "first.jsonl", rows)
    result = CliRunner().invoke(cli, ["batch", str(path), "--judge", "fake/j+first", "--json"])
    assert result.exit_code == 0, result.output
    labels = json.loads(result.stdout)["labels"]
    assert {k: labels[k] for k in ("labelled", "agree", "ties", "position_consistency", "cohen_kappa")} == {
        "labelled": 4,
        "agree": 1,
        "ties": 4,
        "position_consistency": 0.0,
        "cohen_kappa": 0.0,  # p_o = 1/4 = p_e (every verdict TIE, one TIE label)
    }
    assert labels["accuracy"] == pytest.approx(0.25)
    assert labels["per_order_accuracy"] == {"a_first": 0.5, "b_first": 0.25}


def test_an_unlabelled_batch_has_no_agreement_numbers(tmp_path, council_home):
    path = write_jsonl(tmp_path / "plain.jsonl", [pair(1), pair(2)])
    result = CliRunner().invoke(cli, ["batch", str(path), "--judge", "fake/j", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["labels"] is None and summary["gold_scores"] is None


def test_gold_scores_give_mae_and_spearman_of_the_judges_scores(tmp_path, council_home):
    rows = [
        {"id": f"g{i}", "prompt": f"Question {i}?", "response": f"Response {i} " + "detail " * i, "gold_score": gold}
        for i, gold in enumerate([1, 2, 2, 3, 4, 5, 5, 3], 1)
    ]
    path = write_jsonl(tmp_path / "graded.jsonl", rows)
    output = tmp_path / "graded.results.jsonl"
    result = CliRunner().invoke(cli, ["batch", str(path), "--judge", "fake/j", "--json", "--output", str(output)])
    assert result.exit_code == 0, result.output
    gold_scores = json.loads(result.stdout)["gold_scores"]
    # the judge's score on the 1-5 scale, read back from each item's report
    judged = []
    for line in output.read_text().splitlines():
        report = json.loads(line)["result"]["report"]
        lo, hi = report["scale"]
        judged.append(lo + report["normalized"] * (hi - lo))
    gold = [r["gold_score"] for r in rows]
    assert gold_scores["scored"] == len(rows)
    assert gold_scores["mean_absolute_error"] == pytest.approx(np.mean(np.abs(np.array(gold) - np.array(judged))))
    assert gold_scores["spearman_rho"] == pytest.approx(spearmanr(gold, judged).statistic)
    assert json.loads(result.stdout)["labels"] is None


async def test_labels_are_stored_with_the_item_and_survive_a_resume(tmp_path, council_home):
    rows = [pair(1, label="A"), pair(2, label="B")]
    text = write_jsonl(tmp_path / "r.jsonl", rows).read_text()
    items = parse_batch(text, "r.jsonl")
    store = SQLiteStore.open()
    settings = BatchSettings(judges=["fake/j"])
    common = {"settings": settings, "batch_id": "r", "source": "r.jsonl", "content_sha256": content_digest(text)}
    judge = fake_client("fake/j")
    first = await run_batch(items[:1], judges=[judge], store=store, **common)
    assert first.labels is not None and first.labels.labelled == 1
    again = await run_batch(items, judges=[judge], store=store, resume=True, **common)
    assert again.labels is not None and again.labels.labelled == 2 and again.skipped == 1
    stored = {r["item_id"]: r["label"] for r in store.db.query("select item_id, label from batch_items")}
    assert stored == {"i1": "A", "i2": "B"}


def test_the_text_summary_shows_the_agreement_rows(tmp_path, council_home):
    rows = [pair(1, label="A"), pair(2, label="B"), {"id": "g", "prompt": "Q?", "response": "R", "gold_score": 3}]
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    result = CliRunner().invoke(cli, ["batch", str(path), "--judge", "fake/j+first"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "verdict = label" in text and "0 of 2 (0.0%)" in text  # +first: both pairs end as TIE
    assert "pass picked the label, A / B shown first" in text and "50.0% / 50.0%" in text
    assert "gold scores: MAE, Spearman ρ" in text
