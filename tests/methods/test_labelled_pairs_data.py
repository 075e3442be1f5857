"""The labelled pairs the local-judge benchmark runs on: valid batch input with labels, both
label directions, short enough for a tiny CPU model, and a README that names their source."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from council.judging.batch import parse_batch

DATA_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
PAIRS = DATA_DIR / "labelled_pairs.jsonl"


def items():
    return parse_batch(PAIRS.read_text(encoding="utf-8"), str(PAIRS), "pairwise")


def test_the_file_is_pairwise_batch_input_every_item_labelled():
    parsed = items()
    assert 12 <= len(parsed) <= 20
    assert all(item.mode == "pairwise" and item.label in ("A", "B", "TIE") for item in parsed)


def test_both_label_directions_in_about_equal_numbers_and_any_prefix_has_both():
    labels = [item.label for item in items()]
    counts = Counter(labels)
    assert counts["A"] > 0 and counts["B"] > 0
    assert abs(counts["A"] - counts["B"]) <= 2
    assert set(labels[:2]) == {"A", "B"}  # the benchmark's --limit takes a prefix


def test_prompts_and_responses_are_short():
    for item in items():
        assert len(item.prompt) <= 400, item.id
        assert 0 < len(item.a or "") <= 400 and 0 < len(item.b or "") <= 400, item.id


def test_every_item_says_where_it_comes_from():
    for line in PAIRS.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        meta = row["metadata"]
        assert meta["source"] == "PandaLM testset-v1" and row["id"] == f"pandalm-{meta['idx']}"
        # Kept only where the three annotators agreed; their verdict (1: response 1 = "a") is the label.
        assert len(set(meta["annotators"])) == 1
        assert {1: "A", 2: "B"}[meta["annotators"][0]] == row["label"]


def test_the_readme_names_the_source_commit_and_licence():
    readme = (DATA_DIR / "README.md").read_text(encoding="utf-8")
    for needed in (
        "labelled_pairs.jsonl",
        "https://github.com/WeOpenML/PandaLM",
        "data/testset-v1.json",
        "d82043d2f31f5a45690bc528334439da246d0fd3",
        "Apache-2.0",
    ):
        assert needed in readme, needed
