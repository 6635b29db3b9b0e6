"""Static word vectors for ToolSearch: IDF-weighted pooling and query-word neighbours.

The vectors are ``wordllama`` 0.4.0.post1's (the 256-d ``l2_supercat`` weights and
tokenizer shipped inside its wheel, loaded with downloads disabled: no network, no
torch). wordllama's own ``embed`` averages a text's token vectors; here each token
vector is weighted by the token's inverse document frequency over the catalog being
indexed (:func:`idf_weights`, :func:`pool`), so words that every tool shares ("get",
"the", "a", "data") stop pulling every tool and every query toward the same direction.
Measured with ``bench/search.py`` (docs/search.md): MRR up by about two points over the
plain mean, on both halves of the LiveMCPBench queries.

:class:`NeighbourTerms` gives BM25 a query word's nearest words in the same vector
space ("railway" for "train", "temperature" for "weather"), restricted to words that
occur in the catalog, so a query can match a tool that words its task differently.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keen.capabilities._text import STOPWORDS, stem_words, words

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DIM",
    "NeighbourTerms",
    "WordVectors",
    "embedder",
    "idf_weights",
    "neighbour_candidates",
    "pool",
    "token_ids",
    "word_vectors",
]

DIM = 256
"""Width of the vectors."""
_BATCH = 256
_WHOLE_WORD = re.compile(r"[a-z]{3,}")
# A query word's neighbours (NeighbourTerms): at most this many per word, each at least
# this similar, over at most this many distinct query words (bounds the cost of a query).
_NEIGHBOURS = 2
_MIN_SIMILARITY = 0.6
_MAX_WORDS = 48
_SHORTLIST = 20
_CACHED_TOKENS = 8192


@functools.cache
def embedder() -> Any:
    """The wordllama model from the installed wheel (``disable_download=True``).

    Raises ``FileNotFoundError`` when the wheel lacks its weights (a broken install).
    """
    with _root_logging_kept():
        import wordllama
        from wordllama import WordLlama

    return WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)


@dataclass(frozen=True)
class WordVectors:
    """wordllama's tokenizer (no padding, no truncation) and its ``(32000, DIM)`` float32
    token vectors: all that ToolSearch uses of the model."""

    tokenizer: Any
    embedding: np.ndarray


@functools.cache
def word_vectors() -> WordVectors:
    """The tokenizer and token vectors of the installed wordllama wheel, read without
    importing ``wordllama`` (its import alone took 0.5 to 1.2 s here: it loads its training
    configuration), so a search in a new process is ready sooner. The same files
    :func:`embedder` reads (``tests/capabilities/test_search_vectors.py`` compares them).

    Raises ``FileNotFoundError`` when the wheel lacks its files (a broken install).
    """
    import numpy as np
    from safetensors import safe_open
    from tokenizers import Tokenizer

    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the wordllama package is not installed; reinstall keen")
    root = Path(next(iter(spec.submodule_search_locations)))
    tokenizer_file = root / "tokenizers" / "l2_supercat_tokenizer_config.json"
    weights_file = root / "weights" / f"l2_supercat_{DIM}.safetensors"
    for path in (tokenizer_file, weights_file):
        if not path.is_file():
            raise FileNotFoundError(f"wordllama's {path.name} is missing from {root}; reinstall keen")
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    with safe_open(str(weights_file), framework="np", device="cpu") as f:  # pyright: ignore[reportUnknownVariableType]
        table = np.ascontiguousarray(f.get_tensor("embedding.weight").astype(np.float32))  # pyright: ignore[reportUnknownMemberType]
    return WordVectors(tokenizer, table)


def token_ids(texts: Sequence[str]) -> list[np.ndarray]:
    """The wordllama token ids of each of ``texts`` (``int32`` arrays, no padding)."""
    import numpy as np

    tokenizer = word_vectors().tokenizer
    if len(texts) == 1:  # a query: encode_batch would hand it to the tokenizer's thread pool
        return [np.asarray(tokenizer.encode(texts[0], add_special_tokens=False).ids, dtype=np.int32)]
    out: list[np.ndarray] = []
    for start in range(0, len(texts), _BATCH):
        for enc in tokenizer.encode_batch(list(texts[start : start + _BATCH]), add_special_tokens=False):
            out.append(np.asarray(enc.ids, dtype=np.int32))
    return out


def idf_weights(docs: Sequence[np.ndarray]) -> np.ndarray:
    """Per token id, ``log((N + 1) / (df + 0.5))`` over the ``N`` token-id arrays ``docs``
    (``df``: how many hold the token). A token no document holds gets the highest weight:
    in a query it is a word the catalog does not use, whose vector still points at the
    tools that use its synonyms."""
    import numpy as np

    df = np.zeros(word_vectors().embedding.shape[0], dtype=np.float64)
    if not docs:
        return np.ones(df.shape, dtype=np.float32)  # no catalog, no statistics: a plain mean
    for ids in docs:
        df[np.unique(ids)] += 1
    return np.log((len(docs) + 1) / (np.maximum(df, 1.0) + 0.5)).astype(np.float32)


def pool(docs: Sequence[np.ndarray], weights: np.ndarray) -> np.ndarray:
    """Unit vectors ``(len(docs), DIM)``: each document's token vectors averaged with
    ``weights`` (per token id); an empty document (or one whose weights are all zero) is
    the zero vector."""
    import numpy as np

    table = word_vectors().embedding
    out = np.zeros((len(docs), DIM), dtype=np.float32)
    for i, ids in enumerate(docs):
        if ids.size:
            w = weights[ids]
            out[i] = w @ table[ids]
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, norms, out=np.zeros_like(out), where=norms > 1e-12)


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


@contextlib.contextmanager
def _root_logging_kept() -> Iterator[None]:
    """wordllama calls ``logging.basicConfig(level=INFO)`` on import, which would give the
    program that embeds Keen a stderr handler printing every INFO line: undo it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
