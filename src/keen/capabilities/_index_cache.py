"""Search indexes kept on disk: ``$KEEN_HOME/cache/toolsearch/v<format>-<key>/``.

A folder holds one catalog's index: its rows per document (``tools.npz``,
``servers.npz``), the index assembled from them (``assembled.npz``: BM25's postings and
statistics, the sums of word vectors with the weights they were pooled with and the
products that correct them, the token document frequencies) and ``meta.json``
(the capability ids, the query-word neighbours and every candidate, each server's digest
and its tools' runs of positions: :func:`~keen.capabilities._documents.server_blocks`).
``key`` is a hash of those digests and runs (so of every field a document is made from
and every id), so a catalog's folder is found without reading any. A new process loads
its catalog's folder whole, or, when there is none, derives the index from the folder
used last: every server whose digest is the same takes its rows from there, the others'
are found by key or tokenised (:mod:`keen.capabilities._refresh`); a folder is written on a
background thread, whole, and renamed into place, so a reader never sees half of one. The
:data:`MAX_INDEXES` most recently used folders are kept; those of other formats and
half-written ones left by a process that died are deleted.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keen.capabilities import _refresh
from keen.capabilities._bm25 import Lexical
from keen.capabilities._documents import server_blocks, server_docs
from keen.capabilities._documents import tool_keys as tool_row_keys
from keen.capabilities._embed import DIM, word_vectors
from keen.capabilities._pooling import Pooled, idf_rows, weight_parts
from keen.capabilities._refresh import Assembled, IndexPart, LastIndex, Since
from keen.capabilities._rows import Columns, Doc
from keen.capabilities._sums import load_sums, spare_rows
from keen.capabilities.descriptor import Capability

if TYPE_CHECKING:
    import numpy as np

__all__ = ["INDEX_FORMAT", "MAX_INDEXES", "cached", "flush", "forget"]

logger = logging.getLogger(__name__)

INDEX_FORMAT = 9
"""Bumped when the cached index layout or its document text changes (folders of other
formats are deleted when an index is saved)."""
MAX_INDEXES = 4
"""How many catalogs' index folders the cache keeps (the most recently used): a folder is
written per tool list, and a session whose servers change would otherwise leave one per
change behind."""
_Blocks = dict[str, tuple[str, list[tuple[int, int]]]]
"""Per server, its digest and its tools' runs (:func:`~keen.capabilities._documents.server_blocks`)."""
_READ_PIECE = 1 << 22
"""Bytes read at once into an array's buffer (:func:`_with_room`)."""
_STALE_TEMP_S = 3600.0
"""A half-written index folder older than this was left by a process that died: removed."""


_UNREADABLE = (OSError, ValueError, KeyError, TypeError, EOFError, RecursionError, zipfile.BadZipFile)
"""What reading a saved index raises when a file of it is damaged (:func:`_read`): rebuilt."""


def cached(
    caps: Sequence[Capability], servers: dict[str, str], cache_root: Path, since: Since | None = None
) -> Assembled:
    """The index of ``caps``: built from the documents this process indexed last (only new
    or changed ones tokenised), else loaded from ``cache_root/v<format>-<key>`` when there,
    else built (reusing the rows of the folder used last) and saved there. The folder keeps
    :data:`MAX_INDEXES` catalogs, the most recently used. A folder that cannot be read is
    rebuilt; one that cannot be written is logged and skipped. ``since``: where ``caps``
    came from (:class:`~keen.capabilities._refresh.Since`)."""

    with _refresh.build_lock:
        index: Assembled | None = None
        folder: Path | None = None
        blocks: _Blocks | None = None
        if _refresh.last_index() is None:  # a new process: the folder, not the rows in memory
            blocks = server_blocks(caps, servers)
            folder = cache_root / _folder_name(caps, servers, blocks)
            docs, names = server_docs(caps, servers)
            if folder.is_dir():
                try:
                    index = _load(folder, caps, servers, (docs, names))
                except _UNREADABLE as exc:
                    logger.warning("toolsearch cache %s unreadable (%s); rebuilding", folder, exc)
                    shutil.rmtree(folder, ignore_errors=True)  # replaced by the rebuilt one
            if index is None:
                # Derived from the folder used last as from this process's last index: its
                # rows found by key, only what changed tokenised and pooled.
                here = folder
                base, found = _base(_last_used(cache_root, here), caps, blocks, names)
                plan = _refresh.plan(
                    caps,
                    servers,
                    None if base is not None else lambda: _last_used(cache_root, here),
                    None if base is not None else tool_row_keys(caps),
                    (docs, names),
                    base,
                    found=found,
                )
                index = _refresh.assemble(caps, servers, plan)
        else:
            plan = _refresh.plan(caps, servers, lambda: _last_used(cache_root, None), since=since)
            index = _refresh.assemble(caps, servers, plan)
        _write_later(index, cache_root, folder, caps, servers, blocks)
        return index


def _base(
    folder: Path | None, caps: Sequence[Capability], blocks: _Blocks, names: list[str]
) -> tuple[LastIndex | None, tuple[np.ndarray, np.ndarray] | None]:
    """The index saved in ``folder`` to derive a new catalog's from by its rows' keys
    (:func:`keen.capabilities._refresh.keyed_index`), and the rows of it already known for
    ``caps`` and their servers (``names``, sorted): those of every server whose block digest
    (``blocks``) is the folder's (:func:`_rows_by_block`). None when there is none or it is unreadable
    (the catalog's index is then built reusing what rows can be read)."""
    if folder is None:
        return None, None
    try:
        meta, tools, server_part = _read(folder)
    except _UNREADABLE as exc:
        logger.debug("toolsearch: not deriving from %s (%s)", folder, exc)
        return None, None
    found = _rows_by_block(meta, len(caps), blocks, names, len(tools.rows))
    return _refresh.keyed_index(tools, server_part), found


def _rows_by_block(
    meta: dict[str, Any], n: int, blocks: _Blocks, names: list[str], rows: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """Per tool of a catalog of ``n`` (its ``blocks``: :func:`~keen.capabilities._documents.
    server_blocks`) and per server of ``names``, its row in the folder whose ``meta.json``
    is ``meta`` (of ``rows`` tool rows), or -1: every server whose digest is the one stored there keeps its
    tools' rows in order, and its own row; the other tools are keyed and looked up. None
    when the folder stored no digests (an index saved without them) or they do not fit it."""
    import numpy as np

    stored, stored_names = meta.get("blocks"), meta.get("server_names")
    if not isinstance(stored, dict) or not isinstance(stored_names, list):
        return None
    tools = np.full(n, -1, dtype=np.int64)
    server_rows = np.full(len(names), -1, dtype=np.int64)
    was_row = {name: row for row, name in enumerate(stored_names)}
    row_of = {name: row for row, name in enumerate(names)}
    try:
        for name, (digest, spans) in blocks.items():
            was = stored.get(name)
            if not was or was[0] != digest:
                continue
            if spans:
                here, there = _positions(spans), _positions(was[1])
                if len(here) != len(there) or int(there.max()) >= rows or int(there.min()) < 0:
                    return None
                tools[here] = there
            if name in row_of and name in was_row:
                server_rows[row_of[name]] = was_row[name]
    except (TypeError, ValueError, IndexError):  # digests of another layout
        return None
    return tools, server_rows


def _positions(spans: Sequence[Sequence[int]]) -> np.ndarray:
    """The positions of the ``(start, end)`` runs ``spans``, in order."""
    import numpy as np

    return np.concatenate([np.arange(int(a), int(b), dtype=np.int64) for a, b in spans])


def _save(
    index: Assembled, folder: Path, blocks: _Blocks, server_names: list[str], below: Path | None = None
) -> None:
    """Write ``index`` to ``folder`` (renamed into place whole), or mark it used when it is
    there already. Its ``meta.json`` keeps its catalog's per-server digests and tool runs
    (``blocks``: :func:`~keen.capabilities._documents.server_blocks`) and its servers'
    names (sorted: the servers' rows), so that a new process whose catalog changed some
    servers takes the others' rows by digest (:func:`_rows_by_block`).

    ``below``: a folder that must still exist (the KEEN_HOME, or its nearest folder, when
    the search ran): the folders between it and ``folder`` are made one at a time, so a
    ``below`` removed meanwhile raises ``FileNotFoundError`` and is not made again."""
    import numpy as np

    df = index.tools.df
    assert df is not None  # the tools' part carries the document frequencies
    candidates = _refresh.known_candidates()
    if (folder / "meta.json").is_file():
        with contextlib.suppress(OSError):
            os.utime(folder)
        return
    if below is None:
        folder.parent.mkdir(parents=True, exist_ok=True)
    else:
        for part in reversed([folder.parent, *folder.parent.parents]):
            if below in part.parents:
                part.mkdir(exist_ok=True)  # not parents=True: a removed ``below`` is not made again
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        tools, server_part = index.tools, index.servers
        tools.rows.save(tmp / "tools.npz")
        server_part.rows.save(tmp / "servers.npz")
        # The assembled index too: a new process loads it as it is (assembling it from the
        # rows took several times as long as reading it), and the sums of word vectors, so
        # its first refresh pools only what changed.
        spliced = server_part.spliced
        arrays: dict[str, Any] = {
            **tools.sums.arrays(),
            "g": tools.sums.g,
            "df": df,
            "server_plain": spliced.plain,
            "server_weighted": spliced.weighted,
            "server_sq": spliced.sq,
            **tools.lexical.to_arrays("bm25_"),
            **server_part.lexical.to_arrays("servers_"),
        }
        with (tmp / "assembled.npz").open("wb") as handle:
            np.savez(handle, **arrays)
        neighbours = index.neighbours
        meta = {
            "ids": index.ids,
            "neighbours": {"tokens": neighbours.tokens.tolist(), "stems": neighbours.stems},
            # Every candidate too (the same for every catalog): a process that loads this
            # folder then stems none of them for its first refresh.
            **(
                {}
                if candidates is None
                else {"candidates": {"tokens": candidates[0].tolist(), "stems": list(candidates[1])}}
            ),
            "blocks": blocks,
            "server_names": server_names,
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


def _read(folder: Path) -> tuple[dict[str, Any], IndexPart, IndexPart]:
    """The index saved in ``folder``: its ``meta.json`` and the tools' and servers' parts.
    Raises ``ValueError`` (or ``OSError``, ``KeyError``, ``TypeError``, ``EOFError``,
    ``zipfile.BadZipFile``: a file cut short; ``RecursionError``: a meta.json nested past the parser) when it is unreadable or its parts do not fit
    together."""
    import numpy as np

    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    tool_rows = Columns.load(folder / "tools.npz")
    server_rows = Columns.load(folder / "servers.npz")
    roomy = ("plain", "weighted")
    with np.load(folder / "assembled.npz") as data:
        arrays = {k: data[k] for k in data.files if k not in roomy}
    # The tools' sums read into buffers with room for the rows a refresh appends: grown
    # later, each would be copied whole (2 x 51 MB at 50,000 tools) by the first refresh.
    arrays |= _with_room(folder / "assembled.npz", roomy, len(tool_rows), spare_rows(len(tool_rows)))
    bm25 = Lexical.from_arrays(arrays, "bm25_")
    bm25_servers = Lexical.from_arrays(arrays, "servers_")
    size = word_vectors().embedding.shape[0]
    g, df = arrays["g"], arrays["df"]
    server_pooled = Pooled(arrays["server_plain"], arrays["server_weighted"], arrays["server_sq"], g)
    n, n_servers = len(tool_rows), len(server_rows)
    if (
        bm25._n != max(n, 1)  # pyright: ignore[reportPrivateUsage]
        or len(bm25._length) != max(n, 1)  # pyright: ignore[reportPrivateUsage]
        or len(bm25_servers._length) != max(n_servers, 1)  # pyright: ignore[reportPrivateUsage]
        or server_pooled.plain.shape != (n_servers, DIM)
        or server_pooled.weighted.shape != (n_servers, DIM)
        or server_pooled.sq.shape != (n_servers, 3)
        or g.shape != (size,)
        or df.shape != (size,)
        or len(meta["ids"]) != n
    ):
        raise ValueError("an assembled index of another size")
    if not np.array_equal(g, weight_parts(n, df)[1]):
        raise ValueError("word weights that do not fit the document counts")
    sums = load_sums(arrays, tool_rows, g)
    return meta, IndexPart(tool_rows, bm25, sums, df), IndexPart(server_rows, bm25_servers, server_pooled)


def _with_room(path: Path, names: Sequence[str], stored: int, rows: int) -> dict[str, np.ndarray]:
    """The 2-d float32 arrays ``names`` of ``stored`` rows each in the ``.npz`` at ``path``
    (as ``np.savez`` writes them: uncompressed), each read into the first rows of a buffer of
    ``rows`` rows (at least ``stored``). Raises ``ValueError`` (or ``OSError``, ``KeyError``)
    when one is missing, unreadable, not such an array or of another row count (the buffer's
    spare rows would pass for the missing ones)."""
    import numpy as np

    out: dict[str, np.ndarray] = {}
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{path.name}: {exc}") from exc
    with archive:
        for name in names:
            with archive.open(f"{name}.npy") as handle:
                version = np.lib.format.read_magic(handle)  # pyright: ignore[reportUnknownMemberType]
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)  # pyright: ignore[reportUnknownMemberType]
                else:
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)  # pyright: ignore[reportUnknownMemberType]
                if fortran or dtype != np.dtype(np.float32) or len(shape) != 2:
                    raise ValueError(f"{name}: not a 2-d float32 array")
                if shape[0] != stored:
                    raise ValueError(f"{name}: {shape[0]} rows for {stored} tools")
                buffer = np.empty((max(rows, stored), shape[1]), dtype=np.float32)
                out[name] = buffer
                if not shape[0] * shape[1]:
                    continue  # no rows (a catalog with no tools): nothing to read, and no view to cast
                # Read in place by pieces: no bytes object of the whole array between
                # (numpy's stubs give ndarray no buffer protocol).
                view = memoryview(buffer[: shape[0]]).cast("B")  # pyright: ignore[reportArgumentType, reportUnknownMemberType]
                got = 0
                while got < view.nbytes:
                    piece = handle.read(min(_READ_PIECE, view.nbytes - got))
                    if not piece:
                        raise ValueError(f"{name}: shorter than its header says")
                    view[got : got + len(piece)] = piece
                    got += len(piece)
    return out


def _load(
    folder: Path,
    caps: Sequence[Capability],
    servers: dict[str, str],
    docs: tuple[list[Doc], list[str]],
) -> Assembled:
    """The index saved in ``folder`` (named by :func:`_folder_name` of ``caps`` and
    ``servers``; ``docs``: the servers' documents and names); raises ``ValueError`` (or
    ``OSError``, ``KeyError``) when it is unreadable or of other capabilities."""
    import numpy as np

    meta, tools, servers_part = _read(folder)
    ids = [c.id for c in caps]
    if meta["ids"] != ids:
        raise ValueError("rows for other capability ids")
    if len(servers_part.rows) != len(servers):
        raise ValueError("an assembled index of another size")
    stored = meta["neighbours"]
    tokens = np.asarray(stored["tokens"], dtype=np.int32)
    stems = [str(s) for s in stored["stems"]]
    if len(tokens) != len(stems):
        raise ValueError("neighbour tokens and stems differ in number")
    every = meta.get("candidates")
    if isinstance(every, dict) and _refresh.known_candidates() is None:
        _refresh.seed_candidates(
            np.asarray(every["tokens"], dtype=np.int32), [str(s) for s in every["stems"]]
        )
    assert tools.df is not None  # _read gives the tools' part its document frequencies
    a = weight_parts(len(tools.rows), tools.df)[0]
    tools.pooled = tools.sums.folded_for(a)  # one array per query until the next refresh
    names = docs[1]
    doc_server = _refresh.doc_servers(caps, names)
    hashes = _refresh.copy_hashes(caps)
    groups = _refresh.copy_groups(caps, hashes)
    _refresh.remember(
        LastIndex(
            list(caps),
            tools,
            servers_part,
            names,
            docs[0],
            dict(servers),
            doc_server,
            hashes,
            groups,
            caps,
        )
    )
    return Assembled(
        ids,
        doc_server,
        tools,
        servers_part,
        a,
        idf_rows(tools.rows, tools.df),
        groups,
        _refresh.neighbour_terms(tools.lexical, (tokens, stems)),
    )


def forget() -> None:
    """Drop the rows this process keeps from its last index: the next one is loaded from the
    cache folder or built as a new process would (benchmarks and tests use it). Waits for
    the cache folders being written (:func:`flush`)."""
    flush()
    _refresh.forget_last()


_writes: list[tuple[threading.Thread, threading.Event]] = []
_WRITE_DELAY_S = 2.0
"""How long a new index waits before it is written to its cache folder (:func:`flush`
writes at once; so does the process's exit)."""
_writes_lock = threading.Lock()
_one_writer = threading.Lock()


def _write_later(
    index: Assembled,
    cache_root: Path,
    folder: Path | None,
    caps: Sequence[Capability],
    servers: dict[str, str],
    blocks: _Blocks | None,
) -> None:
    """Save ``index`` (of ``caps`` and ``servers``, whose :func:`~keen.capabilities.
    _documents.server_blocks` are ``blocks`` when made already) to ``folder`` (None: named
    there, by :func:`_folder_name`) and evict old folders on a background thread: the search that
    needed the index waits neither for the disk nor for hashing the catalog (a folder is
    written whole and renamed into place, so a reader never sees half of one; one left
    half-written by a process killed meanwhile is removed later, see :func:`_evict`)."""
    caps = list(caps)  # as they are now: the caller's list may change meanwhile
    servers = dict(servers)
    # The nearest folder that exists now (the KEEN_HOME of a first search): a temporary
    # KEEN_HOME removed before the write (keen demo's) must not be made again by it.
    there = next((p for p in (cache_root, *cache_root.parents) if p.is_dir()), None)

    def write() -> None:
        # One at a time: two evictions at once, each keeping its own folder, would delete
        # more than either alone.
        with _one_writer:
            # Checked once the lock is held: a write that waited for it may find the home
            # removed meanwhile (and _save makes nothing above ``there``, should it go now).
            if there is not None and not there.is_dir():
                return
            try:
                made = server_blocks(caps, servers) if blocks is None else blocks
                target = folder if folder is not None else cache_root / _folder_name(caps, servers, made)
                _save(index, target, made, sorted(servers), there)
                _evict(cache_root, target)
            except OSError as exc:
                if there is not None and not there.is_dir():
                    return  # removed while this write ran: nothing to cache into
                logger.warning("cannot cache the tool search index in %s: %s", cache_root, exc)

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


def _folder_name(
    caps: Sequence[Capability],
    servers: dict[str, str],
    blocks: dict[str, tuple[str, list[tuple[int, int]]]] | None = None,
) -> str:
    """The folder of ``caps``' index with ``servers``' texts: a hash of every server's
    block digest and its tools' runs (``blocks``, :func:`~keen.capabilities._documents.
    server_blocks`, made when not given), so every field a document is made from, each
    server's name and text and the ids, in order. A hash per server, not per tool: a new
    process names the folder of its catalog before it reads it, and the same digests find
    the rows of the folder used last when there is none (:func:`_rows_by_block`)."""
    blocks = server_blocks(caps, servers) if blocks is None else blocks
    digest = hashlib.sha256(json.dumps(sorted(blocks.items())).encode("utf-8", "surrogatepass"))
    return f"v{INDEX_FORMAT}-{digest.hexdigest()[:32]}"


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
