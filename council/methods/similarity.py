"""How alike two answers are: the Jaccard index of their word-bigram sets (docs/methods.md,
"Deliberation").

    words(t)  = the lower-cased ``\\w+`` runs of t, in order
    S(t)      = {(w_i, w_{i+1})} over consecutive words; {(w_1,)} for a one-word text; ∅ for none
    sim(a, b) = |S(a) ∩ S(b)| / |S(a) ∪ S(b)|   (1 when both are empty)

Pure and symmetric, 0 ≤ sim ≤ 1, 1 exactly when the two texts have the same bigram set (a
verbatim copy, whatever its spacing, case or punctuation). Bigrams, not single words: two
different answers on one topic share most of their common words, rarely their word pairs.
Linear in the texts' length (sets, no alignment), so long answers cost little.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_WORD = re.compile(r"\w+")

#: A revised answer at least this similar to a peer's earlier answer (and more similar to it
#: than to the member's own) was adopted from that peer: near-verbatim.
ADOPTION_THRESHOLD = 0.8


def bigrams(text: str) -> frozenset[tuple[str, ...]]:
    """S(text): the set of consecutive word pairs (one word: that word alone)."""
    words = _WORD.findall(text.lower())
    if len(words) == 1:
        return frozenset({(words[0],)})
    return frozenset(zip(words, words[1:], strict=False))


def jaccard(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def similarity(a: str, b: str) -> float:
    """sim(a, b), the word-bigram Jaccard index of two texts."""
    return jaccard(bigrams(a), bigrams(b))


def adopted_from(
    revised: str, own_before: str, peers_before: Mapping[str, str], threshold: float = ADOPTION_THRESHOLD
) -> str | None:
    """The peer whose earlier answer ``revised`` copies near-verbatim: the most similar peer
    with sim ≥ ``threshold`` and closer than the member's own earlier answer (ties: the peer
    first in ``peers_before``); None when there is none."""
    mine = bigrams(revised)
    own = jaccard(mine, bigrams(own_before))
    best, best_sim = None, -1.0
    for peer, text in peers_before.items():
        sim = jaccard(mine, bigrams(text))
        if sim >= threshold and sim > own and sim > best_sim:
            best, best_sim = peer, sim
    return best
