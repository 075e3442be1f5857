"""Asking in the web app as in a chat app: the configured default council preselected (not the
first in the alphabet), Enter sends and Shift+Enter starts a new line, and follow-up questions
continue the conversation: the council sees the earlier turns (the ``attack`` council's members
quote every question they were asked, ``+quote``), and the page shows them."""

from __future__ import annotations

import json

from web_browser import open_app, session_id_of


def test_the_configured_default_council_is_preselected(served, browser):
    page = open_app(browser, served)
    assert page.eval_on_selector_all("#ask-council option", "(os) => os.map((o) => o.value)") == ["attack", "default"]
    assert page.input_value("#ask-council") == "default"
    page.close()


def test_enter_sends_and_shift_enter_starts_a_new_line(served, browser):
    page = open_app(browser, served)
    page.click("#ask-question")
    page.keyboard.type("Line one")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("line two?")
    assert page.input_value("#ask-question") == "Line one\nline two?"
    assert page.locator("#session").count() == 0  # not sent
    page.keyboard.press("Enter")
    page.wait_for_selector("#status.complete", timeout=60_000)
    assert page.text_content("#question") == "Line one\nline two?"
    page.close()


def test_follow_up_questions_continue_the_conversation(served, browser):
    page = open_app(browser, served)
    posted: list[dict] = []
    page.on("request", lambda r: posted.append(json.loads(r.post_data)) if r.method == "POST" else None)
    page.select_option("#ask-council", "attack")
    page.fill("#ask-question", "What is the tallest mountain?")
    page.press("#ask-question", "Enter")
    page.wait_for_selector("#status.complete", timeout=60_000)
    first_id = session_id_of(page)
    assert page.locator("#earlier").count() == 0

    page.fill("#followup-question", "How tall is it?")
    page.press("#followup-question", "Enter")
    page.wait_for_url(lambda url: not url.endswith(first_id))
    page.wait_for_selector("#status.complete", timeout=60_000)
    # The council heard the first question: each member quotes it before the new one.
    page.click(".tab[data-member=qa]")
    assert "Earlier you asked: What is the tallest mountain?" in page.text_content("#answer-panel")
    assert "You asked: How tall is it?" in page.text_content("#answer-panel")
    assert page.text_content("#main .meta strong") == "attack"  # the same council
    # The page shows the earlier turn, its question and the council's answer.
    assert page.text_content("#earlier .turn-question") == "What is the tallest mountain?"
    history = posted[-1]["history"]
    assert [t["role"] for t in history] == ["user", "assistant"]
    assert history[0]["content"] == "What is the tallest mountain?"
    assert history[1]["content"].startswith("Quoting the answers I was shown")  # the chairman's synthesis

    page.fill("#followup-question", "And the second tallest?")
    page.click("#followup-submit")
    page.wait_for_selector("#earlier .turn:nth-of-type(2)")
    page.wait_for_selector("#status.complete", timeout=60_000)
    panel = page.text_content("#answer-panel")
    assert "Earlier you asked: What is the tallest mountain?" in panel and "Earlier you asked: How tall is it?" in panel
    assert [t["role"] for t in posted[-1]["history"]] == ["user", "assistant", "user", "assistant"]
    assert page.problems == []
    page.close()
