"""Query-word neighbours: the index words nearest a query's words in wordllama's vector space.

:class:`NeighbourTerms` gives BM25 a query word's nearest words in the static word vectors'
space (:mod:`keen.capabilities._embed`): "railway" for "train", "temperature" for
"weather", restricted to words that occur in the catalog, so a query can match a tool that
words its task differently.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from keen.capabilities._embed import DIM, word_vectors
from keen.capabilities._text import STOPWORDS, stem_words, words

if TYPE_CHECKING:
    import numpy as np

__all__ = ["NeighbourTerms", "neighbour_candidates"]

_WHOLE_WORD = re.compile(r"[a-z]{3,}")
# A query word's neighbours (NeighbourTerms): at most this many per word, each at least
# this similar, over at most this many distinct query words (bounds the cost of a query).
_NEIGHBOURS = 2
_MIN_SIMILARITY = 0.6
_MAX_WORDS = 48
_SHORTLIST = 20
_CACHED_TOKENS = 8192


@functools.cache
def neighbour_candidates() -> tuple[np.ndarray, tuple[str, ...]]:
    """The wordllama tokens that can be a query word's neighbour, in token id order: whole
    lowercase words of three letters or more, not stopwords, with their stems. The same
    for every catalog, so computed once per process (about 0.1 s: 16,000 words stemmed)."""
    import numpy as np

    tokens = word_vectors().tokenizer.get_vocab()
    pairs = sorted(
        (i, t[1:])
        for t, i in tokens.items()
        if t.startswith("\u2581") and _WHOLE_WORD.fullmatch(t[1:]) and t[1:] not in STOPWORDS
    )
    stems = stem_words([w for _, w in pairs])
    return np.array([i for i, _ in pairs], dtype=np.int32), tuple(stems)


class NeighbourTerms:
    """Query-word neighbours among the words of a BM25 index.

    ``vocab`` maps a BM25 term (a stemmed word) to its id. Candidates are the wordllama
    tokens that are whole lowercase words (three letters or more, not stopwords) whose stem
    is in ``vocab`` (:func:`neighbour_candidates`); ``tokens`` and ``stems`` give them when
    they are known already (a cached index keeps them: :attr:`tokens`, :attr:`stems`).
    """

    def __init__(
        self, vocab: Mapping[str, int], tokens: np.ndarray | None = None, stems: Sequence[str] | None = None
    ) -> None:
        import numpy as np

        if tokens is None or stems is None:
            all_tokens, all_stems = neighbour_candidates()
            keep = [j for j, s in enumerate(all_stems) if s in vocab]
            tokens = all_tokens[np.array(keep, dtype=np.int64)]
            stems = [all_stems[j] for j in keep]
        keep = [j for j, s in enumerate(stems) if s in vocab]  # a cached list may hold more
        self.tokens: np.ndarray = np.asarray(tokens, dtype=np.int32)[np.array(keep, dtype=np.int64)]
        """The candidates' wordllama token ids."""
        self.stems: list[str] = [stems[j] for j in keep]
        """The candidates' stems (BM25 terms)."""
        self._terms = np.array([vocab[s] for s in self.stems], dtype=np.int64)
        self._stems = self.stems
        table = word_vectors().embedding
        self._tokenizer = word_vectors().tokenizer
        vectors = table[self.tokens.astype(np.int64)] if self.stems else np.zeros((0, DIM))
        self._vectors = _unit(np.asarray(vectors, dtype=np.float32))
        self._table = table
        self._near: dict[int, list[tuple[int, float]]] = {}

    @classmethod
    def of(
        cls,
        vocab: Mapping[str, int],
        tokens: np.ndarray,
        stems: list[str],
        terms: np.ndarray,
        unit: np.ndarray,
    ) -> NeighbourTerms:
        """The neighbours when the caller has them already: candidates ``tokens`` whose
        ``stems`` are all in ``vocab`` (as the term ids ``terms``), with their unit
        vectors ``unit`` (a refreshed index looks them up in one vectorised pass)."""
        import numpy as np

        self = cls.__new__(cls)
        self.tokens = np.asarray(tokens, dtype=np.int32)
        self.stems = stems
        self._terms = np.asarray(terms, dtype=np.int64)
        self._stems = stems
        self._tokenizer = word_vectors().tokenizer
        self._vectors = unit
        self._table = word_vectors().embedding
        self._near = {}
        return self

    def expand(self, query: str, exclude: set[str]) -> list[tuple[int, float]]:
        """``(term id, similarity)`` of the nearest index words of ``query``'s words: per
        word at most two, each at least 0.6 similar, none whose stem is in ``exclude`` (the
        query's own) or already taken for an earlier word; in the order found."""
        tokens: list[int] = []
        for word in dict.fromkeys(w for w in words(query) if w not in STOPWORDS):
            token = self._tokenizer.token_to_id("\u2581" + word)
            if token is not None:
                tokens.append(token)
            if len(tokens) >= _MAX_WORDS:
                break
        near = self._look_up(tokens)
        taken: dict[int, float] = {}
        seen = set(exclude)
        for token in tokens:
            found = 0
            for j, sim in near[token]:
                if found >= _NEIGHBOURS:
                    break
                if self._stems[j] in seen:
                    continue
                seen.add(self._stems[j])
                taken[int(self._terms[j])] = sim
                found += 1
        return list(taken.items())

    def _look_up(self, tokens: list[int]) -> dict[int, list[tuple[int, float]]]:
        """Per token of ``tokens``, the candidates at least 0.6 similar, most similar first
        (at most ``_SHORTLIST``). Kept per token (an agent's queries reuse their words); the
        answer is a dict of its own, so a search on another thread that clears the cache
        cannot take an entry from under this one."""
        import numpy as np

        cache = self._near
        near: dict[int, list[tuple[int, float]]] = {}
        for token in tokens:
            hit = cache.get(token)  # get, not "in" then []: another thread may clear it between
            if hit is not None:
                near[token] = hit
        new = [t for t in dict.fromkeys(tokens) if t not in near]
        if new:
            # One product for all the new words: (candidates, words). vecdot, not BLAS:
            # see search._dot (threads woken for a small product cost more).
            query = _unit(np.asarray(self._table[new], dtype=np.float32))
            sims = np.vecdot(self._vectors[:, None, :], query[None, :, :])
            for token, column in zip(new, sims.T, strict=True):
                hits = np.flatnonzero(column >= _MIN_SIMILARITY)
                hits = hits[np.argsort(-column[hits], kind="stable")][:_SHORTLIST]
                near[token] = [(int(j), float(column[j])) for j in hits]
            if len(cache) + len(new) > _CACHED_TOKENS:
                cache.clear()
            cache.update((t, near[t]) for t in new)
        return near


def _unit(matrix: np.ndarray) -> np.ndarray:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 1e-12)
