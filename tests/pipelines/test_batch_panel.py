"""A batch judged by a jury (two or more judges) reports its panel: each judge's habits, how far
the judges agree, and with labels how often each is right and how far their errors go together,
on both storage backends, from the run and from the store (``council batch results --summary``).
Every number below is counted by hand from the script, or computed by an independent library
(``krippendorff``, numpy's ``corrcoef``)."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pytest
from batch_files import write_jsonl
from click.testing import CliRunner
from fake_judges import fake_client, first_shown_judge

from council.cli.main import cli
from council.judging.batch import BatchSettings, BatchSummary, content_digest, parse_batch, run_batch
from council.methods.panel import Panel

FLIP = {"A": "B", "B": "A", "TIE": "TIE"}

# item: label, (longer answer), then per judge its verdicts in the original labels with A shown
# first and with B shown first. Under the consistency strategy a judge's verdict is its passes'
# common verdict, TIE when they differ; the jury's is the strict majority of those.
ITEMS = {
    #      label   longer  j1            j2            j3               judges' verdicts -> combined
    "i1": ("A", "A", ("A", "A"), ("A", "A"), ("A", "B")),  # A A TIE -> A
    "i2": ("B", "B", ("B", "B"), ("A", "B"), ("A", "B")),  # B TIE TIE -> TIE
    "i3": ("A", None, ("A", "A"), ("B", "B"), ("B", "B")),  # A B B -> B
    "i4": ("B", "A", ("B", "B"), ("B", "B"), ("A", "A")),  # B B A -> B
    "i5": ("A", "B", ("TIE", "TIE"), ("A", "A"), ("A", "A")),  # TIE A A -> A
    "i6": (None, None, ("A", "A"), ("A", "A"), ("A", "A")),  # A A A -> A (unlabelled)
}
JUDGES = ("fake/j1", "fake/j2", "fake/j3")


def jury_file(tmp_path):
    rows, scripts = [], {j: {} for j in JUDGES}
    for n, (item_id, (label, longer, *verdicts)) in enumerate(ITEMS.items(), 1):
        a, b = f"answer {n} from A", f"answer {n} from B"
        a, b = (a + "....", b) if longer == "A" else (a, b + "....") if longer == "B" else (a, b)
        row = {"id": item_id, "prompt": f"Question {n}?", "a": a, "b": b}
        rows.append(row if label is None else {**row, "label": label})
        for judge, (a_first, b_first) in zip(JUDGES, verdicts, strict=True):
            scripts[judge][a] = a_first  # pass 1 shows A first: seen as it is
            scripts[judge][b] = FLIP[b_first]  # pass 2 shows B first: its "A" is the original B
    text = write_jsonl(tmp_path / "jury.jsonl", rows).read_text()
    return text, [first_shown_judge(j, scripts[j], calls=2 * len(rows)) for j in JUDGES]


async def test_a_jury_batch_reports_its_panel_counted_by_hand(tmp_path, store_backend):
    text, judges = jury_file(tmp_path)
    summary = await run_batch(parse_batch(text, "jury.jsonl"), settings=BatchSettings(judges=list(JUDGES)),
                              judges=judges, batch_id="jury", source="jury.jsonl", content_sha256=content_digest(text),
                              store=store_backend)  # fmt: skip
    assert summary.finished == 6 and (summary.a_wins, summary.b_wins, summary.ties) == (3, 2, 1)
    panel = summary.panel
    assert panel is not None
    by_judge = {p.judge: p for p in panel.judges}
    assert list(by_judge) == list(JUDGES)
    j1, j2, j3 = (by_judge[j] for j in JUDGES)
    assert (j1.decided, j2.decided, j3.decided) == pytest.approx((5 / 6, 5 / 6, 4 / 6))
    assert (j1.agreement_with_combined, j2.agreement_with_combined, j3.agreement_with_combined) == pytest.approx(
        (3 / 6, 1.0, 4 / 6)
    )
    # Passes that chose a response: the one shown first (A first: chose A; B first: chose B).
    assert (j1.p_prefers_first, j2.p_prefers_first, j3.p_prefers_first) == pytest.approx((5 / 10, 7 / 12, 8 / 12))
    # Decided verdicts on pairs of unequal length (i1, i2, i4, i5), for the longer answer.
    assert (j1.p_prefers_longer, j2.p_prefers_longer, j3.p_prefers_longer) == pytest.approx((2 / 3, 1 / 3, 1 / 2))
    assert panel.agreement["fake/j1"] == pytest.approx({"fake/j1": 1.0, "fake/j2": 3 / 6, "fake/j3": 1 / 6})
    assert panel.agreement["fake/j2"]["fake/j3"] == pytest.approx(4 / 6)
    verdicts = {  # each judge's own verdict, item by item
        "fake/j1": ["A", "B", "A", "B", "TIE", "A"],
        "fake/j2": ["A", "TIE", "B", "B", "A", "A"],
        "fake/j3": ["TIE", "TIE", "B", "A", "A", "A"],
    }
    codes = {"A": 0, "B": 1, "TIE": 2}
    data = np.array([[codes[v] for v in verdicts[j]] for j in JUDGES], dtype=float)
    assert panel.krippendorff_alpha == pytest.approx(krippendorff.alpha(data, level_of_measurement="nominal"))
    # Labelled items i1..i5 (A B A B A).
    assert (j1.accuracy, j2.accuracy, j3.accuracy) == pytest.approx((4 / 5, 3 / 5, 1 / 5))
    assert (j1.accuracy_per_order.a_first, j1.accuracy_per_order.b_first) == pytest.approx((4 / 5, 4 / 5))
    assert (j2.accuracy_per_order.a_first, j2.accuracy_per_order.b_first) == pytest.approx((3 / 5, 4 / 5))
    assert (j3.accuracy_per_order.a_first, j3.accuracy_per_order.b_first) == pytest.approx((2 / 5, 2 / 5))
    # The plain majority of each order's passes: A first A, A, B, B, A (i2 and i3 wrong); B first
    # A, B, B, B, A (i3 wrong). Its accuracy is the mean of the two orders'.
    assert (panel.majority_accuracy_per_order.a_first, panel.majority_accuracy_per_order.b_first) == pytest.approx(
        (3 / 5, 4 / 5)
    )
    assert (panel.majority_accuracy, panel.combined_accuracy, panel.best_single_accuracy) == pytest.approx(
        (7 / 10, 3 / 5, 4 / 5)
    )
    errors = np.array([[0, 0, 0, 0, 1], [0, 1, 1, 0, 0], [1, 1, 1, 1, 0]], dtype=float)  # a judge a row
    r = np.corrcoef(errors)
    assert panel.error_correlation["fake/j1"]["fake/j3"] == pytest.approx(r[0, 2])
    rho = r[~np.eye(3, dtype=bool)].mean()
    assert panel.mean_error_correlation == pytest.approx(rho)
    assert panel.n_eff == pytest.approx(3 / (1 + 2 * rho))
    assert panel.n_eff_ci is not None and panel.n_eff_ci[0] <= panel.n_eff_ci[1]
    # The summary's JSON carries it as the "panel" block.
    assert json.loads(summary.model_dump_json())["panel"]["judges"][0]["judge"] == "fake/j1"


def test_the_summary_types_its_panel():
    assert BatchSummary.model_fields["panel"].annotation == Panel | None


def test_a_one_judge_summary_has_no_panel(tmp_path, council_home):
    path = write_jsonl(tmp_path / "one.jsonl", [{"id": 1, "prompt": "Q?", "a": "a", "b": "b", "label": "A"}])
    result = CliRunner().invoke(cli, ["batch", str(path), "--judge", "fake/j", "--json"])
    assert result.exit_code == 0, result.output
    assert "panel" not in json.loads(result.stdout) and "combine" not in json.loads(result.stdout)
    text = CliRunner().invoke(cli, ["batch", str(path), "--judge", "fake/j", "--batch-id", "again"])
    assert text.exit_code == 0 and "Panel" not in text.stdout


def test_the_cli_shows_the_panel_and_batch_results_reads_it_back(tmp_path, council_home):
    rows = [{"id": i, "prompt": f"Q{i}?", "a": f"answer {i}" + "!" * i, "b": f"other {i}", "label": "AB"[i % 2]}
            for i in range(6)]  # fmt: skip
    path = write_jsonl(tmp_path / "two.jsonl", rows)
    args = ["batch", str(path), "--judge", "fake/x", "--judge", "fake/y+first"]
    ran = CliRunner().invoke(cli, [*args, "--json"])
    assert ran.exit_code == 0, ran.output
    summary = json.loads(ran.stdout)
    panel = summary["panel"]
    assert [j["judge"] for j in panel["judges"]] == ["fake/x", "fake/y+first"]
    assert panel["judges"][1]["p_prefers_first"] == 1.0  # +first always picks the response shown first
    assert set(panel) >= {"agreement", "krippendorff_alpha", "n_eff", "n_eff_ci", "best_single_accuracy"}
    stored = CliRunner().invoke(cli, ["batch", "results", summary["batch_id"], "--summary", "--json"])
    assert stored.exit_code == 0, stored.output
    assert json.loads(stored.stdout)["panel"] == panel
    text = CliRunner().invoke(cli, ["batch", "results", summary["batch_id"], "--summary"])
    assert text.exit_code == 0, text.output
    for shown in ("Panel", "fake/y+first", "prefers first", "Krippendorff's α", "n_eff", "best single judge"):
        assert shown in text.stdout
    lines = CliRunner().invoke(cli, ["batch", "results", summary["batch_id"]])
    assert lines.exit_code == 0 and len(lines.stdout.splitlines()) == 6  # unchanged: the result lines
    out = tmp_path / "again.jsonl"
    both = CliRunner().invoke(cli, ["batch", "results", summary["batch_id"], "--summary", "--json", "-o", str(out)])
    assert both.exit_code == 0 and json.loads(both.stdout)["panel"] == panel and out.read_text() == lines.stdout
    alone = CliRunner().invoke(cli, ["batch", "results", summary["batch_id"], "--json"])
    assert alone.exit_code == 2 and "--json goes with --summary" in alone.stderr


def test_a_judge_that_is_always_wrong_is_left_out_of_n_eff(tmp_path, council_home):
    # fake/y+first picks whatever is shown first: under the consistency strategy every verdict of
    # it is a TIE, wrong against every label. x and z err on the same pairs: ρ̄ = 1 over them, and
    # the panel is worth one judge of the two whose errors vary, not one of three.
    rows = [{"id": i, "prompt": f"Q{i}?", "a": f"answer {i}" + "!" * i, "b": f"other {i}", "label": "AB"[i % 2]}
            for i in range(6)]  # fmt: skip
    path = write_jsonl(tmp_path / "three.jsonl", rows)
    args = ["batch", str(path), "--judge", "fake/x", "--judge", "fake/y+first", "--judge", "fake/z"]
    ran = CliRunner().invoke(cli, [*args, "--json"])
    assert ran.exit_code == 0, ran.output
    panel = json.loads(ran.stdout)["panel"]
    assert panel["error_correlation"]["fake/x"]["fake/z"] == pytest.approx(1.0)
    assert [j["accuracy"] for j in panel["judges"]][1] == 0.0
    assert (panel["n_eff"], panel["n_eff_judges"], panel["mean_error_correlation"]) == (1.0, 2, 1.0)
    assert panel["n_eff_left_out"] == {"fake/y+first": "always wrong"}
    text = CliRunner().invoke(cli, ["batch", "results", json.loads(ran.stdout)["batch_id"], "--summary"])
    assert text.exit_code == 0, text.output
    assert "of 2" in text.stdout and "left out: fake/y+first (always wrong)" in text.stdout


async def test_a_jury_of_two_fake_judges_runs_without_labels(tmp_path, store_backend):
    rows = [{"id": i, "prompt": f"Q{i}?", "a": f"answer {i}", "b": f"other {i}"} for i in range(4)]
    text = write_jsonl(tmp_path / "plain.jsonl", rows).read_text()
    judges = [fake_client("fake/x"), fake_client("fake/y")]
    summary = await run_batch(parse_batch(text, "plain.jsonl"), settings=BatchSettings(judges=["fake/x", "fake/y"]),
                              judges=judges, batch_id="plain", source="plain.jsonl",
                              content_sha256=content_digest(text), store=store_backend)  # fmt: skip
    panel = summary.panel
    assert panel is not None and panel.n_eff is None and panel.error_correlation is None
    assert all(j.accuracy is None for j in panel.judges) and panel.agreement["fake/x"]["fake/x"] == 1.0
    # Without labels the keys that measure against them are left out (SPEC.md, "Juries").
    shown = json.loads(summary.model_dump_json())["panel"]
    assert set(shown) == {"judges", "agreement", "krippendorff_alpha"}
    assert set(shown["judges"][0]) == {"judge", "decided", "agreement_with_combined", "p_prefers_first",
                                       "p_prefers_longer"}  # fmt: skip
