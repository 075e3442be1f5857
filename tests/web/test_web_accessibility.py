"""The web app for people using a keyboard or a screen reader: the member tabs follow the ARIA
tabs pattern (arrow keys, Home and End; the focus never drops to the top of the page), stage
changes and the finished answer are announced in a polite live region (not each streamed word),
every status badge's text has 4.5:1 contrast, and axe-core finds no serious or critical
violation on any page at a laptop's or a phone's width."""

from __future__ import annotations

import httpx
import pytest
from mock_server import wait_for
from web_browser import AUTH, ask, axe_violations, open_app

FOCUSED_TAB = "document.activeElement.getAttribute('role') === 'tab' ? document.activeElement.dataset.member : null"


def selected(page) -> list[str]:
    return page.eval_on_selector_all('[role="tab"][aria-selected="true"]', "(ts) => ts.map((t) => t.dataset.member)")


def test_the_member_tabs_follow_the_aria_tabs_pattern(served, browser):
    page = open_app(browser, served)
    ask(page, "Which tabs?")
    page.wait_for_selector('[role="tab"]')
    page.focus('[role="tab"][tabindex="0"]')  # while the session still runs and the view is redrawn
    page.wait_for_selector("#status.complete", timeout=60_000)
    assert page.evaluate(FOCUSED_TAB) == "alpha"  # kept through every redraw
    for key, member in (("ArrowRight", "beta"), ("ArrowRight", "gamma"), ("ArrowRight", "alpha"),
                        ("ArrowLeft", "gamma"), ("Home", "alpha"), ("End", "gamma")):  # fmt: skip
        page.keyboard.press(key)
        assert page.evaluate(FOCUSED_TAB) == member, key
        assert selected(page) == [member]
        tabindex = page.eval_on_selector_all('[role="tab"]', "(ts) => ts.map((t) => t.tabIndex)")
        assert sorted(tabindex) == [-1, -1, 0]  # one tab stop for the whole list
        panel = page.locator('[role="tabpanel"]')
        assert panel.get_attribute("aria-labelledby") == page.get_attribute(f'[data-member="{member}"]', "id")
    page.focus('[data-member="beta"]')
    page.keyboard.press("Enter")
    assert page.evaluate(FOCUSED_TAB) == "beta" and selected(page) == ["beta"]
    page.keyboard.press("Space")
    assert page.evaluate(FOCUSED_TAB) == "beta"
    page.close()


RECORD = """() => {
  window.__said = [];
  const box = document.getElementById("announcer");
  // each text put there (several in one task are seen in one callback)
  new MutationObserver((records) => {
    for (const r of records) for (const n of r.addedNodes) window.__said.push(n.textContent);
  }).observe(box, { childList: true });
}"""


def test_stage_changes_and_the_finished_answer_are_announced_politely_not_word_by_word(served, browser):
    page = open_app(browser, served)
    assert page.get_attribute("#announcer", "aria-live") == "polite"
    page.evaluate(RECORD)
    ask(page, "What is announced?")
    page.wait_for_selector("#status.complete", timeout=60_000)
    said = page.evaluate("window.__said")
    assert said[:3] == ["Now the members answer.", "Now the reviewers rank.", "Now the chairman writes."], said
    assert len(said) == 4, said  # and once at the end, however many words were streamed
    synthesis = " ".join(page.text_content("#synthesis-text").split())
    assert said[3].startswith("The session is complete. The council's answer: ")
    assert " ".join(said[3].split()).endswith(synthesis)
    assert page.get_attribute("#synthesis-text", "aria-busy") == "false"
    page.close()


BADGES = """() => {
  const box = document.getElementById("main");
  for (const status of ["running", "partial", "complete", "failed", "interrupted"]) {
    const card = document.createElement("div");
    card.className = "card";
    const badge = document.createElement("span");
    badge.className = "badge " + status;
    badge.textContent = status;
    card.append(badge);
    box.append(card);
  }
}"""


def test_every_status_badge_has_enough_contrast(served, browser):
    page = open_app(browser, served)
    page.wait_for_selector("#sessions")
    page.evaluate(BADGES)
    assert [v for v in axe_violations(page) if v.startswith("color-contrast")] == []
    page.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_axe_finds_no_serious_or_critical_violation_on_any_page(served, browser, width):
    done = httpx.post(f"{served}/v1/sessions", json={"council": "default", "question": "Audit me?"}, headers=AUTH)
    url = f"{served}/v1/sessions/{done.json()['session_id']}"
    assert wait_for(lambda: httpx.get(url, headers=AUTH).json().get("status") not in (None, "running"), 60, 0.05)
    page = open_app(browser, served, width=width, height=800)
    found = {}
    page.wait_for_selector("#sessions ul.sessions")
    found["home"] = axe_violations(page)
    page.click("#token-toggle")  # the token form open
    found["home with the token form"] = axe_violations(page)
    page.click("#token-toggle")
    page.click(f'#sessions a[href="#/session/{done.json()["session_id"]}"]')
    page.wait_for_selector("#status.complete")
    page.wait_for_selector("#followup")
    found["session"] = axe_violations(page)
    page.fill("#followup-question", "And a **follow-up** with `code`?")
    page.press("#followup-question", "Enter")
    page.wait_for_selector("#earlier")
    page.wait_for_selector("#followup", timeout=60_000)
    found["follow-up in a conversation"] = axe_violations(page)
    page.goto(served + "/#/leaderboard")
    page.wait_for_selector("main .report table")
    found["leaderboard"] = axe_violations(page)
    page.goto(served + "/#/bias")
    page.wait_for_selector("main .report table")
    found["bias report"] = axe_violations(page)
    assert not any(found.values()), "\n".join(f"{name}: {line}" for name, lines in found.items() for line in lines)
    assert page.problems == []
    page.close()
