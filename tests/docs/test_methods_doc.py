"""Keep docs/methods.md linkable: every link into it from the code or the docs names a real section."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
METHODS = ROOT / "docs" / "methods.md"


def github_anchor(heading: str) -> str:
    """The fragment GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings() -> list[str]:
    text = re.sub(r"```.*?```", "", METHODS.read_text(encoding="utf-8"), flags=re.DOTALL)
    return [m.group(1) for m in re.finditer(r"^#{1,6} +(.+?) *$", text, re.MULTILINE)]


def anchors() -> set[str]:
    return {github_anchor(h) for h in headings()}


def project_texts() -> list[tuple[Path, str]]:
    files = [*sorted((ROOT / "council").rglob("*.py")), *sorted((ROOT / "council").rglob("*.toml"))]
    files += [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [(p, p.read_text(encoding="utf-8")) for p in files]


def test_github_anchor_rule():
    assert github_anchor("Kendall's W") == "kendalls-w"
    assert github_anchor("Length-score correlation") == "length-score-correlation"
    assert github_anchor("Merging one judge's votes") == "merging-one-judges-votes"


def test_headings_are_unique_so_anchors_are_stable():
    seen = [github_anchor(h) for h in headings()]
    repeated = sorted({a for a in seen if seen.count(a) > 1})
    assert not repeated, f"headings with the same anchor (GitHub would suffix them -1): {repeated}"


def test_every_link_into_methods_names_a_section():
    known = anchors()
    broken = []
    for path, text in project_texts():
        where = path.relative_to(ROOT)
        for m in re.finditer(r"docs/methods\.md#([\w\-]+)", text):
            if m.group(1) not in known:
                broken.append(f"{where}: #{m.group(1)}")
        for m in re.finditer(r'docs/methods\.md, "([^"]+)"', text):
            if github_anchor(m.group(1)) not in known:
                broken.append(f'{where}: "{m.group(1)}"')
        if path == METHODS:
            for m in re.finditer(r"\]\(#([\w\-]+)\)", text):
                if m.group(1) not in known:
                    broken.append(f"{where}: (#{m.group(1)})")
    assert not broken, "links to missing sections of docs/methods.md:\n" + "\n".join(broken)


def test_the_readme_links_the_methods():
    assert "](docs/methods.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_code_points_at_the_methods_not_the_design_documents():
    cited = [
        f"{path.relative_to(ROOT)}: {m.group(0)}"
        for path, text in project_texts()
        if path.parts[-2:] != ("docs", "methods.md") and path.suffix in (".py", ".toml")
        for m in re.finditer(r"(?i)\bseed[ -]00\d", text)
    ]
    assert not cited, "cite docs/methods.md sections instead:\n" + "\n".join(cited)


def code_references() -> list[tuple[str, str, list[str]]]:
    """(section, path, names) for each place named in the "Code references" table."""
    text = METHODS.read_text(encoding="utf-8")
    table = text[text.index("## Code references") :]
    out = []
    for row in re.finditer(r"^\| \[#([\w\-]+)\]\(#[\w\-]+\) \| (.+) \|$", table, re.MULTILINE):
        for part in row.group(2).split(";"):
            m = re.match(r"\s*`([^`]+)`(.*)", part)
            assert m, f"#{row.group(1)}: {part!r} does not start with a path"
            names_text = re.sub(r"\([^)]*\)", "", m.group(2))  # parenthesised: fields, options
            out.append((row.group(1), m.group(1), re.findall(r"`([^`]+)`", names_text)))
    return out


def test_code_references_name_files_and_names_that_exist():
    refs = code_references()
    assert len(refs) > 50
    missing = []
    for section, path, names in refs:
        target = ROOT / path
        if not target.exists():
            missing.append(f"#{section}: {path} does not exist")
            continue
        if target.is_dir():
            continue
        source = target.read_text(encoding="utf-8")
        for name in names:
            if not all(re.search(rf"\b{re.escape(piece)}\b", source) for piece in name.split(".")):
                missing.append(f"#{section}: {path} has no {name}")
    assert not missing, "docs/methods.md's code references are out of date:\n" + "\n".join(missing)
