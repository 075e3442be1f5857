"""Deterministic, offline replies that fit the council's prompts, for tests, demos and the mock server.

``FakeResponder`` turns (model, messages, schema, seed) into reply text. The in-process
provider :class:`council.providers.fake.FakeAPI` serves it for model strings
``fake/NAME[+behaviour...]``; ``scripts/mock_llm_server.py`` serves the same responder over real
HTTP (any model name, same suffixes), so both behave identically. It reads prompts through the
names the prompts themselves use (the peer-review schema name, the answer, response and
question slots), so a renamed slot cannot silently leave the fake behind.

Replies are a pure function of the model's base name (without ``fake/`` and suffixes), the
messages, the schema and the seed (``hashlib``, never ``hash()``), except where ``flaky`` says
otherwise. Without a schema the reply is a few sentences about the question, longer or shorter
depending on the model name; a chairman prompt (one that mentions the chairman or a synthesis)
gets a synthesis-like text. With a JSON schema the reply is a JSON document that validates against
it (the subset pydantic v2 emits: objects, ``$ref``/``$defs``, arrays and tuples, enum, const,
strings with length bounds and common formats, bounded integers and numbers, booleans, null,
anyOf/oneOf/allOf; ``pattern`` is not supported).

The chairman's structured synthesis (``SYNTHESIS_SCHEMA_NAME``) holds the plain synthesis text as its
answer and names the answers' labels (``_structured_synthesis``).

The council's peer review (``schema_name == PEER_REVIEW_SCHEMA_NAME``) is answered coherently: one score
per label of ``properties.evaluations`` (labels in display order), on the scale of the
``score`` field, and a ranking consistent with the scores (best first, ties in label order). By
default a score depends on the text in the answer's ``<answer label="X">`` slot (mostly a hash
shared by every reviewer, partly the reviewer's own), so reviewers broadly agree, but not fully.

Other judging schemas are answered the same way when the prompt holds judged texts in
``<answer label="X">`` or ``<response id="X">`` slots: side-scored integers (``a_score``,
``b_score``, ``A.score``) follow each side's text, every enum offering "A" and "B" (a verdict)
names the better side ("TIE"/"tie" when they are close, if offered), consistently with those
scores, so swapping the two texts swaps the verdict; with one judged text (a rubric grade)
``score``-like fields follow it. Arrays of objects keyed by an enum field (``criterion``) list
each key once, in order; string lists named like ``safety_concerns``/``issues`` stay empty.

Behaviours, as ``+suffix`` on the model name (combine them: ``fake/x+first+slow``):

- ``default``: as above.
- ``first``: a position-biased judge. Peer-review scores strictly decrease with display position
  (as far as the scale allows) and the ranking is the display order; in any other schema every
  enum offering both "A" and "B" picks "A", and integer/number fields of the A side (``score_a``,
  ``A.score``...) get the top of their range, the B side the middle.
- ``harsh`` / ``generous``: peer-review scores (and other ``score``-like fields) pushed to the
  low / high end of the scale.
- ``garbage``: schema requests get prose with no JSON object in it at all.
- ``badscore``: schema requests get JSON in which one score is 3.5 or just out of range.
- ``flaky``: the first schema request of a conversation gets garbage, later ones are valid. A
  conversation is keyed by its opening messages (up to the first user message), so a re-request
  that appends the invalid reply and a correction counts as a second try.
- ``fail``: every request raises ``ProviderError`` (HTTP 500, retryable).
- ``slow``: same output; ``FakeAPI`` waits ``slow_seconds`` first, the mock server its
  ``--slow-seconds``.
- ``adopt`` / ``stubborn``: in a deliberation round, copy the peer answer it likes best verbatim,
  with no reason (the capitulation guard's case) / always keep its own answer. By default a member
  keeps or revises by a hash of its name and answer; a revision appends the best peer answer's
  first sentence to its own.
- ``cutoff``: the reply breaks off halfway: streamed, the first half arrives and then an error
  (HTTP 500); not streamed, the call fails with that error.

Hostile behaviours, for testing what council promises about untrusted text:

- ``echo``: every request fails with HTTP 400 whose message echoes the request, as some
  providers and proxies do: the mock server quotes the ``Authorization`` header and the raw
  body; ``FakeAPI`` quotes the messages.
- ``markup``: replies carry terminal markup (``MARKUP``: rich markup such as ``[/]`` and
  ``[link=...]``, ANSI colour and OSC 8 hyperlink escapes) in front of plain answers and of
  every reasoning field.
- ``quote``: replies quote what the model was shown: a plain reply quotes every answer slot
  (or, with none, the question, after the conversation's earlier questions); a peer review puts
  each answer's text where its integer score belongs, so the review is invalid and the
  validation message quotes the answer; any other schema gets the first judged text where its
  first number belongs.
- ``leak``: replies quote the credentials the request was sent with (the mock server: its
  ``Authorization`` header), as a model told its key by a careless prompt or proxy might: in
  front of plain answers and of every reasoning field, like ``markup``.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from council.errors import ConfigError, ProviderError
from council.judging.prompts import RESPONSE_SLOT
from council.providers.json_schema import integer_bounds, resolve_ref
from council.session.prompts import ANSWER_SLOT, QUESTION_SLOT
from council.session.schemas import PEER_REVIEW_SCHEMA_NAME, REVISION_SCHEMA_NAME
from council.session.structured import SYNTHESIS_SCHEMA_NAME

BEHAVIOURS = frozenset(
    {"default", "first", "harsh", "generous", "garbage", "badscore", "flaky", "fail", "slow", "echo", "markup", "quote",
     "cutoff", "leak", "adopt", "stubborn"}
)
#: What ``+markup`` puts in front of its replies: rich markup (an unmatched closing tag, a
#: hidden link, styles), an ANSI colour and an OSC 8 terminal hyperlink.
MARKUP = (
    "[/] [bold red]ALERT[/bold red] [link=http://evil.example/]click here[/link] "
    "\x1b[31mred\x1b[0m \x1b]8;;http://evil.example/\x07hyperlink\x1b]8;;\x07 :warning: "
)
_SLOT = re.compile(
    rf'<({ANSWER_SLOT}|{RESPONSE_SLOT}) (?:label|id)="([^"]+)"[^>]*>\n?(.*?)\n?</\1>', re.DOTALL
)
_QUESTION = re.compile(rf"<{QUESTION_SLOT}>\s*(.*?)\s*</{QUESTION_SLOT}>", re.DOTALL)
_REASONING_NAME = re.compile(
    r"reason|rational|explan|justif|thought|analys|critique|feedback|comment|summary|why|evidence|notes?$",
    re.IGNORECASE,
)
_SCORE_NAME = re.compile(r"score|rating|grade|points?$", re.IGNORECASE)
_PROBLEM_NAME = re.compile(r"concern|issue|problem|risk|warning|error|violation", re.IGNORECASE)
_TIES = ("TIE", "tie", "Tie")
_MAX_DEPTH = 8
_MAX_VALUES = 200  # past this many values, generate only what the schema requires

_PLAIN = (
    "The short answer to {topic} is that the well-established view holds, with a few caveats.",
    "Most sources agree on the core of {topic}, so the main point is not controversial.",
    "A useful way to think about {topic} is to separate the definition from the practical details.",
    "In everyday terms, {topic} comes down to one or two key facts that are easy to check.",
    "One common misconception about {topic} is worth correcting here.",
    "The exact figure depends on the conditions assumed, which is why careful answers state them.",
    "For most practical purposes, the standard textbook answer is the one to use.",
    "If more precision is needed, consult a primary reference and note the assumptions.",
    "Historically, the answer was refined as measurements improved.",
    "In summary, the answer is well supported and unlikely to change.",
)
_SYNTHESIS = (
    "The council's strongest answers agree on the essentials, and this synthesis keeps them.",
    "Where the answers differed, the better-supported position is adopted here.",
    "Minor errors in the weaker answers are corrected rather than repeated.",
    "The result is a single, direct answer that a reader can rely on.",
)
_REASONING = (
    "The answer is accurate and addresses the question directly.",
    "It covers the main point clearly but leaves out a useful detail.",
    "The reasoning is sound, although the wording could be tighter.",
    "It is partly correct and somewhat vague about the key fact.",
    "The response is clear, relevant and well organised.",
)
_GARBAGE = (
    "Honestly, all of these answers look reasonable to me. The first reads best, the second is fine, "
    "and the rest are about the same. I would not want to put numbers on it.",
    "I am unable to produce the requested format right now, but overall the answers seem decent "
    "and mostly correct, with some differences in detail.",
    "Scores: great, good, okay. Ranking: the usual order. Let me know if you need anything else!",
)
_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")
_FORMATS = {
    "date-time": "2024-01-02T03:04:05Z",
    "date": "2024-01-02",
    "time": "03:04:05",
    "duration": "PT1M",
    "email": "someone@example.com",
    "uri": "https://example.com/",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
}


# -- names, hashes, tokens ------------------------------------------------------
def stream_pieces(text: str) -> list[str]:
    """How the fake transports stream a reply: a word (with the space before it) a piece."""
    return re.findall(r"\s*\S+|\s+$", text)


def cutoff_error(model: str) -> ProviderError:
    """What ``+cutoff`` raises once half the reply is out."""
    return ProviderError("fake failure: the reply broke off (+cutoff)", model=model, status_code=500, retryable=True)


def parse_model_name(model: str) -> tuple[str, frozenset[str]]:
    """``fake/alpha+first+slow`` → ``("alpha", {"first", "slow"})``; unknown suffixes are errors."""
    base, *suffixes = model.removeprefix("fake/").split("+")
    unknown = sorted(set(suffixes) - BEHAVIOURS)
    if unknown or not base:
        problem = f"unknown behaviour {', '.join(unknown)!r}" if unknown else "empty model name"
        raise ConfigError(f"fake model {model!r}: {problem}; behaviours: {', '.join(sorted(BEHAVIOURS))}")
    return base, frozenset(suffixes) - {"default"}


def stable_digest(*parts: Any) -> bytes:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).digest()


def _unit(*parts: Any) -> float:
    """A stable pseudo-random number in [0, 1) from ``parts``."""
    return int.from_bytes(stable_digest(*parts)[:8], "big") / 2**64


def count_tokens(text: str) -> int:
    """Whitespace words: a stand-in for tokens, good enough for accounting tests."""
    return len(text.split())


def prompt_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    return sum(count_tokens(str(m.get("content") or "")) for m in messages)


def truncate_to_tokens(text: str, max_tokens: int | None) -> tuple[str, bool]:
    """Cut ``text`` to ``max_tokens`` words, as a real model stops at its limit."""
    if max_tokens is None or count_tokens(text) <= max_tokens:
        return text, False
    return " ".join(text.split()[:max_tokens]), True


def answer_slots(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Label → text of the ``<answer label="X">`` (council) or ``<response id="X">`` (judging)
    slots in the first user message that has any."""
    for m in messages:
        if m.get("role") == "user":
            slots = _SLOT.findall(str(m.get("content") or ""))
            if slots:
                return {label: text for _, label, text in slots}
    return {}


def _quoted(messages: Sequence[Mapping[str, Any]]) -> str:
    """``+quote``: the answers this model was shown, verbatim (else the question it was asked)."""
    slots = answer_slots(messages)
    if slots:
        return "Quoting the answers I was shown:\n" + "\n".join(f"{label}: {text}" for label, text in slots.items())
    users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    earlier = "".join(f"Earlier you asked: {text}\n\n" for text in users[:-1])  # a conversation's history
    return earlier + "You asked: " + (users[-1] if users else "")


def _prefix(behaviours: frozenset[str], credentials: str) -> str:
    """What ``+markup`` and ``+leak`` put in front of plain replies and reasoning."""
    leak = f"(I was called with {credentials}) " if "leak" in behaviours else ""
    return (MARKUP if "markup" in behaviours else "") + leak


def _merit(judge: str, text: str) -> float:
    """How good ``text`` looks to ``judge``, in [0, 1): mostly shared by every judge, partly its own."""
    return 0.7 * _unit("merit", text) + 0.3 * _unit("taste", judge, text)


def _opening(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    for i, m in enumerate(messages):
        if m.get("role") == "user":
            return list(messages[: i + 1])
    return list(messages)


def _topic(messages: Sequence[Mapping[str, Any]]) -> str:
    users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    text = users[-1] if users else ""
    question = _QUESTION.search(text)
    words = (question.group(1) if question else text).split()[:8]
    return "“" + (" ".join(words).rstrip("?.!,;:") or "this question") + "”"


# -- the responder ----------------------------------------------------------------
class FakeResponder:
    """Deterministic replies shared by ``FakeAPI`` and the mock LLM server."""

    def __init__(self) -> None:
        self._seen: dict[bytes, int] = {}

    def reply(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        json_schema: Mapping[str, Any] | None = None,
        schema_name: str | None = None,
        seed: int | None = None,
        json_mode: bool = False,
        request_echo: str | None = None,
        credentials: str = "",
    ) -> str:
        """The reply text; raises ``ProviderError`` for ``+fail`` and ``+echo``, ``ConfigError`` for
        unknown suffixes.

        ``json_mode`` without a schema (OpenAI's ``{"type": "json_object"}``) wraps the plain answer
        as ``{"answer": ...}``. ``request_echo``: what ``+echo`` quotes (default: the messages);
        ``credentials``: what ``+leak`` quotes.
        """
        name, behaviours = parse_model_name(model)
        prefix = _prefix(behaviours, credentials)
        if "fail" in behaviours:
            message = "fake failure requested by the +fail behaviour"
            raise ProviderError(message, model=model, status_code=500, retryable=True)
        if "echo" in behaviours:
            echo = request_echo if request_echo is not None else json.dumps({"messages": list(messages)})
            raise ProviderError(f"could not process this request: {echo}", model=model, status_code=400)
        rng = random.Random(stable_digest(name, list(messages), seed, schema_name))
        structured = json_schema is not None or json_mode
        if structured and "flaky" in behaviours:
            key = stable_digest(name, _opening(messages), seed, schema_name)
            tries = self._seen.get(key, 0)
            self._seen[key] = tries + 1
            if tries == 0:
                return rng.choice(_GARBAGE)
        if structured and "garbage" in behaviours:
            return rng.choice(_GARBAGE)
        if json_schema is None:
            text = prefix + (_quoted(messages) if "quote" in behaviours else self._plain(name, messages, rng))
            return json.dumps({"answer": text}) if json_mode else text
        document = None
        if schema_name == PEER_REVIEW_SCHEMA_NAME:
            document = _peer_review(name, messages, json_schema, behaviours, rng, prefix)
        elif schema_name == REVISION_SCHEMA_NAME:
            document = _revision(name, messages, behaviours, prefix)
        elif schema_name == SYNTHESIS_SCHEMA_NAME:
            answer = prefix + (_quoted(messages) if "quote" in behaviours else self._plain(name, messages, rng))
            document = _structured_synthesis(answer, messages)
        if document is None:
            generator = _Generator(json_schema, rng, behaviours, name, answer_slots(messages), prefix)
            document = generator.generate()
            if "quote" in behaviours:
                document = generator.quote_into_first_number(document)
        return json.dumps(document, ensure_ascii=False)

    @staticmethod
    def _plain(name: str, messages: Sequence[Mapping[str, Any]], rng: random.Random) -> str:
        topic = _topic(messages)
        system = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "system").lower()
        if "synthes" in system or "chairman" in system:
            n = len(answer_slots(messages))
            opening = f"Synthesis of {n} answers on {topic}." if n else f"Synthesis on {topic}."
            return " ".join([opening, *_SYNTHESIS[: 2 + rng.randint(0, 2)]])
        # The number of sentences is mostly the model's own, so answer lengths differ by model.
        count = 2 + int(_unit("length", name) * 6) + rng.randint(0, 1)
        picked = rng.sample(_PLAIN, k=min(count, len(_PLAIN)))
        return " ".join(s.format(topic=topic) for s in picked)


# -- the chairman's structured synthesis ------------------------------------------------
def _structured_synthesis(answer: str, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A structured synthesis over the answers' labels: the answer, one point of agreement, with
    two answers or more a disagreement between the first and the rest, with three or more a
    minority view, and the first answer's insight."""
    labels = list(answer_slots(messages))
    topic = _topic(messages)
    disagreements = []
    if len(labels) >= 2:
        positions = [
            {"summary": "a short, direct answer is enough", "members": labels[:1]},
            {"summary": "the caveats belong in the answer", "members": labels[1:]},
        ]
        disagreements.append({"point": f"how much detail {topic} needs", "positions": positions})
    return {
        "answer": answer,
        "agreements": [f"the core facts of {topic}"],
        "disagreements": disagreements,
        "minority_view": "the caveats could be left out" if len(labels) >= 3 else "",
        "unique_insights": [{"member": labels[0], "insight": "the exact figure depends on the assumptions"}]
        if labels
        else [],
        "blind_spots": ["no answer cites a primary source"],
    }


# -- peer review ---------------------------------------------------------------------
def _int_bounds(schema: Mapping[str, Any], default: tuple[int, int] = (0, 10)) -> tuple[int, int]:
    """The schema's integer range; an open side gets a span of 10, no bounds ``default``."""
    lo, hi = integer_bounds(schema)
    if lo is None and hi is None:
        return default
    if lo is None:
        return hi - 10, hi  # type: ignore[operator]
    if hi is None:
        return lo, lo + 10
    return lo, hi


def _review_reasoning(label: str, fraction: float) -> str:
    if fraction >= 0.75:
        verdict = "is accurate, complete and clearly written"
    elif fraction >= 0.5:
        verdict = "is mostly correct but misses a useful detail"
    elif fraction >= 0.25:
        verdict = "is partly correct and vague about the key point"
    else:
        verdict = "is largely unhelpful or wrong on the main point"
    return f"Answer {label} {verdict}."


def _peer_review(
    reviewer: str,
    messages: Sequence[Mapping[str, Any]],
    schema: Mapping[str, Any],
    behaviours: frozenset[str],
    rng: random.Random,
    prefix: str = "",
) -> dict[str, Any] | None:
    """A coherent peer review, or None when the schema is not shaped like one; ``prefix`` goes
    in front of every reasoning (:func:`_prefix`)."""
    try:
        evaluations = resolve_ref(schema, schema["properties"]["evaluations"])
        item_schemas = {label: resolve_ref(schema, s) for label, s in evaluations["properties"].items()}
        labels = list(item_schemas)
        lo, hi = _int_bounds(resolve_ref(schema, item_schemas[labels[0]]["properties"]["score"]), (1, 10))
    except (KeyError, TypeError, IndexError, ValueError):
        return None
    if not labels or lo > hi:
        return None
    slots = answer_slots(messages)
    span = hi - lo
    scores: dict[str, int | float] = {}
    for i, label in enumerate(labels):
        merit = _merit(reviewer, slots.get(label, f"label:{label}"))
        if "first" in behaviours:
            scores[label] = max(lo, hi - i)
        elif "harsh" in behaviours:
            scores[label] = lo + round(span * 0.4 * merit)
        elif "generous" in behaviours:
            scores[label] = hi - round(span * 0.4 * (1 - merit))
        else:
            scores[label] = lo + round(span * merit)
    ranking = sorted(labels, key=lambda lab: (-scores[lab], labels.index(lab)))
    if "badscore" in behaviours:
        victim = rng.choice(labels)
        scores[victim] = rng.choice((3.5, hi + 1, lo - 1))
    generator = _Generator(schema, rng, behaviours, reviewer, slots, prefix)
    out: dict[str, Any] = {}
    for label, item in item_schemas.items():
        fraction = (scores[label] - lo) / span if span else 1.0
        entry: dict[str, Any] = {}
        for prop, sub in item.get("properties", {}).items():
            if prop == "score":
                # +quote: the answer's text where its score belongs (invalid: not an integer)
                entry[prop] = slots.get(label, label) if "quote" in behaviours else scores[label]
            elif _REASONING_NAME.search(prop):
                entry[prop] = prefix + _review_reasoning(label, fraction)
            else:
                entry[prop] = generator.value(sub, (prop,), 1)
        out[label] = entry
    document: dict[str, Any] = {"evaluations": out, "ranking": ranking}
    for prop, sub in schema["properties"].items():
        if prop not in document:
            document[prop] = generator.value(sub, (prop,), 1)
    return document


# -- deliberation ---------------------------------------------------------------------------
_OWN = re.compile(rf'<{ANSWER_SLOT} label="([^"]+)" author="you">')


def _revision(
    member: str, messages: Sequence[Mapping[str, Any]], behaviours: frozenset[str], prefix: str = ""
) -> dict[str, Any] | None:
    """A member's deliberation reply: ``+stubborn`` keeps its answer; ``+adopt`` copies the
    peer answer it likes best verbatim and gives no reason (what the capitulation guard flags);
    by default a member keeps or revises by a hash of (its name, its answer): revising appends
    the best peer answer's first sentence to its own, saying so. None: no answer of its own in
    the prompt."""
    slots = answer_slots(messages)
    users = "".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
    own = _OWN.search(users)
    if own is None or own.group(1) not in slots:
        return None
    label = own.group(1)
    peers = {lab: text for lab, text in slots.items() if lab != label}
    best = max(peers, key=lambda lab: (_merit(member, peers[lab]), lab), default=None)
    if "adopt" in behaviours and best is not None:
        return {"decision": "revise", "reason": "", "answer": peers[best]}
    if "stubborn" in behaviours or best is None or _unit("revise", member, slots[label]) < 0.5:
        return {"decision": "keep", "reason": prefix + "My answer already covers the question; the reviews "
                "raised nothing that changes it.", "answer": ""}  # fmt: skip
    sentence = re.split(r"(?<=[.!?])\s", peers[best].strip(), maxsplit=1)[0]
    return {
        "decision": "revise",
        "reason": prefix + f"Added the point answer {best} makes, which the reviewers credited and mine lacked.",
        "answer": f"{prefix}{slots[label].strip()} {sentence}",
    }


# -- generic JSON-Schema instances ---------------------------------------------------------
def _tokens(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [t.lower() for t in re.split(r"[^A-Za-z0-9]+", spaced) if t]


def _side(path: tuple[str, ...]) -> str | None:
    """Which side of a pairwise comparison a field belongs to, from its nearest named ancestor."""
    for part in reversed(path):
        tokens = _tokens(part)
        if any(t in ("a", "first", "1") for t in tokens):
            return "A"
        if any(t in ("b", "second", "2") for t in tokens):
            return "B"
    return None


class _Generator:
    """Builds one instance of a JSON Schema (pydantic v2's subset) with a seeded RNG."""

    def __init__(
        self,
        root: Mapping[str, Any],
        rng: random.Random,
        behaviours: frozenset[str] = frozenset(),
        judge: str = "",
        slots: Mapping[str, str] | None = None,
        prefix: str = "",
    ) -> None:
        self.root = root
        self.rng = rng
        self.behaviours = behaviours
        self.prefix = prefix  # in front of every reasoning-like string (:func:`_prefix`)
        # Judged texts by slot label: sided scores and A/B verdicts follow their content.
        self.slots = dict(slots or {})
        self.merits = {label: _merit(judge, text) for label, text in self.slots.items()}
        self.values = 0

    def generate(self) -> Any:
        value = self.value(self.root, (), 0)
        return self._spoil_first_number(value) if "badscore" in self.behaviours else value

    def _minimal(self, depth: int) -> bool:
        return depth > _MAX_DEPTH or self.values > _MAX_VALUES

    def value(self, schema: Any, path: tuple[str, ...], depth: int) -> Any:
        self.values += 1
        if schema is True or schema is None:
            return self.rng.choice(_WORDS)
        schema = resolve_ref(self.root, schema)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self._enum(list(schema["enum"]))
        if "allOf" in schema:
            return self.value(self._merge(schema), path, depth)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self._union(schema[key], path, depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            concrete = [k for k in kind if k != "null"]
            kind = concrete[0] if concrete and not self._minimal(depth) else (kind[0] if kind else None)
        if kind is None:
            if "properties" in schema:
                kind = "object"
            elif "items" in schema or "prefixItems" in schema:
                kind = "array"
        handler = getattr(self, f"_{kind}", None) if kind else None
        return handler(schema, path, depth) if handler else self.rng.choice(_WORDS)

    # unions and merges
    def _merge(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            part = resolve_ref(self.root, part)
            part = self._merge(part) if "allOf" in part else part
            for k, v in part.items():
                if k == "properties":
                    merged["properties"] = {**merged.get("properties", {}), **v}
                elif k == "required":
                    merged["required"] = [*merged.get("required", []), *v]
                else:
                    merged.setdefault(k, v)
        return merged

    def _union(self, options: list[Any], path: tuple[str, ...], depth: int) -> Any:
        resolved = [resolve_ref(self.root, o) for o in options]
        non_null = [o for o in resolved if o.get("type") != "null"]
        if non_null and (not self._minimal(depth) or len(non_null) == len(resolved)):
            return self.value(non_null[0], path, depth)
        return None

    def _enum(self, values: list[Any]) -> Any:
        for a, b in (("A", "B"), ("a", "b")):
            if a in values and b in values:
                if "first" in self.behaviours:
                    return a
                if "A" in self.merits and "B" in self.merits:
                    diff = self.merits["A"] - self.merits["B"]
                    tie = next((t for t in _TIES if t in values), None)
                    if tie is not None and abs(diff) < 0.05:
                        return tie
                    return a if diff >= 0 else b
        return self.rng.choice(values)

    def _merit_for(self, path: tuple[str, ...]) -> float | None:
        """The merit behind a score at ``path``: its side's (A/B), or the only judged text's."""
        side = _side(path)
        if side is not None:
            return self.merits.get(side)
        if len(self.merits) == 1 and path and _SCORE_NAME.search(path[-1]):
            return next(iter(self.merits.values()))
        return None

    # scalars
    def _null(self, schema: Mapping[str, Any], path: tuple[str, ...], depth: int) -> None:
        return None

    def _boolean(self, schema: Mapping[str, Any], path: tuple[str, ...], depth: int) -> bool:
        return self.rng.random() < 0.25  # flags ("detected", "is_harmful") are mostly off

    def _string(self, schema: Mapping[str, Any], path: tuple[str, ...], depth: int) -> str:
        fmt = schema.get("format")
        name = path[-1] if path else ""
        if fmt == "uuid":
            a, b, c, d, e = (self.rng.getrandbits(bits) for bits in (32, 16, 12, 12, 48))
            text = f"{a:08x}-{b:04x}-4{c:03x}-8{d:03x}-{e:012x}"
        elif fmt in _FORMATS:
            text = _FORMATS[fmt]
        elif _REASONING_NAME.search(name):
            text = self.prefix + self.rng.choice(_REASONING)
        else:
            text = f"{self.rng.choice(_WORDS)}-{self.rng.randint(1, 999)}"
        lo, hi = schema.get("minLength", 0), schema.get("maxLength")
        if hi is not None:
            text = text[:hi].rstrip()
        return text + "x" * max(0, lo - len(text))

    def _integer(self, schema: Mapping[str, Any], path: tuple[str, ...], depth: int) -> int:
        lo, hi = _int_bounds(schema)
        step = schema.get("multipleOf")
        if isinstance(step, int) and step > 0:
            first, last = -(-lo // step), hi // step
            if first <= last:
                return step * self._pick(first, last, path)
        return self._pick(lo, max(lo, hi), path)

    def _pick(self, lo: int, hi: int, path: tuple[str, ...]) -> int:
        span = hi - lo
        if "first" in self.behaviours and (side := _side(path)):
            return hi if side == "A" else lo + span // 2
        side = _side(path)
        if side is not None and "A" in self.merits and "B" in self.merits:
            return self._sided_scores(lo, hi)[side]
        merit = self._merit_for(path)
        if merit is not None:
            return self._scaled(merit, lo, hi)
        if path and _SCORE_NAME.search(path[-1]):
            if "harsh" in self.behaviours:
                return lo + self.rng.randint(0, span // 3)
            if "generous" in self.behaviours:
                return hi - self.rng.randint(0, span // 3)
        return self.rng.randint(lo, hi)

    def _scaled(self, merit: float, lo: int, hi: int) -> int:
        span = hi - lo
        if "harsh" in self.behaviours:
            return lo + round(span * 0.4 * merit)
        if "generous" in self.behaviours:
            return hi - round(span * 0.4 * (1 - merit))
        return lo + round(span * merit)

    def _sided_scores(self, lo: int, hi: int) -> dict[str, int]:
        """Scores of sides A and B that agree with the verdict ``_enum`` gives (tie = equal)."""
        diff = self.merits["A"] - self.merits["B"]
        a, b = self._scaled(self.merits["A"], lo, hi), self._scaled(self.merits["B"], lo, hi)
        if abs(diff) < 0.05:
            b = a
        elif a == b and hi > lo:
            better, worse = ("A", "B") if diff > 0 else ("B", "A")
            scores = {"A": a, "B": b}
            if scores[better] < hi:
                scores[better] += 1
            else:
                scores[worse] -= 1
            a, b = scores["A"], scores["B"]
        elif (a - b) * diff < 0:
            a, b = b, a
        return {"A": a, "B": b}

    def _number(self, schema: Mapping[str, Any], path: tuple[str, ...], depth: int) -> float:
        if isinstance(schema.get("multipleOf"), int | float) and schema["multipleOf"] > 0:
            lo_i, hi_i = _int_bounds(schema)
            step = schema["multipleOf"]
            first, last = math.ceil(lo_i / step), math.floor(hi_i / step)
            if first <= last:
                return float(step * self.rng.randint(first, last))
        lo = schema.get("minimum", schema.get("exclusiveMinimum"))
        hi = schema.get("maximum", schema.get("exclusiveMaximum"))
        lo = float(lo if lo is not None else (hi - 10 if hi is not None else 0))
        hi = float(hi if hi is not None else lo + 10)
        if "first" in self.behaviours and (side := _side(path)):
            fraction = 0.95 if side == "A" else 0.5
        else:
            fraction = self.rng.randint(1, 19) / 20
        # strictly inside the range, so exclusive bounds hold too
        value = lo + (hi - lo) * fraction
        rounded = round(value, 3)
        return rounded if lo < rounded < hi else value

    # containers
    def _array(self, schema: Mapping[str, Any], path: tuple[str, ...], depth: int) -> list[Any]:
        prefix = schema.get("prefixItems") or []
        lo = schema.get("minItems", 0)
        hi = schema.get("maxItems")
        out = [self.value(s, path, depth + 1) for s in prefix]
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return out
        want = lo if self._minimal(depth) else max(lo, self.rng.randint(1, 3))
        want = max(len(out), want if hi is None else min(want, hi))
        item = resolve_ref(self.root, items)
        if item.get("type") == "string" and lo == 0 and path and _PROBLEM_NAME.search(path[-1]):
            return out  # "safety_concerns", "issues": none found
        key = self._key_property(item)
        if key is not None and not prefix:
            # A list of per-item objects keyed by an enum ("criterion"): each key once, in order.
            prop, values = key
            entries = [self.value(item, path, depth + 1) for _ in range(want)]
            if want <= len(values):
                for entry, value in zip(entries, values, strict=False):
                    entry[prop] = value
            return entries
        if schema.get("uniqueItems"):
            choices = [item["const"]] if "const" in item else item.get("enum")
            if choices is not None:
                picked = list(choices)
                self.rng.shuffle(picked)
                return out + picked[: want - len(out)]
            seen = {json.dumps(v, sort_keys=True) for v in out}
            for _ in range(20 * want):
                if len(out) >= want:
                    break
                candidate = self.value(item, path, depth + 1)
                marker = json.dumps(candidate, sort_keys=True)
                if marker not in seen:
                    seen.add(marker)
                    out.append(candidate)
            return out
        return out + [self.value(item, path, depth + 1) for _ in range(want - len(out))]

    def _key_property(self, item: Mapping[str, Any]) -> tuple[str, list[Any]] | None:
        if "allOf" in item:
            item = self._merge(item)
        if item.get("type") != "object":
            return None
        for prop in item.get("required", ()):
            sub = resolve_ref(self.root, item.get("properties", {}).get(prop, {}))
            if "enum" in sub:
                return prop, list(sub["enum"])
        return None

    def _object(self, schema: Mapping[str, Any], path: tuple[str, ...], depth: int) -> dict[str, Any]:
        required = set(schema.get("required", ()))
        out: dict[str, Any] = {}
        for prop, sub in schema.get("properties", {}).items():
            if prop in required or not self._minimal(depth):
                out[prop] = self.value(sub, (*path, prop), depth + 1)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping) and not schema.get("properties"):
            names = resolve_ref(self.root, schema.get("propertyNames", {}))
            keys = [k for k in names.get("enum", ()) if isinstance(k, str)] or [f"key{i}" for i in range(1, 4)]
            lo, hi = schema.get("minProperties", 0), schema.get("maxProperties", len(keys))
            want = lo if self._minimal(depth) else max(lo, min(hi, self.rng.randint(1, 2)))
            for key in keys[:want]:
                out[key] = self.value(extra, (*path, key), depth + 1)
        return out

    # +quote
    def quote_into_first_number(self, value: Any) -> Any:
        """Put the first judged text where the first integer (else number) belongs."""
        target = self._find_number(self.root, value, "integer") or self._find_number(self.root, value, "number")
        if target is not None and self.slots:
            container, key, _ = target
            container[key] = next(iter(self.slots.values()))
        return value

    # +badscore
    def _spoil_first_number(self, value: Any) -> Any:
        """Make the first integer (else number) in ``value`` 3.5 or out of range."""
        target = self._find_number(self.root, value, "integer") or self._find_number(self.root, value, "number")
        if target is None:
            return value
        container, key, sub = target
        bounded = any(k in sub for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))
        options: list[Any] = [3.5] if sub.get("type") == "integer" else []
        if bounded:
            lo, hi = _int_bounds(sub)
            options += [hi + 1, lo - 1]
        container[key] = self.rng.choice(options or ["not a number"])
        return value

    def _effective(self, schema: Any, value: Any) -> Mapping[str, Any]:
        """The branch of ``schema`` that the generator used for ``value``."""
        if not isinstance(schema, Mapping):
            return {}
        schema = resolve_ref(self.root, schema)
        if "allOf" in schema:
            schema = self._merge(schema)
        for union in ("anyOf", "oneOf"):
            if union in schema:
                if value is None:
                    return {"type": "null"}
                options = [resolve_ref(self.root, o) for o in schema[union]]
                non_null = [o for o in options if o.get("type") != "null"]
                return self._effective(non_null[0], value) if non_null else {}
        return schema

    def _find_number(self, schema: Any, value: Any, kind: str) -> tuple[Any, Any, Mapping[str, Any]] | None:
        schema = self._effective(schema, value)
        if isinstance(value, dict):
            props = schema.get("properties", {})
            children = [(value, k, props.get(k, schema.get("additionalProperties"))) for k in value]
        elif isinstance(value, list):
            prefix = schema.get("prefixItems") or []
            children = [(value, i, prefix[i] if i < len(prefix) else schema.get("items")) for i in range(len(value))]
        else:
            return None
        for container, key, sub in children:
            child = container[key]
            sub = self._effective(sub, child)
            plain = "enum" not in sub and "const" not in sub and not isinstance(child, bool)
            if sub.get("type") == kind and plain and isinstance(child, int | float):
                return container, key, sub
            found = self._find_number(sub, child, kind)
            if found:
                return found
        return None
