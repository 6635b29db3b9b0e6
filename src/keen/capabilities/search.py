"""ToolSearch: rank a catalog's capabilities for a task, offline and on the CPU.

Two signals, fused:

- lexical: BM25 (Lucene variant, as ``bm25s`` computes it) over Snowball-stemmed words
  (:mod:`keen.capabilities._text`) of each capability's name (split on case, ``_``,
  ``-``, ``.``, ``/``; counted ``NAME_REPEAT`` times), title, description and parameter
  descriptions; each query word's nearest catalog words in the embedding space count
  too, at ``NEIGHBOUR_WEIGHT`` times their similarity (``railway`` also matches
  ``train``; :class:`~keen.capabilities._neighbours.NeighbourTerms`);
- semantic: cosine similarity of static word embeddings (``wordllama`` 0.4.0.post1,
  the 256-d ``l2_supercat`` weights and tokenizer shipped inside its wheel, loaded with
  downloads disabled: no network, no torch) of the server name, the tool name and the
  one-line summary (:func:`semantic_text`), each text's token vectors averaged with
  their inverse document frequency over the catalog's tools as weights
  (:mod:`keen.capabilities._embed`), the query's with the same weights.

Both are computed for every document and for every *server* (its name, catalog
description and the names of its tools), each standardised over the corpus (z-scores:
how far a score stands out from the rest, so a signal whose scores are all alike
cannot swamp one with a clear winner, as min-max scaling lets it), then combined per
capability as
``w_lex * lex + w_sem * sem + w_server * trust * (lex_server + sem_server)``
(``trust``, :func:`server_trust`, shrinks the server signal on a few servers):
a tool of a server that matches the task as a whole ranks above a same-named tool of
an unrelated server (the server context of "tool-to-agent" retrieval); with the
transformer, the server term also counts the mean of its tools' fused scores
(``SearchWeights.server_tools``). Weights are
:class:`SearchWeights`; the defaults and the text fields were chosen on the
even-numbered LiveMCPBench tasks and checked on the odd ones (``bench/search.py
--half``).

The query passes through :func:`keen.capabilities._query.search_query` first (a file path
gains the word "file": the task needs a tool that reads or writes files, not one about
the path's words); the tools' vectors (transformer and wordllama) and the servers'
transformer vectors are compared with it through
:func:`keen.capabilities._query.value_kinds` as well (each file name, URL, host name and
quoted text replaced by its kind: ``md file``, ``web page``, ``web site``, ``text``), and
the transformer reads it as ``how to <request>``, the form of its tool texts
(:func:`dense_text`). Each tool has four transformer vectors (:func:`dense_views`: the
whole text, its head ``how to <tool> with <server>: <title>``, its description, and its
head with the name said in everyday verbs, ``how to list directory with filesystem (show
directory, get all directory)``), and the best of their four cosines counts: a request that
names what the tool does meets the head, one that says it the way the description does
meets that, one that says the action in other words meets the last, without any diluting
the others.

Identical capabilities on different servers (the same tool name, title, description,
parameters and risk: one server configured twice, or a fork that changed nothing) are
one result: :meth:`ToolSearch.top` keeps the best-scoring copy and
:meth:`ToolSearch.copies` names the others, so a result list does not spend its places
on the same tool twice.

The index is assembled from rows per document (:mod:`keen.capabilities._rows`; the
documents' texts: :mod:`keen.capabilities._documents`): each tool and server text is
tokenised once, and the next catalog of this process is derived from the last index by
what changed (:mod:`keen.capabilities._refresh`), so a refresh of one server tokenises that
server only. Indexes are kept under ``$KEEN_HOME/cache/toolsearch/`` for the next process
(:mod:`keen.capabilities._index_cache`). While the calling thread encodes a request, a
helper thread scores its keywords and word vectors and finds the query words the why lines
name, and half of the views' product runs on a helper (:mod:`keen.capabilities._helper`):
the same numbers, sooner when a CPU is free.
Results are candidates for the caller's visibility decision, never authorization; the
caller's permission filter is applied before the top ``k`` is cut, so a filtered-out
capability is never returned (not even as a count).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keen.capabilities import _index_cache, _refresh
from keen.capabilities._documents import (
    DENSE_VIEWS,
    NAME_REPEAT,
    dense_text,
    dense_views,
    lexical_text,
    name_phrases,
    semantic_text,
)
from keen.capabilities._embed import embedder, pool, token_ids
from keen.capabilities._helper import beside, dot_halves
from keen.capabilities._index_cache import INDEX_FORMAT, MAX_INDEXES, flush, forget
from keen.capabilities._query import search_query, value_kinds
from keen.capabilities._text import stem_tokens
from keen.capabilities.descriptor import Capability

if TYPE_CHECKING:
    import numpy as np

    from keen.capabilities._refresh import Assembled, Since
    from keen.capabilities.dense import DenseVectors

__all__ = [
    "DENSE_VIEWS",
    "INDEX_FORMAT",
    "MAX_INDEXES",
    "MAX_QUERY_CHARS",
    "NAME_REPEAT",
    "NEIGHBOUR_WEIGHT",
    "SERVER_PRIOR",
    "SearchWeights",
    "ToolSearch",
    "dense_text",
    "dense_views",
    "embedder",
    "flush",
    "forget",
    "lexical_text",
    "name_phrases",
    "semantic_text",
    "server_trust",
]

_MAX_WHY_WORDS = 48
MAX_QUERY_CHARS = 2000
"""Only a query's first characters count: a task fits in far fewer, and scoring time grows
with the query's length (a 1 MB query took 2.4 s here), which a host of ``keen serve``
could otherwise spend for every other host."""
NEIGHBOUR_WEIGHT = 0.3
"""How much a query word's neighbour (:class:`~keen.capabilities._neighbours.NeighbourTerms`)
counts in BM25 against the word itself, times their similarity."""


SERVER_PRIOR = 4
"""How many servers' worth of doubt the server signal starts with (:func:`server_trust`)."""


def server_trust(n_servers: int) -> float:
    """How much the server signal counts with ``n_servers`` servers, from 0 to 1:
    ``(n - 1) / (n - 1 + SERVER_PRIOR)``.

    Standardised over two servers, any difference between them becomes +1 and -1, the
    same as a clear one: a user with two servers saw "add two numbers" rank ``add_note``
    of the server whose words matched a little better above ``get-sum`` ("the sum of two
    numbers") of the other. The signal is shrunk towards nothing on few servers (0.2 for 2,
    0.69 for 10, 0.95 for 70) and counts in full on many, where its z-scores mean something.
    """
    return (n_servers - 1) / (n_servers - 1 + SERVER_PRIOR) if n_servers > 1 else 0.0


@dataclass(frozen=True)
class SearchWeights:
    """Fusion weights (see the module docstring). ``lexical`` and ``semantic`` weigh the
    two signals; ``server`` how much the capability's server as a whole counts.

    With the transformer vectors ready (:mod:`keen.capabilities.dense`), ``dense`` weighs
    their cosine, ``dense_server`` that of the capability's server (the mean of its tools'
    vectors; inside the server term), and the static (wordllama) cosine counts ``static_with_dense`` times
    ``semantic``: the transformer carries most of what it did. ``server_tools`` weighs, inside
    the server term and with the transformer only, how well the server's tools match the
    request on average (the mean of their fused keyword, wordllama and transformer scores):
    the server judged by what its tools as a whole do, the first stage of a two-stage
    search folded into one score (docs/search.md, "Server term from its tools' scores")."""

    lexical: float = 1.0
    semantic: float = 1.5
    server: float = 0.5
    dense: float = 3.0
    dense_server: float = 2.0
    static_with_dense: float = 1 / 3
    server_tools: float = 0.5


def _vectors(texts: Sequence[str], weights: np.ndarray) -> np.ndarray:
    return pool(token_ids(texts), weights)


def _best_view(dense: DenseVectors, query: np.ndarray) -> np.ndarray:
    """Per tool, the best cosine of ``query`` with its :data:`DENSE_VIEWS` vectors (each
    distinct text's once: :attr:`~keen.capabilities.dense.DenseVectors.distinct`)."""
    cosines = dot_halves(dense.distinct, query)[dense.rows]
    return cosines.reshape(dense.views, -1).max(axis=0) if dense.views > 1 else cosines


def _dot(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` on this thread: ``np.vecdot``, one dot product per row. Not
    ``@``: for 4,000 x 256 a multithreaded BLAS spends more waking its threads than
    computing (measured here, on 2 busy cores: ``@`` p50 12 ms per search, einsum under 1
    ms); and vecdot took 0.5 to 0.9 of the time of einsum's loop (docs/search.md, "Query
    latency")."""
    import numpy as np

    return np.vecdot(matrix, vector)


def _standardise(values: np.ndarray) -> np.ndarray:
    """``values`` as z-scores (0 where they are all equal, or empty)."""
    import numpy as np

    if values.size == 0:
        return values
    # values.std()'s own steps (the mean, the deviations, the root of their mean square), so
    # the mean and the deviations are computed once, not again for the z-scores; each mean as
    # np.mean computes it for float arrays (the sum by add.reduce, divided by the count)
    # without its Python wrapper (43 -> 27 us a call on 4,310 values): the same bits.
    centred = values - np.add.reduce(values) / values.size
    spread = float(np.sqrt(np.add.reduce(np.square(centred)) / values.size))
    if spread <= 1e-9:
        return values * 0.0
    return centred / spread


class ToolSearch:
    """The search index of one catalog (build with :meth:`build`, or :meth:`cached`).

    ``servers`` maps a server name to its text (catalog description, instructions);
    capabilities without a server (local skills) get no server signal.
    """

    def __init__(self, parts: Assembled, weights: SearchWeights | None = None) -> None:
        import numpy as np

        self._parts = parts
        self.ids = parts.ids
        self._doc_server = parts.doc_server  # server row per document, -1 for none
        self._bm25 = parts.tools.lexical
        self._bm25_servers = parts.servers.lexical
        # The tools' word vectors as their two sums (see _pooling.Pooled, _sums) and a =
        # ln(N + 1): a refresh that changes N moves no vector, and none is made.
        self._pooled, self._a = parts.tools.sums, parts.a
        self._inverse_norms = self._pooled.inverse_norms(self._a)
        self._server_vectors = parts.servers.spliced.vectors(parts.a)
        self.weights = weights or SearchWeights()
        # IDF per wordllama token id over this catalog (see _embed).
        self._token_weights = parts.token_weights
        # Copy group per document (see _refresh.copy_groups); members of groups with copies.
        self._groups = parts.groups
        shared = np.flatnonzero(np.bincount(self._groups, minlength=len(self.ids))[self._groups] > 1)
        self._shared = shared  # positions of the groups with copies, ascending
        self._by_group: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        if shared.size:  # made with the index, not by its first search (2 ms at 50k tools)
            self._group_table()
        self.dense: DenseVectors | None = None
        """The transformer signal, attached by the catalog (None: not used)."""
        self._dense_server_cache: tuple[np.ndarray, np.ndarray] | None = None
        self._neighbours = parts.neighbours

    # -- building -------------------------------------------------------------

    @classmethod
    def build(
        cls,
        caps: Sequence[Capability],
        servers: dict[str, str],
        weights: SearchWeights | None = None,
        *,
        since: Since | None = None,
    ) -> ToolSearch:
        """Index ``caps`` (in this order) with their ``servers``' texts. The documents this
        process indexed for the last catalog are reused (:mod:`keen.capabilities._refresh`):
        only new or changed ones are tokenised. ``since``: as for :meth:`cached`."""
        return cls(_refresh.build(caps, servers, since), weights)

    @classmethod
    def cached(
        cls,
        caps: Sequence[Capability],
        servers: dict[str, str],
        cache_root: Path | None,
        weights: SearchWeights | None = None,
        *,
        since: Since | None = None,
    ) -> ToolSearch:
        """The index of ``caps``, as :meth:`build` makes it, or loaded from its folder under
        ``cache_root`` and saved there (:mod:`keen.capabilities._index_cache`);
        ``cache_root=None``: built, not saved. ``since``: where ``caps`` came from (an
        earlier catalog's list, position by position), so the index is derived from that
        one's without matching every capability."""
        if cache_root is None:
            return cls.build(caps, servers, weights, since=since)
        return cls(_index_cache.cached(caps, servers, cache_root, since), weights)

    # -- querying -------------------------------------------------------------

    @staticmethod
    def _lexical(bm25: Any, tokens: list[str], size: int) -> np.ndarray:
        import numpy as np

        vocab: dict[str, int] = bm25.vocab_dict
        ids = [vocab[t] for t in tokens if t in vocab]
        if not ids:
            return np.zeros(size, dtype=np.float32)
        return np.asarray(bm25.get_scores_from_ids(ids), dtype=np.float32)

    def _expanded_lexical(self, query: str, tokens: list[str]) -> np.ndarray:
        """BM25 of ``tokens`` plus, for each neighbour of a query word, its BM25 times
        ``NEIGHBOUR_WEIGHT`` times its similarity."""
        scores = self._lexical(self._bm25, tokens, len(self.ids))  # a new array: added to in place
        for term, similarity in self._neighbours.expand(query, set(tokens)):
            self._bm25.add_scores(scores, term, NEIGHBOUR_WEIGHT * similarity)
        return scores

    def signals(self, query: str) -> dict[str, np.ndarray]:
        """Each signal's weighted contribution to every document's score for ``query``
        (their sum is :meth:`scores`): ``lexical``, ``static`` (wordllama), ``dense`` (the
        transformer, when :attr:`dense` is ready) and ``server``."""
        return self._signals(query, with_words=False)[0]

    def signals_and_words(self, query: str) -> tuple[dict[str, np.ndarray], list[tuple[str, np.ndarray]]]:
        """:meth:`signals` and :meth:`query_words` of ``query`` (what a search with why lines
        needs): the query words are found on the helper thread beside the encoder, with the
        other signals that need no transformer vector (docs/search.md, "Query latency")."""
        found, matched = self._signals(query, with_words=True)
        return found, matched if matched is not None else []

    def _signals(
        self, query: str, *, with_words: bool
    ) -> tuple[dict[str, np.ndarray], list[tuple[str, np.ndarray]] | None]:
        import numpy as np

        w = self.weights
        typed = query
        cut = query[:MAX_QUERY_CHARS]
        # A query that is nothing but data (a hash, a tool named by its UUID) still ranks by
        # it: dropping it all would leave nothing to rank by, and an arbitrary order.
        words = search_query(cut)
        query = words if words.strip() else cut
        tokens = stem_tokens([query])
        # The tools' vectors are compared with the request with its values replaced by their
        # kinds ("rename md file to md file", not "rename draft_v2.md to final.md": see
        # _query.value_kinds); keywords and the servers' word vectors read the values (their
        # kinds there measured lower on the even halves, docs/search.md).
        kinds = value_kinds(query)
        dense = self.dense if self.dense is not None and self.dense.ready else None
        if dense is not None:
            # The request in the tools' own form (dense_text: "how to <tool> with <server>: ..."),
            # encoded on this thread (outside the GIL) while a helper scores the signals that
            # do not need its vector (_helper: the same bits, sooner with a CPU free).
            words_part = beside(
                lambda: (
                    self._word_signals(query, kinds, tokens),
                    self.query_words(typed) if with_words else None,
                )
            )
            qd = dense.query_vector(f"how to {kinds}" if kinds.strip() else kinds)
            (lexical, static, srv), matched = words_part()
        else:
            qd = None
            lexical, static, srv = self._word_signals(query, kinds, tokens)
            matched = self.query_words(typed) if with_words else None
        out: dict[str, np.ndarray] = {
            "lexical": w.lexical * lexical,
            "static": w.semantic * (w.static_with_dense if qd is not None else 1.0) * static,
        }
        if dense is not None and qd is not None:
            out["dense"] = w.dense * _standardise(_best_view(dense, qd))
        if srv is not None:
            if dense is not None and qd is not None:
                srv += w.dense_server * _standardise(_dot(self._dense_servers(dense), qd))
                if w.server_tools:  # the server as a whole: how well its tools match on average
                    tools = out["lexical"] + out["static"] + out["dense"]
                    srv += w.server_tools * _standardise(self._server_means(tools))
            srv = np.append(srv, 0.0)  # row -1: documents without a server
            out["server"] = w.server * server_trust(len(self._server_vectors)) * srv[self._doc_server]
        return out, matched

    def _word_signals(
        self, query: str, kinds: str, tokens: list[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The z-scores of the signals that need no transformer vector: keywords (``tokens``,
        with neighbours), the tools' word vectors (of ``kinds``), and the servers' keyword
        and word-vector z-scores summed (None without servers or a server weight)."""
        qv = _vectors([query], self._token_weights)[0]
        qk = qv if kinds == query else _vectors([kinds], self._token_weights)[0]
        lexical = _standardise(self._expanded_lexical(query, tokens))
        static = _standardise(self._static_scores(qk))
        n_servers = len(self._server_vectors)
        if not (n_servers and self.weights.server):
            return lexical, static, None
        srv = _standardise(self._lexical(self._bm25_servers, tokens, n_servers))
        srv += _standardise(_dot(self._server_vectors, qv))
        return lexical, static, srv

    def _static_scores(self, query: np.ndarray) -> np.ndarray:
        """Each tool's word-vector cosine with the unit vector ``query``."""
        return self._pooled.static_scores(self._a, self._inverse_norms, query)

    def query_words(self, query: str) -> list[tuple[str, np.ndarray]]:
        """Each content word of ``query`` (as typed, lowercase; first 2,000 characters) that
        the catalog uses, with a boolean array of the documents whose text holds it: what
        a search result's one-line why names."""
        from keen.capabilities._text import STOPWORDS, stem_words, words

        vocab = self._bm25.vocab_dict
        out: list[tuple[str, np.ndarray]] = []
        seen: set[str] = set()
        for word in words(query[:MAX_QUERY_CHARS])[:_MAX_WHY_WORDS]:
            if word in STOPWORDS or word in seen:
                continue
            seen.add(word)
            term = vocab.get(stem_words([word])[0])
            if term is not None:
                out.append((word, self._bm25.holding(term)))
        return out

    # For _server_means, per server-row array (kept while it is the index's): the documents
    # with a server (None: all of them), their servers' rows, each server's count (>= 1).
    _server_rows: tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray] | None = None

    def _server_means(self, scores: np.ndarray) -> np.ndarray:
        """Per server, the mean of its documents' ``scores`` (0 for a server without any)."""
        import numpy as np

        n = len(self._server_vectors)
        kept = self._server_rows
        if kept is None or kept[0] is not self._doc_server or kept[3].size != n:
            rows = self._doc_server >= 0
            servers = self._doc_server[rows]
            counts = np.maximum(np.bincount(servers, minlength=n), 1)
            kept = self._server_rows = (self._doc_server, None if rows.all() else rows, servers, counts)
        _, rows, servers, counts = kept
        weights = scores if rows is None else scores[rows]
        return np.bincount(servers, weights=weights, minlength=counts.size) / counts

    def _dense_servers(self, dense: DenseVectors) -> np.ndarray:
        """Per server, the unit mean of its tools' transformer vectors (measured above a
        vector of the server's own text: docs/search.md), computed once per vector set."""
        import numpy as np

        docs = dense.docs
        if self._dense_server_cache is None or self._dense_server_cache[0] is not docs:
            matrix = np.zeros((len(self._server_vectors), docs.shape[1]), dtype=np.float32)
            rows = self._doc_server >= 0
            np.add.at(matrix, self._doc_server[rows], docs[rows])
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 1e-12)
            self._dense_server_cache = (docs, matrix)
        return self._dense_server_cache[1]

    def scores(self, query: str, signals: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """The fused score of every document for ``query`` (higher is better): the sum of
        its :meth:`signals` (given, when the caller has them already)."""
        import numpy as np

        return np.sum(list((signals or self.signals(query)).values()), axis=0)

    def top(
        self,
        query: str,
        k: int,
        mask: np.ndarray | None = None,
        *,
        signals: dict[str, np.ndarray] | None = None,
    ) -> list[tuple[int, float]]:
        """The best ``k`` documents as ``(position, score)``, best first; only positions
        where the boolean array ``mask`` is true (all when ``None``), and of identical
        copies only the best-scoring one (:meth:`copies` names the rest). Ties keep
        catalog order."""
        import numpy as np

        if k <= 0 or not self.ids:
            return []
        scores = self.scores(query, signals)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        if self._shared.size:
            scores = self._collapse(scores)
        k = min(k, len(self.ids))
        head = np.argpartition(-scores, k - 1)[:k] if k < len(self.ids) else np.arange(len(self.ids))
        # Best first; equal scores in catalog order, so a ranking is the same every run.
        order = head[np.lexsort((head, -scores[head]))]
        finite = np.isfinite(scores[order])
        return [(int(i), float(scores[i])) for i in order[finite]]

    def _collapse(self, scores: np.ndarray) -> np.ndarray:
        """``scores`` with every copy but the best of its group (the first in catalog
        order on a tie) set to ``-inf``."""
        import numpy as np

        members, starts, sizes, _, group = self._group_table()
        values = scores[members]
        best = np.repeat(np.maximum.reduceat(values, starts), sizes)
        # The lead of a group: its first member (in catalog order) with the best score.
        top = np.flatnonzero(values == best)
        first = np.ones(top.size, dtype=bool)
        first[1:] = group[top[1:]] != group[top[:-1]]
        lead = np.zeros(values.size, dtype=bool)
        lead[top[first]] = True
        scores = scores.copy()
        scores[members[~lead]] = -np.inf
        return scores

    def _group_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The documents with copies by group, then catalog order (``members``), where each
        group starts in it and its size, the groups' ids in that order (ascending), and each
        member's group number (its place in that order):
        sorted once per index in C, not per query, and never walked in Python (at 50k tools
        a per-group dict took tens of milliseconds of a refresh's first search)."""
        import numpy as np

        if self._by_group is None:
            pos, grp = self._shared, self._groups[self._shared]
            order = np.lexsort((pos, grp))
            starts = np.flatnonzero(np.r_[True, grp[order][1:] != grp[order][:-1]])
            members = pos[order]
            sizes = np.diff(np.r_[starts, order.size])
            self._by_group = (
                members,
                starts,
                sizes,
                grp[order][starts],
                np.repeat(np.arange(starts.size), sizes),
            )
        return self._by_group

    def copies(self, position: int, mask: np.ndarray | None = None) -> list[int]:
        """The positions of the other documents identical to the one at ``position``
        (only those ``mask`` allows), in catalog order; ``[]`` when it has none."""
        if not self._shared.size:
            return []
        members, starts, sizes, keys, _ = self._group_table()
        group = self._groups[position]
        at = int(keys.searchsorted(group))
        if at == keys.size or keys[at] != group:
            return []
        found = members[starts[at] : starts[at] + sizes[at]].tolist()
        return [i for i in found if i != position and (mask is None or bool(mask[i]))]
