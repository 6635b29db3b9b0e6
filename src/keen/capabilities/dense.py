"""Transformer vectors of one catalog's tools, encoded in the background.

:class:`DenseVectors` takes the texts to encode, finds what the
:class:`~keen.capabilities.vector_cache.VectorCache` already holds, and encodes the rest on
one background thread with the :mod:`~keen.capabilities.encoder`. Until every vector is
there (and the encoder has loaded, which the query needs), :attr:`DenseVectors.ready` is
false and ToolSearch ranks without this signal, saying so in :meth:`DenseVectors.status`:
a search never waits for indexing unless its caller asks to (:meth:`DenseVectors.wait`).
"""

from __future__ import annotations

import atexit
import functools
import logging
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from keen._text import one_line
from keen.capabilities import encoder as _encoder
from keen.capabilities.vector_cache import VectorCache, text_key

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DenseVectors", "dense_key", "shared_cache"]

logger = logging.getLogger(__name__)

# One encoding at a time per process: catalogs rebuilt in quick succession (servers
# connecting one by one) would otherwise encode the same new tools on several threads.
_encoding = threading.Lock()
_running: weakref.WeakSet[DenseVectors] = weakref.WeakSet()


def dense_key(text: str) -> bytes:
    """``text``'s key in the embedding cache (:func:`keen.capabilities.vector_cache.text_key`
    of this model; the cut at the encoder's token limit changes a long text's vector, so
    it is part of the key)."""
    return text_key(_KEY_MODEL, text)


_KEY_MODEL = f"{_encoder.MODEL_ID}:{_encoder.MAX_TOKENS}"


@atexit.register
def _stop_all() -> None:
    """Stop background encoding before the interpreter finalizes: an ONNX Runtime call still
    running on a daemon thread then aborts the process ("terminate called without an
    active exception", exit -6). Each stops within one batch."""
    for dense in list(_running):
        dense.close()
    for dense in list(_running):
        thread = dense._thread  # pyright: ignore[reportPrivateUsage]
        if thread is not None:
            thread.join(timeout=10)


@functools.cache
def shared_cache(folder: Path | None) -> VectorCache:
    """One :class:`VectorCache` per folder per process, so every catalog built in a
    session (one per change of a server's tools) reuses the vectors already encoded."""
    return VectorCache(folder, _encoder.DIM)


class DenseVectors:
    """The encoder's vectors of ``texts``: ``views`` texts per document, view-major (every
    document's first text, then every document's second, ...).

    ``total``, ``done`` and ``missing`` count documents (a document is done when all its
    views are).

    Args:
        texts: the documents' texts, in catalog order, ``views`` blocks of them.
        cache: where vectors are looked up and stored.
        start: begin encoding what is missing at once (on a daemon thread).
        views: texts per document.
        keys: each text's :func:`dense_key`, when the caller has them already (a refreshed
            catalog keeps those of the tools it kept).

    Raises:
        ValueError: ``texts`` is not ``views`` blocks of equal length, or ``keys`` is not
            one per text.
    """

    def __init__(
        self,
        texts: Sequence[str],
        cache: VectorCache,
        *,
        start: bool = True,
        views: int = 1,
        keys: Sequence[bytes] | None = None,
    ) -> None:
        if views < 1 or len(texts) % views:
            raise ValueError(f"{len(texts)} texts are not {views} views of the same documents")
        self._texts = list(texts)
        self._cache = cache
        self.views = views
        self._keys = list(map(dense_key, self._texts)) if keys is None else list(keys)
        if len(self._keys) != len(self._texts):
            raise ValueError(f"{len(self._keys)} keys for {len(self._texts)} texts")
        found = cache.lookup(self._keys)
        self._found = found
        self.total = len(texts) // views
        self.missing = self._missing_documents([v is not None for v in found])
        self.done = self.total - self.missing
        self._distinct: np.ndarray | None = None
        self._rows: np.ndarray | None = None
        self._first: np.ndarray | None = None
        self._encoder: _encoder.SentenceEncoder | None = None
        self._ready = threading.Event()
        self._finished = threading.Event()  # ready, or given up (no encoder)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.failed = ""
        if start:
            self.start()

    # -- state ----------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Every vector is there and the encoder is loaded: the signal can be used."""
        return self._ready.is_set()

    def status(self) -> str:
        """One line on the signal: ``""`` when ready, else why the search ran without it."""
        if self.ready or not self.total:  # no tools: nothing the vectors would rank
            return ""
        if self.failed:
            return f"semantic ranking by wordllama: the transformer model is unavailable ({self.failed})"
        if self.done >= self.total:
            # Every vector is there (from the cache): only the encoder (loading, or another
            # catalog's turn) is missing, which indexing would not change.
            return (
                f"semantic ranking not ready (all {self.total} tools' vectors cached; the transformer"
                " model is still loading): ranked by keywords and wordllama meanwhile"
            )
        return (
            f"semantic vectors not ready ({self.done} of {self.total} tools encoded): ranked by"
            " keywords and wordllama meanwhile; `keen tools index` finishes the index"
        )

    def start(self) -> None:
        """Encode what is missing on a daemon thread (once; later calls do nothing)."""
        with self._lock:
            if self._thread is not None or self._finished.is_set():
                return
            self._thread = threading.Thread(target=self._run, name="keen-dense-index", daemon=True)
            _running.add(self)
            self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until ready or given up, at most ``timeout`` seconds; whether it is ready."""
        self._finished.wait(timeout)
        return self.ready

    def close(self) -> None:
        """Stop encoding at the next batch (what was encoded is kept in the cache)."""
        self._stop.set()

    # -- work -----------------------------------------------------------------

    def _missing_documents(self, have: Sequence[bool]) -> int:
        """How many documents lack a vector of some view (``have``: per text)."""
        import numpy as np

        # One array pass, not a Python loop over every document's views: at 4,312 tools
        # (17,248 texts) the loop was about 10 ms of a refresh before the new tool is findable.
        flags = np.fromiter(have, dtype=bool, count=len(have)).reshape(self.views, self.total)
        return self.total - int(np.count_nonzero(flags.all(axis=0)))

    def _run(self) -> None:
        try:
            self._fill()
        except Exception as exc:  # a background failure must not end the session: rank without it
            self.failed = one_line(str(exc), 200) or type(exc).__name__
            logger.warning("transformer indexing failed (%s); searching with wordllama", self.failed)
        finally:
            self._finished.set()

    def _fill(self) -> None:
        with _encoding:
            self._fill_locked()

    def _fill_locked(self) -> None:
        import numpy as np

        model = _encoder.sentence_encoder()
        if model is None:
            self.failed = _encoder.unavailable_reason() or "it did not load"
            return
        if any(v is None for v in self._found):  # another catalog's thread may have encoded them
            self._found = self._cache.lookup(self._keys)
            self.done = self.total - self._missing_documents([v is not None for v in self._found])
        # One vector per distinct text: a repeated text is neither encoded nor multiplied twice.
        rows, firsts = _distinct_rows(self._keys)
        have = [self._found[i] is not None for i in firsts]
        todo = [row for row, present in enumerate(have) if not present]
        text_rows = rows.tolist()  # per text, its distinct row: for the progress count below
        matrix = np.zeros((len(firsts), _encoder.DIM), dtype=np.float32)
        for row, i in enumerate(firsts):
            vector = self._found[i]
            if vector is not None:
                matrix[row] = vector
        for start in range(0, len(todo), 256):
            if self._stop.is_set():
                return
            chunk = todo[start : start + 256]
            vectors = model.encode([self._texts[firsts[row]] for row in chunk], stop=self._stop)
            if self._stop.is_set():
                return
            matrix[chunk] = vectors
            # Stored as it goes: an index stopped half-way keeps what it encoded.
            self._cache.store([self._keys[firsts[row]] for row in chunk], vectors)
            for row in chunk:
                have[row] = True
            # keen tools index's bar polls it
            self.done = self.total - self._missing_documents([have[row] for row in text_rows])
        self.done = self.total
        self._distinct, self._rows = matrix, rows
        self._first = matrix[rows[: self.total]]  # one object: callers cache by identity
        self._encoder = model
        self._ready.set()

    # -- use ------------------------------------------------------------------

    def query_vector(self, query: str) -> np.ndarray | None:
        """The query's vector, or ``None`` when not ready."""
        if not self.ready or self._encoder is None:
            return None
        return self._encoder.encode_one(query)

    @property
    def docs(self) -> np.ndarray:
        """``(n_docs, 384)`` unit vectors of the documents' first view (only when
        :attr:`ready`)."""
        assert self._first is not None
        return self._first

    @property
    def distinct(self) -> np.ndarray:
        """``(n_distinct, 384)`` unit vectors, one per distinct text (only when
        :attr:`ready`): identical texts have one vector (their cache key is the same), and
        a query's products over these are what :attr:`rows` spreads to every text."""
        assert self._distinct is not None
        return self._distinct

    @property
    def rows(self) -> np.ndarray:
        """``(views * n_docs,)`` per text, view-major, its row in :attr:`distinct` (only
        when :attr:`ready`)."""
        assert self._rows is not None
        return self._rows

    @property
    def all_docs(self) -> np.ndarray:
        """``(views * n_docs, 384)`` unit vectors of every view, view-major (only when
        :attr:`ready`); a new array on every call (:attr:`distinct` by :attr:`rows`)."""
        return self.distinct[self.rows]


def _distinct_rows(keys: Sequence[bytes]) -> tuple[np.ndarray, list[int]]:
    """Per text, the row of its key among the distinct ``keys`` (numbered in order of first
    occurrence), and per row the first text with that key. At 4,310 tools 2,248 of the
    17,240 view texts repeat another (a name said in no other verbs makes the fourth view
    the head; forks repeat whole tools): a query's product over the distinct rows reads 13%
    fewer bytes for the same cosines (docs/search.md, "Query latency")."""
    import numpy as np

    row_of: dict[bytes, int] = {}
    firsts: list[int] = []
    rows = np.empty(len(keys), dtype=np.intp)
    for i, key in enumerate(keys):
        row = row_of.get(key)
        if row is None:
            row = row_of[key] = len(firsts)
            firsts.append(i)
        rows[i] = row
    return rows, firsts
