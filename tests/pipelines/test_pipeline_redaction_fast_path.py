"""redact_document returns a document in which nothing can be redacted as it is, without the
field-by-field walk; whatever it returns equals what the walk returns."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from council.untrusted import redaction
from council.untrusted.redaction import REDACTED, private_scope, redact_document

STRONG = "k-7f3a9c2e5b1d4e6f8a0b"
QUOTED = 'pa"ss\\word-77x9'  # escaped in JSON text
SECRETS = frozenset({STRONG, "ollama", QUOTED, "naïve-key-42é"})
PIECES = ["answer", "the", "ollama", "ollamas", STRONG, QUOTED, "naïve-key-42é", "Bearer", "sk-", "KEY", "Token",
          "ſk-", ":", "=", "\n", '"', "\\", "é", "\u2028", "\x7f", "text"]  # fmt: skip
TEXT = st.lists(st.sampled_from(PIECES), max_size=6).map("".join) | st.text(max_size=12)
KEYS = st.sampled_from(["question", "model", "text", "error", "reasoning", "problem", "members", "flags", "note", "x"])
DOCS = st.recursive(
    TEXT | st.integers() | st.floats(allow_nan=False) | st.none() | st.booleans(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=20,
)


@given(document=st.dictionaries(KEYS, DOCS, max_size=5) | st.lists(DOCS, max_size=4))
def test_the_shortcut_never_changes_what_is_stored(document):
    assert redact_document(document, SECRETS) == redaction._redact_fields(document, SECRETS, "reply")


def test_a_document_with_nothing_to_redact_is_returned_as_it_is():
    document = {"winner": "A", "scores": [1.0, 2.0], "judges": [{"reasoning": "clear and correct", "error": None}]}
    assert redact_document(document, SECRETS) is document
    # Credential words and weak secrets matter in error text only: a judge's reasoning may say them.
    document = {"reasoning": "vague about the key fact, like ollama", "usage": {"prompt_tokens": 9}, "flags": []}
    assert redact_document(document, SECRETS) is document


def test_credential_words_outside_the_error_fields_beside_an_error_text_keep_the_shortcut():
    # A session's result: a methods note (an error key holding text) and, elsewhere, "tokens"
    # and "key". Only the note's own text is error text; it holds no credential word.
    document = {
        "note": "p from 2,000 seeded permutations",
        "usage": {"prompt_tokens": 9, "completion_tokens": 3},
        "answers": [{"text": "the key fact, like ollama", "flags": []}],
    }
    assert redact_document(document, SECRETS) is document
    for note, cut in (("bad key here", "bad key here"), ("said ollama", f"said {REDACTED}")):
        changed = {**document, "note": note}
        assert redact_document(changed, SECRETS) is not changed  # the walk, for the note's words
        assert redact_document(changed, SECRETS)["note"] == cut


def test_a_secret_or_a_credential_word_anywhere_takes_the_full_walk():
    for document, cut in (
        ({"judges": [{"reasoning": f"uses {STRONG}"}]}, {"judges": [{"reasoning": f"uses {REDACTED}"}]}),
        ({"error": "server said: bad key ollama"}, {"error": f"server said: bad key {REDACTED}"}),
        ({"error": f"x {QUOTED}"}, {"error": f"x {REDACTED}"}),
    ):
        assert redact_document(document, SECRETS) == cut


def test_private_text_is_still_cut_when_transcripts_are_off():
    private = "a private paragraph that the user asked not to keep anywhere"
    with private_scope(keep_text=False, texts=[private]):
        clean = redact_document({"reasoning": f"quoting: {private}"}, frozenset())
    assert private not in clean["reasoning"]


def test_the_secrets_known_follow_every_change_of_the_environment_and_the_registry(monkeypatch):
    # The environment is read again only when it changed: each change must still be seen at once.
    secret, other = "k-4d2f8a6c1e9b3d5f7a0c", "k-1a2b3c4d5e6f7a8b9c0d"
    monkeypatch.setattr(redaction, "_registered", set())
    assert redaction.redact(f"got {secret}") == f"got {secret}"
    monkeypatch.setenv("SOME_SERVICE_API_KEY", secret)
    assert redaction.redact(f"got {secret}") == f"got {REDACTED}"
    monkeypatch.setenv("SOME_SERVICE_API_KEY", other)  # the same names, another value
    assert redaction.redact(f"got {secret} and {other}") == f"got {secret} and {REDACTED}"
    monkeypatch.delenv("SOME_SERVICE_API_KEY")
    assert redaction.redact(f"got {other}") == f"got {other}"
    redaction.register_secret(secret)
    assert redaction.redact(f"got {secret}") == f"got {REDACTED}"
    monkeypatch.setattr(redaction, "_registered", {other})  # another registry of the same size
    assert redaction.redact(f"got {secret} and {other}") == f"got {secret} and {REDACTED}"


async def test_an_outcome_serialized_from_the_model_is_stored_as_its_dump_would_be(monkeypatch):
    """redacted_model_json (a judged item's stored result) writes JSON straight from the model; it
    equals redacted_json of the model's dump, a secret in it cut as there."""
    from fake_judges import fake_client

    from council.judging.engine import compare, grade
    from council.untrusted.redaction import redacted_json, redacted_model_json

    judged = await compare("Which? é \u2028", "A, in detail.", "B.", judges=[fake_client()], store=None)
    graded = await grade("Capital?", "Paris", judges=[fake_client()], store=None)
    failed = judged.model_copy(update={"success": False, "error": f"provider error: key {STRONG} refused"})
    monkeypatch.setattr(redaction, "_registered", {STRONG})
    for outcome in (judged, graded, failed):
        assert redacted_model_json(outcome) == redacted_json(outcome.model_dump(mode="json"))
    assert STRONG not in redacted_model_json(failed) and REDACTED in redacted_model_json(failed)
    with private_scope(keep_text=False, texts=["A, in detail."]):
        assert redacted_model_json(judged) == redacted_json(judged.model_dump(mode="json"))
