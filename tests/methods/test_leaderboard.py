"""`council leaderboard`: pairwise outcomes counted in SQL from stored rankings and judged
pairs, filters, and the command's text, JSON and HTML output."""

from __future__ import annotations

import itertools
import json
import random
from collections import defaultdict

import numpy as np
import pytest
from click.testing import CliRunner

from council import Council
from council.cli.main import cli
from council.errors import InputError, UsageError
from council.leaderboard.stored import leaderboard
from council.methods.bradley_terry import win_matrix
from council.storage import SQLiteStore


def add_session(
    store: SQLiteStore,
    sid: str,
    answers: dict[str, tuple[str, str]],
    ballots: list[tuple[str, list[str], int]],
    *,
    council: str = "default",
    created: str = "2026-01-01T00:00:00.000000+00:00",
) -> None:
    """``answers``: member -> (model, status); ``ballots``: (reviewer, ranking, valid)."""
    with store.immediate() as db:
        db["sessions"].insert({"id": sid, "created_at": created, "status": "complete", "kind": "council",
                               "council": council, "members": json.dumps(list(answers))})
        db["answers"].insert_all(
            {"session_id": sid, "member": m, "model": model, "status": status} for m, (model, status) in answers.items()
        )
        db["reviews"].insert_all(
            {"session_id": sid, "reviewer": r, "model": "judge", "ranking": json.dumps(ranking), "valid": valid}
            for r, ranking, valid in ballots
        )


def add_judgment(store: SQLiteStore, run_id: str, model_a: str | None, model_b: str | None, winner: str | None, **row):
    with store.immediate() as db:
        db["judgment_runs"].insert({"id": run_id, "kind": "compare", "status": "ok", "winner": winner,
                                    "model_a": model_a, "model_b": model_b,
                                    "created_at": "2026-03-01T00:00:00.000000+00:00", **row})


def matrix_by_name(data) -> dict[tuple[str, str], float]:
    from council.methods.bradley_terry import Stratum

    wins = win_matrix([Stratum("s", data.sessions), Stratum("j", data.judgments)], len(data.models))
    return {
        (data.models[i], data.models[j]): float(wins[i, j])
        for i in range(len(data.models))
        for j in range(len(data.models))
        if wins[i, j]
    }


@pytest.fixture
def store(council_home):
    store = SQLiteStore.open()
    ok = "ok"
    # s1: three members; each ballot leaves out the reviewer's own answer; one invalid ballot
    add_session(
        store,
        "s1",
        {"m1": ("x", ok), "m2": ("y", ok), "m3": ("z", ok)},
        [("m1", ["m2", "m3"], 1), ("m2", ["m1", "m3"], 1), ("m3", ["m2", "m1"], 1), ("m4", ["m3", "m1"], 0)],
    )
    # s2: two members share a model (their pair says nothing), a candidate answer is not a model
    add_session(
        store,
        "s2",
        {"a": ("x", ok), "b": ("x", ok), "c": ("w", ok), "cand": ("draft", "candidate")},
        [("c", ["c", "a", "b", "cand"], 1)],
        council="other",
        created="2026-02-01T00:00:00.000000+00:00",
    )
    yield store
    store.close()


def test_rankings_become_pairwise_wins_per_model(store):
    data = store.comparisons(judgments=False)
    assert data.models == ["w", "x", "y", "z"]
    assert matrix_by_name(data) == {("y", "z"): 1, ("x", "z"): 1, ("y", "x"): 1, ("w", "x"): 2}
    assert sum(n for n, _ in data.sessions) == 2


def test_filters_by_council_and_since(store):
    assert matrix_by_name(store.comparisons(council="default")) == {("y", "z"): 1, ("x", "z"): 1, ("y", "x"): 1}
    assert matrix_by_name(store.comparisons(since="2026-01-15T00:00:00.000000+00:00")) == {("w", "x"): 2}


def test_judged_pairs_count_with_ties_as_half_wins(store):
    add_judgment(store, "r1", "p", "q", "A")
    add_judgment(store, "r2", "p", "q", "TIE")
    add_judgment(store, "r3", "q", "p", "B")  # p wrote B here, and won
    add_judgment(store, "r4", None, "q", "A")  # the item named no models
    add_judgment(store, "r5", "p", "q", None, status="failed")
    add_judgment(store, "r6", "p", "p", "A")  # a model against itself
    data = store.comparisons(sessions=False)
    assert matrix_by_name(data) == {("p", "q"): 2.5, ("q", "p"): 0.5}
    assert sum(n for n, _ in data.judgments) == 3
    board = leaderboard(store, source="judgments", bootstrap=0)
    by_model = {m.model: m for m in board.models}
    assert by_model["p"].comparisons == 3 and by_model["p"].wins == 2.5
    assert by_model["q"].win_rate == pytest.approx(0.5 / 3)
    assert [m.model for m in board.models] == ["p", "q"]


def test_the_board_pools_a_model_across_sessions_and_counts_its_comparisons(store):
    board = leaderboard(store, bootstrap=200, seed=3)
    by_model = {m.model: m for m in board.models}
    assert {m: (r.comparisons, r.wins) for m, r in by_model.items()} == {
        "x": (4, 1.0), "y": (2, 2.0), "z": (2, 0.0), "w": (2, 2.0)
    }
    assert board.sessions == 2 and board.judgments == 0 and board.comparisons == 5
    ratings = [m.rating for m in board.models]
    assert ratings == sorted(ratings, reverse=True)
    assert np.mean(ratings) == pytest.approx(1000.0)
    assert by_model["z"].rating < by_model["x"].rating < by_model["y"].rating
    for m in board.models:
        assert m.ci is not None and m.ci[0] <= m.rating <= m.ci[1]
    assert board == leaderboard(store, bootstrap=200, seed=3)  # seeded: the same numbers


def test_usage_errors(store):
    with pytest.raises(UsageError, match="--council selects sessions"):
        leaderboard(store, council="default", source="judgments")
    with pytest.raises(UsageError, match="--source must be one of"):
        leaderboard(store, source="everything")
    with pytest.raises(InputError, match="--since"):
        leaderboard(store, since="last tuesday")


def test_disconnected_models_are_reported_as_separate_groups(council_home):
    store = SQLiteStore.open()
    add_session(store, "s1", {"a": ("x", "ok"), "b": ("y", "ok")}, [("r", ["a", "b"], 1)])
    add_session(store, "s2", {"a": ("u", "ok"), "b": ("v", "ok")}, [("r", ["b", "a"], 1)])
    board = leaderboard(store, bootstrap=50)
    assert board.groups == [["u", "v"], ["x", "y"]]
    assert any("never compared" in n for n in board.notes)
    assert all(np.isfinite(m.rating) for m in board.models)


def test_sql_counts_match_a_python_count_of_the_raw_rows(council_home):
    """Random sessions (shared models, failed and candidate answers, invalid ballots, self-review
    included or not), counted by SQL and by a loop over the stored rows."""
    rnd = random.Random(5)
    store = SQLiteStore.open()
    models = ["m/a", "m/b", "m/c", "m/d", "m/e"]
    for s in range(120):
        members = [f"k{i}" for i in range(rnd.randint(2, 5))]
        answers = {m: (rnd.choice(models), rnd.choice(["ok"] * 8 + ["failed", "candidate"])) for m in members}
        ballots = []
        for reviewer in members:
            shown = [m for m in members if answers[m][1] != "failed" and (rnd.random() < 0.5 or m != reviewer)]
            ballots.append((reviewer, rnd.sample(shown, len(shown)), int(rnd.random() < 0.9)))
        add_session(store, f"s{s}", answers, ballots, created=f"2026-01-{1 + s % 28:02d}T00:00:00.000000+00:00")
    expected: dict[tuple[str, str], float] = defaultdict(float)
    model_of = {(r["session_id"], r["member"]): (r["model"], r["status"]) for r in store.db["answers"].rows}
    for review in store.db["reviews"].rows:
        if not review["valid"]:
            continue
        ranking = json.loads(review["ranking"])
        for w, lo in itertools.combinations(ranking, 2):
            (mw, sw), (ml, sl) = model_of[(review["session_id"], w)], model_of[(review["session_id"], lo)]
            if sw == sl == "ok" and mw != ml:
                expected[(mw, ml)] += 1
    assert matrix_by_name(store.comparisons()) == dict(expected)


async def test_real_sessions_follow_the_councils_self_review_setting(council_home):
    members = ["fake/alpha", "fake/beta", "fake/gamma"]
    for setting, council in (("exclude", "ex"), ("include", "in")):
        c = Council.from_config(
            {
                "defaults": {"council": council},
                "councils": {council: {"members": members, "chairman": members[0], "self_review": setting}},
            },
            store=True,
        )
        for seed in range(2):
            result = await c.run("What is two plus two?", seed=seed, synthesis=False)
            assert result.status == "complete"
        await c.aclose()
    store = SQLiteStore.open()
    # exclude: each of 3 ballots ranks the 2 other answers (1 pair); include: all 3 (3 pairs)
    assert leaderboard(store, council="ex", bootstrap=0).comparisons == 2 * 3 * 1
    assert leaderboard(store, council="in", bootstrap=0).comparisons == 2 * 3 * 3
    board = leaderboard(store, bootstrap=0)
    assert sorted(m.model for m in board.models) == sorted(members)
    assert sum(m.comparisons for m in board.models) == 2 * board.comparisons == 2 * 24
    store.close()


# ----------------------------------------------------------------------------- CLI


def test_cli_json_has_the_contract_keys_best_first(store):
    result = CliRunner().invoke(cli, ["leaderboard", "--json", "--bootstrap", "100"])
    assert result.exit_code == 0, result.output
    board = json.loads(result.stdout)
    assert board["method"] == "bradley-terry" and board["bootstrap"] == 100
    assert [set(m) >= {"model", "rating", "ci", "comparisons", "win_rate"} for m in board["models"]] == [True] * 4
    ratings = [m["rating"] for m in board["models"]]
    assert ratings == sorted(ratings, reverse=True)
    assert all(m["ci"][0] <= m["rating"] <= m["ci"][1] for m in board["models"])


def test_cli_text_table_and_filters(store):
    result = CliRunner().invoke(cli, ["leaderboard", "--council", "default", "--bootstrap", "50"])
    assert result.exit_code == 0, result.output
    assert "Bradley–Terry" in result.stdout and "mean rating 1000" in result.stdout
    rows = [line.split("│") for line in result.stdout.splitlines() if line.startswith("│")]
    assert [(cells[1].strip(), cells[2].strip()) for cells in rows] == [("1", "y"), ("2", "x"), ("3", "z")]


def test_cli_bad_input_is_one_line_and_exit_2(store):
    result = CliRunner().invoke(cli, ["leaderboard", "--since", "yesterday"])
    assert result.exit_code == 2 and result.stderr.startswith("error: --since:") and "Traceback" not in result.output
    result = CliRunner().invoke(cli, ["leaderboard", "--council", "default", "--source", "judgments"])
    assert result.exit_code == 2 and result.stderr.strip().count("\n") == 0


def test_cli_html_page_escapes_model_names(store, tmp_path):
    add_judgment(store, "r1", "<script>alert(1)</script>", "x", "A")
    page = tmp_path / "board.html"
    result = CliRunner().invoke(cli, ["leaderboard", "--html", "-o", str(page), "--bootstrap", "50"])
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "<svg" in html and 'class="chart leaderboard"' in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert html.count("<circle") == 5
    assert result.stdout == "" and f"wrote {page}" in result.stderr


def test_cli_output_formats(store, tmp_path):
    as_json = tmp_path / "board.json"
    result = CliRunner().invoke(cli, ["leaderboard", "--json", "-o", str(as_json), "--bootstrap", "0"])
    assert result.exit_code == 0 and json.loads(as_json.read_text())["bootstrap"] == 0
    text = tmp_path / "board.txt"
    result = CliRunner().invoke(cli, ["leaderboard", "-o", str(text), "--bootstrap", "0"])
    assert result.exit_code == 0 and "Bradley–Terry" in text.read_text() and "\x1b[" not in text.read_text()
    page = tmp_path / "extra.html"
    result = CliRunner().invoke(cli, ["leaderboard", "--html", str(page), "--json", "--bootstrap", "0"])
    assert result.exit_code == 0 and page.read_text().startswith("<!DOCTYPE html>")
    assert json.loads(result.stdout)["method"] == "bradley-terry"  # the page beside the usual output
    result = CliRunner().invoke(cli, ["leaderboard", "--html", "--json"])
    assert result.exit_code == 2 and "choose one" in result.stderr
    result = CliRunner().invoke(cli, ["leaderboard", "--html"])
    assert result.exit_code == 0 and result.stdout.startswith("<!DOCTYPE html>")


def test_an_empty_database_says_where_comparisons_come_from(council_home):
    result = CliRunner().invoke(cli, ["leaderboard"])
    assert result.exit_code == 0 and "No pairwise comparisons on record" in result.stdout


def test_filters_that_match_nothing_say_so(store):
    board = leaderboard(store, council="no-such-council", bootstrap=0)
    assert board.models == [] and board.notes[0].startswith("No pairwise comparisons match these filters")


async def test_a_batch_that_names_its_models_feeds_the_leaderboard(tmp_path, council_home):
    from fake_judges import fake_client

    from council.judging.batch import BatchSettings, content_digest, parse_batch, run_batch

    rows = [
        {"id": i, "prompt": f"Q{i}?", "a": f"long answer {i} " * (i % 3 + 1), "b": f"b{i}",
         "model_a": "vendor/big", "model_b": "vendor/small"}
        for i in range(12)
    ] + [{"id": "anon", "prompt": "Q?", "a": "x", "b": "y"}]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    store = SQLiteStore.open()
    judge = fake_client("fake/j")
    await run_batch(parse_batch(text, "b.jsonl"), settings=BatchSettings(judges=["fake/j"]), judges=[judge],
                    batch_id="b", source="b.jsonl", content_sha256=content_digest(text), store=store)
    verdicts = [r["winner"] for r in store.db.query("select winner from judgment_runs where model_a is not null")]
    assert len(verdicts) == 12
    big_wins = verdicts.count("A") + verdicts.count("TIE") / 2
    board = leaderboard(store, source="judgments", bootstrap=0)
    assert board.judgments == 12 and board.comparisons == 12
    by_model = {m.model: m for m in board.models}
    assert by_model["vendor/big"].wins == big_wins and by_model["vendor/small"].wins == 12 - big_wins


def test_the_command_and_the_library_share_their_defaults():
    from council.cli.leaderboard import leaderboard as command
    from council.leaderboard.stored import DEFAULT_BOOTSTRAP

    defaults = {p.name: p.default for p in command.params}
    assert defaults["bootstrap"] == DEFAULT_BOOTSTRAP and defaults["source"] == "all" and defaults["seed"] == 0


def test_the_stores_judgments_share_their_model_names_and_markdown_counts():
    """A fit holds every stored pair: each distinct name and count is one object (2 -> 1 kB a pair)."""
    from council.leaderboard.judged import stored_judgments

    def row(i: int) -> dict:
        counts = {"headers": 1, "lists": 2, "bold": i % 2}
        return {"run_id": f"r{i}", "created_at": "2026-01-01", "model_a": "".join(["m/", "a"]),
                "model_b": "".join(["m/", "b"]), "winner": "AB"[i % 2], "length_a": 10 + i, "length_b": 20,
                "prompt_id": None, "markdown_a": dict(counts), "markdown_b": None}  # fmt: skip

    first, second, third = stored_judgments(row(i) for i in (0, 1, 2))
    assert first.model_a is second.model_a is third.model_a and first.model_b is third.model_b
    assert first.markdown_a is third.markdown_a and first.markdown_a is not second.markdown_a
    assert (second.markdown_a.headers, second.markdown_a.lists, second.markdown_a.bold) == (1, 2, 1)
    assert (second.model_a, second.winner, second.length_a, second.markdown_b) == ("m/a", "B", 11, None)
