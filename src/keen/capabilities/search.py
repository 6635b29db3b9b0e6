"""ToolSearch: rank a catalog's capabilities for a task, offline and on the CPU.

Two signals, fused:

- lexical: BM25 (Lucene variant, as ``bm25s`` computes it) over Snowball-stemmed words
  (:mod:`keen.capabilities._text`) of each capability's name (split on case, ``_``,
  ``-``, ``.``, ``/``; counted ``NAME_REPEAT`` times), title, description and parameter
  descriptions; each query word's nearest catalog words in the embedding space count
  too, at ``NEIGHBOUR_WEIGHT`` times their similarity (``railway`` also matches
  ``train``; :class:`~keen.capabilities._embed.NeighbourTerms`);
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
(:func:`dense_text`). Each tool has three transformer vectors (:func:`dense_views`: the
whole text, its head ``how to <tool> with <server>: <title>``, and its description), and
the best of their three cosines counts: a request that names what the tool does meets the
head, one that says it the way the description does meets that, without either diluting
the other.

Identical capabilities on different servers (the same tool name, title, description,
parameters and risk: one server configured twice, or a fork that changed nothing) are
one result: :meth:`ToolSearch.top` keeps the best-scoring copy and
:meth:`ToolSearch.copies` names the others, so a result list does not spend its places
on the same tool twice.

The index is assembled from rows per document (:mod:`keen.capabilities._index`): each
tool and server text is tokenised once, and the next catalog of this process reuses the
rows of its unchanged documents, so a refresh of one server tokenises that server only.
The rows are cached under ``$KEEN_HOME/cache/toolsearch/v<format>-<key>/`` (``key``: a
hash of every document's text), of which the :data:`MAX_INDEXES` most recently used are
kept; a new process loads its catalog's folder, or reuses the rows of the folder used
last. A reader of a half-written folder never exists because it is renamed into place.
Results are candidates for the caller's visibility decision, never authorization; the
caller's permission filter is applied before the top ``k`` is cut, so a filtered-out
capability is never returned (not even as a count).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keen.capabilities._embed import (
    DIM,
    NeighbourTerms,
    embedder,
    neighbour_candidates,
    pool,
    token_ids,
    word_vectors,
)
from keen.capabilities._index import (
    Columns,
    Doc,
    Lexical,
    Pooled,
    doc_key,
    idf_rows,
    intern,
    pool_parts,
    repool,
    token_df,
    tokenise,
    weight_parts,
)
from keen.capabilities._query import search_query, value_kinds
from keen.capabilities._text import split_identifier, stem_tokens
from keen.capabilities.descriptor import Capability

if TYPE_CHECKING:
    import numpy as np

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
    "server_trust",
]

logger = logging.getLogger(__name__)

INDEX_FORMAT = 6
"""Bumped when the cached index layout or its document text changes (folders of other
formats are deleted when an index is saved)."""
MAX_INDEXES = 4
"""How many catalogs' index folders the cache keeps (the most recently used): a folder is
written per tool list, and a session whose servers change would otherwise leave one per
change behind."""
_SEED_ABOVE = 256
"""Documents new to this process above which the rows of the cache folder used last are
read to find them, rather than tokenising them all."""
_STALE_TEMP_S = 3600.0
"""A half-written index folder older than this was left by a process that died: removed."""
NAME_REPEAT = 2
"""How many times the split name counts in the lexical document (names are the densest signal)."""
_MAX_DOC_CHARS = 2000
_MAX_WHY_WORDS = 48
MAX_QUERY_CHARS = 2000
"""Only a query's first characters count: a task fits in far fewer, and scoring time grows
with the query's length (a 1 MB query took 2.4 s here), which a host of ``keen serve``
could otherwise spend for every other host."""
NEIGHBOUR_WEIGHT = 0.3
"""How much a query word's neighbour (:class:`~keen.capabilities._embed.NeighbourTerms`)
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


def lexical_text(cap: Capability) -> list[str]:
    """The fields of ``cap``'s lexical document. Parameter names stay out: they are
    generic (``query``, ``id``, ``path``) and cost recall (bench/search.py); their
    descriptions are part of ``search_text``."""
    name = split_identifier(cap.name)
    return [*([name] * NAME_REPEAT), cap.title, cap.search_text[:_MAX_DOC_CHARS]]


def semantic_text(cap: Capability) -> str:
    """``cap``'s text for the embedding: split server name, split tool name (twice),
    title and one-line summary.

    Static embeddings are averages of word vectors: the long tail of a description or of
    parameter descriptions dilutes them (measured with bench/search.py: recall@5 drops
    about 3 points with the full text), so only the head goes in; BM25 gets the rest.
    The server name places the tool among its siblings (tool-to-agent retrieval: a tool
    embedded with its server)."""
    name = split_identifier(cap.name)
    server = split_identifier(cap.server or "")
    return ". ".join(p for p in (server, name, name, cap.title, cap.summary) if p)


def dense_text(cap: Capability) -> str:
    """``cap``'s text for the transformer encoder: ``how to tool name with server: title.
    description`` (split names; the encoder reads the first :data:`~keen.capabilities.
    encoder.MAX_TOKENS` word pieces).

    Said as what a request asks for ("how to git diff staged with git: ..."), a tool's
    name and server meet requests in their own form: on bench/search.py's even halves
    recall@1 and MRR rose on both natural-request sets (recall@5 equal) against
    ``server: tool name. title. description``; the request is read as "how to <request>"
    to match (recall@5 one request higher on both even halves; docs/search.md)."""
    head = _how_to(cap)
    rest = ". ".join(p for p in (cap.title, cap.search_text[:400]) if p)
    return f"{head}: {rest}" if rest else head


def _how_to(cap: Capability) -> str:
    """``how to <tool name> with <server>`` (split names; no server for a local skill)."""
    name = split_identifier(cap.name)
    server = split_identifier(cap.server or "")
    return f"how to {name} with {server}" if server else f"how to {name}"


DENSE_VIEWS = 3
"""Transformer vectors per tool (:func:`dense_views`)."""


def dense_views(cap: Capability) -> tuple[str, str, str]:
    """``cap``'s :data:`DENSE_VIEWS` texts for the transformer: the whole text
    (:func:`dense_text`), its head (``how to tool name with server: title``) and its
    description (``search_text``, with the parameters' descriptions, cut as in the whole
    text; the head when it has none). A query's cosine with a tool is the best of the three.

    One vector of the whole text averages the head and the description: a request in the
    words of either matches it less than that part alone. With the best of the three,
    bench/search.py's even halves (where the method is tuned) rose on the real servers from
    recall@1 0.534 and @5 0.849 to 0.603 and 0.890 (docs/search.md, "Label audit" and
    after)."""
    head = f"{_how_to(cap)}: {cap.title}" if cap.title else _how_to(cap)
    return dense_text(cap), head, cap.search_text[:400] or head


def _best_view(dense: DenseVectors, query: np.ndarray) -> np.ndarray:
    """Per tool, the best cosine of ``query`` with its :data:`DENSE_VIEWS` vectors."""
    cosines = _dot(dense.all_docs, query)
    return cosines.reshape(dense.views, -1).max(axis=0) if dense.views > 1 else cosines


def _dot(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` on this thread. einsum's own loop, not BLAS: for 4,000 x 256 a
    multithreaded BLAS spends more waking its threads than computing (measured here, on 2
    busy cores: ``@`` p50 12 ms per search, einsum under 1 ms)."""
    import numpy as np

    return np.einsum("ij,j->i", matrix, vector)


def _copy_key(cap: Capability) -> tuple[object, ...]:
    """What two identical capabilities share (everything the index and a result show)."""
    return (cap.kind, cap.name, cap.title, cap.search_text, cap.params, cap.risk)


# Per capability object, the hash of its copy key: a refresh keeps most objects, and hashing
# 4,300 keys (their Risk dataclasses in Python) cost more than grouping them. Entries are
# added, not rebuilt (a refresh makes few new objects, and so few for the garbage collector
# to scan); bounded by _bound.
_copy_hashes: dict[int, tuple[Capability, int]] = {}
# Per copy, the first member of its group it was compared equal to (both objects kept).
_copy_verified: dict[int, tuple[Capability, Capability]] = {}


def _bound(cache: dict[int, Any], caps: Sequence[Capability]) -> None:
    """Keep a per-object cache to the objects of ``caps`` once it holds twice as many (the
    entries of objects gone keep them alive until then)."""
    if len(cache) > 2 * len(caps) + 64:
        alive = {id(c) for c in caps}
        for key in [k for k in cache if k not in alive]:
            del cache[key]


def _copy_groups(caps: Sequence[Capability]) -> np.ndarray:
    """Per capability, the position of the first identical one (itself when unique)."""
    import numpy as np

    hashes: list[int] = []
    get = _copy_hashes.get
    for cap in caps:
        hit = get(id(cap))
        if hit is None or hit[0] is not cap:
            hit = _copy_hashes[id(cap)] = (cap, hash(_copy_key(cap)))
        hashes.append(hit[1])
    n = len(caps)
    _bound(_copy_hashes, caps)
    if n == 0:
        return np.empty(0, dtype=np.int32)
    _, first, inverse = np.unique(np.array(hashes, dtype=np.int64), return_index=True, return_inverse=True)
    groups = first[inverse].astype(np.int32)
    # Equal hashes are nearly always equal keys; the few shared ones are compared in full
    # (two different keys of one hash must not become copies).
    shared = np.flatnonzero(np.bincount(groups, minlength=n)[groups] > 1)
    mismatched: list[int] = []
    seen = _copy_verified.get
    for i, lead in zip(shared.tolist(), groups[shared].tolist(), strict=True):
        if i == lead:
            continue
        cap, first = caps[i], caps[lead]
        before = seen(id(cap))
        if before is not None and before[0] is cap and before[1] is first:
            continue  # the same two objects compared equal last time
        if _copy_key(cap) == _copy_key(first):
            _copy_verified[id(cap)] = (cap, first)
        else:
            mismatched.append(lead)
    _bound(_copy_verified, caps)
    if mismatched:  # a collision: those groups are sorted out by their keys
        exact: dict[tuple[object, ...], int] = {}
        suspect = np.isin(groups, mismatched)
        for i in np.flatnonzero(suspect).tolist():
            groups[i] = exact.setdefault(_copy_key(caps[i]), i)
    return groups


def _standardise(values: np.ndarray) -> np.ndarray:
    """``values`` as z-scores (0 where they are all equal, or empty)."""
    if values.size == 0:
        return values
    spread = float(values.std())
    if spread <= 1e-9:
        return values * 0.0
    return (values - float(values.mean())) / spread


class ToolSearch:
    """The search index of one catalog (build with :meth:`build`, or :meth:`cached`).

    ``servers`` maps a server name to its text (catalog description, instructions);
    capabilities without a server (local skills) get no server signal.
    """

    def __init__(
        self,
        ids: list[str],
        doc_server: np.ndarray,
        bm25: Any,
        bm25_servers: Any,
        vectors: np.ndarray,
        server_vectors: np.ndarray,
        weights: SearchWeights,
        groups: np.ndarray | None = None,
        token_weights: np.ndarray | None = None,
        neighbours: NeighbourTerms | None = None,
    ) -> None:
        import numpy as np

        self.ids = ids
        self._doc_server = doc_server  # server row per document, -1 for none
        self._bm25 = bm25
        self._bm25_servers = bm25_servers
        self._vectors = vectors
        self._server_vectors = server_vectors
        self.weights = weights
        # IDF per wordllama token id over this catalog (see _embed); all ones: a plain mean.
        self._token_weights = (
            np.ones(word_vectors().embedding.shape[0], dtype=np.float32)
            if token_weights is None
            else token_weights
        )
        # Copy group per document (see _copy_groups); members of groups with copies.
        self._groups = np.arange(len(ids), dtype=np.int32) if groups is None else groups
        shared = np.flatnonzero(np.bincount(self._groups, minlength=len(ids))[self._groups] > 1)
        self._shared = shared  # positions of the groups with copies, ascending
        self.dense: DenseVectors | None = None
        """The transformer signal, attached by the catalog (None: not used)."""
        self._dense_server_cache: tuple[np.ndarray, np.ndarray] | None = None
        self._neighbour_terms = neighbours

    # -- building -------------------------------------------------------------

    @classmethod
    def build(
        cls,
        caps: Sequence[Capability],
        servers: dict[str, str],
        weights: SearchWeights | None = None,
    ) -> ToolSearch:
        """Index ``caps`` (in this order) with their ``servers``' texts. The documents this
        process indexed for the last catalog are reused (:mod:`keen.capabilities._index`):
        only new or changed ones are tokenised."""
        with _build_lock:
            rows, srcs = _rows(caps, servers, None)
            return cls._assemble(caps, servers, rows, srcs, weights)

    @classmethod
    def _assemble(
        cls,
        caps: Sequence[Capability],
        servers: dict[str, str],
        rows: tuple[Columns, Columns],
        srcs: tuple[_Since | None, _Since | None],
        weights: SearchWeights | None,
        neighbours: tuple[np.ndarray, list[str]] | None = None,
    ) -> ToolSearch:
        """The index of ``caps`` from their rows and their servers' rows; ``srcs``: per
        row, its row in the last index's rows (``-1``: not there), so what depends on the
        whole catalog is updated from the last index by what changed (:func:`_parts`)."""
        import numpy as np

        tool_rows, server_rows = rows
        row = {name: i for i, name in enumerate(sorted(servers))}
        # Token IDF over the tools' lexical text (their whole description, not only the
        # head that is embedded): a word every tool uses weighs little in any vector.
        df = token_df(tool_rows)
        token_weights = idf_rows(tool_rows, df)
        a, g = weight_parts(len(tool_rows), df)
        tools = _part(0, tool_rows, srcs[0], g)
        servers_part = _part(1, server_rows, srcs[1], g)
        global _last
        _last = (tools, servers_part)
        assert tools.pooled is not None and servers_part.pooled is not None
        bm25 = tools.lexical
        index = cls(
            [c.id for c in caps],
            np.array([row.get(c.server or "", -1) for c in caps], dtype=np.int32),
            bm25,
            servers_part.lexical,
            tools.pooled.vectors(a),
            servers_part.pooled.vectors(a),
            weights or SearchWeights(),
            _copy_groups(caps),
            token_weights,
            _neighbour_terms(bm25, neighbours),
        )
        index._rows = rows
        return index

    _rows: tuple[Columns, Columns] | None = None

    @classmethod
    def cached(
        cls,
        caps: Sequence[Capability],
        servers: dict[str, str],
        cache_root: Path | None,
        weights: SearchWeights | None = None,
    ) -> ToolSearch:
        """The index of ``caps``: built from the documents this process indexed last (only
        new or changed ones tokenised), else loaded from ``cache_root/v<format>-<key>`` (the
        key: a hash of every document's text) when there, else built (reusing the rows of
        the folder used last) and saved there; ``cache_root=None``: built, not saved. The
        folder keeps :data:`MAX_INDEXES` catalogs, the most recently used. A folder that
        cannot be read is rebuilt; one that cannot be written is logged and skipped."""
        if cache_root is None:
            return cls.build(caps, servers, weights)
        with _build_lock:
            tool_keys, known = _tool_keys(caps)
            docs = _server_docs(caps, servers)
            keys = (tool_keys, _server_doc_keys(docs))
            folder = cache_root / _folder_name(keys[0], keys[1], caps)
            index: ToolSearch | None = None
            if not known and folder.is_dir():  # a new process: the folder, not the rows in memory
                try:
                    index = cls._load(folder, caps, servers, keys, weights)
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    logger.warning("toolsearch cache %s unreadable (%s); rebuilding", folder, exc)
                    shutil.rmtree(folder, ignore_errors=True)  # replaced by the rebuilt one
            if index is None:
                rows, srcs = _rows(caps, servers, lambda: _last_used(cache_root, folder), keys, docs)
                index = cls._assemble(caps, servers, rows, srcs, weights)
            _write_later(index, cache_root, folder)
            return index

    def _save(self, folder: Path) -> None:
        """Write the index's rows to ``folder`` (renamed into place whole), or mark it used
        when it is there already."""
        import numpy as np

        assert self._rows is not None
        if (folder / "meta.json").is_file():
            with contextlib.suppress(OSError):
                os.utime(folder)
            return
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            tool_rows, server_rows = self._rows
            tool_rows.save(tmp / "tools.npz")
            server_rows.save(tmp / "servers.npz")
            # The assembled index too: a new process loads it as it is (assembling it from
            # the rows took several times as long as reading it).
            with (tmp / "assembled.npz").open("wb") as handle:
                np.savez(
                    handle,
                    vectors=self._vectors,
                    server_vectors=self._server_vectors,
                    token_weights=self._token_weights,
                    **self._bm25.to_arrays("bm25_"),
                    **self._bm25_servers.to_arrays("servers_"),
                )
            neighbours = self._neighbours
            meta = {
                "ids": self.ids,
                "neighbours": {"tokens": neighbours.tokens.tolist(), "stems": neighbours.stems},
            }
            (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
            try:
                os.rename(tmp, folder)
            except OSError:
                if not folder.is_dir():  # lost the race to another writer: theirs is as good
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    @classmethod
    def _load(
        cls,
        folder: Path,
        caps: Sequence[Capability],
        servers: dict[str, str],
        keys: tuple[list[bytes], list[bytes]],
        weights: SearchWeights | None,
    ) -> ToolSearch:
        """The index saved in ``folder``; raises ``ValueError`` (or ``OSError``,
        ``KeyError``) when it is unreadable or holds other documents than ``keys``."""
        import numpy as np

        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        tool_rows = Columns.load(folder / "tools.npz")
        server_rows = Columns.load(folder / "servers.npz")
        if [bytes(k) for k in tool_rows.keys] != keys[0] or [bytes(k) for k in server_rows.keys] != keys[1]:
            raise ValueError("rows of other documents")
        if meta["ids"] != [c.id for c in caps]:
            raise ValueError("rows for other capability ids")
        stored = meta["neighbours"]
        tokens = np.asarray(stored["tokens"], dtype=np.int32)
        stems = [str(s) for s in stored["stems"]]
        if len(tokens) != len(stems):
            raise ValueError("neighbour tokens and stems differ in number")
        rows = (tool_rows, server_rows)
        with np.load(folder / "assembled.npz") as data:
            arrays = {k: data[k] for k in data.files}
        bm25 = Lexical.from_arrays(arrays, "bm25_")
        bm25_servers = Lexical.from_arrays(arrays, "servers_")
        vectors, server_vectors = arrays["vectors"], arrays["server_vectors"]
        token_weights = arrays["token_weights"]
        if (
            bm25._n != max(len(caps), 1)  # pyright: ignore[reportPrivateUsage]
            or len(bm25._length) != max(len(tool_rows), 1)  # pyright: ignore[reportPrivateUsage]
            or len(bm25_servers._length) != max(len(server_rows), 1)  # pyright: ignore[reportPrivateUsage]
            or vectors.shape != (len(caps), DIM)
            or server_vectors.shape != (len(servers), DIM)
            or token_weights.shape != (word_vectors().embedding.shape[0],)
        ):
            raise ValueError("an assembled index of another size")
        _remember(caps, rows)
        global _last
        _last = (_Part(tool_rows, bm25, None), _Part(server_rows, bm25_servers, None))
        row = {name: i for i, name in enumerate(sorted(servers))}
        index = cls(
            [c.id for c in caps],
            np.array([row.get(c.server or "", -1) for c in caps], dtype=np.int32),
            bm25,
            bm25_servers,
            vectors,
            server_vectors,
            weights or SearchWeights(),
            _copy_groups(caps),
            token_weights,
            _neighbour_terms(bm25, (tokens, stems)),
        )
        index._rows = rows
        return index

    # -- querying -------------------------------------------------------------

    @staticmethod
    def _lexical(bm25: Any, tokens: list[str], size: int) -> np.ndarray:
        import numpy as np

        vocab: dict[str, int] = bm25.vocab_dict
        ids = [vocab[t] for t in tokens if t in vocab]
        if not ids:
            return np.zeros(size, dtype=np.float32)
        return np.asarray(bm25.get_scores_from_ids(ids), dtype=np.float32)

    @property
    def _neighbours(self) -> NeighbourTerms:
        """The query-word neighbours among this index's terms (made with the index)."""
        if self._neighbour_terms is None:
            self._neighbour_terms = NeighbourTerms(self._bm25.vocab_dict)
        return self._neighbour_terms

    def _expanded_lexical(self, query: str, tokens: list[str]) -> np.ndarray:
        """BM25 of ``tokens`` plus, for each neighbour of a query word, its BM25 times
        ``NEIGHBOUR_WEIGHT`` times its similarity."""
        import numpy as np

        scores = self._lexical(self._bm25, tokens, len(self.ids))
        for term, similarity in self._neighbours.expand(query, set(tokens)):
            extra = np.asarray(self._bm25.get_scores_from_ids([term]), dtype=np.float32)
            scores = scores + (NEIGHBOUR_WEIGHT * similarity) * extra
        return scores

    def signals(self, query: str) -> dict[str, np.ndarray]:
        """Each signal's weighted contribution to every document's score for ``query``
        (their sum is :meth:`scores`): ``lexical``, ``static`` (wordllama), ``dense`` (the
        transformer, when :attr:`dense` is ready) and ``server``."""
        import numpy as np

        w = self.weights
        n_servers = len(self._server_vectors)
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
        qv = _vectors([query], self._token_weights)[0]
        qk = qv if kinds == query else _vectors([kinds], self._token_weights)[0]
        dense = self.dense if self.dense is not None and self.dense.ready else None
        # The request in the tools' own form (dense_text: "how to <tool> with <server>: ...").
        qd = dense.query_vector(f"how to {kinds}" if kinds.strip() else kinds) if dense is not None else None
        out: dict[str, np.ndarray] = {
            "lexical": w.lexical * _standardise(self._expanded_lexical(query, tokens)),
            "static": w.semantic
            * (w.static_with_dense if qd is not None else 1.0)
            * _standardise(_dot(self._vectors, qk)),
        }
        if dense is not None and qd is not None:
            out["dense"] = w.dense * _standardise(_best_view(dense, qd))
        if n_servers and w.server:
            srv = _standardise(self._lexical(self._bm25_servers, tokens, n_servers))
            srv += _standardise(_dot(self._server_vectors, qv))
            if dense is not None and qd is not None:
                srv += w.dense_server * _standardise(_dot(self._dense_servers(dense), qd))
                if w.server_tools:  # the server as a whole: how well its tools match on average
                    tools = out["lexical"] + out["static"] + out["dense"]
                    srv += w.server_tools * _standardise(self._server_means(tools))
            srv = np.append(srv, 0.0)  # row -1: documents without a server
            out["server"] = w.server * server_trust(n_servers) * srv[self._doc_server]
        return out

    def query_words(self, query: str) -> list[tuple[str, np.ndarray]]:
        """Each content word of ``query`` (as typed, lowercase; first 2,000 characters) that
        the catalog uses, with a boolean array of the documents whose text holds it: what
        a search result's one-line why names."""
        import numpy as np

        from keen.capabilities._text import STOPWORDS, stem_words, words

        vocab: dict[str, int] = self._bm25.vocab_dict
        out: list[tuple[str, np.ndarray]] = []
        seen: set[str] = set()
        for word in words(query[:MAX_QUERY_CHARS])[:_MAX_WHY_WORDS]:
            if word in STOPWORDS or word in seen:
                continue
            seen.add(word)
            term = vocab.get(stem_words([word])[0])
            if term is not None:
                out.append((word, np.asarray(self._bm25.get_scores_from_ids([term])) > 0))
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

        pos, grp = self._shared, self._groups[self._shared]
        order = np.lexsort((pos, -scores[pos], grp))  # by group, best first, then catalog order
        leads = np.ones(order.size, dtype=bool)
        leads[1:] = grp[order[1:]] != grp[order[:-1]]
        scores = scores.copy()
        scores[pos[order[~leads]]] = -np.inf
        return scores

    def copies(self, position: int, mask: np.ndarray | None = None) -> list[int]:
        """The positions of the other documents identical to the one at ``position``
        (only those ``mask`` allows), in catalog order; ``[]`` when it has none."""
        shared = self._shared
        members = shared[self._groups[shared] == self._groups[position]].tolist()
        return [i for i in members if i != position and (mask is None or bool(mask[i]))]


# -- the rows this process indexed (keen.capabilities._index) ------------------------------

_build_lock = threading.RLock()
# The rows of the last catalog indexed, so a catalog that changed one server tokenises that
# server only: per capability object (a catalog rebuilt by CatalogCache keeps the objects of
# unchanged servers; identity, not equality: comparing 4,300 dataclasses by value costs
# more than the rest of a refresh: its key), and per row key (each kind's rows of the last
# index, by key). The object entries are added and dropped, not rebuilt: a refresh makes
# few new objects, so few for the garbage collector to scan (a full collection of a
# 50,000-tool heap took longer than the refresh). Bounded by _bound and the last index.
_known: dict[int, tuple[Capability, bytes]] = {}
_known_rows: tuple[tuple[Columns, dict[bytes, int]], ...] = ()


@dataclass(eq=False)
class _Part:
    """What the last index assembled from its tools' or servers' rows: BM25's postings and
    the pooled sums of word vectors (``None`` when the index was loaded: pooled again at the
    next change)."""

    rows: Columns
    lexical: Lexical
    pooled: Pooled | None


# The last index's parts (tools, servers): the next catalog's are derived from them by what
# changed. Replaced at every build: bounded by one catalog.
_last: tuple[_Part, _Part] | None = None


def _part(kind: int, rows: Columns, since: _Since | None, g: np.ndarray) -> _Part:
    """The parts of ``rows`` (``kind`` 0: tools, 1: servers): from the last index's by what
    changed when ``since`` maps ``rows`` to its rows, else built whole."""
    last = _last[kind] if _last is not None and since is not None else None
    if last is None or since is None or since.base is not last.rows:
        return _Part(rows, Lexical(rows), pool_parts(rows, g))
    src = since.src
    pooled = pool_parts(rows, g) if last.pooled is None else repool(last.pooled, src, rows, g)
    return _Part(rows, last.lexical.refresh(src, rows), pooled)


@functools.cache
def _candidates() -> tuple[np.ndarray, tuple[str, ...], np.ndarray, np.ndarray]:
    """The query-word neighbour candidates (:func:`~keen.capabilities._embed.
    neighbour_candidates`) with their stems' term ids and their unit vectors."""
    import numpy as np

    tokens, stems = neighbour_candidates()
    table = word_vectors().embedding
    vectors = table[tokens.astype(np.int64)] if len(tokens) else np.zeros((0, DIM), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 1e-12)
    return tokens, stems, np.array(intern(list(stems)), dtype=np.int64), unit.astype(np.float32)


def _neighbour_terms(bm25: Lexical, stored: tuple[np.ndarray, list[str]] | None) -> NeighbourTerms:
    """The neighbours among ``bm25``'s terms: the ``stored`` candidates (a cached index's),
    or those of every candidate whose stem the index holds (a vectorised look-up)."""
    import numpy as np

    if stored is not None:
        return NeighbourTerms(bm25.vocab_dict, *stored)
    tokens, stems, terms, unit = _candidates()
    keep = np.flatnonzero(bm25.vocab_dict.holds(terms))
    return NeighbourTerms.of(
        bm25.vocab_dict, tokens[keep], [stems[j] for j in keep.tolist()], terms[keep], unit[keep]
    )


def forget() -> None:
    """Drop the rows this process keeps from its last index: the next one is loaded from the
    cache folder or built as a new process would (benchmarks and tests use it). Waits for
    the cache folders being written (:func:`flush`)."""
    flush()
    global _last, _known_rows
    with _build_lock:
        _known.clear()
        _known_rows = ()
        _last = None


_writes: list[tuple[threading.Thread, threading.Event]] = []
_WRITE_DELAY_S = 2.0
"""How long a new index waits before it is written to its cache folder (:func:`flush`
writes at once; so does the process's exit)."""
_writes_lock = threading.Lock()
_one_writer = threading.Lock()


def _write_later(index: ToolSearch, cache_root: Path, folder: Path) -> None:
    """Save ``index`` to ``folder`` and evict old folders on a background thread: the search
    that needed the index does not wait for the disk (a folder is written whole and renamed
    into place, so a reader never sees half of one; one left half-written by a process
    killed meanwhile is removed later, see :func:`_evict`)."""

    def write() -> None:
        # One at a time: two evictions at once, each keeping its own folder, would delete
        # more than either alone.
        with _one_writer:
            try:
                index._save(folder)  # pyright: ignore[reportPrivateUsage]
                _evict(cache_root, folder)
            except OSError as exc:
                logger.warning("cannot cache the tool search index in %s: %s", folder, exc)

    hurry = threading.Event()

    def later() -> None:
        # Not at once: the search that needed this index runs now, and writing it (numpy
        # savez, JSON) would compete for the GIL and a CPU with that search.
        hurry.wait(_WRITE_DELAY_S)
        write()

    thread = threading.Thread(target=later, name="keen-toolsearch-save", daemon=True)
    with _writes_lock:
        _writes[:] = [(t, e) for t, e in _writes if t.is_alive()]
        _writes.append((thread, hurry))
    thread.start()


@atexit.register
def flush(timeout: float | None = 10.0) -> None:
    """Write the index folders waiting to be written now, and wait (at most ``timeout``
    seconds each) until they are."""
    with _writes_lock:
        pending = list(_writes)
    for _, hurry in pending:
        hurry.set()
    for thread, _ in pending:
        thread.join(timeout)


def _tool_doc(cap: Capability) -> Doc:
    lexical = lexical_text(cap)
    return Doc(tuple(lexical), semantic_text(cap), " ".join(lexical))


_server_keys: dict[Doc, bytes] = {}


def _server_doc_keys(docs: Sequence[Doc]) -> list[bytes]:
    """The servers' row keys, kept per document: a server's text is thousands of
    characters, hashed again for every catalog otherwise. Holds the last catalog's only."""
    out: list[bytes] = []
    used: dict[Doc, bytes] = {}
    for doc in docs:
        key = _server_keys.get(doc)
        if key is None:
            key = doc_key(doc)
        used[doc] = key
        out.append(key)
    _server_keys.clear()
    _server_keys.update(used)
    return out


_split_name = functools.lru_cache(maxsize=1 << 16)(split_identifier)
"""A tool name split into words, kept: every catalog splits every tool's name again."""


def _server_docs(caps: Sequence[Capability], servers: dict[str, str]) -> list[Doc]:
    """Per server (sorted by name): its name, text and tool names, as one document."""
    names = sorted(servers)
    members: dict[str, list[str]] = {name: [] for name in names}
    for cap in caps:
        if cap.server in members:
            members[cap.server].append(_split_name(cap.name))
    docs: list[Doc] = []
    for name in names:
        fields = (split_identifier(name), servers[name], " ".join(members[name]))
        docs.append(Doc(fields, ". ".join(p for p in fields if p)[: _MAX_DOC_CHARS * 2], None))
    return docs


def _folder_name(tool_keys: Sequence[bytes], server_keys: Sequence[bytes], caps: Sequence[Capability]) -> str:
    digest = hashlib.sha256(b"".join(tool_keys))
    digest.update(b"".join(server_keys))
    digest.update("\n".join(c.id for c in caps).encode())
    return f"v{INDEX_FORMAT}-{digest.hexdigest()[:32]}"


def _tool_keys(caps: Sequence[Capability]) -> tuple[list[bytes], int]:
    """Each capability's row key (from the last build's rows when it is the same object,
    else hashed from its texts) and how many were found that way."""
    keys: list[bytes] = []
    known = 0
    for cap in caps:
        hit = _known.get(id(cap))
        if hit is not None and hit[0] is cap:
            keys.append(hit[1])
            known += 1
        else:
            keys.append(doc_key(_tool_doc(cap)))
    return keys, known


def _gather(
    items: Sequence[Any],
    make: Any,
    seed: Callable[[], Columns | None],
    keys: Sequence[bytes] | None,
    by_object: bool,
    kind: int,
) -> tuple[Columns, np.ndarray | None, Columns | None]:
    """The rows of ``items`` in order: the last index's row (of this ``kind``: 0 tools, 1
    servers) of the same object (when ``by_object``) or of the same key, else ``seed``'s
    (rows read from disk), else tokenised now (``make``: item ->
    :class:`~keen.capabilities._index.Doc`; ``keys``: the items' row keys when known). With
    them, per row, its row in the last index's rows (``-1``: not from there), and those
    rows (``None``, and no mapping, without a last index)."""
    import numpy as np

    last, last_rows = _known_rows[kind] if len(_known_rows) > kind else (None, {})
    sources: dict[int, tuple[Columns, list[int], list[int]]] = {}
    from_last: tuple[list[int], list[int]] = ([], [])

    def add(columns: Columns, pos: int, row: int) -> None:
        entry = sources.setdefault(id(columns), (columns, [], []))
        entry[1].append(pos)
        entry[2].append(row)

    missing: list[int] = []
    if by_object:
        # The common case inline (a refresh reuses thousands of rows of the last index).
        get, row_of = _known.get, last_rows.get
        for pos, item in enumerate(items):
            hit = get(id(item))
            row = row_of(hit[1]) if hit is not None and hit[0] is item else None
            if row is None:
                missing.append(pos)
            else:
                from_last[0].append(pos)
                from_last[1].append(row)
    else:
        missing = list(range(len(items)))
    if missing:
        docs = {pos: make(items[pos]) for pos in missing}
        key_of = {pos: keys[pos] if keys is not None else doc_key(docs[pos]) for pos in missing}
        still: list[int] = []
        for pos in missing:
            row = last_rows.get(key_of[pos])
            if row is not None:
                from_last[0].append(pos)
                from_last[1].append(row)
            else:
                still.append(pos)
        # Many documents new to this process (a new process, or a catalog switched): the
        # rows of the folder used last may hold them (reading it costs what tokenising
        # a few hundred documents does).
        seeded = seed() if len(still) > _SEED_ABOVE else None
        if seeded is not None:
            where = dict(zip(_key_list(seeded), range(len(seeded)), strict=True))
            left: list[int] = []
            for pos in still:
                row = where.get(key_of[pos])
                if row is None:
                    left.append(pos)
                else:
                    add(seeded, pos, row)
            still = left
        if still:
            fresh = tokenise([docs[pos] for pos in still], [key_of[pos] for pos in still])
            for row, pos in enumerate(still):
                add(fresh, pos, row)
    src = np.full(len(items), -1, dtype=np.int64) if last is not None else None
    if from_last[0] and last is not None:
        sources[id(last)] = (last, *from_last)
        if src is not None:
            # A row of the last index stands for one row here; an equal document met
            # again counts as new (its postings are added, not moved).
            old = np.asarray(from_last[1], dtype=np.int64)
            _, first = np.unique(old, return_index=True)
            src[np.asarray(from_last[0], dtype=np.int64)[first]] = old[first]
    if not sources:
        return tokenise([], []), src, last
    parts = [columns.take(np.asarray(rows, dtype=np.int64)) for columns, _, rows in sources.values()]
    positions = np.concatenate([np.asarray(p, dtype=np.int64) for _, p, _ in sources.values()])
    whole = Columns.concat(parts)
    if (positions == np.arange(len(items))).all():
        return whole, src, last
    return whole.take(np.argsort(positions)), src, last


def _rows(
    caps: Sequence[Capability],
    servers: dict[str, str],
    seed: Callable[[], Path | None] | None,
    keys: tuple[list[bytes], list[bytes]] | None = None,
    server_docs: list[Doc] | None = None,
) -> tuple[tuple[Columns, Columns], tuple[_Since | None, _Since | None]]:
    """The tools' and the servers' rows for this catalog (see :func:`_gather`), and where
    each was in the last index's rows; ``seed``: gives an index folder whose rows may be
    reused. Remembered for the next build."""
    loaded: dict[str, Columns | None] = {}

    def seeded(name: str) -> Columns | None:
        if name not in loaded:
            folder = seed() if seed is not None else None
            loaded[name] = None
            if folder is not None:
                try:
                    loaded[name] = Columns.load(folder / name)
                except (OSError, ValueError, KeyError) as exc:
                    logger.debug("toolsearch: not reusing %s (%s)", folder, exc)
        return loaded[name]

    if server_docs is None:
        server_docs = _server_docs(caps, servers)
    tools, tool_src, tool_base = _gather(
        caps, _tool_doc, lambda: seeded("tools.npz"), None if keys is None else keys[0], True, 0
    )
    servers_rows, server_src, server_base = _gather(
        server_docs, lambda d: d, lambda: seeded("servers.npz"), None if keys is None else keys[1], False, 1
    )
    rows = (tools, servers_rows)
    _remember(caps, rows)
    return rows, (
        None if tool_src is None or tool_base is None else _Since(tool_base, tool_src),
        None if server_src is None or server_base is None else _Since(server_base, server_src),
    )


@dataclass(frozen=True, eq=False)
class _Since:
    """Where each new row was in ``base`` (the last index's rows): ``src[i]``, or -1."""

    base: Columns
    src: np.ndarray


def _remember(caps: Sequence[Capability], rows: tuple[Columns, Columns]) -> None:
    """Keep ``caps``' row keys and ``rows`` by key for the next build."""
    global _known_rows
    keys = _key_list(rows[0])
    get = _known.get
    for cap, key in zip(caps, keys, strict=True):
        hit = get(id(cap))
        if hit is None or hit[0] is not cap or hit[1] != key:
            _known[id(cap)] = (cap, key)
    _bound(_known, caps)
    _known_rows = tuple(
        (columns, dict(zip(_key_list(columns), range(len(columns)), strict=True))) for columns in rows
    )


def _key_list(columns: Columns) -> list[bytes]:
    """The rows' keys as ``bytes`` (one C pass, not one conversion per row)."""
    import numpy as np

    return columns.keys.view(np.dtype((np.void, 16))).ravel().tolist()


def _index_folders(cache_root: Path) -> list[Path]:
    """The index folders of this format under ``cache_root``, most recently used first."""
    found: list[tuple[float, Path]] = []
    with contextlib.suppress(OSError):
        for entry in cache_root.iterdir():
            if entry.name.startswith(f"v{INDEX_FORMAT}-"):
                with contextlib.suppress(OSError):
                    found.append((entry.stat().st_mtime, entry))
    return [p for _, p in sorted(found, key=lambda x: -x[0])]


def _last_used(cache_root: Path, other_than: Path) -> Path | None:
    return next((p for p in _index_folders(cache_root) if p != other_than), None)


def _evict(cache_root: Path, keep: Path) -> None:
    """Delete index folders of other formats, those past the :data:`MAX_INDEXES` most
    recently used (never ``keep``), and half-written ones left by a process that died."""
    now = time.time()
    for entry in list(cache_root.iterdir()):
        name = entry.name
        other_format = name.startswith("v") and "-" in name and not name.startswith(f"v{INDEX_FORMAT}-")
        try:
            stale = name.startswith(".v") and now - entry.stat().st_mtime > _STALE_TEMP_S
        except OSError:
            continue
        if other_format or stale:
            shutil.rmtree(entry, ignore_errors=True)
    for old in [p for p in _index_folders(cache_root) if p != keep][MAX_INDEXES - 1 :]:
        shutil.rmtree(old, ignore_errors=True)
