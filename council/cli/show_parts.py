"""``--show``: which parts of a session ``council run`` and ``council sessions show`` print.

Apart from the view that prints them (:mod:`council.cli.views`, which needs rich) so that a
run checks its options without importing rich before its first call.
"""

from __future__ import annotations

#: What ``--show`` can name.
PARTS = ("question", "answers", "reviews", "consensus", "synthesis")


def parse_show(value: str | None) -> frozenset[str]:
    """``answers,reviews`` → the parts; ``all`` → every part; None (not given) → none. Unknown
    names, or none named (``""``): a ValueError saying so."""
    if value is None:
        return frozenset()
    names = {n.strip().lower() for n in value.split(",") if n.strip()}
    if not names:
        raise ValueError(f"no part named; choose from {', '.join(PARTS)}, all")
    if "all" in names:
        return frozenset(PARTS)
    unknown = sorted(names - set(PARTS))
    if unknown:
        raise ValueError(f"unknown part(s) {', '.join(map(repr, unknown))}; choose from {', '.join(PARTS)}, all")
    return frozenset(names)


def show_option_parts(show: str | None, as_json: bool) -> frozenset[str]:
    """``--show`` of ``run`` and ``sessions show`` checked alike: a bad value, or parts to print
    together with ``--json`` (which prints the whole session), is a ``UsageError``."""
    from council.errors import UsageError

    try:
        parts = parse_show(show)
    except ValueError as exc:
        raise UsageError(f"--show: {exc}") from None
    if parts and as_json:
        raise UsageError("--show prints for people; --json prints the whole result: choose one")
    return parts
