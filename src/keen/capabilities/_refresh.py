"""A catalog's search index, assembled from this process's last one by what changed.

An index is made of rows per document (:mod:`keen.capabilities._rows`; the documents:
:mod:`keen.capabilities._documents`) and of what depends on the whole catalog: BM25's
postings and statistics, the pooled sums of word vectors, the token document frequencies
and IDF weights, the copy groups of identical capabilities. :func:`plan` finds each
document's row: in the last index (the same capability object, or the same document key),
else in the rows of the cache folder a new process is given (many documents new to it),
else tokenised now; :func:`assemble` then updates what depends on the whole catalog from the
last index by what changed, so a refresh of one server tokenises and pools that server only.
The last index is kept (:class:`LastIndex`, one per process, replaced at every build).
"""

from __future__ import annotations

import bisect
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from keen.capabilities import _documents
from keen.capabilities._bm25 import Lexical
from keen.capabilities._documents import server_doc, split_name, tool_doc
from keen.capabilities._embed import DIM, word_vectors
from keen.capabilities._neighbours import NeighbourTerms, neighbour_candidates
from keen.capabilities._pooling import Pooled, idf_rows, pool_parts, repool, token_df, weight_parts
from keen.capabilities._rows import Columns, Doc, doc_key, intern, splice, tokenise
from keen.capabilities._sums import ToolSums, build_sums, refresh_sums
from keen.capabilities.descriptor import Capability

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Assembled",
    "IndexPart",
    "LastIndex",
    "Plan",
    "Since",
    "assemble",
    "build",
    "build_lock",
    "copy_groups",
    "copy_hashes",
    "doc_servers",
    "forget_last",
    "keyed_index",
    "known_candidates",
    "last_index",
    "neighbour_terms",
    "object_table",
    "plan",
    "remember",
    "seed_candidates",
    "server_doc_keys",
]

logger = logging.getLogger(__name__)

_SEED_ABOVE = 256
"""Documents new to this process above which the rows of the cache folder used last are
read to find them, rather than tokenising them all."""


@dataclass(eq=False)
class Assembled:
    """What a :class:`~keen.capabilities.search.ToolSearch` ranks with: per document its id
    and its server's row (-1: none), the tools' and the servers' parts, ``a = ln(N + 1)``
    of the word-vector weights, the IDF weight per wordllama token id, the copy group per
    document (:func:`copy_groups`) and the query-word neighbours among the index's terms."""

    ids: list[str]
    doc_server: np.ndarray
    tools: IndexPart
    servers: IndexPart
    a: float
    token_weights: np.ndarray
    groups: np.ndarray
    neighbours: NeighbourTerms


def _copy_key(cap: Capability) -> tuple[object, ...]:
    """What two identical capabilities share (everything the index and a result show)."""
    return (cap.kind, cap.name, cap.title, cap.search_text, cap.params, cap.risk)


def copy_groups(
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


def copy_hashes(caps: Sequence[Capability]) -> np.ndarray:
    """The hash of each capability's :func:`_copy_key`."""
    import numpy as np

    return np.fromiter((hash(_copy_key(c)) for c in caps), dtype=np.int64, count=len(caps))


# -- the rows this process indexed (keen.capabilities._rows) -------------------------------

build_lock = threading.RLock()


@dataclass(eq=False)
class IndexPart:
    """What an index assembled from its tools' or servers' rows: BM25's postings and the
    pooled sums of word vectors (the tools' under row numbers that last, the servers'
    spliced: :mod:`keen.capabilities._sums`); ``df``: the tools' token document
    frequencies."""

    rows: Columns
    lexical: Lexical
    pooled: Pooled | ToolSums
    df: np.ndarray | None = None

    @property
    def sums(self) -> ToolSums:
        """The tools' vector sums."""
        assert isinstance(self.pooled, ToolSums), "the servers' part has no ToolSums"
        return self.pooled

    @property
    def spliced(self) -> Pooled:
        """The servers' vector sums."""
        assert isinstance(self.pooled, Pooled), "the tools' part keeps ToolSums"
        return self.pooled


@dataclass(eq=False)
class LastIndex:
    """The last index of this process, kept whole so the next catalog's is derived from it
    by what changed: its capability objects (kept alive, so an ``id()`` among
    ``by_object`` is still theirs; identity, not equality: a catalog rebuilt by
    CatalogCache keeps the objects of unchanged servers, and comparing 50,000 dataclasses
    by value costs more than the rest of a refresh), ``by_object``: their ``id()`` values
    sorted, ``order``: the row of each; the parts; per server (sorted by name) its
    document and text; per tool its server row, copy-key hash and copy group. Replaced at
    every build: bounded by one catalog."""

    caps: list[Capability]
    tools: IndexPart
    servers: IndexPart
    server_names: list[str]
    server_docs: list[Doc]
    server_texts: dict[str, str]
    doc_server: np.ndarray
    hashes: np.ndarray
    groups: np.ndarray
    source: Sequence[Capability] | None = None
    """The sequence the index was made of (identity: a :class:`Since` that names it gives
    each position's row without matching any object)."""
    _objects: tuple[np.ndarray, np.ndarray] | None = None

    def objects(self) -> tuple[np.ndarray, np.ndarray]:
        """``by_object`` and ``order`` (see the class): made when first asked for, as a
        catalog derived by :class:`Since` never needs them."""
        if self._objects is None:
            self._objects = object_table(self.caps)
        return self._objects


@dataclass(frozen=True, eq=False)
class Since:
    """Where a catalog's capabilities came from: ``caps``, an earlier catalog's sequence
    (never modified), and per position of the new one, the position of the same object
    in it, or -1 (:meth:`keen.capabilities.Catalog.with_servers` knows it from the
    servers it replaced), and the new one's ids. When the last index was made of ``caps``, the new one's rows
    are found from it with no pass over the objects."""

    caps: Sequence[Capability]
    same: np.ndarray
    ids: list[str]
    """The new catalog's ids, in its order."""


_last: LastIndex | None = None


def last_index() -> LastIndex | None:
    """The last index this process assembled or loaded (None: none yet, or forgotten)."""
    return _last


def remember(last: LastIndex | None) -> None:
    """Keep ``last`` as the index the next catalog's is derived from (a loaded one's; None:
    none, as in a new process)."""
    global _last
    _last = last


def forget_last() -> None:
    """Drop the last index: the next one is built as a new process would build it."""
    global _last
    with build_lock:
        _last = None


def keyed_index(tools: IndexPart, servers: IndexPart) -> LastIndex:
    """An index to derive the next one from by its rows' keys only (it has no capability
    objects): a cache folder's, read by a new process whose catalog has no folder of its
    own, so that only what changed is tokenised and pooled (the rows of the servers that
    did not change keep their vector sums, as in a refresh within one process)."""
    import numpy as np

    none = np.zeros(0, dtype=np.int64)
    return LastIndex([], tools, servers, [], [], {}, none.astype(np.int32), none, none.astype(np.int32))


def object_table(caps: Sequence[Capability]) -> tuple[np.ndarray, np.ndarray]:
    """``caps``' ``id()`` values sorted, and the position of each (see :class:`LastIndex`)."""
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
class Plan:
    """What a catalog's index is assembled from (:func:`plan`); ``last``: the index it is
    derived from (``take`` and ``src`` point into its rows), or None: built whole."""

    ids: list[str]
    tools: _Rows
    servers: _Rows
    server_names: list[str]
    server_docs: list[Doc]
    doc_server: np.ndarray
    same: np.ndarray
    hashes: np.ndarray
    last: LastIndex | None


def _part(last: IndexPart | None, rows: _Rows, g: np.ndarray, df: np.ndarray | None) -> IndexPart:
    """The parts of ``rows``: from ``last``'s by what changed, else built whole. The tools'
    part (``df`` given) keeps its vector sums under row numbers that last
    (:mod:`keen.capabilities._sums`); the servers' (a few thousand rows) are spliced."""
    tools = df is not None
    if last is None:
        pooled: Pooled | ToolSums = build_sums(rows.rows, g) if tools else pool_parts(rows.rows, g)
        return IndexPart(rows.rows, Lexical(rows.rows), pooled, df)
    if tools:
        pooled = refresh_sums(last.sums, rows.take, rows.rows, rows.added, g)
    else:
        pooled = repool(last.spliced, rows.take, rows.rows, rows.added, g)
    return IndexPart(rows.rows, last.lexical.refresh(rows.src, rows.rows, last.rows), pooled, df)


def _df_after(last: IndexPart, rows: _Rows) -> np.ndarray:
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


def plan(
    caps: Sequence[Capability],
    servers: dict[str, str],
    seed: Callable[[], Path | None] | None,
    tool_keys: list[bytes] | None = None,
    server_docs: tuple[list[Doc], list[str]] | None = None,
    base: LastIndex | None = None,
    since: Since | None = None,
    found: tuple[np.ndarray, np.ndarray] | None = None,
) -> Plan:
    """The rows of ``caps`` and their servers: from the last index (the same capability
    object, or the same document key), else from the rows of the index folder ``seed``
    gives (many documents new to this process), else tokenised now. ``tool_keys``: every
    tool's row key (:func:`~keen.capabilities._documents.tool_keys`), when made already;
    ``server_docs``: the servers' documents and names, when made already; ``base``: the
    index to derive from in place of this process's last (a cache folder's, loaded by a
    new process: :func:`keyed_index`); ``since``: where ``caps`` came from, when the last
    index was made of that (:class:`Since`); ``found``: per tool and per server (sorted by
    name), its row in ``base`` already known (-1: not known; a new process knows those of
    every server whose digest is the folder's: :func:`~keen.capabilities._documents.
    server_blocks`), so only the others are keyed and looked up."""
    import numpy as np

    last = _last if base is None else base
    n = len(caps)
    ids = since.ids if since is not None and len(since.ids) == n else [c.id for c in caps]
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

    if last is not None and since is not None and last.source is since.caps and len(since.same) == n:
        same = since.same.copy()  # the catalog says which objects it kept, and where
    else:
        # The same objects as the last index's: a search of the sorted id() values, no
        # lookup per capability in Python.
        same = np.full(n, -1, dtype=np.int64)
        if last is not None and n and last.caps:
            by_object, order = last.objects()
            objects = np.fromiter(map(id, caps), dtype=np.int64, count=n)
            at = np.minimum(np.searchsorted(by_object, objects), len(by_object) - 1)
            hit = by_object[at] == objects
            same[hit] = order[at[hit]]
    take = same.copy()
    if found is not None:
        take[same < 0] = found[0][same < 0]
    missing = np.flatnonzero(take < 0).tolist()
    if tool_keys is not None:  # made already (a new process keys every tool to find its folder)
        keys = {pos: tool_keys[pos] for pos in missing}
    else:
        keys = dict(zip(missing, _documents.tool_keys([caps[pos] for pos in missing]), strict=True))
    tools = _fill(
        take,
        missing,
        lambda pos: tool_doc(caps[pos]),
        keys,
        None if last is None else last.tools.rows,
        lambda: seeded("tools.npz"),
    )
    # Servers: the last index's document of every server none of whose tools changed.
    names = sorted(servers)
    doc_server = doc_servers(caps, names, same, last)
    if server_docs is not None:
        sdocs = server_docs[0]
    elif last is None:
        sdocs = _documents.server_docs(caps, servers)[0]
    else:
        sdocs = _server_docs_after(caps, servers, names, doc_server, same, last)
    server_take = np.full(len(names), -1, dtype=np.int64)
    server_missing = list(range(len(names)))
    if last is not None and last.server_docs:
        # A server whose document is the last index's (the same object) keeps its row: no
        # key made, no lookup by key of every server.
        if sdocs == last.server_docs:  # the same objects: a comparison that stops at identity
            same_doc = np.arange(len(sdocs), dtype=np.int64)
        else:
            was = {id(doc): row for row, doc in enumerate(last.server_docs)}
            same_doc = np.fromiter((was.get(id(doc), -1) for doc in sdocs), dtype=np.int64, count=len(sdocs))
        server_take[:] = same_doc
        server_missing = np.flatnonzero(same_doc < 0).tolist()
    elif found is not None:
        server_take[:] = found[1]
        server_missing = np.flatnonzero(server_take < 0).tolist()
    skeys = server_doc_keys([sdocs[i] for i in server_missing])
    servers_rows = _fill(
        server_take,
        server_missing,
        sdocs.__getitem__,
        dict(zip(server_missing, skeys, strict=True)),
        None if last is None else last.servers.rows,
        lambda: seeded("servers.npz"),
    )
    hashes = np.empty(n, dtype=np.int64)
    kept = same >= 0
    if last is not None:
        hashes[kept] = last.hashes[same[kept]]
    hashes[~kept] = copy_hashes([caps[i] for i in np.flatnonzero(~kept).tolist()])
    return Plan(ids, tools, servers_rows, names, sdocs, doc_server, same, hashes, last)


def _fill(
    take: np.ndarray,
    missing: list[int],
    doc: Callable[[int], Doc],
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
        fresh = tokenise([doc(pos) for pos in missing], [keys[pos] for pos in missing])
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


def doc_servers(
    caps: Sequence[Capability],
    names: list[str],
    same: np.ndarray | None = None,
    last: LastIndex | None = None,
) -> np.ndarray:
    """Per capability, the row of its server among ``names`` (sorted; -1: none): the last
    index's, renumbered, for the same objects."""
    import numpy as np

    out = np.full(len(caps), -1, dtype=np.int32)
    if same is None or last is None:
        todo: list[int] = list(range(len(caps)))
    else:
        kept = same >= 0
        if names == last.server_names:  # the same servers: the same rows
            out[kept] = last.doc_server[same[kept]]
        else:
            row = {name: i for i, name in enumerate(names)}
            renumber = np.array([row.get(name, -1) for name in last.server_names] + [-1], dtype=np.int32)
            out[kept] = renumber[last.doc_server[same[kept]]]
        todo = np.flatnonzero(~kept).tolist()
    # names is sorted: a search, not a dictionary of every server per catalog; each server
    # met searched once (a load places every tool, thousands per server name).
    met: dict[str, int] = {}
    for i in todo:
        server = caps[i].server or ""
        row = met.get(server)
        if row is None:
            at = bisect.bisect_left(names, server)
            row = met[server] = at if at < len(names) and names[at] == server else -1
        out[i] = row
    return out


_server_keys: dict[Doc, bytes] = {}


def server_doc_keys(docs: Sequence[Doc]) -> list[bytes]:
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


def _server_docs_after(
    caps: Sequence[Capability],
    servers: dict[str, str],
    names: list[str],
    doc_server: np.ndarray,
    same: np.ndarray,
    last: LastIndex,
) -> list[Doc]:
    """:func:`~keen.capabilities._documents.server_docs`, with the last index's document of every server whose text is
    the same and whose tools are the same objects (a server whose tool list changed, or
    that lost a tool, is made again from its tools)."""
    import numpy as np

    dirty = np.zeros(len(names) + 1, dtype=bool)  # the last: capabilities without a server
    dirty[doc_server[same < 0]] = True
    gone = np.ones(len(last.caps), dtype=bool)
    gone[same[same >= 0]] = False
    docs: list[Doc | None]
    if names == last.server_names and len(last.server_docs) == len(names):
        # The same servers (a refresh of some): the same rows, and their texts compared as
        # one dictionary (a comparison that stops at identity for the unchanged ones).
        dirty[last.doc_server[gone]] = True
        if servers != last.server_texts:
            dirty[:-1] |= np.fromiter(
                (last.server_texts.get(name) != servers[name] for name in names), dtype=bool, count=len(names)
            )
        docs = [None if dirty[i] else doc for i, doc in enumerate(last.server_docs)]
    else:
        row = {name: i for i, name in enumerate(names)}
        renumber = np.array([row.get(name, -1) for name in last.server_names] + [-1], dtype=np.int32)
        dirty[renumber[last.doc_server[gone]]] = True
        before = dict(zip(last.server_names, last.server_docs, strict=True))
        docs = []
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
            members[int(doc_server[pos])].append(split_name(caps[pos].name))
        for i, words in members.items():
            docs[i] = server_doc(names[i], servers[names[i]], words)
    return [d for d in docs if d is not None]


_stored_candidates: tuple[np.ndarray, tuple[str, ...]] | None = None


def seed_candidates(tokens: np.ndarray, stems: Sequence[str]) -> None:
    """Take the neighbour candidates (:func:`~keen.capabilities._neighbours.neighbour_candidates`)
    as a cache folder stored them, so this process does not stem them again (about 0.2 s of
    a new process's first refresh after a warm load). Ignored once they are known."""
    global _stored_candidates
    if _stored_candidates is None and len(tokens) == len(stems):
        _stored_candidates = (tokens, tuple(stems))


def known_candidates() -> tuple[np.ndarray, tuple[str, ...]] | None:
    """The neighbour candidates when this process has them (computed or seeded), else None."""
    if _stored_candidates is not None:
        return _stored_candidates
    return neighbour_candidates() if _candidates.cache_info().currsize else None


@functools.cache
def _candidates() -> tuple[np.ndarray, tuple[str, ...], np.ndarray, np.ndarray]:
    """The query-word neighbour candidates (:func:`~keen.capabilities._neighbours.
    neighbour_candidates`, or those a cache folder stored: :func:`seed_candidates`) with
    their stems' term ids and their unit vectors."""
    import numpy as np

    tokens, stems = _stored_candidates if _stored_candidates is not None else neighbour_candidates()
    table = word_vectors().embedding
    if len(tokens) and (int(tokens.min()) < 0 or int(tokens.max()) >= len(table)):
        # A folder's stored candidates that this vocabulary cannot hold (a damaged or foreign
        # folder of the same format): computed again, not an IndexError at every refresh.
        tokens, stems = neighbour_candidates()
    vectors = table[tokens.astype(np.int64)] if len(tokens) else np.zeros((0, DIM), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 1e-12)
    return tokens, stems, np.array(intern(list(stems)), dtype=np.int64), unit.astype(np.float32)


def neighbour_terms(bm25: Lexical, stored: tuple[np.ndarray, list[str]] | None) -> NeighbourTerms:
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


def assemble(
    caps: Sequence[Capability],
    servers: dict[str, str],
    plan: Plan,
    neighbours: tuple[np.ndarray, list[str]] | None = None,
) -> Assembled:
    """The index of ``caps`` from the :class:`Plan` of their rows: what depends on the
    whole catalog is updated from the last index by what changed, and the result kept as
    the last index. Call with :data:`build_lock` held."""
    global _last
    last = plan.last
    tool_rows = plan.tools.rows
    # Token IDF over the tools' lexical text (their whole description, not only the
    # head that is embedded): a word every tool uses weighs little in any vector.
    df = token_df(tool_rows) if last is None else _df_after(last.tools, plan.tools)
    a, g = weight_parts(len(tool_rows), df)
    tools = _part(None if last is None else last.tools, plan.tools, g, df)
    servers_part = _part(None if last is None else last.servers, plan.servers, g, None)
    groups = copy_groups(caps, plan.hashes, plan.same, None if last is None else last.groups)
    _last = LastIndex(
        list(caps),
        tools,
        servers_part,
        plan.server_names,
        plan.server_docs,
        dict(servers),
        plan.doc_server,
        plan.hashes,
        groups,
        caps,
    )
    return Assembled(
        plan.ids,
        plan.doc_server,
        tools,
        servers_part,
        a,
        idf_rows(tool_rows, df),
        groups,
        neighbour_terms(tools.lexical, neighbours),
    )


def build(caps: Sequence[Capability], servers: dict[str, str], since: Since | None = None) -> Assembled:
    """The index of ``caps`` (in this order) with their ``servers``' texts, derived from the
    last index of this process: only new or changed documents are tokenised (``since``:
    where ``caps`` came from, :class:`Since`)."""
    with build_lock:
        return assemble(caps, servers, plan(caps, servers, None, since=since))
