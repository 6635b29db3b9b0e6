"""The keyword signal: BM25 over the rows' postings, updated by what changed.

:class:`Lexical` is BM25 as ``bm25s`` computes it (Lucene variant: ``idf = ln(1 + (N -
df + 0.5) / (df + 0.5))``, ``tf / (tf + k1 (1 - b + b dl / avgdl))``, ``k1`` 1.5, ``b``
0.75; Kamphuis et al., ECIR 2020), with the same float types and the same score sums,
computed per query term from the postings instead of from token lists. It is made from the
rows of :mod:`keen.capabilities._rows`; for a catalog that differs from the last one by one
server its postings are merged (:meth:`Lexical.refresh`) and its IDF and average length
recomputed in one vectorised pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from keen.capabilities._rows import Columns, Doc, Vocab, gather_ragged, stored_terms, term_words, tokenise

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "LEXICAL_APPENDED",
    "LEXICAL_TOMBSTONES",
    "Lexical",
]

K1 = 1.5
B = 0.75


class Lexical:
    """BM25 over the rows of a :class:`~keen.capabilities._rows.Columns` (the interface
    ToolSearch used of bm25s: :attr:`vocab_dict` and :meth:`get_scores_from_ids`). The
    vocabulary holds the terms of these rows only, so a query word no document uses is not
    in it.

    The index keeps each term's postings (row, count) by process-wide term id, and each
    term's IDF over all of them; a term's scores are computed when a query first asks for it,
    with bm25s's operations on the same float types, so they are bit for bit bm25s's, and
    kept with the index (:meth:`add_scores` and :meth:`holding` read them for one term).

    Rows keep their number for as long as they live, as the tools' vector sums do
    (:mod:`keen.capabilities._sums`): :meth:`refresh` derives the index of a catalog that
    kept most rows of this one by appending the new rows' postings to a small second
    segment (sorted by term) and leaving the dropped rows' postings in place as tombstones,
    with a map from each document to its row; the document frequencies are updated by the
    rows gone and added, and the IDF and the average length recomputed from them. So a
    refresh costs the changed rows and a pass over the terms, not over every posting. A
    query scores the rows of both segments (each row is in one) and takes each
    document's. Past :data:`LEXICAL_TOMBSTONES` of the rows dropped, or a second segment
    past :data:`LEXICAL_APPENDED` of the first, the index is built again compact."""

    def __init__(self, columns: Columns) -> None:
        import numpy as np

        n = len(columns)
        if n == 0:  # bm25s indexed one empty document for an empty catalog
            columns = tokenise([Doc([], "", None)], [b"\0" * 16])
        term_ids = columns.term_ids
        rows = np.repeat(np.arange(len(columns), dtype=np.int32), np.diff(columns.term_ptr))
        order = np.argsort(term_ids, kind="stable")
        self._finish(term_ids[order], rows[order], columns.tf[order], columns.length, n if n else 1)

    def _finish(
        self, terms: np.ndarray, rows: np.ndarray, tf: np.ndarray, length: np.ndarray, n: int
    ) -> None:
        """Set the index from postings sorted by term (row = document)."""
        import numpy as np

        size = max(len(term_words()), int(terms[-1]) + 1 if terms.size else 0)
        df = np.bincount(terms, minlength=size)
        self._indptr = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(df, out=self._indptr[1:])
        self._indices = rows.astype(np.int32, copy=False)
        self._tf = tf.astype(np.float32, copy=False)
        self._length = length.astype(np.int64, copy=False)
        self._n = n
        self._rows: np.ndarray | None = None
        """Each document's row (None: row = document)."""
        self._extra = _no_extra()
        self._set_stats(df, len(self._length), int(self._length.sum()))

    def _set_stats(self, df: np.ndarray, n: int, total_length: int) -> None:
        """IDF and average length of ``n`` documents with these document frequencies and
        the sum of their lengths."""
        import numpy as np

        self._df = df
        # As bm25s computes them (float64, stored as float32); the mean of integer lengths
        # is their exact sum over their number, as numpy's mean of them is.
        self._idf = np.log(1 + (n - df + 0.5) / (df + 0.5)).astype(np.float32)
        self._avgdl = np.float64(total_length) / np.float64(n)
        self._total_length = total_length
        self.vocab_dict = Vocab(df)
        """Term -> id (process-wide)."""
        # Per term asked for, its rows and their scores (see _scored); these statistics' own.
        self._by_term: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._row_documents: np.ndarray | None = None
        """Per row, its document (-1: no document uses the row any more); see :meth:`_documents`."""

    @property
    def documents(self) -> int:
        """The documents scored (a catalog's positions; 1 for an empty catalog)."""
        return self._n

    def refresh(self, src: np.ndarray, columns: Columns, old: Columns) -> Lexical:
        """The index of ``columns``, whose document ``i`` is this index's document ``src[i]``
        (the same document, of this index's rows ``old``) or new (``-1``)."""
        import numpy as np

        n_old = len(old)
        if len(columns) == 0 or n_old == 0 or self._n != n_old:  # bm25s's one empty document
            return Lexical(columns)
        kept = src >= 0
        fresh = np.flatnonzero(~kept)
        added = columns.take(fresh)
        store = len(self._length)
        extra_terms, extra_rows, extra_tf = self._extra
        if store + len(fresh) - len(columns) > LEXICAL_TOMBSTONES * (store + len(fresh)) or len(
            extra_terms
        ) + len(added.term_ids) > LEXICAL_APPENDED * max(len(self._indices), 1):
            return Lexical(columns)  # compact again
        old_rows = self._rows if self._rows is not None else np.arange(n_old, dtype=np.int64)
        live = int(np.count_nonzero(kept))
        rows = np.empty(len(columns), dtype=np.int64)
        rows[kept] = old_rows[src[kept]]
        rows[fresh] = store + np.arange(len(fresh), dtype=np.int64)
        gone = np.ones(n_old, dtype=bool)
        gone[src[kept]] = False
        dropped = old.take(np.flatnonzero(gone))
        size = max(len(term_words()), len(self._df))
        df = np.zeros(size, dtype=np.int64)
        df[: len(self._df)] = self._df
        df -= np.bincount(dropped.term_ids, minlength=size)
        df += np.bincount(added.term_ids, minlength=size)
        total = self._total_length - int(dropped.length.sum()) + int(added.length.sum())
        new_terms = added.term_ids
        new_rows = np.repeat(rows[fresh].astype(np.int32), np.diff(added.term_ptr))
        terms = np.concatenate([extra_terms, new_terms])
        order = np.argsort(terms, kind="stable")
        out = Lexical.__new__(Lexical)
        out._indptr, out._indices, out._tf = self._indptr, self._indices, self._tf
        out._length = np.concatenate([self._length, added.length.astype(np.int64)])
        out._n = len(columns)
        out._rows = rows
        out._extra = (
            terms[order],
            np.concatenate([extra_rows, new_rows])[order],
            np.concatenate([extra_tf, added.tf.astype(np.float32)])[order],
        )
        out._set_stats(df, live + len(fresh), total)
        return out

    def _postings(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every live posting as (term, document, count), sorted by term."""
        import numpy as np

        terms = np.repeat(np.arange(len(self._indptr) - 1, dtype=np.int64), np.diff(self._indptr))
        rows, tf = self._indices.astype(np.int64), self._tf
        if self._rows is None:
            return terms, rows, tf
        extra_terms, extra_rows, extra_tf = self._extra
        terms = np.concatenate([terms, extra_terms.astype(np.int64)])
        rows = np.concatenate([rows, extra_rows.astype(np.int64)])
        tf = np.concatenate([tf, extra_tf])
        docs = self._documents()[rows]
        live = docs >= 0
        order = np.argsort(terms[live], kind="stable")
        return terms[live][order], docs[live][order], tf[live][order]

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The postings and vocabulary as arrays named ``prefix``-something, by document
        (:meth:`from_arrays` reads them back; terms as words, not process ids)."""
        import numpy as np

        terms, rows, tf = self._postings()
        df = np.bincount(terms, minlength=len(self._df)) if terms.size else np.zeros(0, dtype=np.int64)
        live = np.flatnonzero(df)
        known = term_words()
        words = "\0".join(known[i] for i in live.tolist()).encode()
        indptr = np.zeros(len(live) + 1, dtype=np.int64)
        np.cumsum(df[live], out=indptr[1:])
        length = self._length if self._rows is None else self._length[self._rows]
        return {
            f"{prefix}indices": rows.astype(np.int32),
            f"{prefix}tf": tf.astype(np.float32),
            f"{prefix}indptr": indptr,
            f"{prefix}length": length,
            f"{prefix}n": np.array([self._n], dtype=np.int64),
            f"{prefix}words": np.frombuffer(words, dtype=np.uint8),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> Lexical:
        """The index :meth:`to_arrays` wrote. Raises ``ValueError`` or ``KeyError`` when the
        arrays do not fit together."""
        import numpy as np

        raw = arrays[f"{prefix}words"].tobytes()
        indptr = arrays[f"{prefix}indptr"]
        ids = stored_terms(raw, len(indptr) == 2)
        indices, tf = arrays[f"{prefix}indices"], arrays[f"{prefix}tf"]
        length, n = arrays[f"{prefix}length"], int(arrays[f"{prefix}n"][0])
        if len(indptr) != len(ids) + 1 or int(indptr[0]) != 0 or int(indptr[-1]) != len(indices):
            raise ValueError("a keyword index whose offsets do not fit its vocabulary")
        if (np.diff(indptr) <= 0).any() or len(tf) != len(indices):
            raise ValueError("a keyword index whose offsets do not fit its vocabulary")
        if n != max(len(length), 1) or (
            indices.size and (int(indices.max()) >= len(length) or indices.min() < 0)
        ):
            raise ValueError("a keyword index with documents out of range")
        order = np.argsort(ids, kind="stable")  # this process numbers the terms its own way
        ptr, rows, counts = gather_ragged(indptr, order, indices, tf)
        terms = np.repeat(ids[order], np.diff(ptr))
        self = cls.__new__(cls)
        self._finish(terms, rows, counts, length, n)
        return self

    def get_scores_from_ids(self, ids: Sequence[int]) -> np.ndarray:
        """The BM25 score of every document for the query terms ``ids`` (from
        :attr:`vocab_dict`; a term given twice counts twice)."""
        import numpy as np

        scores = np.zeros(len(self._length), dtype=np.float32)
        for t in ids:
            for rows, values in self._scored(t):  # a row is in one segment: once per term
                scores[rows] += values
        return scores if self._rows is None else scores[self._rows]

    def add_scores(self, scores: np.ndarray, term: int, weight: float) -> None:
        """Add ``weight`` times the BM25 score of ``term`` to the documents' ``scores``
        (float32, in place): ``scores + weight * get_scores_from_ids([term])`` bit for bit
        (with ``weight`` as float32; a document without the term adds 0), made over the
        documents that hold the term only."""
        import numpy as np

        factor = np.float32(weight)
        for rows, values in self._scored(term):
            docs = rows if self._rows is None else self._documents()[rows]
            live = docs >= 0
            docs = docs[live]
            scores[docs] = scores[docs] + factor * values[live]

    def holding(self, term: int) -> np.ndarray:
        """Per document, whether its text holds ``term`` (``get_scores_from_ids([term]) >
        0``, without scoring every document)."""
        import numpy as np

        held = np.zeros(len(self._length), dtype=bool)
        for rows, values in self._scored(term):
            held[rows] = values > 0
        return held if self._rows is None else held[self._rows]

    def _documents(self) -> np.ndarray:
        """Per row, its document (-1 for a row no document uses any more)."""
        import numpy as np

        if self._row_documents is None:
            assert self._rows is not None
            document = np.full(len(self._length), -1, dtype=np.int64)
            document[self._rows] = np.arange(len(self._rows), dtype=np.int64)
            self._row_documents = document
        return self._row_documents

    def _scored(self, t: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """The rows that hold term ``t`` and their BM25 scores for it (float32), per
        segment; computed on the term's first query and kept (one float32 per posting of the
        term, plus about 400 bytes of objects per term: bounded by the index's vocabulary,
        about 8 MB if every term of 4,310 tools' 19,409 were asked for), since a query's terms recur across an agent's searches
        (bench/search.py's 230 requests: 0.1 to 0.2 ms of each search's keyword scores)."""
        import numpy as np

        known = self._by_term.get(t)
        if known is not None:
            return known
        out: list[tuple[np.ndarray, np.ndarray]] = []
        if 0 <= t < len(self._idf):  # else a term this index never held (interned since)
            extra_terms, extra_rows, extra_tf = self._extra
            segments = []
            if t < len(self._indptr) - 1:
                start, end = self._indptr[t], self._indptr[t + 1]
                segments.append((self._indices[start:end], self._tf[start:end]))
            if len(extra_terms):
                lo, hi = np.searchsorted(extra_terms, [t, t + 1])
                if hi > lo:
                    segments.append((extra_rows[lo:hi], extra_tf[lo:hi]))
            for rows, tf in segments:
                # bm25s's operations, in its order and types: float64, stored as float32.
                tfc = tf / (K1 * ((1 - B) + B * self._length[rows] / self._avgdl) + tf)
                out.append((rows, (self._idf[t] * tfc).astype(np.float32)))
        self._by_term[t] = out
        return out


LEXICAL_TOMBSTONES = 0.25
"""The share of a keyword index's rows no longer used above which a refresh builds it
again compact."""
LEXICAL_APPENDED = 0.25
"""The postings of the rows appended since a keyword index was built, as a share of its
first segment's, above which a refresh builds it again compact."""


def _no_extra() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An empty second segment of postings: terms, rows, counts."""
    import numpy as np

    return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
