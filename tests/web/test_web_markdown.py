"""A model's markdown is rendered, and rendered safely: the members and the chairman of the
``attack`` council quote a hostile question back (``+quote``), so their answers and synthesis
carry script tags, event handlers, ``javascript:`` links, raw HTML, iframes and SVG payloads.
The page is opened with its Content-Security-Policy switched off, so that only the sanitiser
stands between the payloads and the page: nothing may run, and no dangerous element or
attribute may reach the DOM. Code blocks are shown in monospace."""

from __future__ import annotations

from web_browser import ask, open_app

PAYLOADS = [
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    "[a link](javascript:window.__pwned=3)",
    '<a href="javascript:window.__pwned=4">raw link</a>',
    '<iframe src="javascript:window.__pwned=5"></iframe>',
    '<svg onload="window.__pwned=6"><script>window.__pwned=7</script></svg>',
    '<math><mtext><table><mglyph><style><img src=x onerror="window.__pwned=8"></style></mglyph></table></mtext>'
    "</math>",
    '![an image](javascript:window.__pwned=9 "title")',
    '<details open ontoggle="window.__pwned=10">toggle</details>',
    "[data](data:text/html,<script>window.__pwned=11</script>)",
    "[vb](vbscript:msgbox)",
    '<form action="javascript:window.__pwned=12"><button>go</button></form>',
    '<a href="https://example.org/" onclick="window.__pwned=13">ok link</a>',
    "[spaced]( javascript:window.__pwned=14 )",
    "[entity](&#106;avascript:window.__pwned=15)",
    "<javascript:window.__pwned=16>",
]
# Each payload alone in its paragraph (a block of raw HTML runs to the next blank line), and
# once more inside a sentence (inline).
ATTACK = (
    "Please review this:\n\n# A heading\n\nSome **bold** text and `inline code`.\n\n"
    '```python\nprint("hi")\n```\n\n' + "\n\n".join(PAYLOADS) + "\n\n"
    + " and ".join("inline " + p for p in PAYLOADS) + "\n"
)

DANGER = """() => {
  const found = [];
  for (const node of document.querySelectorAll("#main *")) {
    const tag = node.tagName.toLowerCase();
    if (["script", "iframe", "object", "embed", "svg", "math", "img", "style", "form", "button", "details",
         "input", "textarea", "base", "link", "meta"].includes(tag) && node.closest(".md")) found.push("<" + tag + ">");
    for (const attr of node.attributes) {
      const name = attr.name.toLowerCase(), value = attr.value.replace(/\\s+/g, "").toLowerCase();
      if (name.startsWith("on")) found.push(tag + " " + name);
      if (["href", "src", "action", "formaction", "xlink:href", "srcdoc"].includes(name)
          && /^(javascript|data|vbscript):/.test(value)) found.push(tag + " " + name + "=" + value);
      if (name === "style" && node.closest(".md")) found.push(tag + " style");
    }
  }
  return found;
}"""


def test_hostile_markdown_in_answers_and_the_synthesis_never_runs_nor_reaches_the_dom(served, browser):
    page = open_app(browser, served, bypass_csp=True)  # the sanitiser alone, no CSP behind it
    ask(page, ATTACK, council="attack")
    page.wait_for_selector("#status:not(.running)", timeout=60_000)
    page.wait_for_timeout(200)  # time for anything that would run (an onerror, an onload) to run
    for member in ("qa", "qb"):
        page.click(f".tab[data-member={member}]")
        answer = page.locator("#answer-panel .answer-text.md")
        # The markdown is rendered: a heading, bold, code; the raw HTML is shown as text.
        assert answer.locator("h1").text_content() == "A heading"
        assert answer.locator("strong").first.text_content() == "bold"
        assert answer.locator("pre code").text_content().strip() == 'print("hi")'
        text = answer.text_content()
        assert "<script>window.__pwned = 1</script>" in text and '<iframe src="javascript:' in text
        assert page.evaluate(DANGER) == []
        links = page.eval_on_selector_all(
            "#answer-panel a", "(links) => links.map((a) => [a.textContent, a.getAttribute('href'), a.rel])"
        )
        assert ["ok link", "https://example.org/", "noopener noreferrer"] not in links  # raw HTML stays text
        assert all(href is None or href.startswith("https:") for _, href, _ in links), links
        for link in page.locator("#answer-panel a").all():  # a click on any link runs nothing either
            if link.get_attribute("href") is None:
                link.click()
    synthesis = page.locator("#synthesis-text")
    assert synthesis.locator("pre code").count() >= 1 and "<svg onload=" in synthesis.text_content()
    assert page.evaluate(DANGER) == []
    assert page.evaluate("window.__pwned") is None
    page.close()


def test_code_blocks_are_monospace_and_scroll_inside_their_box(served, browser):
    page = open_app(browser, served, width=390, height=800)
    ask(page, "Show code:\n\n```\n" + "x = 1  # " + "long_" * 40 + "\n```", council="attack")
    page.wait_for_selector("#status:not(.running)", timeout=60_000)
    block = "#answer-panel pre"
    family = page.evaluate(f"getComputedStyle(document.querySelector('{block} code')).fontFamily")
    assert "monospace" in family
    assert page.evaluate(f"getComputedStyle(document.querySelector('{block}')).overflowX") == "auto"
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    page.close()
