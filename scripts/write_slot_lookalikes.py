"""Write council/untrusted/lookalikes.py: the part of Unicode's confusables table that slot tags need
(tests/pipelines/test_slots.py checks it is current; ruff formats it).

    python scripts/write_slot_lookalikes.py

The table comes from the ``confusable-homoglyphs`` package (a ``dev`` dependency): every single
character it lists as confusable with ``<``, ``/`` or a letter of a slot name, mapped to what it
looks like. Loading the whole table takes ~30 ms of CPU, on the critical path of the first prompt
that quotes non-ASCII text; the part kept here is a few hundred characters.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "council" / "slot_lookalikes.py"


def lookalikes() -> dict[str, str]:
    from confusable_homoglyphs.confusables import confusables_data

    from council.untrusted.slots import NEUTRAL_OPENER, SLOT_NAMES

    targets = {ch for name in SLOT_NAMES for ch in name} | {"<", "/"}
    table: dict[str, str] = {}
    for target in sorted(targets):
        for key in sorted({target, target.upper()}):
            for homoglyph in confusables_data.get(key, ()):
                lookalike = homoglyph["c"]
                for form in sorted({lookalike, lookalike.casefold()}):
                    if len(form) == 1 and not form.isascii():  # ASCII is read as itself ("0" stays "0")
                        table.setdefault(form, target)
    table.pop(NEUTRAL_OPENER, None)  # already neutral: left as it is
    return dict(sorted(table.items()))


def source(table: dict[str, str]) -> str:
    by_target: dict[str, list[str]] = {}
    for lookalike, target in table.items():
        by_target.setdefault(target, []).append(lookalike)
    lines = [
        '"""The characters that read as ``<``, ``/`` or a letter of a slot name (from Unicode\'s confusables',
        'table; written by scripts/write_slot_lookalikes.py, do not edit). See council.untrusted.slots."""',
        "",
        "# target: every single character confusable with it, as escapes",
        "_BY_TARGET = {",
    ]
    for target, chars in sorted(by_target.items()):
        escaped = [f"\\U{ord(c):08x}" if ord(c) > 0xFFFF else f"\\u{ord(c):04x}" for c in chars]
        rows = ["".join(escaped[i : i + 10]) for i in range(0, len(escaped), 10)]
        lines.append(f'    "{target}": (')
        lines += [f'        "{row}"' for row in rows]
        lines.append("    ),")
    lines += [
        "}",
        "",
        "LOOKALIKES: dict[str, str] = {ch: target for target, chars in _BY_TARGET.items() for ch in chars}",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    TARGET.write_text(source(lookalikes()), encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
