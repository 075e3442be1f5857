"""The web app in a real headless Chromium (Debian's, driven by Playwright): ask → the three stages
arrive live → open the stored session; hostile model text stays text; the layout holds at a
laptop's and a phone's width (checked by element boxes, not pixels); the reports render."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import httpx
import pytest
from mock_server import wait_for
from serve_helpers import council_serve
from web_browser import AUTH, TOKEN, ask, open_app, session_id_of, words

HOSTILE = 'Is <img src=x onerror="window.__pwned=1"> safe? </script><script>window.__pwned=2</script>'


def test_ask_watch_the_three_stages_arrive_then_open_the_stored_session(served, browser):
    page = open_app(browser, served)
    ask(page, "Why is the sky blue?")
    page.wait_for_selector("#answer-panel .answer-text")
    assert page.locator(".tab").count() == 3
    # The synthesis grows while the chairman writes (the mock sends a word every 20 ms).
    lengths, stages = set(), set()
    while page.locator("#status.running").count():
        lengths.add(len(page.text_content("#synthesis-text") or ""))
        stages.update(page.locator("#stage").all_text_contents())  # never waits: it goes when the session ends
        page.wait_for_timeout(30)
    page.wait_for_selector("#status.complete")
    assert len({n for n in lengths if n > 0}) >= 2, lengths  # seen part-written, more than once
    assert " · now: the chairman writes" in stages  # the stage in progress is named
    assert page.locator("#stage").count() == 0  # and no longer once the session is done
    assert page.locator(".review").count() == 3
    assert page.locator(".review tbody tr").count() == 6  # each reviewer scored the two others
    assert page.locator("#consensus tbody tr").count() == 3
    assert page.text_content("#kendall-w") not in ("", "—")
    session_id = session_id_of(page)
    stored = httpx.get(f"{served}/v1/sessions/{session_id}", headers=AUTH).json()
    assert words(page.text_content("#synthesis-text")) == words(stored["synthesis"]["text"])
    # Each member's answer in its own tab; labels de-anonymised in the reviews.
    answers = {a["member"]: a["text"] for a in stored["answers"]}
    page.click(".tab[data-member=gamma]")
    assert words(page.text_content("#answer-panel .answer-text")) == words(answers["gamma"])
    review = stored["reviews"][0]
    ranking = page.locator(".ranking").first.text_content()
    assert all(member in ranking for member in review["ranking"])

    # Home lists it; opening it shows the stored session.
    page.click("a.brand")
    page.wait_for_selector("#sessions ul.sessions")
    page.fill("#search", "sky is")  # no match
    page.wait_for_selector("#sessions p.muted")
    page.fill("#search", "SKY")
    page.wait_for_selector(f'#sessions a[href="#/session/{session_id}"]')
    page.click(f'#sessions a[href="#/session/{session_id}"]')
    page.wait_for_selector("#status.complete")
    assert page.text_content("#question") == "Why is the sky blue?"
    assert words(page.text_content("#synthesis-text")) == words(stored["synthesis"]["text"])
    assert page.locator(".review").count() == 3
    assert page.problems == []
    page.close()


def test_hostile_model_text_is_shown_as_text_and_never_runs(served, browser):
    page = open_app(browser, served)
    ask(page, HOSTILE)
    page.wait_for_selector("#status.complete")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#main img, #main script").count() == 0
    assert page.text_content("#question") == HOSTILE
    # The members and the chairman quote the question: their text shows the markup, inert.
    assert "<img src=x" in page.text_content("#answer-panel .answer-text")
    assert "</script><script>" in page.text_content("#synthesis-text")
    csp = httpx.get(served + "/").headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "connect-src 'self'" in csp
    page.close()


LAYOUT = """() => {
  const width = document.documentElement.clientWidth;
  const boxes = (selector) => [...document.querySelectorAll(selector)]
    .filter((e) => e.offsetParent !== null)
    .map((e) => e.getBoundingClientRect());
  const problems = [];
  const scroll = document.documentElement.scrollWidth;
  if (scroll > width) problems.push("page scrolls sideways: " + scroll + " > " + width);
  const groups = [".top > *", "main > *", "#session > *", ".tab", "#ask .row > *", ".meta", ".review", ".sessions a"];
  for (const group of groups) {
    const list = boxes(group);
    for (const b of list) {
      if (b.left < -0.5 || b.right > width + 0.5) problems.push(group + " outside the page: " + JSON.stringify(b));
    }
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length; j++) {
        const a = list[i], b = list[j];
        const across = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const down = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (across > 0.5 && down > 0.5) problems.push(group + " overlap: " + JSON.stringify([a, b]));
      }
    }
  }
  return problems;
}"""


@pytest.mark.parametrize("width", [1280, 390])
def test_layout_holds_at_a_laptops_and_a_phones_width(served, browser, width):
    page = open_app(browser, served, width=width, height=800)
    httpx.post(f"{served}/v1/sessions", json={"council": "default", "question": "Layout?"}, headers=AUTH)
    page.reload()
    page.wait_for_selector("#sessions ul.sessions a")
    assert page.evaluate(LAYOUT) == []  # the home page: ask form and sessions
    ask(page, "A long question " + "with_a_very_long_unbroken_word_" * 6 + " to wrap?")
    page.wait_for_selector("#status.complete")
    assert page.evaluate(LAYOUT) == []
    page.goto(served + "/#/leaderboard")
    page.wait_for_selector("main table")
    assert page.evaluate(LAYOUT) == []
    page.close()


SNAKE = re.compile(r"\b[a-z]+_[a-z_]+\b")


@pytest.mark.parametrize(("route", "path", "command"), [
    ("#/leaderboard", "/v1/leaderboard", "leaderboard"),
    ("#/bias", "/v1/bias-report", "bias-report"),
])
def test_the_leaderboard_and_bias_report_pages_are_the_clis_html_reports(served, served_root, browser, tmp_path,
                                                                         route, path, command):
    question = {"council": "default", "question": "Name a prime."}
    started = httpx.post(f"{served}/v1/sessions", json=question, headers=AUTH)
    # The session runs in the background: the reports have its models once it has finished
    # (on a busy machine, not always by the time a browser page is open).
    url = f"{served}/v1/sessions/{started.json()['session_id']}"
    finished = wait_for(lambda: httpx.get(url, headers=AUTH).json().get("status") not in (None, "running"), 60, 0.05)
    assert finished, "the session did not finish"
    # One source: what the server sends the app is the body of the CLI's --html page.
    fragment = httpx.get(f"{served}{path}?format=html", headers=AUTH)
    assert fragment.status_code == 200 and fragment.headers["content-type"].startswith("text/html")
    cli_page = tmp_path / "report.html"
    env = {**os.environ, "COUNCIL_HOME": str(served_root / "home")}
    subprocess.run([sys.executable, "-m", "council", command, "--html", str(cli_page)], env=env, check=True,
                   capture_output=True)  # fmt: skip
    assert fragment.text.strip() in cli_page.read_text(encoding="utf-8")
    assert httpx.get(f"{served}{path}?format=xml", headers=AUTH).status_code == 400

    page = open_app(browser, served)
    page.goto(served + "/" + route)
    page.wait_for_selector("main .report table")
    shown = page.inner_text("main")
    assert "{" not in shown and not SNAKE.findall(shown), SNAKE.findall(shown)  # no JSON, no raw keys
    assert page.locator("main .report svg").count() >= 1  # the report's charts
    if command == "leaderboard":
        board = httpx.get(f"{served}/v1/leaderboard", headers=AUTH).json()
        assert board["models"] and all(m["model"] in shown for m in board["models"])
        assert "Bradley–Terry ratings from" in shown
    else:
        assert "What the data says" in shown and "Reviewer calibration" in shown
    # The report's own style sheet applies (its headings' rule), inside the report only.
    assert page.evaluate("getComputedStyle(document.querySelector('main .report table th')).backgroundColor") \
        == "rgb(244, 246, 249)"
    assert page.is_hidden("#error") and page.problems == []
    page.close()


@pytest.fixture(scope="module")
def served_tight(tmp_path_factory):
    """A council whose members' ``tpm`` no long question fits (fake models: no calls go out)."""
    root = tmp_path_factory.mktemp("tight")
    config = root / "council.toml"
    lines = ["[councils.default]", 'members = ["a", "b", "c"]', 'chairman = "fake/chair"']
    for alias in "abc":
        lines += [f"[models.{alias}]", f'model = "fake/{alias}"', "tpm = 2000", "max_tokens = 50"]
    config.write_text("\n".join(lines) + "\n")
    (root / "home").mkdir()
    with council_serve(config, root / "home", "--token", TOKEN) as (base, _):
        yield base


def test_a_question_too_large_for_the_members_tpm_is_one_line_naming_the_limit(served_tight, browser):
    page = open_app(browser, served_tight)
    question = "Why is the sky blue? " + "Please be thorough. " * 150  # ~3,000 bytes, > tpm = 2000
    page.fill("#ask-question", question)
    page.click("#ask-submit")
    page.wait_for_selector("#error:not([hidden])")
    shown = page.text_content("#error")
    assert "too large" in shown and "[models.a] tpm = 2000" in shown and "\n" not in shown
    assert "#/session/" not in page.url  # no view of a session that never ran
    assert page.input_value("#ask-question") == question  # nothing to type again
    # Nothing lost: the failed session is listed, and opening it shows the same reason.
    [kept] = httpx.get(f"{served_tight}/v1/sessions", headers=AUTH).json()
    link = f'#sessions a[href="#/session/{kept["session_id"]}"]'
    page.wait_for_selector(link)
    page.click(link)
    page.wait_for_selector("#status.failed")
    assert "[models.a] tpm = 2000" in page.text_content("#main .error-text")
    assert [p for p in page.problems if "status of 400" not in p] == []  # Chromium logs the 400 itself
    page.close()
