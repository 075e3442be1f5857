"""Screenshots of every page of the web app at a laptop's and a phone's width (1280 and 390 px),
for the docs site (docs/chat-apps/screenshots/): headless Chromium drives the app served by
``council serve`` over the mock LLM server, as a user would.

Pages: the home page (ask, recent sessions), a finished session (answers, reviews, consensus,
synthesis), a follow-up in a conversation (the earlier turn above, an answer rendered from
markdown), the leaderboard and the bias report.

    python scripts/screenshot_pages.py
    python scripts/screenshot_pages.py --output /tmp/shots --width 390
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "tests"):  # the package, tests/mock_server.py and tests/serve_helpers.py
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import httpx  # noqa: E402
from mock_server import start_mock_server, wait_for  # noqa: E402
from serve_helpers import council_serve  # noqa: E402

TOKEN = "screenshot-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}
WIDTHS = (1280, 390)
QUESTIONS = [
    "Why is the sky blue, and why are sunsets red?",
    "What is the boiling point of water at the top of Mount Everest?",
    "How many moons does Mars have?",
    "Is a tomato a fruit or a vegetable?",
]
# The "echo" council's members repeat what they were asked: its answers show how markdown renders.
MARKDOWN_QUESTION = """How do I read a file line by line in Python?

## Steps

1. Open it with `open()` in a `with` block.
2. Loop over the file object.

```python
with open("notes.txt", encoding="utf-8") as f:
    for line in f:
        print(line.rstrip())
```

> Files are read lazily: **one line at a time**."""


def config(mock_url: str) -> str:
    lines = ["[councils.default]", 'members = ["alpha", "beta", "gamma"]', 'chairman = "alpha"',
             "[councils.echo]", 'members = ["echo-a", "echo-b"]', 'reviewers = ["alpha", "beta"]',
             'chairman = "alpha"']  # fmt: skip
    for alias in ("alpha", "beta", "gamma"):
        lines += [f"[models.{alias}]", f'model = "openai/mock-{alias}"', f'api_base = "{mock_url}"']
    for alias in ("echo-a", "echo-b"):
        lines += [f"[models.{alias}]", f'model = "openai/mock-{alias}+quote"', f'api_base = "{mock_url}"']
    return "\n".join(lines) + "\n"


def finished(base: str, session_id: str) -> None:
    url = f"{base}/v1/sessions/{session_id}"
    if not wait_for(lambda: httpx.get(url, headers=AUTH).json().get("status") not in (None, "running"), 120, 0.05):
        raise RuntimeError(f"session {session_id} did not finish")


def shoot(page, out: Path, name: str, width: int) -> Path:
    path = out / f"{name}-{width}.png"
    page.wait_for_timeout(150)  # the last frame drawn
    page.screenshot(path=str(path), full_page=True)
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} ({path.stat().st_size // 1024} KB)")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--output", default=str(ROOT / "docs" / "chat-apps" / "screenshots"), help="folder of PNGs")
    parser.add_argument("--width", type=int, action="append", help="only this width (repeatable)")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="council-shots-") as tmp, start_mock_server(latency=0.02) as mock:
        home = Path(tmp) / "home"
        home.mkdir()
        (Path(tmp) / "council.toml").write_text(config(mock.base_url))
        with council_serve(Path(tmp) / "council.toml", home, "--token", TOKEN) as (base, _), sync_playwright() as p:
            for seed, question in enumerate(QUESTIONS):  # recent sessions, and data for the reports
                body = {"council": "default", "question": question, "seed": seed}
                finished(base, httpx.post(f"{base}/v1/sessions", json=body, headers=AUTH).json()["session_id"])
            browser = p.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            for width in args.width or WIDTHS:
                page = browser.new_page(viewport={"width": width, "height": 900 if width > 600 else 844})
                page.goto(base + "/")
                page.evaluate(f"sessionStorage.setItem('council-token', {json.dumps(TOKEN)})")
                page.goto(base + "/#/")
                page.reload()
                page.wait_for_selector("#sessions ul.sessions")
                shoot(page, out, "home", width)

                page.fill("#ask-question", QUESTIONS[0])
                page.press("#ask-question", "Enter")
                page.wait_for_selector("#status.complete", timeout=120_000)
                page.wait_for_selector("#followup")
                page.click(".tab[data-member=beta]")
                shoot(page, out, "session", width)

                page.goto(base + "/#/")
                page.wait_for_selector("#ask-council option", state="attached")
                page.select_option("#ask-council", "echo")
                page.fill("#ask-question", "Which file formats does Python read without extra packages?")
                page.press("#ask-question", "Enter")
                page.wait_for_selector("#followup", timeout=120_000)
                page.fill("#followup-question", MARKDOWN_QUESTION)
                page.click("#followup-submit")
                page.wait_for_selector("#earlier")
                page.wait_for_selector("#followup", timeout=120_000)
                shoot(page, out, "conversation", width)

                page.goto(base + "/#/leaderboard")
                page.wait_for_selector("main .report table")
                shoot(page, out, "leaderboard", width)
                page.goto(base + "/#/bias")
                page.wait_for_selector("main .report table")
                shoot(page, out, "bias-report", width)
                page.close()
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
