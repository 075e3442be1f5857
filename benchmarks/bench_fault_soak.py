"""Benchmark: council sessions under injected faults, then an independent audit of council.db.

    python benchmarks/bench_fault_soak.py                  # 200 sessions, 4 members, 20 % faults, 15 % malformed
    python benchmarks/bench_fault_soak.py --sessions 30 --workers 1 --concurrency 4
    python benchmarks/bench_fault_soak.py --postgres --session-timeout 1.5
    python benchmarks/bench_fault_soak.py --database-url postgresql://... --sessions 40   # a fresh database of yours

The mock LLM server (``scripts/mock_llm_server.py``, real HTTP on 127.0.0.1) answers with
``--fault-rate`` injected faults (500, 429 and hangs, mixed), ``--malformed-rate`` broken JSON
on structured (review) requests, and logs every chat request (``--log-requests``).
Members are ``openai/mock-NAME`` models with an ``api_base``, reached through ``--transport``
(native by default, or litellm). ``--workers`` processes each run their share of the sessions through ONE ``Council``
(``--concurrency`` sessions in flight), all writing the same council.db, as several
processes would (``--postgres``: one database on a throwaway PostgreSQL server, read by the
audit with psycopg). A hang costs one per-call ``--timeout``; retries back off briefly;
``--session-timeout`` adds a session deadline (calls it cuts are logged as ``cancelled``).

It prints the outcome (complete / partial / failed, with causes counted) and then audits
the database, read with plain sqlite3, against two sources that never pass through the store:
what each ``run()`` returned or raised (the workers' ground truth) and the server's request log.

- **lost record**: a row the ground truth requires that is not there: a started session
  without its row (matched by its unique question), an answer / review / bias record of a
  returned result, an answer of a session that raised (a session that stops early keeps the
  answers that came: their progress events are the ground truth), a call attempt the server
  logged (per model and request kind), a call attempt counted in a returned result's usage, or
  a gap in a logical call's attempt numbers.
- **duplicated record**: a row the ground truth does not account for: a second session row
  for one question, a second answer per (session, member), review per (session, reviewer) or
  bias record per (session, reviewer, answered model), a review or bias row of a failed
  session, an answer whose status is not the one its result or event gave, call-log rows
  beyond what the server logged (but for attempts cancelled before their request reached it:
  counted apart) or what a result counted.
- also checked: no session left ``running`` or without ``finished_at``; each row's status and
  error equal what ``run()`` returned or raised; no exception other than ``CouncilError``
  escapes ``run()``; every logical call's attempts are 1..n, all but the last failed.

Exit code 0 when every goal holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import re
import shlex
import sqlite3
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from council.session.schemas import PEER_REVIEW_SCHEMA_NAME as REVIEW_SCHEMA  # noqa: E402  (as the server logs it)

NAMES = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def question(i: int) -> str:
    # Unique per session: the audit finds each session's row by its question.
    return f"Soak question {i}: why does topic {i % 37} matter, in two sentences?"


# -- workers -----------------------------------------------------------------------
def worker_main(indices: list[int], config: dict[str, Any], opts: dict[str, Any], out: str, barrier: Any) -> None:
    os.environ["COUNCIL_HOME"] = opts["home"]
    os.environ.pop("COUNCIL_DATABASE_URL", None)
    if opts["database_url"]:
        os.environ["COUNCIL_DATABASE_URL"] = opts["database_url"]
    from council._util.logs import configure_logging

    configure_logging()  # as the CLI does: warnings and errors only, on stderr
    if opts["transport"] == "litellm":
        from council.providers.litellm_api import import_litellm

        import_litellm()  # its ~2.5 s import is a one-off, outside the timed part
    barrier.wait()
    records = asyncio.run(run_sessions(indices, config, opts))
    Path(out).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


async def run_sessions(indices: list[int], config: dict[str, Any], opts: dict[str, Any]) -> list[dict[str, Any]]:
    from council import Council
    from council.errors import CouncilError
    from council.providers.client import RetryPolicy

    gate = asyncio.Semaphore(opts["concurrency"])
    records: list[dict[str, Any]] = []
    cpu0 = time.process_time()

    async with Council.from_config(config, retry=RetryPolicy(**opts["retry"])) as council:

        async def one(i: int) -> None:
            ids: list[str] = []  # the session id, from its progress events (a raised error carries none)
            # Its answers, from their events: what a session that stops early keeps (a raised error
            # carries no result).
            answered: list[dict[str, str]] = []

            def noted(event: Any) -> None:
                ids.append(event.session_id)
                if event.type == "answer":
                    answered.append({"member": event.member, "status": event.status})

            record: dict[str, Any] = {"index": i, "question": question(i)}
            async with gate:
                try:
                    result = await council.run(question(i), seed=i, on_event=noted)
                    record.update(outcome="returned", result=result.model_dump(mode="json"))
                except CouncilError as exc:
                    record.update(outcome="raised", error=str(exc), error_type=type(exc).__name__, answered=answered)
                except Exception:  # anything else escaping run() is a bug
                    record.update(outcome="escaped", error=traceback.format_exc())
            record["session_id"] = ids[0] if ids else None
            records.append(record)

        await asyncio.gather(*(one(i) for i in indices))
    records.append({"cpu_s": time.process_time() - cpu0})
    return records


# -- classification ------------------------------------------------------------------
def cause(error: str) -> str:
    """A failure's cause class; anything unexpected is shown verbatim (shortened)."""
    if error.startswith("invalid output after"):
        return "invalid output (malformed JSON, re-requests used up)"
    for pattern, name in (
        (r"Timeout: no reply within", "timeout (hang)"),
        (r"\(HTTP 429\)", "HTTP 429"),
        (r"\(HTTP 500\)", "HTTP 500"),
        (r"^cancelled$", "cancelled"),
    ):
        if re.search(pattern, error):
            return name
    return "other: " + error[:120]


def tally(title: str, counts: list[tuple[str, int]]) -> None:
    if counts:
        print(f"  {title}:")
        for what, n in counts:
            print(f"    {n:>4}  {what}")


def session_failure(error: str) -> list[str]:
    """``only 2 of 4 members answered (quorum 3): m1: …; m3: …`` → the head and each member's cause."""
    head, _, rest = error.partition(": ")
    if not head.startswith("only "):
        return [re.sub(r"\d+(\.\d+)?", "N", error)[:120]]
    causes = [cause(part.split(": ", 2)[-1]) for part in rest.split("; ") if part]
    return [re.sub(r"\d+", "N", head)] + [f"  member cause: {c}" for c in causes]


def outcome_of_call(ok: int, error: str | None) -> str:
    named = {"timeout (hang)": "timeout", "HTTP 429": "429", "HTTP 500": "500", "cancelled": "cancelled"}
    return "200" if ok else named.get(cause(error or ""), "other")


def outcome_of_request(entry: dict[str, Any]) -> str:
    if entry.get("fault") == "timeout":
        return "timeout"
    return str(entry["status"])


# -- audit ---------------------------------------------------------------------------
class Audit:
    def __init__(self) -> None:
        self.lost: Counter[str] = Counter()
        self.duplicated: Counter[str] = Counter()
        self.mismatched: Counter[str] = Counter()
        self.examples: list[str] = []

    def problem(self, kind: Counter[str], what: str, n: int, example: str) -> None:
        if n > 0:
            kind[what] += n
            if len(self.examples) < 12:
                self.examples.append(example)

    def compare(self, what: str, sid: str, expected: Counter[Any], got: Counter[Any]) -> None:
        missing, extra = expected - got, got - expected
        self.problem(self.lost, what, sum(missing.values()), f"{what} lost in {sid}: {dict(missing)}")
        self.problem(self.duplicated, what, sum(extra.values()), f"{what} extra in {sid}: {dict(extra)}")


def connect(db_path: Path, database_url: str | None) -> Any:
    """The database, read as it is, outside council: plain sqlite3, or psycopg for PostgreSQL;
    rows read by their columns' names on both."""
    if database_url:
        import psycopg
        from psycopg.rows import dict_row

        return psycopg.connect(database_url, autocommit=True, row_factory=dict_row)
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    return db


def audit(
    db_path: Path, records: list[dict[str, Any]], requests: list[dict[str, Any]], database_url: str | None = None
) -> tuple[Audit, dict[str, Any]]:
    a = Audit()
    db = connect(db_path, database_url)
    facts: dict[str, Any] = {}

    # Sessions: exactly one final row per question the script asked.
    by_question: dict[str, list[sqlite3.Row]] = defaultdict(list)
    for row in db.execute("select id, question, status, error, finished_at from sessions"):
        by_question[row["question"]].append(row)
    sid_of: dict[int, str] = {}
    for rec in records:
        rows = by_question.pop(rec["question"], [])
        a.problem(a.lost, "sessions", 1 if not rows else 0, f"no session row for question {rec['index']}")
        a.problem(a.duplicated, "sessions", len(rows) - 1, f"{len(rows)} session rows for question {rec['index']}")
        if not rows:
            continue
        row = rows[0]
        sid_of[rec["index"]] = row["id"]
        result = rec.get("result")
        want_id = result["session_id"] if result else rec["session_id"]
        want_status = result["status"] if result else "failed"
        if row["id"] != want_id:
            a.problem(a.mismatched, "session id", 1, f"question {rec['index']}: row {row['id']} ≠ {want_id}")
        if row["status"] != want_status:
            a.problem(a.mismatched, "session status", 1, f"{row['id']}: row {row['status']}, run() {want_status}")
        if rec["outcome"] == "raised" and row["error"] != rec["error"]:
            a.problem(a.mismatched, "session error", 1, f"{row['id']}: row error {row['error']!r} ≠ {rec['error']!r}")
    stray = sum(len(rows) for rows in by_question.values())
    a.problem(a.duplicated, "sessions", stray, f"{stray} session rows for questions the script never asked")
    facts["not final"] = db.execute(
        "select count(*) as n from sessions where status = 'running' or finished_at is null"
    ).fetchone()["n"]

    # Answers, reviews, bias records, per-session call counts: equal to what run() returned.
    def grouped(sql: str) -> dict[str, list[sqlite3.Row]]:
        out: dict[str, list[sqlite3.Row]] = defaultdict(list)
        for row in db.execute(sql):
            out[row["session_id"]].append(row)
        return out

    answers = grouped("select session_id, member, status from answers")
    reviews = grouped("select session_id, reviewer, valid, attempts, error from reviews")
    bias = grouped("select session_id, reviewer_id, model_id, position, score_value from bias_records")
    calls = grouped(  # in the order they started: ids need not be (a transaction writes several at once)
        "select id, session_id, stage, member, model, attempt, ok, error from calls order by started_at, id"
    )
    for rec in records:
        sid = sid_of.get(rec["index"])
        if sid is None:
            continue
        # A session that raised keeps the answers that came (their events say which), nothing after.
        result = rec.get("result") or {"answers": rec.get("answered", []), "reviews": [], "models": {}}
        got_answers = Counter((r["member"], r["status"]) for r in answers.pop(sid, []))
        a.compare("answers", sid, Counter((x["member"], x["status"]) for x in result["answers"]), got_answers)
        want_reviews = {r["reviewer"]: r for r in result["reviews"]}
        got_reviews = reviews.pop(sid, [])
        a.compare("reviews", sid, Counter(want_reviews.keys()), Counter(r["reviewer"] for r in got_reviews))
        for r in got_reviews:
            want = want_reviews.get(r["reviewer"])
            if want and (bool(r["valid"]), r["attempts"]) != (want["valid"], want["attempts"]):
                a.problem(a.mismatched, "reviews", 1, f"{sid} review {r['reviewer']}: row differs from result")
        models = result["models"]
        want_bias = Counter(
            (r["model"], models[m], pos, float(r["scores"][m]))
            for r in result["reviews"]
            if r["valid"]
            for pos, m in enumerate(r["display_order"])
        )
        got_bias = Counter(
            (r["reviewer_id"], r["model_id"], r["position"], r["score_value"]) for r in bias.pop(sid, [])
        )
        a.compare("bias_records", sid, want_bias, got_bias)
        session_calls = calls.get(sid, [])
        if rec["outcome"] == "returned":
            usage = result["usage"]
            failed = sum(1 for c in session_calls if not c["ok"])
            a.compare("calls vs result", sid, Counter(attempts=usage["calls"]), Counter(attempts=len(session_calls)))
            if failed != usage["failed_calls"]:
                note = f"{sid}: {failed} failed calls in the log, result says {usage['failed_calls']}"
                a.problem(a.mismatched, "calls", 1, note)
            # Logical calls per (stage, member) against the result: one answer each, one review
            # call per review attempt, one or two chairmen (chairman, fallback), the one who wrote
            # with a call per attempt (a structured synthesis is re-asked like a review; the result
            # does not count a failed chairman's attempts: the log's are taken).
            logical = Counter((c["stage"], c["member"]) for c in session_calls if c["attempt"] == 1)
            want_logical: Counter[tuple[str, str]] = Counter({("answer", x["member"]): 1 for x in result["answers"]})
            want_logical.update({("review", r["reviewer"]): r["attempts"] for r in result["reviews"]})
            synth = result["synthesis"]
            chairs = list(dict.fromkeys(c["member"] for c in session_calls if c["stage"] == "synthesis"))
            two = synth["fallback_used"] or synth["status"] == "failed"
            if synth["status"] != "skipped" and len(chairs) != (2 if two else 1):
                a.problem(a.mismatched, "calls", 1, f"{sid}: synthesis calls {chairs} do not fit {synth['status']}")
            want_logical.update(
                {
                    ("synthesis", m): (synth["attempts"] or 1) if m == synth["chairman"] else logical[("synthesis", m)]
                    for m in chairs
                }
            )
            a.compare("calls (logical)", sid, want_logical, logical)
    for what, left in (("answers", answers), ("reviews", reviews), ("bias_records", bias)):
        n = sum(len(rows) for rows in left.values())  # rows of failed or unknown sessions
        a.problem(a.duplicated, what, n, f"{n} {what} rows of failed or unknown sessions")
    facts["duplicate bias pairs"] = db.execute(
        "select count(*) as n from (select 1 from bias_records"
        " group by session_id, reviewer_id, model_id having count(*) > 1) as repeated"
    ).fetchone()["n"]

    # Attempt numbering inside each logical call: 1..n, every attempt but the last failed.
    retries = failed_attempts = gave_up = logical_calls = 0
    for rows in calls.values():
        per_member: dict[tuple[str, str], list[sqlite3.Row]] = defaultdict(list)
        for c in rows:
            per_member[(c["stage"], c["member"])].append(c)
        for seq in per_member.values():
            chains: list[list[sqlite3.Row]] = []
            for c in seq:
                if c["attempt"] == 1 or not chains:
                    chains.append([])
                chains[-1].append(c)
            for chain in chains:
                logical_calls += 1
                numbers = [c["attempt"] for c in chain]
                if numbers != list(range(1, len(chain) + 1)):
                    a.problem(a.mismatched, "call attempts", 1, f"{chain[0]['session_id']}: attempts {numbers}")
                if any(c["ok"] for c in chain[:-1]):
                    a.problem(a.mismatched, "call attempts", 1, f"{chain[0]['session_id']}: retried after success")
                retries += len(chain) - 1
                failed_attempts += sum(1 for c in chain if not c["ok"])
                gave_up += 0 if chain[-1]["ok"] else 1
    facts.update(logical_calls=logical_calls, retries=retries, failed_attempts=failed_attempts, gave_up=gave_up)

    # Call log against the server's request log: per (model, request kind) counts must be equal.
    # The attempts of a logical call are ordered by when they started (above), not by id.
    def kind(stage_or_schema: str | None) -> str:
        return "review" if stage_or_schema in ("review", REVIEW_SCHEMA) else "answer/synthesis"

    all_calls = [c for rows in calls.values() for c in rows]
    db_keys = Counter((c["model"].removeprefix("openai/"), kind(c["stage"])) for c in all_calls)
    server_keys = Counter((r["model"], kind(r.get("schema"))) for r in requests)
    # An attempt is on record before it is sent; one cancelled (a session's deadline) before its
    # request reached the server is a row the server never saw: only those may be extra.
    cancelled = Counter(
        (c["model"].removeprefix("openai/"), kind(c["stage"])) for c in all_calls if c["error"] == "cancelled"
    )
    unseen = (db_keys - server_keys) & cancelled
    a.compare("calls vs server", "the whole run", server_keys + unseen, db_keys)
    facts["cancelled unseen"] = sum(unseen.values())
    db_outcomes = Counter(outcome_of_call(c["ok"], c["error"]) for c in all_calls)
    server_outcomes = Counter(outcome_of_request(r) for r in requests)
    facts.update(
        calls=len(all_calls),
        requests=len(requests),
        db_outcomes=db_outcomes,
        server_outcomes=server_outcomes,
        malformed_served=sum(1 for r in requests if r.get("fault") == "malformed"),
        unknown_session_calls=sum(len(rows) for sid, rows in calls.items() if sid not in set(sid_of.values())),
    )
    # Malformed replies served vs invalid review outputs recorded (a re-request follows each).
    invalid_outputs = 0
    for review in db.execute("select valid, attempts, error from reviews"):
        valid, attempts, error = review["valid"], review["attempts"], review["error"]
        ended_on_provider_error = not valid and not (error or "").startswith("invalid output after")
        invalid_outputs += attempts if not valid and not ended_on_provider_error else attempts - 1
    facts["invalid_outputs"] = invalid_outputs
    # PostgreSQL checks its own pages and constraints as it writes: nothing like SQLite's to ask.
    facts["integrity"] = "ok" if database_url else db.execute("pragma integrity_check").fetchone()[0]
    db.close()
    return a, facts


# -- main ----------------------------------------------------------------------------
def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=200)
    p.add_argument("--members", type=int, default=4, help=f"members, each its own mock model (≤ {len(NAMES)})")
    p.add_argument("--quorum", type=int, default=3, help="members that must answer")
    p.add_argument("--workers", type=int, default=2, help="processes, each with one Council, writing one database")
    p.add_argument("--concurrency", type=int, default=6, help="sessions in flight per worker")
    p.add_argument("--fault-rate", type=float, default=0.2)
    p.add_argument("--fault-kinds", default="500,429,timeout")
    p.add_argument("--malformed-rate", type=float, default=0.15)
    p.add_argument("--latency", type=float, default=0.02, help="seconds per mock call")
    p.add_argument("--timeout", type=float, default=1.0, help="seconds per call attempt (what a hang costs)")
    p.add_argument("--hang-seconds", type=float, default=2.0, help="how long a hang lasts on the server (> --timeout)")
    p.add_argument("--retries", type=int, default=1, help="retries per call on 429/5xx/timeouts")
    p.add_argument("--max-review-attempts", type=int, default=3, help="1 request + re-requests for invalid output")
    p.add_argument("--session-timeout", type=float, default=None, help="seconds per session (default: none)")
    p.add_argument("--backoff", type=float, default=0.05, help="first retry wait, seconds (doubles, max 0.5 s)")
    p.add_argument("--seed", type=int, default=0, help="the server's fault RNG seed")
    p.add_argument("--home", default=None, help="COUNCIL_HOME to keep (default: a temp dir, removed)")
    p.add_argument("--transport", choices=("native", "litellm"), default="native", help="how the members are reached")
    p.add_argument(
        "--postgres", action="store_true", help="the workers share a fresh database on a throwaway PostgreSQL server"
    )
    p.add_argument("--database-url", default=None, help="the workers share this PostgreSQL database (a fresh one)")
    args = p.parse_args()
    if not 1 <= args.members <= len(NAMES) or not 1 <= args.quorum <= args.members:
        p.error(f"need 1 ≤ --quorum ≤ --members ≤ {len(NAMES)}")
    if args.hang_seconds <= args.timeout:
        p.error("--hang-seconds must exceed --timeout, or hangs are just slow replies")

    print("$ " + shlex.join(["python", "benchmarks/bench_fault_soak.py", *sys.argv[1:]]))
    from bench_common import postgres_if
    from mock_server import start_mock_server

    with tempfile.TemporaryDirectory() as tmp, postgres_if(args.postgres and not args.database_url) as database:
        database_url = args.database_url or (None if database is None else database.fresh_database(migrated=False))
        home = Path(args.home) if args.home else Path(tmp) / "home"
        home.mkdir(parents=True, exist_ok=True)
        log_path = Path(tmp) / "requests.jsonl"
        server_opts = dict(
            latency=args.latency,
            fault_rate=args.fault_rate,
            fault_kinds=args.fault_kinds,
            malformed_rate=args.malformed_rate,
            hang_seconds=args.hang_seconds,
            seed=args.seed,
            log_requests=log_path,
        )
        with start_mock_server(**server_opts) as server:
            aliases = [f"m{i + 1}" for i in range(args.members)]
            models = {
                alias: {
                    "model": f"openai/mock-{NAMES[i]}",
                    "api_base": server.base_url,
                    "transport": args.transport,
                    "timeout": args.timeout,
                    "retries": args.retries,
                }
                for i, alias in enumerate(aliases)
            }
            council = {
                "members": aliases,
                "chairman": aliases[0],
                "fallback_chairman": aliases[1 % args.members],
                "quorum": args.quorum,
                "max_review_attempts": args.max_review_attempts,
            }
            if args.session_timeout:
                council["session_timeout"] = args.session_timeout
            config = {"councils": {"default": council}, "models": models}
            opts = {
                "home": str(home),
                "database_url": database_url,
                "transport": args.transport,
                "concurrency": args.concurrency,
                "retry": {"initial_wait": args.backoff, "max_wait": 0.5, "jitter": args.backoff},
            }
            print(
                f"config: {args.sessions} sessions, {args.members} members "
                f"({', '.join(m['model'] for m in models.values())}; transport {args.transport}), "
                f"quorum {args.quorum}, self-review exclude, chairman m1 (fallback {council['fallback_chairman']}), "
                f"max review attempts {args.max_review_attempts}, session deadline "
                + (f"{args.session_timeout:g} s" if args.session_timeout else "none")
            )
            print(
                f"        per call: timeout {args.timeout:g} s, {args.retries} retries, backoff {args.backoff:g} s "
                f"doubling to 0.5 s; max_concurrency 8 per model per worker"
            )
            print(
                f"        {args.workers} worker processes × {args.concurrency} sessions in flight, "
                + (f"one PostgreSQL database ({database_url})" if database_url else "one council.db (WAL)")
            )
            print(
                f"server: latency {args.latency * 1000:g} ms, faults {args.fault_rate:.0%} of requests "
                f"({args.fault_kinds}; hangs last {args.hang_seconds:g} s), malformed JSON {args.malformed_rate:.0%} "
                f"of structured replies, seed {args.seed}"
            )

            ctx = multiprocessing.get_context("spawn")
            barrier = ctx.Barrier(args.workers + 1)
            outs = [Path(tmp) / f"worker-{w}.jsonl" for w in range(args.workers)]
            procs = [
                ctx.Process(
                    target=worker_main,
                    args=(list(range(w, args.sessions, args.workers)), config, opts, str(outs[w]), barrier),
                )
                for w in range(args.workers)
            ]
            for proc in procs:
                proc.start()
            barrier.wait(timeout=120)
            t0 = time.perf_counter()
            for proc in procs:
                proc.join()
            wall = time.perf_counter() - t0
            if any(proc.exitcode != 0 for proc in procs):
                print(f"a worker died: exit codes {[proc.exitcode for proc in procs]}")
                return 1
            # Hung requests are logged by the server when their hang ends: wait for the last ones.
            time.sleep(args.hang_seconds + 0.2)
            n = -1
            while n != len(server.logged_requests()):
                n = len(server.logged_requests())
                time.sleep(0.3)
            requests = server.logged_requests()

        lines = [json.loads(line) for out in outs for line in out.read_text().splitlines()]
        records = [r for r in lines if "index" in r]
        cpu = sum(r["cpu_s"] for r in lines if "cpu_s" in r)
        a, facts = audit(home / "council.db", records, requests, database_url)

    report(records, a, facts, wall, cpu)
    ok = (
        not a.lost
        and not a.duplicated
        and not a.mismatched
        and facts["not final"] == 0
        and facts["duplicate bias pairs"] == 0
        and facts["integrity"] == "ok"
        and facts["unknown_session_calls"] == 0
        and len(records) == args.sessions
        and not any(r["outcome"] == "escaped" for r in records)
    )
    print("\nRESULT: " + ("all goals met" if ok else "GOALS NOT MET"))
    return 0 if ok else 1


def report(records: list[dict[str, Any]], a: Audit, facts: dict[str, Any], wall: float, cpu: float) -> None:
    status = Counter(r["result"]["status"] if r["outcome"] == "returned" else r["outcome"] for r in records)
    print(f"\nwall time {wall:.1f} s for {len(records)} sessions ({len(records) / wall:.1f} sessions/s); "
          f"worker CPU {cpu:.1f} s ({1000 * cpu / max(facts['calls'], 1):.1f} ms per call attempt)")
    print(
        f"sessions: {status['complete']} complete, {status['partial']} partial, "
        f"{status['raised']} failed (CouncilError raised), {status['escaped']} escaped exceptions"
    )
    failed = Counter(line for r in records if r["outcome"] == "raised" for line in session_failure(r["error"]))
    tally(
        "failed sessions, by cause",
        sorted(failed.items(), key=lambda kv: (kv[0].startswith(" "), -kv[1])),
    )
    partial = Counter(
        re.sub(r"\d+", "N", reason.split(":")[0])
        for r in records
        if r["outcome"] == "returned"
        for reason in r["result"]["partial_reasons"]
    )
    tally("partial sessions, by reason", partial.most_common())
    failures = Counter(
        f"{f['stage']:<9} {cause(f['error'])}"
        for r in records
        if r["outcome"] == "returned"
        for f in r["result"]["failures"]
    )
    tally("member failures inside finished sessions (stage, cause)", failures.most_common())
    for r in records:
        if r["outcome"] == "escaped":
            print(f"  ESCAPED in session {r['index']}:\n{r['error']}")

    print("\ncalls: {calls} attempts in the call log, {requests} chat requests in the server log".format(**facts))
    print(
        f"  {facts['logical_calls']} logical calls; {facts['retries']} retries; "
        f"{facts['failed_attempts']} failed attempts ({facts['gave_up']} gave up after the last retry)"
    )
    outcomes = sorted(set(facts["db_outcomes"]) | set(facts["server_outcomes"]))
    print("  outcome    call log   server log")
    for o in outcomes:
        print(f"  {o:<9} {facts['db_outcomes'][o]:>9} {facts['server_outcomes'][o]:>12}")
    print(f"  malformed JSON served: {facts['malformed_served']}; invalid review outputs in stored reviews: "
          f"{facts['invalid_outputs']} (equal unless a failed session's reviews, which are not stored, got some)")
    if facts["db_outcomes"] != facts["server_outcomes"]:
        print("  (outcomes differ where the client gave up first: a call cut by the session deadline is 'cancelled'")
        print("   in the call log, and the server logs what it sent later; the count per model and kind must match)")

    print("\naudit of council.db (plain sqlite3) against run() results and the server's request log:")
    checks = ["sessions", "answers", "reviews", "bias_records", "calls vs result", "calls vs server", "calls (logical)"]
    print(f"  {'rows':<16} {'lost':>5} {'duplicated':>11}")
    for t in checks:
        print(f"  {t:<16} {a.lost[t]:>5} {a.duplicated[t]:>11}")
    print(f"  {'any check':<16} {sum(a.lost.values()):>5} {sum(a.duplicated.values()):>11}   (goal 0 and 0)")
    print(f"  sessions not final (running / no finished_at): {facts['not final']} (goal 0)")
    print(f"  bias records repeated per (session, reviewer, answered model): {facts['duplicate bias pairs']} (goal 0)")
    print(f"  rows differing from what run() returned or raised: {sum(a.mismatched.values())} (goal 0)"
          + (f" {dict(a.mismatched)}" if a.mismatched else ""))
    print(f"  call-log rows of sessions the script did not start: {facts['unknown_session_calls']} (goal 0)")
    print(f"  cancelled attempts the server never saw (cut before they were sent): {facts['cancelled unseen']}")
    print(f"  integrity_check: {facts['integrity']}")
    for example in a.examples:
        print(f"  ! {example}")


if __name__ == "__main__":
    sys.exit(main())
