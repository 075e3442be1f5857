"""The deliberation log's similarity (docs/methods.md, "Deliberation")."""

from __future__ import annotations

import pytest

from council.methods.similarity import ADOPTION_THRESHOLD, adopted_from, bigrams, similarity


def test_similarity_is_the_jaccard_index_of_word_bigram_sets():
    a, b = "the cat sat on the mat", "the cat sat on a mat"
    sa, sb = bigrams(a), bigrams(b)
    assert sa == {("the", "cat"), ("cat", "sat"), ("sat", "on"), ("on", "the"), ("the", "mat")}
    assert similarity(a, b) == pytest.approx(len(sa & sb) / len(sa | sb)) == pytest.approx(3 / 7)
    assert similarity(a, b) == similarity(b, a)


def test_case_spacing_and_punctuation_do_not_count_word_order_does():
    assert similarity("Water boils at 100 C.", "water   BOILS at 100 c") == 1.0
    assert similarity("water boils at 100", "100 at boils water") == 0.0
    assert similarity("", "") == 1.0 and similarity("", "water") == 0.0
    assert similarity("water", "Water!") == 1.0


def test_adoption_needs_a_near_verbatim_copy_closer_than_its_own_answer():
    own = "Mars is red because of iron oxide dust on its surface."
    peer = "Mars looks red since its soil is rich in rusty iron minerals, seen from Earth."
    assert adopted_from(peer, own, {"p": peer, "q": own}) == "p"
    assert adopted_from(own + " It is the fourth planet.", own, {"p": peer}) is None  # revised its own
    slightly_changed = peer.replace(", seen from Earth", " seen from Earth today")
    assert similarity(slightly_changed, peer) >= ADOPTION_THRESHOLD
    assert adopted_from(slightly_changed, own, {"p": peer}) == "p"
    assert adopted_from("something else entirely here", own, {"p": peer}) is None
