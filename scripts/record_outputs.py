"""Record what council's public CLI prints, run-varying values masked, to compare two checkouts.

The script drives only the ``council`` command, each call in its own subprocess, so it works on any
checkout whatever its module layout. It starts the checkout's mock LLM server
(``scripts/mock_llm_server.py``, deterministic replies, no latency, no faults), writes a council
file whose members, chairman and judges are models on it, and runs every command below in a fresh
temporary ``COUNCIL_HOME`` (SQLite store) with a scrubbed environment (no keys, no
``COUNCIL_*`` variable of the caller, ``TZ=UTC``, a fixed terminal width, no bytecode written
into the checkout). Each output goes to its
own file in OUTDIR; ``commands.txt`` lists every command in order with its exit code and its
masked stderr. What is recorded:

- ``run --json`` on two questions, on a council whose third member always fails (exit code and
  warning too), and ``run`` as text; ``sessions list`` (JSON and text) and ``sessions show``
  (JSON for every session, text for one);
- ``compare --json`` (one judge; two judges on the depth criteria; one pass, averaged),
  ``grade --json`` (the built-in ``general`` rubric; a rubric file with a reference answer) and
  ``cache stats`` (JSON and text) after cached repeats;
- ``batch`` on a small pairwise file naming ``model_a``/``model_b`` (``--json`` summary and the
  results file; the text summary; two judges), on a small grading file, and ``batch status
  --json`` / ``batch results`` of the first batch. The pairwise batches run with
  ``--concurrency 1``: ``export --judged-pairs`` and the leaderboard read judged pairs oldest
  first, and items judged side by side finish in the scheduler's order (the grading batch,
  which nothing reads by time, keeps the default concurrency);
- ``bias-report`` (``--json``, text, ``--html``) and ``leaderboard`` (``--json`` for every
  ``--source``, text, ``--html``, ``--judgments`` on the exported judged pairs, with
  ``--control length`` and ``--baseline``);
- every ``export``: shapes sessions, scores and answers in jsonl and csv (each also
  ``--redact``), ``--bias-records`` in both, ``--judged-pairs`` (JSON Lines only), and one
  ``-o FILE`` for a CSV and for the judged pairs;
- careless-user errors: exit code and first stderr line of a broken council file, an unknown
  judge, a missing file, an unknown council, a bad batch line, an unknown session id and
  ``--judged-pairs --format csv``.

Masking (``Masker``): one masker sees every output in the order above, so equal values get equal
placeholders across files and a changed reference between outputs still shows. Outputs are
otherwise kept byte for byte (JSON formatting, CSV quoting, line endings).

- session ids (UUIDs) become ``<uuid-N>``, numbered by first appearance, and a shown prefix of
  one (8 to 15 hex digits, as the text tables print) ``<uuid-N:prefix>``. Batch ids are not
  masked: they are a digest of the file and the settings, the same on every run, and ``--resume``
  finds a stored batch by them;
- date-times (ISO, with or without a zone, as the tables print them) become ``<TIME>``, dates
  ``<DATE>``;
- durations: in JSON and JSON Lines, a number under a key naming one (``duration_ms``,
  ``latency_ms``, ``elapsed_ms``, ``wall_time_s``..., see ``TIMING_KEY``) becomes
  ``"<DURATION>"``; in CSV, the cells of such a column; in text, a number followed by a time
  unit (``1.2 s``, ``35ms``);
- the mock server's port becomes ``<PORT>``, the temporary directory ``<TMP>``, the mock's
  reply ids (``chatcmpl-mock-PID-N``) ``<CHATCMPL>``;
- the one order that varies: ``bias-report --html`` draws its scatter points in session id
  order (the store reads them ``ORDER BY session_id``, and the ids are random UUIDs), so it
  differs between runs of the same code while where each point is drawn does not; each run of
  ``<circle>`` elements in an HTML page is sorted.

Nothing else is sorted: key order and row order are what users see. The shuffles are seeded
(``--seed``), the leaderboard's bootstrap uses its default seed, and the mock's replies are a
pure function of the request, so everything else is council's own behaviour.

Usage (the checkout under test is the first entry of PYTHONPATH, or ``--checkout``)::

    PYTHONPATH=/path/to/old python scripts/record_outputs.py /tmp/snap/before
    PYTHONPATH=/path/to/new python scripts/record_outputs.py /tmp/snap/after
    diff -r /tmp/snap/before /tmp/snap/after      # empty when nothing users see changed

``--council-cmd "council"`` runs another command instead of ``python -m council`` (it is split
like a shell line; PYTHONPATH is still set to the checkout). Running the script twice on the same
code gives identical files (check with ``diff -r`` of two runs). OUTDIR is emptied first.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parents[1]

QUESTIONS = ("Why is the sky blue?", "What causes the seasons on Earth?", "How do vaccines train the immune system?")

UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
# Digits next to a dot or a word character are part of a number or a word, never an id's prefix.
HEX_PREFIX = re.compile(r"(?<![\w.])[0-9a-f]{8,15}(?![\w.])")
JSON_NUMBER = re.compile(r'("(?:[^"\\]|\\.)*")(\s*:\s*)(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)')
CIRCLES = re.compile(r"(?:<circle [^>]*/>)+")
CIRCLE = re.compile(r"<circle [^>]*/>")
DATETIME = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
TEXT_DURATION = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds|µs|us|min)\b")
CHATCMPL = re.compile(r"chatcmpl-mock-\d+-\d+")
TIMING_KEY = re.compile(
    r"(?:^|_)(?:latency|duration|elapsed|wall|seconds|secs|runtime|took)(?:_|$)|_ms$|_s$", re.IGNORECASE
)


def _csv_text(rows: list[list[str]], like: str) -> str:
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\r\n" if "\r\n" in like else "\n").writerows(rows)
    return out.getvalue()


class Proc(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


class Masker:
    """Replaces run-varying values; placeholders are numbered by first appearance over all outputs."""

    def __init__(self, tmp: Path, port: int, database_url: str | None = None) -> None:
        self.tmp_paths = sorted({str(tmp), str(tmp.resolve())}, key=len, reverse=True)
        self.database = database_url.rsplit("/", 1)[-1].split("?")[0] if database_url else None
        self.port = str(port)
        self.ids: dict[str, str] = {}

    def _id(self, value: str, kind: str) -> str:
        if value not in self.ids:
            self.ids[value] = f"<{kind}-{sum(1 for v in self.ids.values() if v.startswith(f'<{kind}-')) + 1}>"
        return self.ids[value]

    def _prefix(self, match: re.Match[str]) -> str:
        short = match.group(0)
        for full, placeholder in self.ids.items():
            if full.replace("-", "").startswith(short) or full.startswith(short):
                return f"{placeholder[:-1]}:prefix>"
        return short

    def text(self, s: str) -> str:
        for path in self.tmp_paths:
            s = s.replace(path, "<TMP>")
        if self.database:
            s = s.replace(self.database, "<DATABASE>")
        for host in ("127.0.0.1", "localhost"):
            s = s.replace(f"{host}:{self.port}", f"{host}:<PORT>")
        s = CHATCMPL.sub("<CHATCMPL>", s)
        s = UUID.sub(lambda m: self._id(m.group(0), "uuid"), s)
        s = HEX_PREFIX.sub(self._prefix, s)
        s = DATETIME.sub("<TIME>", s)
        s = DATE.sub("<DATE>", s)
        return s

    def text_output(self, s: str) -> str:
        """Human-readable output: also durations written with a unit."""
        return TEXT_DURATION.sub("<DURATION>", self.text(s))

    def html(self, s: str) -> str:
        """An HTML page: also a chart's points in a fixed order (the bias report draws them in the
        order of the random session ids; where each is drawn does not vary)."""
        return CIRCLES.sub(lambda m: "".join(sorted(CIRCLE.findall(m.group(0)))), self.text_output(s))

    def csv(self, s: str) -> str:
        """CSV: the cells of timing columns too (by header, as ``json`` does by key); rewritten by
        ``csv.writer`` with the file's line ending."""
        rows = list(csv.reader(io.StringIO(s, newline="")))
        if not rows:
            return self.text(s)
        timing = {i for i, name in enumerate(rows[0]) if TIMING_KEY.search(name)}
        masked = [
            ["<DURATION>" if n and i in timing and cell else self.text(cell) for i, cell in enumerate(row)]
            for n, row in enumerate(rows)
        ]
        # Only when csv writes the file back byte for byte; otherwise text masking alone.
        return _csv_text(masked, s) if _csv_text(rows, s) == s else self.text(s)

    def json_text(self, s: str) -> str:
        """JSON or JSON Lines as printed (formatting kept): also a number under a timing key."""
        return JSON_NUMBER.sub(
            lambda m: f'{m.group(1)}{m.group(2)}"<DURATION>"' if TIMING_KEY.search(m.group(1)[1:-1]) else m.group(0),
            self.text(s),
        )


class Recorder:
    """Runs council commands in the temporary home and writes their masked outputs."""

    def __init__(self, out: Path, work: Path, env: dict[str, str], council_cmd: Sequence[str], masker: Masker) -> None:
        self.out, self.work, self.env, self.cmd, self.masker = out, work, env, list(council_cmd), masker
        self.index: list[str] = []
        self.raw: dict[str, str] = {}  # unmasked stdout by name, to read ids from

    def _run(self, args: Sequence[str]) -> Proc:
        # Bytes, decoded without newline translation, so a CRLF line ending is recorded as written.
        proc = subprocess.run([*self.cmd, *args], cwd=self.work, env=self.env, capture_output=True, timeout=300)
        return Proc(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))

    def council(self, name: str, *args: str) -> Proc:
        proc = self._run(args)
        self.raw[name] = proc.stdout
        stderr = self.masker.text_output(proc.stderr).rstrip("\n")
        shown = " ".join(shlex.quote(self.masker.text(a)) for a in args)
        self.index.append(f"## {name}\n$ council {shown}\nexit {proc.returncode}\n{stderr}\n")
        return proc

    def record(self, name: str, *args: str) -> Proc:
        """Run and write stdout to ``name``."""
        proc = self.council(name, *args)
        self.write(name, proc.stdout)
        return proc

    def write(self, name: str, content: str) -> None:
        """Write ``content`` masked as its file name's extension says; council's bytes otherwise."""
        if name.endswith((".json", ".jsonl")):
            text = self.masker.json_text(content)
        elif name.endswith(".csv"):
            text = self.masker.csv(content)
        elif name.endswith(".html"):
            text = self.masker.html(content)
        else:
            text = self.masker.text_output(content)
        (self.out / name).write_text(text, encoding="utf-8", newline="")

    def record_file(self, name: str, path: str) -> None:
        """Write a file a command wrote in the work directory."""
        file = self.work / path
        self.write(name, file.read_bytes().decode("utf-8", "replace") if file.exists() else f"<missing: {path}>\n")

    def error(self, name: str, *args: str) -> None:
        """A careless-user error: exit code and first stderr line only."""
        proc = self._run(args)
        first = next((line for line in proc.stderr.splitlines() if line.strip()), "")
        shown = " ".join(shlex.quote(self.masker.text(a)) for a in args)
        body = f"$ council {shown}\nexit {proc.returncode}\nstderr: {self.masker.text_output(first)}\n"
        (self.out / name).write_text(body, encoding="utf-8")
        self.index.append(f"## {name}\n{body}")


def config_text(base_url: str) -> str:
    models = {
        "m1": "mock-alpha", "m2": "mock-beta", "m3": "mock-gamma", "m4": "mock-delta+first",
        "broken": "mock-epsilon+fail", "j1": "mock-judge", "j2": "mock-judge-two+first",
    }  # fmt: skip
    lines = [
        "[defaults]", 'council = "default"', "",
        "[councils.default]", 'members = ["m1", "m2", "m3", "m4"]', 'chairman = "m1"', 'fallback_chairman = "m2"', "",
        "[councils.shaky]", 'members = ["m1", "m2", "broken"]', 'chairman = "m2"', "",
    ]  # fmt: skip
    for alias, model in models.items():
        lines += [f"[models.{alias}]", f'model = "openai/{model}"', f'api_base = "{base_url}"', "retries = 0", ""]
    return "\n".join(lines)


RUBRIC = """name = "brevity"
description = "Short and correct"
scale = [1, 5]

[[criteria]]
name = "correctness"
description = "The answer is right."

[[criteria]]
name = "brevity"
description = "No word is wasted."
"""


def write_inputs(work: Path) -> None:
    (work / "a.txt").write_text("The sky is blue because air scatters short (blue) wavelengths of sunlight more.\n")
    (work / "b.txt").write_text("Because of the ocean.\n")
    (work / "reference.txt").write_text("Rayleigh scattering: shorter wavelengths scatter more strongly.\n")
    (work / "rubric.toml").write_text(RUBRIC)
    (work / "broken.toml").write_text("[councils.default\nmembers = ['m1'\n")
    pairs = [
        {"id": f"p{i}", "prompt": q, "a": f"Answer {i}: a careful, sourced explanation of it.", "b": f"B{i}.",
         "model_a": "openai/mock-alpha", "model_b": "openai/mock-beta" if i % 2 else "openai/mock-gamma"}
        for i, q in enumerate(QUESTIONS * 2, 1)
    ]  # fmt: skip
    (work / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    grades = [
        {"id": f"g{i}", "prompt": q, "response": f"A response to {q.lower()}"} for i, q in enumerate(QUESTIONS, 1)
    ]
    grades[0]["reference"] = "Rayleigh scattering."
    (work / "grades.jsonl").write_text("".join(json.dumps(g) + "\n" for g in grades))
    (work / "bad_batch.jsonl").write_text('{"id": "x", "prompt": "p", "a": "a", "b": "b"}\n{"id": "y", "prompt": \n')


def record_all(r: Recorder) -> None:
    cfg = ("--config", "council.toml")
    cfg_json = (*cfg, "--json")
    # Sessions
    for i, question in enumerate(QUESTIONS[:2], 1):
        r.record(f"run_q{i}.json", "run", question, *cfg_json, "--seed", str(i))
    r.record("run_member_fails.json", "run", QUESTIONS[0], *cfg_json, "--council", "shaky", "--seed", "7")
    r.record("run_q3.txt", "run", QUESTIONS[2], *cfg, "--seed", "3")
    r.record("sessions_list.json", "sessions", "list", "--json")
    r.record("sessions_list.txt", "sessions", "list")
    listed = json.loads(r.raw["sessions_list.json"])
    for n, session in enumerate(reversed(listed), 1):  # oldest first
        r.record(f"sessions_show_{n}.json", "sessions", "show", session["session_id"], "--json")
    r.record("sessions_show_1.txt", "sessions", "show", listed[-1]["session_id"][:8])

    # Judging
    prompt = ("--prompt", QUESTIONS[0])
    pair, swapped = (*prompt, "--a", "a.txt", "--b", "b.txt"), (*prompt, "--a", "b.txt", "--b", "a.txt")
    r.record("compare.json", "compare", *pair, "--judge", "j1", *cfg_json)
    r.record("compare_two_judges_depth.json", "compare", *pair, "--judge", "j1", "--judge", "j2", "--criteria", "depth",
             *cfg_json)  # fmt: skip
    r.record("compare_no_swap_average.json", "compare", *swapped, "--judge", "j2", "--no-swap", "--strategy", "average",
             *cfg_json)  # fmt: skip
    r.record("compare.txt", "compare", *pair, "--judge", "j1", *cfg)
    r.record("grade_general.json", "grade", *prompt, "--response", "a.txt", "--judge", "j1", *cfg_json)
    r.record("grade_rubric_file.json", "grade", *prompt, "--response", "b.txt", "--rubric", "rubric.toml",
             "--reference", "reference.txt", "--judge", "j1", "--judge", "j2", *cfg_json)  # fmt: skip
    r.record("grade.txt", "grade", *prompt, "--response", "a.txt", "--judge", "j1", *cfg)
    for n in (1, 2):  # the second is answered from the call cache
        r.record(f"compare_cached_{n}.json", "compare", *pair, "--judge", "j2", "--cache", *cfg_json)
    r.record("cache_stats.json", "cache", "stats", "--json")
    r.record("cache_stats.txt", "cache", "stats")

    # Batches. Pairwise ones judge an item at a time: the judged pairs are exported (and rated) oldest
    # first, and items judged side by side finish in whatever order the scheduler gives them.
    pairs = ("pairs.jsonl", "--concurrency", "1")
    r.record("batch_pairs_summary.json", "batch", *pairs, "--judge", "j1", *cfg_json)
    r.record_file("batch_pairs.results.jsonl", "pairs.results.jsonl")
    batch_id = json.loads(r.raw["batch_pairs_summary.json"] or "{}").get("batch_id", "")
    r.record("batch_status.json", "batch", "status", batch_id, "--json")
    r.record("batch_results.jsonl", "batch", "results", batch_id)
    r.record("batch_pairs_two_judges_summary.json", "batch", *pairs, "--judge", "j1", "--judge", "j2",
             "-o", "pairs2.results.jsonl", *cfg_json)  # fmt: skip
    r.record_file("batch_pairs_two_judges.results.jsonl", "pairs2.results.jsonl")
    r.record("batch_pairs_summary.txt", "batch", *pairs, "--judge", "j2", "--strategy", "average",
             "-o", "pairs3.results.jsonl", *cfg)  # fmt: skip
    r.record_file("batch_pairs_average.results.jsonl", "pairs3.results.jsonl")
    r.record("batch_grades_summary.json", "batch", "grades.jsonl", "--judge", "j1", "--votes", "1", *cfg_json)
    r.record_file("batch_grades.results.jsonl", "grades.results.jsonl")

    # Reports
    r.record("bias_report.json", "bias-report", "--json")
    r.record("bias_report.txt", "bias-report")
    r.record("bias_report.html", "bias-report", "--html")
    r.record("leaderboard.json", "leaderboard", "--json")
    for source in ("sessions", "judgments"):
        r.record(f"leaderboard_{source}.json", "leaderboard", "--source", source, "--json")
    r.record("leaderboard.txt", "leaderboard")
    r.record("leaderboard.html", "leaderboard", "--html")

    # Exports
    for fmt in ("jsonl", "csv"):
        for shape in ("sessions", "scores", "answers"):
            r.record(f"export_{shape}.{fmt}", "export", "--format", fmt, "--shape", shape)
            r.record(f"export_{shape}_redacted.{fmt}", "export", "--format", fmt, "--shape", shape, "--redact")
        r.record(f"export_bias_records.{fmt}", "export", "--format", fmt, "--bias-records")
    r.record("export_judged_pairs.jsonl", "export", "--judged-pairs")
    r.council("export_to_file", "export", "--shape", "scores", "--format", "csv", "-o", "scores.csv")
    r.record_file("export_scores_to_file.csv", "scores.csv")
    r.council("export_judged_pairs_file", "export", "--judged-pairs", "-o", "judged.jsonl")
    r.record_file("export_judged_pairs_to_file.jsonl", "judged.jsonl")
    judged = ("--judgments", "judged.jsonl", "--json")
    r.record("leaderboard_judgments_file.json", "leaderboard", *judged)
    r.record("leaderboard_judgments_file_controlled.json", "leaderboard", *judged, "--control", "length",
             "--baseline", "openai/mock-alpha")  # fmt: skip

    # Careless users
    r.error("error_broken_config.txt", "run", QUESTIONS[0], "--config", "broken.toml")
    r.error("error_unknown_judge.txt", "compare", *pair, "--judge", "nosuch", *cfg)
    r.error("error_missing_file.txt", "grade", *prompt, "--response", "missing.txt", "--judge", "j1", *cfg)
    r.error("error_unknown_council.txt", "run", QUESTIONS[0], *cfg, "--council", "nosuch")
    r.error("error_bad_batch_line.txt", "batch", "bad_batch.jsonl", "--judge", "j1", *cfg)
    r.error("error_unknown_session.txt", "sessions", "show", "0000dead")
    r.error("error_judged_pairs_csv.txt", "export", "--judged-pairs", "--format", "csv")


def start_mock(script: Path, env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, str(script), "--port", "0", "--seed", "0"]
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    reader.start()
    reader.join(30)
    if not ready or not ready[0].startswith("READY "):
        proc.kill()
        raise SystemExit(f"record_outputs: the mock server {script} did not start")
    return proc, ready[0].split(" ", 1)[1].strip()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("outdir", type=Path)
    first = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    checkout_help = "the checkout whose council runs (default: the first PYTHONPATH entry, else this one)"
    p.add_argument("--checkout", type=Path, default=Path(first) if first else HERE, help=checkout_help)
    cmd_help = "the council command (default: this Python's -m council)"
    p.add_argument("--council-cmd", default=f"{shlex.quote(sys.executable)} -m council", help=cmd_help)
    mock_help = "the mock LLM server (default: the checkout's scripts/mock_llm_server.py)"
    p.add_argument("--mock-script", type=Path, default=None, help=mock_help)
    db_help = "record against this PostgreSQL database (COUNCIL_DATABASE_URL; empty, its URL masked), not SQLite"
    p.add_argument("--database-url", default=None, help=db_help)
    args = p.parse_args(argv)
    checkout = args.checkout.resolve()
    mock_script = args.mock_script or checkout / "scripts" / "mock_llm_server.py"
    if not mock_script.exists():
        mock_script = HERE / "scripts" / "mock_llm_server.py"

    out = args.outdir.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="council-snapshot-") as tmp_name:
        tmp = Path(tmp_name)
        work, home = tmp / "work", tmp / "home"
        work.mkdir()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "COUNCIL_HOME": str(home),
            "PYTHONPATH": str(checkout), "TZ": "UTC", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8",
            "PYTHONIOENCODING": "utf-8", "COLUMNS": "120", "LINES": "50", "NO_COLOR": "1", "TERM": "dumb",
            "PYTHONDONTWRITEBYTECODE": "1",  # the checkout under test may be read-only; leave it as it is
        }  # fmt: skip
        if args.database_url:
            env["COUNCIL_DATABASE_URL"] = args.database_url
        where = [sys.executable, "-c", "import council; print(council.__file__)"]
        found = subprocess.run(where, cwd=work, env=env, capture_output=True, text=True, check=False).stdout.strip()
        print(f"python -m council in PYTHONPATH={checkout} imports {found or 'nothing'}")
        mock, url = start_mock(mock_script, env, work)
        try:
            masker = Masker(tmp, int(url.rsplit(":", 1)[1]), args.database_url)
            (work / "council.toml").write_text(config_text(url + "/v1"))
            write_inputs(work)
            recorder = Recorder(out, work, env, shlex.split(args.council_cmd), masker)
            record_all(recorder)
            (out / "commands.txt").write_text("\n".join(recorder.index), encoding="utf-8")
        finally:
            mock.terminate()
            mock.wait(10)
    print(f"recorded {len(list(out.iterdir()))} files in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
