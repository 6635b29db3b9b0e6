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
    splice,
    static_scores,
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

INDEX_FORMAT = 7
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


def _copy_groups(
    caps: Sequence[Capability],
    hashes: np.ndarray,
    same: np.ndarray | None = None,
    last_groups: np.ndarray | None = None,
) -> np.ndarray:
    """Per capability, the position of the first identical one (itself when unique).

    ``hashes``: each one's :func:`_copy_key` hash. ``same`` (per capability, the row of the
    same object in the last index, or -1) and ``last_groups`` (that index's groups): a
    copy whose object and whose group's first member were in one group there is known
    equal to it; only the others are compared in full (the last catalog's were)."""
    import numpy as np

    n = len(caps)
    if n == 0:
        return np.empty(0, dtype=np.int32)
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    groups = first[inverse].astype(np.int32)
    # Equal hashes are nearly always equal keys; the shared ones are compared in full (two
    # different keys of one hash must not become copies), unless compared last time.
    shared = np.flatnonzero(np.bincount(groups, minlength=n)[groups] > 1)
    members = shared[groups[shared] != shared]
    leads = groups[members]
    if same is not None and last_groups is not None and members.size:
        was, lead_was = same[members], same[leads]
        known = (was >= 0) & (lead_was >= 0)
        known[known] = last_groups[was[known]] == last_groups[lead_was[known]]
        members, leads = members[~known], leads[~known]
    mismatched = [
        lead
        for i, lead in zip(members.tolist(), leads.tolist(), strict=True)
        if _copy_key(caps[i]) != _copy_key(caps[lead])
    ]
    if mismatched:  # a collision: those groups are sorted out by their keys
        exact: dict[tuple[object, ...], int] = {}
        suspect = np.isin(groups, mismatched)
        for i in np.flatnonzero(suspect).tolist():
            groups[i] = exact.setdefault(_copy_key(caps[i]), i)
    return groups


def _copy_hashes(caps: Sequence[Capability]) -> np.ndarray:
    """The hash of each capability's :func:`_copy_key`."""
    import numpy as np

    return np.fromiter((hash(_copy_key(c)) for c in caps), dtype=np.int64, count=len(caps))


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
        static: tuple[Pooled, float],
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
        # The tools' word vectors as their two sums (see _index.Pooled) and a = ln(N + 1):
        # a refresh that changes N moves no vector, and none is made.
        self._pooled, self._a = static
        self._inverse_norms = static[0].inverse_norms(static[1])
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
        self._by_group: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
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
            return cls._assemble(caps, servers, _plan(caps, servers, None), weights)

    @classmethod
    def _assemble(
        cls,
        caps: Sequence[Capability],
        servers: dict[str, str],
        plan: _Plan,
        weights: SearchWeights | None,
        neighbours: tuple[np.ndarray, list[str]] | None = None,
    ) -> ToolSearch:
        """The index of ``caps`` from the :class:`_Plan` of their rows: what depends on the
        whole catalog is updated from the last index by what changed."""
        global _last
        last = _last if plan.based else None
        tool_rows, server_rows = plan.tools.rows, plan.servers.rows
        # Token IDF over the tools' lexical text (their whole description, not only the
        # head that is embedded): a word every tool uses weighs little in any vector.
        df = token_df(tool_rows) if last is None else _df_after(last.tools, plan.tools)
        token_weights = idf_rows(tool_rows, df)
        a, g = weight_parts(len(tool_rows), df)
        tools = _part(None if last is None else last.tools, plan.tools, g, df)
        servers_part = _part(None if last is None else last.servers, plan.servers, g, None)
        hashes = plan.hashes
        groups = _copy_groups(caps, hashes, plan.same, None if last is None else last.groups)
        _last = _Last(
            list(caps),
            *_object_table(caps),
            tools,
            servers_part,
            plan.server_names,
            plan.server_docs,
            dict(servers),
            plan.doc_server,
            hashes,
            groups,
        )
        bm25 = tools.lexical
        index = cls(
            plan.ids,
            plan.doc_server,
            bm25,
            servers_part.lexical,
            (tools.pooled, a),
            servers_part.pooled.vectors(a),
            weights or SearchWeights(),
            groups,
            token_weights,
            _neighbour_terms(bm25, neighbours),
        )
        index._rows = (tool_rows, server_rows)
        index._df = df
        index._server_pooled = servers_part.pooled
        return index

    _rows: tuple[Columns, Columns] | None = None
    _df: np.ndarray | None = None
    _server_pooled: Pooled

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
        import numpy as np

        if cache_root is None:
            return cls.build(caps, servers, weights)
        with _build_lock:
            index: ToolSearch | None = None
            folder: Path | None = None
            if _last is None:  # a new process: the folder, not the rows in memory
                tool_docs = [_tool_doc(c) for c in caps]
                tool_keys = [doc_key(d) for d in tool_docs]
                docs, names = _server_docs(caps, servers)
                server_keys = _server_doc_keys(docs)
                folder = cache_root / _folder_name(
                    b"".join(tool_keys), b"".join(server_keys), [c.id for c in caps]
                )
                if folder.is_dir():
                    try:
                        index = cls._load(folder, caps, servers, (tool_keys, server_keys), weights)
                    except (OSError, ValueError, KeyError, TypeError) as exc:
                        logger.warning("toolsearch cache %s unreadable (%s); rebuilding", folder, exc)
                        shutil.rmtree(folder, ignore_errors=True)  # replaced by the rebuilt one
                if index is None:
                    here = folder
                    plan = _plan(
                        caps,
                        servers,
                        lambda: _last_used(cache_root, here),
                        (tool_docs, tool_keys),
                        (docs, names),
                    )
                    index = cls._assemble(caps, servers, plan, weights)
            else:
                plan = _plan(caps, servers, lambda: _last_used(cache_root, None))
                index = cls._assemble(caps, servers, plan, weights)
            if folder is None:
                assert index._rows is not None
                folder = cache_root / _folder_name(
                    np.ascontiguousarray(index._rows[0].keys).tobytes(),
                    np.ascontiguousarray(index._rows[1].keys).tobytes(),
                    index.ids,
                )
            _write_later(index, cache_root, folder)
            return index

    def _save(self, folder: Path) -> None:
        """Write the index's rows to ``folder`` (renamed into place whole), or mark it used
        when it is there already."""
        import numpy as np

        assert self._rows is not None and self._df is not None
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
            # the rows took several times as long as reading it), and the sums of word
            # vectors, so its first refresh pools only what changed.
            servers_pooled = self._server_pooled
            with (tmp / "assembled.npz").open("wb") as handle:
                np.savez(
                    handle,
                    plain=self._pooled.plain,
                    weighted=self._pooled.weighted,
                    sq=self._pooled.sq,
                    g=self._pooled.g,
                    df=self._df,
                    server_plain=servers_pooled.plain,
                    server_weighted=servers_pooled.weighted,
                    server_sq=servers_pooled.sq,
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
        if _key_list(tool_rows) != keys[0] or _key_list(server_rows) != keys[1]:
            raise ValueError("rows of other documents")
        ids = [c.id for c in caps]
        if meta["ids"] != ids:
            raise ValueError("rows for other capability ids")
        stored = meta["neighbours"]
        tokens = np.asarray(stored["tokens"], dtype=np.int32)
        stems = [str(s) for s in stored["stems"]]
        if len(tokens) != len(stems):
            raise ValueError("neighbour tokens and stems differ in number")
        with np.load(folder / "assembled.npz") as data:
            arrays = {k: data[k] for k in data.files}
        bm25 = Lexical.from_arrays(arrays, "bm25_")
        bm25_servers = Lexical.from_arrays(arrays, "servers_")
        size = word_vectors().embedding.shape[0]
        g, df = arrays["g"], arrays["df"]
        pooled = Pooled(arrays["plain"], arrays["weighted"], arrays["sq"], g)
        server_pooled = Pooled(arrays["server_plain"], arrays["server_weighted"], arrays["server_sq"], g)
        n, n_servers = len(caps), len(server_rows)
        if (
            bm25._n != max(n, 1)  # pyright: ignore[reportPrivateUsage]
            or len(bm25._length) != max(len(tool_rows), 1)  # pyright: ignore[reportPrivateUsage]
            or len(bm25_servers._length) != max(n_servers, 1)  # pyright: ignore[reportPrivateUsage]
            or pooled.plain.shape != (n, DIM)
            or pooled.weighted.shape != (n, DIM)
            or pooled.sq.shape != (n, 3)
            or server_pooled.plain.shape != (n_servers, DIM)
            or server_pooled.weighted.shape != (n_servers, DIM)
            or server_pooled.sq.shape != (n_servers, 3)
            or g.shape != (size,)
            or df.shape != (size,)
            or n_servers != len(servers)
        ):
            raise ValueError("an assembled index of another size")
        a, g_now = weight_parts(len(tool_rows), df)
        if not np.array_equal(g, g_now):
            raise ValueError("word weights that do not fit the document counts")
        docs, names = _server_docs(caps, servers)
        doc_server = _doc_servers(caps, names)
        hashes = _copy_hashes(caps)
        groups = _copy_groups(caps, hashes)
        global _last
        _last = _Last(
            list(caps),
            *_object_table(caps),
            _Part(tool_rows, bm25, pooled, df),
            _Part(server_rows, bm25_servers, server_pooled),
            names,
            docs,
            dict(servers),
            doc_server,
            hashes,
            groups,
        )
        index = cls(
            ids,
            doc_server,
            bm25,
            bm25_servers,
            (pooled, a),
            server_pooled.vectors(a),
            weights or SearchWeights(),
            groups,
            idf_rows(tool_rows, df),
            _neighbour_terms(bm25, (tokens, stems)),
        )
        index._rows = (tool_rows, server_rows)
        index._df = df
        index._server_pooled = server_pooled
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
            * _standardise(self._static_scores(qk)),
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

    def _static_scores(self, query: np.ndarray) -> np.ndarray:
        """Each tool's word-vector cosine with the unit vector ``query``."""
        return static_scores(self._pooled, self._a, self._inverse_norms, query)

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

        if self._by_group is None:
            # The members by group, then catalog order: sorted once per index, not per query.
            pos, grp = self._shared, self._groups[self._shared]
            order = np.lexsort((pos, grp))
            starts = np.flatnonzero(np.r_[True, grp[order][1:] != grp[order][:-1]])
            self._by_group = (pos[order], starts, np.diff(np.r_[starts, order.size]))
        members, starts, sizes = self._by_group
        values = scores[members]
        best = np.repeat(np.maximum.reduceat(values, starts), sizes)
        group = np.repeat(np.arange(len(starts)), sizes)
        # The lead of a group: its first member (in catalog order) with the best score.
        top = np.flatnonzero(values == best)
        first = np.ones(top.size, dtype=bool)
        first[1:] = group[top[1:]] != group[top[:-1]]
        lead = np.zeros(values.size, dtype=bool)
        lead[top[first]] = True
        scores = scores.copy()
        scores[members[~lead]] = -np.inf
        return scores

    def copies(self, position: int, mask: np.ndarray | None = None) -> list[int]:
        """The positions of the other documents identical to the one at ``position``
        (only those ``mask`` allows), in catalog order; ``[]`` when it has none."""
        shared = self._shared
        members = shared[self._groups[shared] == self._groups[position]].tolist()
        return [i for i in members if i != position and (mask is None or bool(mask[i]))]


# -- the rows this process indexed (keen.capabilities._index) ------------------------------

_build_lock = threading.RLock()


@dataclass(eq=False)
class _Part:
    """What an index assembled from its tools' or servers' rows: BM25's postings and the
    pooled sums of word vectors; ``df``: the tools' token document frequencies."""

    rows: Columns
    lexical: Lexical
    pooled: Pooled
    df: np.ndarray | None = None


@dataclass(eq=False)
class _Last:
    """The last index of this process, kept whole so the next catalog's is derived from it
    by what changed: its capability objects (kept alive, so an ``id()`` among
    ``by_object`` is still theirs; identity, not equality: a catalog rebuilt by
    CatalogCache keeps the objects of unchanged servers, and comparing 50,000 dataclasses
    by value costs more than the rest of a refresh), ``by_object``: their ``id()`` values
    sorted, ``order``: the row of each; the parts; per server (sorted by name) its
    document and text; per tool its server row, copy-key hash and copy group. Replaced at
    every build: bounded by one catalog."""

    caps: list[Capability]
    by_object: np.ndarray
    order: np.ndarray
    tools: _Part
    servers: _Part
    server_names: list[str]
    server_docs: list[Doc]
    server_texts: dict[str, str]
    doc_server: np.ndarray
    hashes: np.ndarray
    groups: np.ndarray


_last: _Last | None = None


def _object_table(caps: Sequence[Capability]) -> tuple[np.ndarray, np.ndarray]:
    """``caps``' ``id()`` values sorted, and the position of each (see :class:`_Last`)."""
    import numpy as np

    objects = np.fromiter(map(id, caps), dtype=np.int64, count=len(caps))
    order = np.argsort(objects, kind="stable")
    return objects[order], order


@dataclass(eq=False)
class _Rows:
    """One kind's rows for a new catalog: ``rows``, made of the last index's rows ``take``
    (``-1``: the next of ``added``, in order) and ``src``: the same with each last row
    standing for one new row only (an equal document met again counts as new: its postings
    are added, not moved)."""

    rows: Columns
    take: np.ndarray
    src: np.ndarray
    added: Columns


@dataclass(eq=False)
class _Plan:
    """What a catalog's index is assembled from (:func:`_plan`); ``based``: derived from
    the last index (``take`` and ``src`` point into its rows)."""

    ids: list[str]
    tools: _Rows
    servers: _Rows
    server_names: list[str]
    server_docs: list[Doc]
    doc_server: np.ndarray
    same: np.ndarray
    hashes: np.ndarray
    based: bool


def _part(last: _Part | None, rows: _Rows, g: np.ndarray, df: np.ndarray | None) -> _Part:
    """The parts of ``rows``: from ``last``'s by what changed, else built whole."""
    if last is None:
        return _Part(rows.rows, Lexical(rows.rows), pool_parts(rows.rows, g), df)
    return _Part(
        rows.rows,
        last.lexical.refresh(rows.src, rows.rows),
        repool(last.pooled, rows.take, rows.rows, rows.added, g),
        df,
    )


def _df_after(last: _Part, rows: _Rows) -> np.ndarray:
    """The tools' token document frequencies of ``rows`` from ``last``'s: less the rows gone,
    plus those added or taken twice."""
    import numpy as np

    assert last.df is not None
    size = len(last.df)
    old = rows.take[rows.take >= 0]
    uses = np.bincount(old, minlength=len(last.rows))
    odd = np.flatnonzero(uses != 1)
    df = last.df.astype(np.int64, copy=True)
    if odd.size:
        ptr, lex = _take_lex(last.rows, odd)
        step = np.repeat((uses[odd] - 1).astype(np.int64), np.diff(ptr))
        df += np.bincount(lex, weights=step, minlength=size).astype(np.int64)
    if len(rows.added):
        df += np.bincount(rows.added.lex, minlength=size)
    return df


def _take_lex(columns: Columns, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The IDF token ids of ``rows`` with their offsets."""
    part = columns.take(rows)
    return part.lex_ptr, part.lex


def _plan(
    caps: Sequence[Capability],
    servers: dict[str, str],
    seed: Callable[[], Path | None] | None,
    tool_docs: tuple[list[Doc], list[bytes]] | None = None,
    server_docs: tuple[list[Doc], list[str]] | None = None,
) -> _Plan:
    """The rows of ``caps`` and their servers: from the last index (the same capability
    object, or the same document key), else from the rows of the index folder ``seed``
    gives (many documents new to this process), else tokenised now."""
    import numpy as np

    last = _last
    n = len(caps)
    ids = [c.id for c in caps]
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

    # The same objects as the last index's: a search of the sorted id() values, no lookup
    # per capability in Python.
    same = np.full(n, -1, dtype=np.int64)
    if last is not None and n and len(last.by_object):
        objects = np.fromiter(map(id, caps), dtype=np.int64, count=n)
        at = np.minimum(np.searchsorted(last.by_object, objects), len(last.by_object) - 1)
        hit = last.by_object[at] == objects
        same[hit] = last.order[at[hit]]
    missing = np.flatnonzero(same < 0).tolist()
    if tool_docs is not None:  # made already (a new process keys every tool to find its folder)
        docs = {pos: tool_docs[0][pos] for pos in missing}
        keys = {pos: tool_docs[1][pos] for pos in missing}
    else:
        docs = {pos: _tool_doc(caps[pos]) for pos in missing}
        keys = {pos: doc_key(docs[pos]) for pos in missing}
    tools = _fill(
        same.copy(),
        missing,
        docs,
        keys,
        None if last is None else last.tools.rows,
        lambda: seeded("tools.npz"),
    )
    # Servers: the last index's document of every server none of whose tools changed.
    names = sorted(servers)
    doc_server = _doc_servers(caps, names, same, last)
    if server_docs is not None:
        sdocs = server_docs[0]
    elif last is None:
        sdocs = _server_docs(caps, servers)[0]
    else:
        sdocs = _server_docs_after(caps, servers, names, doc_server, same, last)
    skeys = _server_doc_keys(sdocs)
    server_take = np.full(len(names), -1, dtype=np.int64)
    servers_rows = _fill(
        server_take,
        list(range(len(names))),
        dict(enumerate(sdocs)),
        dict(enumerate(skeys)),
        None if last is None else last.servers.rows,
        lambda: seeded("servers.npz"),
    )
    hashes = np.empty(n, dtype=np.int64)
    kept = same >= 0
    if last is not None:
        hashes[kept] = last.hashes[same[kept]]
    hashes[~kept] = _copy_hashes([caps[i] for i in missing])
    return _Plan(ids, tools, servers_rows, names, sdocs, doc_server, same, hashes, last is not None)


def _fill(
    take: np.ndarray,
    missing: list[int],
    docs: dict[int, Doc],
    keys: dict[int, bytes],
    last: Columns | None,
    seed: Callable[[], Columns | None],
) -> _Rows:
    """The rows of ``take`` (per row, a row of ``last``, or -1) with the ``missing`` ones
    found in ``last`` by key, else in ``seed``'s rows (more than :data:`_SEED_ABOVE`
    documents left), else tokenised."""
    import numpy as np

    if last is not None and missing:
        found, missing = _found_rows(last, missing, keys)
        for pos, row in found.items():
            take[pos] = row
    pieces: dict[int, tuple[Columns, int]] = {}
    seeded = seed() if len(missing) > _SEED_ABOVE else None
    if seeded is not None:
        found, missing = _found_rows(seeded, missing, keys)
        pieces.update((pos, (seeded, row)) for pos, row in found.items())
    if missing:
        fresh = tokenise([docs[pos] for pos in missing], [keys[pos] for pos in missing])
        for row, pos in enumerate(missing):
            pieces[pos] = (fresh, row)
    added = _in_order(pieces)
    base = last if last is not None else tokenise([], [])
    rows = splice(base, take, added)
    src = take
    taken = take[take >= 0]
    if taken.size and int(np.bincount(taken).max()) > 1:
        src = np.full(len(take), -1, dtype=np.int64)
        at = np.flatnonzero(take >= 0)
        _, first = np.unique(taken, return_index=True)
        src[at[first]] = taken[first]
    return _Rows(rows, take, src, added)


def _in_order(pieces: dict[int, tuple[Columns, int]]) -> Columns:
    """The rows ``pieces`` names (position -> its columns and row), by position."""
    import numpy as np

    if not pieces:
        return tokenise([], [])
    by_source: dict[int, tuple[Columns, list[int], list[int]]] = {}
    for pos in sorted(pieces):
        columns, row = pieces[pos]
        entry = by_source.setdefault(id(columns), (columns, [], []))
        entry[1].append(pos)
        entry[2].append(row)
    parts = [c.take(np.asarray(r, dtype=np.int64)) for c, _, r in by_source.values()]
    positions = np.concatenate([np.asarray(p, dtype=np.int64) for _, p, _ in by_source.values()])
    whole = Columns.concat(parts)
    order = np.argsort(positions, kind="stable")
    return whole if (order == np.arange(len(order))).all() else whole.take(order)


def _found_rows(
    columns: Columns, missing: list[int], keys: dict[int, bytes]
) -> tuple[dict[int, int], list[int]]:
    """Of the positions ``missing``, those whose key (``keys``) a row of ``columns`` holds, with
    that row, and the positions still missing, in their order."""
    where = _find_keys(columns, [keys[pos] for pos in missing])
    found: dict[int, int] = {}
    still: list[int] = []
    for pos in missing:
        row = where.get(keys[pos])
        if row is None:
            still.append(pos)
        else:
            found[pos] = row
    return found, still


def _find_keys(columns: Columns, wanted: list[bytes]) -> dict[bytes, int]:
    """The first row of ``columns`` under each of the keys ``wanted`` that one holds: one
    vectorised pass over the rows' keys, then the few candidates checked in full."""
    import numpy as np

    if not wanted or not len(columns):
        return {}
    keys = np.ascontiguousarray(columns.keys)
    heads = keys.view(np.uint64)[:, 0]
    want = np.frombuffer(b"".join(wanted), dtype=np.uint64).reshape(-1, 2)[:, 0]
    wanted_set = set(wanted)
    out: dict[bytes, int] = {}
    for row in np.flatnonzero(np.isin(heads, want)).tolist():
        key = keys[row].tobytes()
        if key in wanted_set and key not in out:
            out[key] = row
    return out


def _doc_servers(
    caps: Sequence[Capability], names: list[str], same: np.ndarray | None = None, last: _Last | None = None
) -> np.ndarray:
    """Per capability, the row of its server among ``names`` (sorted; -1: none): the last
    index's, renumbered, for the same objects."""
    import numpy as np

    row = {name: i for i, name in enumerate(names)}
    out = np.full(len(caps), -1, dtype=np.int32)
    if same is None or last is None:
        todo: list[int] = list(range(len(caps)))
    else:
        kept = same >= 0
        renumber = np.array([row.get(name, -1) for name in last.server_names] + [-1], dtype=np.int32)
        out[kept] = renumber[last.doc_server[same[kept]]]
        todo = np.flatnonzero(~kept).tolist()
    for i in todo:
        out[i] = row.get(caps[i].server or "", -1)
    return out


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


def _server_doc(name: str, text: str, members: list[str]) -> Doc:
    fields = (split_identifier(name), text, " ".join(members))
    return Doc(fields, ". ".join(p for p in fields if p)[: _MAX_DOC_CHARS * 2], None)


def _server_docs(caps: Sequence[Capability], servers: dict[str, str]) -> tuple[list[Doc], list[str]]:
    """Per server (sorted by name): its name, text and tool names, as one document; and the
    names."""
    names = sorted(servers)
    members: dict[str, list[str]] = {name: [] for name in names}
    for cap in caps:
        if cap.server in members:
            members[cap.server].append(_split_name(cap.name))
    return [_server_doc(name, servers[name], members[name]) for name in names], names


def _server_docs_after(
    caps: Sequence[Capability],
    servers: dict[str, str],
    names: list[str],
    doc_server: np.ndarray,
    same: np.ndarray,
    last: _Last,
) -> list[Doc]:
    """:func:`_server_docs`, with the last index's document of every server whose text is
    the same and whose tools are the same objects (a server whose tool list changed, or
    that lost a tool, is made again from its tools)."""
    import numpy as np

    row = {name: i for i, name in enumerate(names)}
    dirty = np.zeros(len(names) + 1, dtype=bool)  # the last: capabilities without a server
    dirty[doc_server[same < 0]] = True
    gone = np.ones(len(last.caps), dtype=bool)
    gone[same[same >= 0]] = False
    renumber = np.array([row.get(name, -1) for name in last.server_names] + [-1], dtype=np.int32)
    dirty[renumber[last.doc_server[gone]]] = True
    before = dict(zip(last.server_names, last.server_docs, strict=True))
    docs: list[Doc | None] = []
    for i, name in enumerate(names):
        doc = before.get(name)
        if doc is None or dirty[i] or last.server_texts.get(name) != servers[name]:
            dirty[i] = True
            docs.append(None)
        else:
            docs.append(doc)
    redo = np.flatnonzero(dirty[:-1])
    if redo.size:
        members: dict[int, list[str]] = {int(i): [] for i in redo.tolist()}
        for pos in np.flatnonzero(np.isin(doc_server, redo)).tolist():
            members[int(doc_server[pos])].append(_split_name(caps[pos].name))
        for i, words in members.items():
            docs[i] = _server_doc(names[i], servers[names[i]], words)
    return [d for d in docs if d is not None]


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
    global _last
    with _build_lock:
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


def _folder_name(tool_keys: bytes, server_keys: bytes, ids: Sequence[str]) -> str:
    digest = hashlib.sha256(tool_keys)
    digest.update(server_keys)
    digest.update("\n".join(ids).encode())
    return f"v{INDEX_FORMAT}-{digest.hexdigest()[:32]}"


def _key_list(columns: Columns) -> list[bytes]:
    """The rows' keys as ``bytes`` (one C pass, not one conversion per row)."""
    import numpy as np

    return np.ascontiguousarray(columns.keys).view(np.dtype((np.void, 16))).ravel().tolist()


def _index_folders(cache_root: Path) -> list[Path]:
    """The index folders of this format under ``cache_root``, most recently used first."""
    found: list[tuple[float, Path]] = []
    with contextlib.suppress(OSError):
        for entry in cache_root.iterdir():
            if entry.name.startswith(f"v{INDEX_FORMAT}-"):
                with contextlib.suppress(OSError):
                    found.append((entry.stat().st_mtime, entry))
    return [p for _, p in sorted(found, key=lambda x: -x[0])]


def _last_used(cache_root: Path, other_than: Path | None) -> Path | None:
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
