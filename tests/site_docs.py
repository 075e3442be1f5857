"""The documentation's texts, for the tests that keep them true: README.md and the site's pages.

The site is `docs/` built by MkDocs (`mkdocs.yml`); the dated benchmark history is kept out of its
navigation and out of these texts (it records what was true when each run was made)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
HISTORY = DOCS / "benchmark-history.md"


def page(relative: str) -> str:
    """One page of the site, by its path under docs/."""
    return (DOCS / relative).read_text(encoding="utf-8")


def site_pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if p != HISTORY)


def site_text() -> str:
    """Every page of the site, one after another."""
    return "\n".join(p.read_text(encoding="utf-8") for p in site_pages())


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
