"""One rate budget across processes (GCRA in one row per key), on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from council.methods.gcra import wait_after


def test_the_gcra_waits_follow_the_theoretical_arrival_time():
    assert wait_after(new_tat=10.5, now=10.0, increment=0.5, tolerance=0.0) == 0.0  # first call: at once
    assert wait_after(new_tat=11.0, now=10.0, increment=0.5, tolerance=0.0) == 0.5
    assert wait_after(new_tat=11.0, now=10.0, increment=0.5, tolerance=0.5) == 0.0  # a burst of two


def test_reservations_in_one_process_are_spaced_by_the_interval(url_store):
    starts = [time.monotonic() + url_store.reserve_rate("rpm:x", 0.5) for _ in range(4)]
    assert [round(b - a, 1) for a, b in zip(starts, starts[1:], strict=False)] == [0.5, 0.5, 0.5]
    # Another key has its own budget; a burst tolerance lets that many start at once.
    assert [url_store.reserve_rate("rpm:y", 0.5, tolerance=1.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert url_store.reserve_rate("rpm:y", 0.5, tolerance=1.0) > 0.4


_RESERVER = textwrap.dedent(
    """
    import json, sys, time
    from council.storage import open_store
    store = open_store()
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    starts = []
    for _ in range(int(sys.argv[1])):
        wait = store.reserve_rate("rpm:shared", float(sys.argv[2]))
        starts.append(time.time() + wait)
    print(json.dumps(starts), flush=True)
    """
)


def run_together(code: str, args: list[str], backend_url: str, processes: int, before_go=None) -> list[float]:
    """``processes`` copies of ``code`` on the store, started together once all are ready
    (after ``before_go``); the sorted times they print."""
    env = {**os.environ, "COUNCIL_DATABASE_URL": backend_url}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, *args],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(processes)
    ]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
    if before_go is not None:
        before_go()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    return sorted(s for p in procs for s in json.loads(p.communicate(timeout=120)[0]))


def test_four_processes_share_one_budget_exactly(backend_url):
    interval, per_process, processes = 0.01, 25, 4
    starts = run_together(_RESERVER, [str(per_process), str(interval)], backend_url, processes)
    assert len(starts) == processes * per_process
    # The starts are one interval apart whichever process reserved them: 100 calls take 99
    # intervals, and no window holds more than its share. A process descheduled between the
    # reservation and its clock read sees its start late: allow 20 ms of that (2 cores shared).
    assert starts[-1] - starts[0] >= (len(starts) - 1) * interval - 0.02
    window, jitter = 0.25, 0.02
    most = max(sum(1 for t in starts if s <= t < s + window) for s in starts)
    assert most <= (window + jitter) / interval + 1, most


def test_a_council_model_with_rpm_waits_on_the_shared_budget(url_store):
    from council.api import Council

    config = {
        "councils": {"default": {"members": ["a", "b"], "chairman": "a"}},
        "models": {"a": {"model": "fake/a", "rpm": 1200, "max_concurrency": 1}, "b": {"model": "fake/b"}},
    }
    # Another process has just used the budget for the next 0.5 s (timed from before it did,
    # so the time it takes to build the council on a loaded machine does not count).
    key = "rpm:a:fake/a"
    started = time.monotonic()
    for _ in range(10):
        url_store.reserve_rate(key, 60 / 1200)
    council = Council.from_config(config, store=url_store)
    result = council.run_sync("What is 2+2?")
    assert result.status in ("complete", "partial")
    assert time.monotonic() - started >= 0.5


# -- tpm: one token budget (a call reserves its worst case, settles at its real usage) ---------


class Usage:
    """A model that answers at once, reporting ``used`` tokens (None: exactly what was reserved)."""

    def __init__(self, client_tokens, used=None):
        self.client_tokens, self.used, self.sent = client_tokens, used, []

    async def generate(self, request):
        from council.providers.base import ChatResponse

        self.sent.append(time.time())
        used = self.client_tokens(request) if self.used is None else self.used
        return ChatResponse(text="ok", prompt_tokens=used // 2, completion_tokens=used - used // 2)

    async def aclose(self):
        pass


def tpm_client(store, *, tpm, max_tokens, used=None, retries=3):
    from council.config import ConfigFile, resolve_model
    from council.config.schema import ModelSpec
    from council.providers.client import ModelClient

    spec = ModelSpec(model="fake/t", tpm=tpm, max_tokens=max_tokens, max_concurrency=4, retries=retries)
    config = ConfigFile(models={"t": spec})
    resolved = resolve_model("t", config, {}, "test")
    client = ModelClient(resolved, None, shared_limits=store)  # type: ignore[arg-type]
    client.api = Usage(client.call_tokens, used)
    return client


def ask(client, text="hi"):
    import asyncio

    from council.providers.base import ChatRequest

    request = ChatRequest(messages=[{"role": "user", "content": text}], max_tokens=client.resolved.spec.max_tokens)
    return asyncio.run(client.complete(request, stage="answer"))


def test_a_call_waits_for_its_tokens_and_never_fails_for_them(url_store):
    # tpm = 6000: 10 ms a token, a bucket of 6000. Each call may take 3030 tokens (30 of
    # prompt bound + max_tokens 3000): two fit in the bucket but for 60 tokens, 0.6 s.
    greedy = tpm_client(url_store, tpm=6000, max_tokens=3000)  # uses all it reserved
    ask(greedy)
    started = time.monotonic()
    ask(greedy)
    assert time.monotonic() - started >= 0.55
    assert len(greedy.api.sent) == 2


def test_a_call_that_used_few_of_its_tokens_lets_the_next_start_at_once(url_store):
    thrifty = tpm_client(url_store, tpm=6000, max_tokens=3000, used=30)
    ask(thrifty)  # reserved 3030, used 30: 3000 given back
    started = time.monotonic()
    ask(thrifty)
    assert time.monotonic() - started < 0.3
    # The budget row holds exactly what was used: a full bucket less those 60 tokens fits at once,
    # 100 tokens more do not.
    assert url_store.reserve_rate("tpm:t:fake/t", 5940 * 0.01, tolerance=60 * 0.01) == 0.0
    assert url_store.reserve_rate("tpm:t:fake/t", 100 * 0.01, tolerance=5900 * 0.01) > 0.5


def test_the_shared_budget_is_asked_off_the_event_loop_where_the_store_allows(url_store, monkeypatch):
    # On PostgreSQL each reservation is a round trip, which every other call on the event loop
    # (every session of a server) waited for; SQLite's connection is the loop's own.
    import threading

    from conftest import threads_calling

    threads = threads_calling(monkeypatch, url_store, "reserve_rate", "adjust_rate")
    ask(tpm_client(url_store, tpm=6000, max_tokens=3000, used=30))  # reserves, then gives back 3000
    assert {name: len(seen) for name, seen in threads.items()} == {"reserve_rate": 1, "adjust_rate": 1}
    here = threading.current_thread().name
    assert all((t != here) == url_store.threadsafe for seen in threads.values() for t in seen), threads


def test_a_call_the_provider_answered_with_an_error_gives_all_its_tokens_back(url_store):
    from council.errors import ProviderError

    client = tpm_client(url_store, tpm=6000, max_tokens=3000, retries=0)

    async def refuse(request):
        raise ProviderError("BadRequestError: no", status_code=400)

    client.api.generate = refuse
    with pytest.raises(ProviderError):
        ask(client)
    # Nothing was used: the whole bucket is there for the next caller.
    assert url_store.reserve_rate("tpm:t:fake/t", 60.0, tolerance=0.0) < 0.05


def test_a_call_larger_than_tpm_is_refused_before_it_is_sent(url_store):
    from council.errors import RequestTooLarge

    client = tpm_client(url_store, tpm=500, max_tokens=400)
    with pytest.raises(RequestTooLarge) as refused:
        ask(client, "x" * 200)  # 228 of prompt bound + 400 > 500
    message = str(refused.value)
    assert "\n" not in message and "tpm = 500" in message and "628 tokens" in message and "not sent" in message
    assert client.api.sent == [] and refused.value.exit_code == 2
    assert url_store.reserve_rate("tpm:t:fake/t", 30.0, tolerance=30.0) == 0.0  # nothing was reserved


_TPM_CALLER = textwrap.dedent(
    """
    import asyncio, json, sys, time
    sys.path.insert(0, sys.argv[3])
    from council.storage import open_store
    from test_storage_rate_limits import ask, tpm_client
    client = tpm_client(open_store(), tpm=int(sys.argv[1]), max_tokens=170)
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    for _ in range(int(sys.argv[2])):
        ask(client)
    print(json.dumps(client.api.sent), flush=True)
    """
)


def test_four_processes_share_one_token_budget(backend_url, monkeypatch):
    from pathlib import Path

    from council.methods.gcra import most_in_window
    from council.storage import open_store

    tpm, per_process, processes, call = 60_000, 6, 4, 200  # 1 ms a token; a call is 30 + 170 tokens
    monkeypatch.setenv("COUNCIL_DATABASE_URL", backend_url)
    store = open_store()

    def empty_the_bucket() -> None:  # another process has just used the whole bucket
        store.reserve_rate("tpm:t:fake/t", 60.0)
        store.close()

    args = [str(tpm), str(per_process), str(Path(__file__).parent)]
    starts = run_together(_TPM_CALLER, args, backend_url, processes, before_go=empty_the_bucket)
    assert len(starts) == processes * per_process
    # 24 calls of 200 tokens at 1000 tokens/s, whichever process sent them: 23 × 0.2 s at least
    # (4 processes each on its own budget would take a quarter of that), and no window holds
    # more than its share + one call (the bucket was empty). Jitter: a process descheduled
    # between its reservation and its send (2 shared cores).
    assert starts[-1] - starts[0] >= (len(starts) - 1) * call / 1000 * 0.99
    window, jitter = 1.0, 0.05
    most = most_in_window(starts, [call] * len(starts), window)
    assert most <= (window + jitter) * tpm / 60 + call, most


def test_a_batch_judge_with_rpm_waits_on_the_shared_budget(url_store, backend_url, tmp_path):
    from conftest import invoke_cli, write_config

    batch = tmp_path / "pairs.jsonl"
    batch.write_text(json.dumps({"id": "p1", "prompt": "Q?", "a": "yes", "b": "no"}) + "\n")
    cfg = write_config(tmp_path / "c.toml", {"j": {"model": "fake/j", "rpm": 600, "max_concurrency": 1}})
    started = time.monotonic()
    for _ in range(10):  # another worker has just used the budget for the next second
        url_store.reserve_rate("rpm:j:fake/j", 0.1)
    judged = invoke_cli("batch", str(batch), "--judge", "j", "--config", str(cfg), "--json",
                        env={"COUNCIL_DATABASE_URL": backend_url})  # fmt: skip
    assert judged.exit_code == 0, judged.stderr
    assert time.monotonic() - started >= 1.1  # its two calls waited their turns after the others'


@pytest.mark.parametrize("command", ["compare", "grade"])
def test_compare_and_grade_judges_with_rpm_wait_on_the_shared_budget(url_store, backend_url, tmp_path, command):
    from conftest import invoke_cli, write_config

    (tmp_path / "a.txt").write_text("yes")
    (tmp_path / "b.txt").write_text("no")
    cfg = write_config(tmp_path / "c.toml", {"j": {"model": "fake/j", "rpm": 600, "max_concurrency": 1}})
    given = {"compare": ["--a", str(tmp_path / "a.txt"), "--b", str(tmp_path / "b.txt")],
             "grade": ["--response", str(tmp_path / "a.txt"), "--votes", "2"]}[command]  # fmt: skip
    started = time.monotonic()
    for _ in range(10):  # another process has just used the budget for the next second
        url_store.reserve_rate("rpm:j:fake/j", 0.1)
    judged = invoke_cli(command, "--prompt", "Q?", *given, "--judge", "j", "--config", str(cfg), "--json",
                        env={"COUNCIL_DATABASE_URL": backend_url})  # fmt: skip
    assert judged.exit_code == 0, judged.stderr
    assert time.monotonic() - started >= 1.1  # its two calls waited their turns after the others'


def test_a_member_whose_call_is_larger_than_tpm_fails_in_one_line_and_the_session_goes_on():
    from council.api import Council

    config = {
        "councils": {"default": {"members": ["a", "b", "c"], "chairman": "b"}},
        "models": {"a": {"model": "fake/a", "tpm": 100, "max_tokens": 50}, "b": {"model": "fake/b"},
                   "c": {"model": "fake/c"}},
    }  # fmt: skip
    result = Council.from_config(config, store=False).run_sync("Why is the sky blue?")
    # The others answered, reviewed and the chairman wrote the synthesis: partial, not failed.
    assert result.status == "partial" and result.synthesis.status == "ok" and result.synthesis.text
    [failed] = [f for f in result.failures if f.member == "a" and f.stage == "answer"]
    assert "\n" not in failed.error and "is more than [models.a] tpm = 100; it was not sent" in failed.error
