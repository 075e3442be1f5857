"""``council batch FILE --provider-batch`` against the mock's OpenAI Files + Batches API (real HTTP
on loopback): calls go in rounds at the batch price, expired lines are asked again in the next
round, a rejected file is one line with nothing lost, and a process killed between submit and
collect is resumed by collecting its provider batch, never by submitting it again."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import db_rows, invoke_cli, write_config
from mock_server import start_mock_server

PRICE = {"input_cost_per_token": 1e-5, "output_cost_per_token": 3e-5, "max_tokens": 800}


def config_for(tmp_path, server):
    return write_config(
        tmp_path / "c.toml",
        {"j": {"model": "openai/mock-judge", "api_base": server.base_url, "api_key_env": "MOCK_KEY", **PRICE}},
    )


def pairs(tmp_path, n):
    path = tmp_path / "pairs.jsonl"
    lines = [
        json.dumps({"id": f"p{i}", "prompt": f"Question {i}?", "a": f"answer {i}", "b": f"other {i}"}) for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def provider_batches(server) -> list[dict]:
    with urllib.request.urlopen(server.base_url + "/batches") as reply:
        return json.loads(reply.read())["data"]


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("MOCK_KEY", "unused")


def test_one_round_at_half_the_price_and_the_same_verdicts(tmp_path, council_home):
    with start_mock_server(batch_seconds=0.1) as server:
        config, items = config_for(tmp_path, server), pairs(tmp_path, 20)
        common = ["batch", str(items), "--judge", "j", "--config", str(config), "--json"]
        direct = invoke_cli(*common, "--batch-id", "direct", "-o", str(tmp_path / "direct.jsonl"))
        batched = invoke_cli(*common, "--batch-id", "batched", "--provider-batch", "-o", str(tmp_path / "b.jsonl"))
        remote = provider_batches(server)
    assert direct.exit_code == 0 and batched.exit_code == 0, batched.stderr
    one, two = json.loads(direct.stdout), json.loads(batched.stdout)
    assert two["finished"] == 20 and two["calls"] == 40
    assert two["provider_rounds"] == 1  # both passes of every pair in one round
    assert len(remote) == 1 and remote[0]["request_counts"] == {"total": 40, "completed": 40, "failed": 0}
    assert two["cost_usd"] == pytest.approx(one["cost_usd"] / 2)
    assert [b["status"] for b in two["provider_batches"]] == ["completed"]
    assert f"provider batch {remote[0]['id']}: completed, 40 done, 0 failed of 40" in batched.stderr
    assert two["provider_batches"][0]["id"] == remote[0]["id"]
    verdicts = [json.loads(line)["result"]["winner"] for line in (tmp_path / "direct.jsonl").read_text().splitlines()]
    assert [
        json.loads(line)["result"]["winner"] for line in (tmp_path / "b.jsonl").read_text().splitlines()
    ] == verdicts


def test_batch_status_lists_the_stored_provider_batches(tmp_path):
    with start_mock_server(batch_seconds=0.05, batch_expire_after=8) as server:
        config, items = config_for(tmp_path, server), pairs(tmp_path, 6)
        ran = invoke_cli("batch", str(items), "--judge", "j", "--config", str(config), "--provider-batch",
                         "--batch-id", "pb")  # fmt: skip
        remote = {b["id"]: b for b in provider_batches(server)}
    assert ran.exit_code == 0, ran.stderr
    shown = invoke_cli("batch", "status", "pb", "--json")
    assert shown.exit_code == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert status["done"] == 6
    rounds = status["provider_batches"]
    # The first round expired with lines undone; they went in a second one (oldest first).
    assert [(r["provider"], r["status"], r["requests"]) for r in rounds] == [("openai", "expired", 12),
                                                                             ("openai", "completed", 4)]  # fmt: skip
    for r in rounds:
        there = remote[r["id"]]  # the provider's id for it
        assert (r["done"], r["failed"]) == (there["request_counts"]["completed"], there["request_counts"]["failed"])
        assert set(r) == {"id", "provider", "status", "requests", "done", "failed", "submitted_at", "collected_at"}
        assert r["submitted_at"] <= r["collected_at"]  # ISO times in UTC
        assert r["submitted_at"].endswith("Z") or "+00:00" in r["submitted_at"]
    assert rounds[0]["collected_at"] <= rounds[1]["submitted_at"]
    text = invoke_cli("batch", "status", "pb")
    assert text.exit_code == 0, text.stderr
    lines = text.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("batch pb: 6 items")
    for line, r in zip(lines[1:], rounds, strict=True):
        counts = f"{r['done']} done, {r['failed']} failed of {r['requests']}"
        times = f"submitted {r['submitted_at']}, collected {r['collected_at']}"
        assert line == f"  openai batch {r['id']}: {r['status']}, {counts}; {times}"


def test_lines_left_undone_by_an_expired_batch_go_in_the_next_round(tmp_path):
    with start_mock_server(batch_seconds=0.05, batch_expire_after=8) as server:
        config, items = config_for(tmp_path, server), pairs(tmp_path, 6)
        result = invoke_cli("batch", str(items), "--judge", "j", "--config", str(config), "--provider-batch", "--json")
        remote = provider_batches(server)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["finished"] == 6 and summary["provider_rounds"] == 2
    assert sorted(b["status"] for b in remote) == ["completed", "expired"]
    assert sum(b["request_counts"]["completed"] for b in remote) == 12


def test_a_rejected_batch_file_is_one_line_and_loses_nothing(tmp_path, council_home):
    with start_mock_server(batch_seconds=0.05, batch_reject="line 3: unsupported parameter 'seed'") as server:
        config, items = config_for(tmp_path, server), pairs(tmp_path, 3)
        args = ["batch", str(items), "--judge", "j", "--config", str(config), "--provider-batch", "--batch-id", "r"]
        result = invoke_cli(*args, "--json")
    assert result.exit_code == 1
    errors = json.loads(result.stdout)["errors"]
    assert all(
        "the provider rejected the batch file: line 3: unsupported parameter 'seed'" in e for e in errors.values()
    )
    assert len(errors) == 3
    assert result.error_lines[-1].startswith("error: 3 of 3 items failed")
    # Nothing was judged, nothing lost: every item is there to be judged again with --resume.
    assert db_rows(council_home, "select status, count(*) from batch_items group by status") == [("failed", 3)]


def test_models_without_a_batch_api_are_refused_in_one_line(tmp_path):
    config = write_config(tmp_path / "c.toml", {"f": {"model": "fake/f"}})
    result = invoke_cli("batch", str(pairs(tmp_path, 2)), "--judge", "f", "--config", str(config), "--provider-batch")
    assert result.exit_code == 2 and len(result.error_lines) == 1
    assert "has no batch API here" in result.stderr


def submitted(home) -> int:
    try:
        return db_rows(home, "select count(*) from provider_batches where provider_batch_id is not null")[0][0]
    except sqlite3.OperationalError:  # the database is still being created
        return 0


@pytest.mark.slow
@pytest.mark.parametrize("id_recorded", [True, False], ids=["id-recorded", "only-the-intent"])
def test_a_process_killed_between_submit_and_collect_is_resumed_by_collecting(tmp_path, council_home, id_recorded):
    """Killed after submitting: the round is collected by its recorded id, or, when the process died
    before recording the id, found by the token it sent in the batch's metadata."""
    with start_mock_server(batch_seconds=4.0) as server:
        config, items = config_for(tmp_path, server), pairs(tmp_path, 5)
        args = ["batch", str(items), "--judge", "j", "--config", str(config), "--provider-batch", "--batch-id", "k"]
        env = {**os.environ, "COUNCIL_HOME": str(council_home), "MOCK_KEY": "unused"}
        # A 2 s claim lease: the resume takes the killed process's items 2 s after its last renewal.
        command = [sys.executable, "-m", "council", *args, "--lease-seconds", "2"]
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if submitted(council_home) == 1:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the round was never submitted")
        os.kill(proc.pid, signal.SIGKILL)  # submitted, not collected
        proc.wait(10)
        assert db_rows(council_home, "select count(*) from batch_items") == [(0,)]
        if not id_recorded:
            db = sqlite3.connect(council_home / "council.db")
            with db:
                db.execute("UPDATE provider_batches SET provider_batch_id = NULL, status = 'submitting'")
            db.close()
        resumed = invoke_cli(*args, "--resume", "--json")
        remote = provider_batches(server)
    assert resumed.exit_code == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["finished"] == 5
    assert len(remote) == 1  # collected, never submitted twice
    assert summary["provider_batches"][0]["id"] == remote[0]["id"]
    assert summary["provider_rounds"] == 1


def test_anthropic_models_go_through_message_batches(tmp_path):
    with start_mock_server(batch_seconds=0.05, batch_expire_after=5) as server:
        config = write_config(
            tmp_path / "c.toml",
            {"c": {"model": "anthropic/mock-claude", "api_base": server.url, "api_key_env": "MOCK_KEY", **PRICE}},
        )
        result = invoke_cli(
            "batch", str(pairs(tmp_path, 4)), "--judge", "c", "--config", str(config), "--provider-batch", "--json"
        )
        remote = provider_batches(server)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["finished"] == 4
    assert summary["calls"] == 8 + 3  # 3 of the 8 lines expired in the first round, asked again in the second
    assert summary["provider_rounds"] == 2
    assert [b["provider"] for b in summary["provider_batches"]] == ["anthropic", "anthropic"]
    assert remote == []  # nothing went through OpenAI's endpoints
    assert summary["cost_usd"] > 0


def test_a_cap_holds_for_lines_waiting_in_a_round(tmp_path, council_home):
    """Each waiting line reserves its worst case before it joins a round: a round never overshoots.
    The lines whose worst case did not fit beside the round's wait for it to settle (at the batch
    price, far below their worst case) and go in later rounds while the cap allows."""
    with start_mock_server(batch_seconds=0.05) as server:
        config, items = config_for(tmp_path, server), pairs(tmp_path, 20)
        args = ["batch", str(items), "--judge", "j", "--config", str(config), "--provider-batch", "--json"]
        result = invoke_cli(*args, "--max-cost", "1")
        remote = provider_batches(server)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["finished"] == 20 and not summary["budget_reached"] and summary["spent_usd"] <= 1
    assert len(remote) > 1 and all(0 < b["request_counts"]["total"] < 40 for b in remote)  # only lines that fit
    assert sum(b["request_counts"]["total"] for b in remote) == summary["calls"] == 40


# -- hostile results: read a line at a time, each line alone, only from the configured server ----


def judges_config(tmp_path, server, provider):
    if provider == "openai":
        return config_for(tmp_path, server)
    model = {"model": "anthropic/mock-claude", "api_base": server.url, "api_key_env": "MOCK_KEY", **PRICE}
    return write_config(tmp_path / "c.toml", {"j": model})


def run_batch(tmp_path, config, n=4):
    return invoke_cli("batch", str(pairs(tmp_path, n)), "--judge", "j", "--config", str(config), "--provider-batch",
                      "--json")  # fmt: skip


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_malformed_results_line_is_asked_again_alone_and_the_others_keep_their_replies(tmp_path, provider):
    with start_mock_server(batch_seconds=0.05, batch_results_faults="malformed") as server:
        result = run_batch(tmp_path, judges_config(tmp_path, server, provider))
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["finished"] == 4 and summary["failed"] == 0
    # Only the malformed line is asked again: read again from the round that holds it (journalled),
    # not submitted (and paid) again; the others kept their replies.
    assert [r["requests"] for r in summary["provider_batches"]] == [8]
    assert summary["calls"] == 8 + 1 and summary["provider_rounds"] == 2


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_results_line_over_the_reply_cap_fails_alone_without_being_asked_again(tmp_path, provider, monkeypatch):
    monkeypatch.setenv("COUNCIL_MAX_REPLY_BYTES", "262144")  # a line's 1 MiB is over; 8 lines' 2 MiB is not
    with start_mock_server(batch_seconds=0.05, batch_results_faults="huge") as server:
        result = run_batch(tmp_path, judges_config(tmp_path, server, provider))
    assert result.exit_code == 1, result.stderr
    summary = json.loads(result.stdout)
    assert [r["requests"] for r in summary["provider_batches"]] == [8]  # never asked again
    [error] = summary["errors"].values()  # its item failed; the others kept their replies
    assert "larger than 262144 bytes (COUNCIL_MAX_REPLY_BYTES)" in error, error
    assert (summary["finished"], summary["failed"]) == (3, 1)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_endless_results_file_is_read_up_to_its_cap(tmp_path, provider, monkeypatch):
    """A results file that never ends (a broken or hostile server) is read up to its cap, never into
    memory whole: here every line came before the endless part, so nothing is lost."""
    monkeypatch.setenv("COUNCIL_MAX_REPLY_BYTES", "65536")
    with start_mock_server(batch_seconds=0.05, batch_results_faults="endless") as server:
        result = run_batch(tmp_path, judges_config(tmp_path, server, provider))
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["finished"] == 4 and summary["failed"] == 0 and summary["provider_rounds"] == 1
    assert "not read further" in result.stderr and "65536 bytes" in result.stderr, result.stderr


class Recorder:
    """A second local server: records every request it gets (path and headers), answers 404."""

    def __init__(self):
        import http.server
        import threading

        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the standard library's name
                seen.append({"path": self.path, "headers": dict(self.headers)})
                self.send_error(404)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_anthropic_results_are_read_from_the_configured_server_only(tmp_path, monkeypatch):
    monkeypatch.setenv("MOCK_KEY", "sk-ant-secret-key-0123456789")
    recorder = Recorder()
    try:
        with start_mock_server(batch_seconds=0.05, batch_results_base=recorder.url) as server:
            result = run_batch(tmp_path, judges_config(tmp_path, server, "anthropic"))
    finally:
        recorder.close()
    assert recorder.seen == []  # never contacted: no request, no key
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["finished"] == 4  # read from the configured server instead
    assert f"results_url {recorder.url}" in result.stderr and "not under the configured" in result.stderr


@pytest.mark.parametrize(
    "base, url, under",
    [
        ("https://api.anthropic.com", "https://api.anthropic.com/v1/messages/batches/b1/results", True),
        ("https://api.anthropic.com", "https://API.anthropic.com:443/v1/messages/batches/b1/results?x=1", True),
        ("http://127.0.0.1:8080/proxy", "http://127.0.0.1:8080/proxy/v1/messages/batches/b1/results", True),
        ("https://api.anthropic.com", "http://api.anthropic.com/v1/messages/batches/b1/results", False),
        ("https://api.anthropic.com", "https://evil.example/v1/messages/batches/b1/results", False),
        ("https://api.anthropic.com", "https://api.anthropic.com:8443/v1/messages/batches/b1/results", False),
        ("https://api.anthropic.com", "https://api.anthropic.com.evil.example/v1/x", False),
        ("https://api.anthropic.com", "https://user@api.anthropic.com/v1/x", False),
        ("http://127.0.0.1:8080/proxy", "http://127.0.0.1:8080/other/v1/messages/batches/b1/results", False),
        ("http://127.0.0.1:8080/proxy", "http://127.0.0.1:8080/proxyother/v1/x", False),
        ("http://127.0.0.1:8080/proxy", "http://127.0.0.1:8080/proxy/../other/v1/x", False),
        ("http://127.0.0.1:8080/proxy", "http://127.0.0.1:8080/proxy/%2e%2e/other/v1/x", False),
        ("https://api.anthropic.com", "/v1/messages/batches/b1/results", False),
        ("https://api.anthropic.com", "", False),
    ],
)
def test_a_results_url_is_used_only_under_the_configured_base(base, url, under):
    from council.providers.provider_batch import under_base

    assert under_base(url, base) is under


def test_a_provider_batch_id_that_is_no_plain_id_is_refused_before_any_request():
    import asyncio

    from council.errors import ProviderError
    from council.providers.provider_batch import AnthropicBatches

    batches = AnthropicBatches("anthropic/m", "m", "http://127.0.0.1:9", "key", None, 100)  # nothing listens there
    for hostile in ("../../v1/other", "b1?x=1", "b1/results", "..", ""):
        with pytest.raises(ProviderError, match="not a batch id"):
            asyncio.run(batches.status(hostile))
