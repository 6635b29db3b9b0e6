"""The search index's parts: what each document contributes, tokenised once and reused.

A document (a capability, or a server's text) contributes to the keyword signal its
stemmed terms with their counts and length, and to the wordllama signal the token ids
of its embedded text and the set of token ids of its lexical text (for the IDF weights).
None of that depends on the other documents, so it is computed once per document
(:func:`tokenise`) and kept in :class:`Columns`: flat arrays with an offset per
document, one row per document, each row under a 16-byte key that is a hash of the texts
it was made from (:func:`doc_key`). What depends on the whole catalog is kept so that a
catalog that differs from the last one by one server tokenises that server's documents and
updates the rest by what changed: BM25's postings are merged (:meth:`Lexical.refresh`) and
its IDF and average length recomputed in one vectorised pass; the word vectors are kept as
two sums per row (:class:`Pooled`, :func:`weight_parts`), of which only the new rows are
pooled and the rows holding a token whose document frequency changed corrected
(:func:`repool`).

:class:`Lexical` is BM25 as ``bm25s`` computes it (Lucene variant: ``idf = ln(1 + (N -
df + 0.5) / (df + 0.5))``, ``tf / (tf + k1 (1 - b + b dl / avgdl))``, ``k1`` 1.5, ``b``
0.75; Kamphuis et al., ECIR 2020), with the same float types and the same score sums,
computed per query term from the postings instead of from token lists.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from keen.capabilities._embed import DIM, token_ids, word_vectors
from keen.capabilities._text import stem_tokens

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "LEXICAL_APPENDED",
    "LEXICAL_TOMBSTONES",
    "Columns",
    "Doc",
    "Lexical",
    "Pooled",
    "Vocab",
    "doc_key",
    "idf_rows",
    "intern",
    "inverse_norms",
    "pool_parts",
    "pool_with_dots",
    "repool",
    "runs",
    "splice",
    "squares",
    "term_words",
    "token_df",
    "tokenise",
    "weight_parts",
]

K1 = 1.5
B = 0.75
_POOL_BLOCK = 16384
"""Token vectors gathered at once while pooling (16 MB of float32)."""
_EMPTY = ""
"""The term of a document without words (as bm25s indexes it): it still has a length."""

# Terms by id for the whole process: a row holds ids, not strings, so assembling an index
# never looks words up again. Only grows (by the distinct words of the tools indexed).
_terms: dict[str, int] = {}
_words: list[str] = []
_terms_lock = threading.Lock()


def intern(words: Sequence[str]) -> list[int]:
    """The process-wide id of each of ``words`` (new words get the next ids)."""
    with _terms_lock:
        out: list[int | None] = list(map(_terms.get, words))  # known words: one C loop
        if None in out:
            for at, word in enumerate(words):
                if out[at] is None:
                    i = _terms.get(word)
                    if i is None:
                        i = _terms[word] = len(_words)
                        _words.append(word)
                    out[at] = i
        return out  # pyright: ignore[reportReturnType]


_stored: tuple[bytes, bool, np.ndarray] | None = None
"""The last stored vocabulary read (:func:`_stored_terms`) and its ids."""


def _stored_terms(raw: bytes, some: bool) -> np.ndarray:
    """The process-wide ids of a stored vocabulary: words joined by NUL, as
    :meth:`Columns.save` and :meth:`Lexical.to_arrays` write them (``some``: it holds a
    word, so no bytes are the one empty word). A cache folder holds the same words twice
    (the rows' and the keyword index's, each in id order), so the second is not looked up
    again: a word's id never changes in a process."""
    import numpy as np

    global _stored
    last = _stored
    if last is not None and last[0] == raw and (raw or last[1] == some):
        return last[2]
    words = raw.decode().split("\0") if raw or some else []
    ids = np.array(intern(words), dtype=np.int64)
    ids.flags.writeable = False
    _stored = (raw, some, ids)
    return ids


def term_words() -> list[str]:
    """The words of the process-wide term ids (index = id); do not modify."""
    return _words


class Doc(NamedTuple):
    """A document's texts: ``lexical`` (the fields BM25 reads), ``embedded`` (the text whose
    word vectors are pooled) and ``idf`` (the text whose token ids count in the IDF
    weights; ``None``: it does not count, as a server's text does not)."""

    lexical: Sequence[str]
    embedded: str
    idf: str | None


def doc_key(doc: Doc) -> bytes:
    """The 16-byte key of ``doc``'s row: a hash of its texts (each after its length, so no
    text a server sends can make two documents' inputs equal; a new process hashes every
    tool's, and JSON-escaping them took more than the hash)."""
    parts = [*doc.lexical, doc.embedded, doc.idf or ""]
    head = ",".join(map(str, map(len, parts))) + ("|-|" if doc.idf is None else "|+|")
    return hashlib.blake2b((head + "".join(parts)).encode(), digest_size=16).digest()


@dataclass(frozen=True, eq=False)
class Columns:
    """Rows of documents, flattened: row ``i``'s terms are ``term_ids[term_ptr[i]:term_ptr[i
    + 1]]`` (process-wide ids, each once) with their counts in ``tf``; ``length``: its
    number of terms, repeats counted; ``lex``: the distinct wordllama ids of its IDF text;
    ``sem``: the wordllama ids of its embedded text; ``keys``: ``(n, 16)`` row keys."""

    keys: np.ndarray
    term_ptr: np.ndarray
    term_ids: np.ndarray
    tf: np.ndarray
    length: np.ndarray
    lex_ptr: np.ndarray
    lex: np.ndarray
    sem_ptr: np.ndarray
    sem: np.ndarray

    def __len__(self) -> int:
        return len(self.length)

    def take(self, rows: np.ndarray) -> Columns:
        """The rows ``rows`` (an index array), in that order."""
        term_ptr, term_ids, tf = _take(self.term_ptr, rows, self.term_ids, self.tf)
        lex_ptr, lex = _take(self.lex_ptr, rows, self.lex)
        sem_ptr, sem = _take(self.sem_ptr, rows, self.sem)
        return Columns(self.keys[rows], term_ptr, term_ids, tf, self.length[rows], lex_ptr, lex, sem_ptr, sem)

    def slice(self, start: int, stop: int) -> Columns:
        """The rows ``start`` to ``stop`` (views of this one's arrays but the offsets)."""

        def cut(ptr: np.ndarray, *flats: np.ndarray) -> list[np.ndarray]:
            lo, hi = int(ptr[start]), int(ptr[stop])
            return [ptr[start : stop + 1] - lo, *(f[lo:hi] for f in flats)]

        term_ptr, term_ids, tf = cut(self.term_ptr, self.term_ids, self.tf)
        lex_ptr, lex = cut(self.lex_ptr, self.lex)
        sem_ptr, sem = cut(self.sem_ptr, self.sem)
        return Columns(
            self.keys[start:stop], term_ptr, term_ids, tf, self.length[start:stop], lex_ptr, lex, sem_ptr, sem
        )

    @staticmethod
    def concat(parts: Sequence[Columns]) -> Columns:
        """``parts``' rows one after the other."""
        import numpy as np

        if len(parts) == 1:
            return parts[0]

        def ptr(name: str) -> np.ndarray:
            out = [np.zeros(1, dtype=np.int64)]
            base = 0
            for p in parts:
                values: np.ndarray = getattr(p, name)
                out.append(values[1:] + base)
                base += int(values[-1])
            return np.concatenate(out)

        def flat(name: str) -> np.ndarray:
            return np.concatenate([getattr(p, name) for p in parts])

        return Columns(
            flat("keys").reshape(-1, 16),
            ptr("term_ptr"),
            flat("term_ids"),
            flat("tf"),
            flat("length"),
            ptr("lex_ptr"),
            flat("lex"),
            ptr("sem_ptr"),
            flat("sem"),
        )

    def save(self, path: Path) -> None:
        """Write the rows to ``path`` (an ``.npz``; terms as words, not process ids)."""
        import numpy as np

        used, local = np.unique(self.term_ids, return_inverse=True)
        words = [_words[i] for i in used.tolist()]
        with path.open("wb") as handle:
            np.savez(
                handle,
                keys=self.keys,
                term_ptr=self.term_ptr,
                term_ids=local.astype(np.int32),
                tf=self.tf,
                length=self.length,
                lex_ptr=self.lex_ptr,
                lex=self.lex,
                sem_ptr=self.sem_ptr,
                sem=self.sem,
                words=np.frombuffer("\0".join(words).encode(), dtype=np.uint8),
            )

    @classmethod
    def load(cls, path: Path) -> Columns:
        """Rows written by :meth:`save`. Raises ``OSError``, ``ValueError`` or ``KeyError``
        when the file is unreadable or inconsistent."""
        import numpy as np

        with np.load(path) as data:
            arrays = {k: data[k] for k in data.files}
        raw = arrays.pop("words").tobytes()
        mapping = _stored_terms(raw, bool(arrays["term_ids"].size))
        local = arrays.pop("term_ids")
        if local.size and (local.min() < 0 or local.max() >= len(mapping)):
            raise ValueError("term ids outside the stored words")
        columns = cls(
            term_ids=mapping[local].astype(np.int32) if local.size else local.astype(np.int32), **arrays
        )
        columns.check()
        return columns

    def check(self) -> None:
        """Raise ``ValueError`` when the arrays do not fit together (a damaged file)."""
        n = len(self.length)
        if self.keys.shape != (n, 16) or self.keys.dtype.kind != "u":
            raise ValueError(f"keys of shape {self.keys.shape}")
        for ptr, values in (
            (self.term_ptr, self.term_ids),
            (self.term_ptr, self.tf),
            (self.lex_ptr, self.lex),
            (self.sem_ptr, self.sem),
        ):
            if (
                len(ptr) != n + 1
                or int(ptr[0]) != 0
                or int(ptr[-1]) != len(values)
                or (ptr[1:] < ptr[:-1]).any()
            ):
                raise ValueError("row offsets that do not fit their values")
        table = word_vectors().embedding.shape[0]
        for ids in (self.lex, self.sem):
            if ids.size and int(ids.max()) >= table:
                raise ValueError("word vector ids outside the vocabulary")


def _take(ptr: np.ndarray, rows: np.ndarray, *flats: np.ndarray) -> list[np.ndarray]:
    """Ragged gather: the new offsets, then each of ``flats`` restricted to ``rows``."""
    import numpy as np

    starts = ptr[rows]
    sizes = ptr[rows + 1] - starts
    new_ptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(sizes, out=new_ptr[1:])
    index = np.repeat(starts - new_ptr[:-1], sizes) + np.arange(int(new_ptr[-1]), dtype=np.int64)
    return [new_ptr, *(f[index] for f in flats)]


_MAX_RUNS = 4096
"""Above this many runs a splice gathers row by row (one fancy index) instead of by slices."""


def runs(take: np.ndarray) -> list[tuple[int, int, int]] | None:
    """``take`` (per new row, an old row, or ``-1``: the next of the added rows) as runs
    ``(source, start, stop)``: ``source`` 0 for old rows, 1 for added ones, ``start:stop``
    their rows there. A catalog that changed one server is three runs, whatever its size;
    ``None`` when there are more than :data:`_MAX_RUNS`."""
    import numpy as np

    n = len(take)
    if n == 0:
        return []
    old = take >= 0
    cont = np.zeros(n, dtype=bool)
    cont[1:] = (old[1:] & old[:-1] & (take[1:] == take[:-1] + 1)) | (~old[1:] & ~old[:-1])
    starts = np.flatnonzero(~cont)
    if len(starts) > _MAX_RUNS:
        return None
    added_before = np.cumsum(~old) - ~old  # added rows before each row
    out: list[tuple[int, int, int]] = []
    for first, end in zip(starts.tolist(), [*starts[1:].tolist(), n], strict=True):
        if old[first]:
            lo = int(take[first])
            out.append((0, lo, lo + end - first))
        else:
            lo = int(added_before[first])
            out.append((1, lo, lo + end - first))
    return out


def splice(old: Columns, take: np.ndarray, added: Columns) -> Columns:
    """The rows ``take`` names: ``take[i]``, a row of ``old``, or ``-1``: the next row of
    ``added`` (in order). By slices of the runs (:func:`runs`): a copy of the flat arrays,
    not a gather of each row."""
    import numpy as np

    spans = runs(take)
    if spans is None:
        index = take.copy()
        index[take < 0] = len(old) + np.arange(int((take < 0).sum()), dtype=np.int64)
        return Columns.concat([old, added]).take(index)
    if len(spans) == 1 and spans[0] == (0, 0, len(old)):
        return old
    return Columns.concat([(old, added)[src].slice(lo, hi) for src, lo, hi in spans] or [added.slice(0, 0)])


def _splice_arrays(old: np.ndarray, take: np.ndarray, added: np.ndarray) -> np.ndarray:
    """Rows of ``old`` and ``added`` as :func:`splice` takes them, for one 2-d array."""
    import numpy as np

    spans = runs(take)
    if spans is None:
        out = np.empty((len(take), *old.shape[1:]), dtype=old.dtype)
        kept = take >= 0
        out[kept] = old[take[kept]]
        out[~kept] = added
        return out
    if len(spans) == 1 and spans[0] == (0, 0, len(old)):
        return old
    parts = [(old, added)[src][lo:hi] for src, lo, hi in spans]
    return np.concatenate(parts) if parts else added[:0]


def tokenise(docs: Sequence[Doc], keys: Sequence[bytes] | None = None) -> Columns:
    """The rows of ``docs`` (``keys``: their :func:`doc_key`, computed when not given).

    Keywords: Snowball stems of the lexical fields (a document without words gets one
    empty term, as bm25s gives it). Word vectors: one tokenizer pass over every text
    there is to tokenise (the IDF texts, then the embedded ones)."""
    import numpy as np

    keys = [doc_key(d) for d in docs] if keys is None else keys
    term_rows: list[list[int]] = []
    tf_rows: list[list[int]] = []
    lengths: list[int] = []
    for doc in docs:
        stems = stem_tokens(doc.lexical) or [_EMPTY]
        counts: dict[str, int] = {}
        for stem in stems:
            counts[stem] = counts.get(stem, 0) + 1
        term_rows.append(intern(list(counts)))
        tf_rows.append(list(counts.values()))
        lengths.append(len(stems))
    idf_docs = [i for i, d in enumerate(docs) if d.idf is not None]
    ids = token_ids([docs[i].idf or "" for i in idf_docs] + [d.embedded for d in docs])
    lex_rows: list[np.ndarray] = [np.zeros(0, dtype=np.int32)] * len(docs)
    for i, row in zip(idf_docs, ids[: len(idf_docs)], strict=True):
        lex_rows[i] = np.unique(row)
    sem_rows = ids[len(idf_docs) :]

    def ptr(rows: Sequence[Sequence[int] | np.ndarray]) -> np.ndarray:
        out = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in rows], out=out[1:])
        return out

    def flat(rows: Sequence[Sequence[int] | np.ndarray], dtype: type) -> np.ndarray:
        return np.concatenate([np.asarray(r, dtype=dtype) for r in rows]) if rows else np.zeros(0, dtype)

    return Columns(
        np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(-1, 16).copy(),
        ptr(term_rows),
        flat(term_rows, np.int32),
        flat(tf_rows, np.float32),
        np.array(lengths, dtype=np.int32),
        ptr(lex_rows),
        flat(lex_rows, np.int32),
        ptr(sem_rows),
        flat(sem_rows, np.int32),
    )


class Vocab(Mapping[str, int]):
    """The terms of a :class:`Lexical` index: term -> its process-wide id (:func:`intern`),
    only the terms some row holds. A view over the index's document frequencies, so a
    refresh builds no dictionary of every term."""

    def __init__(self, df: np.ndarray) -> None:
        self._df = df

    def __getitem__(self, word: str) -> int:
        i = _terms.get(word)
        if i is None or i >= len(self._df) or not self._df[i]:
            raise KeyError(word)
        return i

    def __contains__(self, word: object) -> bool:
        i = _terms.get(word) if isinstance(word, str) else None
        return i is not None and i < len(self._df) and bool(self._df[i])

    def __iter__(self) -> Iterator[str]:
        import numpy as np

        words = _words
        return (words[i] for i in np.flatnonzero(self._df).tolist())

    def __len__(self) -> int:
        import numpy as np

        return int(np.count_nonzero(self._df))

    def holds(self, ids: np.ndarray) -> np.ndarray:
        """Whether each of the term ids ``ids`` is one of these terms (a boolean array)."""
        import numpy as np

        inside = ids < len(self._df)
        out = np.zeros(len(ids), dtype=bool)
        out[inside] = self._df[ids[inside]] > 0
        return out


class Lexical:
    """BM25 over the rows of a :class:`Columns` (the interface ToolSearch used of bm25s:
    :attr:`vocab_dict` and :meth:`get_scores_from_ids`). The vocabulary holds the terms
    of these rows only, so a query word no document uses is not in it.

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

        size = max(len(_words), int(terms[-1]) + 1 if terms.size else 0)
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
        size = max(len(_words), len(self._df))
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
        words = "\0".join(_words[i] for i in live.tolist()).encode()
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
        ids = _stored_terms(raw, len(indptr) == 2)
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
        ptr, rows, counts = _take(indptr, order, indices, tf)
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


def token_df(columns: Columns) -> np.ndarray:
    """Per wordllama token id, how many rows hold it in their IDF text."""
    import numpy as np

    return np.bincount(columns.lex, minlength=word_vectors().embedding.shape[0])


def idf_rows(columns: Columns, df: np.ndarray | None = None) -> np.ndarray:
    """Per wordllama token id, :func:`keen.capabilities._embed.idf_weights` over the rows'
    IDF ids (every row counts in ``N``: tools' rows, never servers'; ``df``: their
    :func:`token_df` when known)."""
    import numpy as np

    size = word_vectors().embedding.shape[0]
    if len(columns) == 0:
        return np.ones(size, dtype=np.float32)  # no catalog, no statistics: a plain mean
    counts = (token_df(columns) if df is None else df).astype(np.float64)
    return np.log((len(columns) + 1) / (np.maximum(counts, 1.0) + 0.5)).astype(np.float32)


def weight_parts(n: int, df: np.ndarray) -> tuple[float, np.ndarray]:
    """:func:`idf_rows` of ``n`` rows as ``a - g``: ``a = ln(N + 1)`` is the same for every
    token and ``g = ln(max(df, 1) + 0.5)`` per token. A row's pooled vector is then ``a``
    times its plain sum of token vectors less its sum weighted by ``g`` (:class:`Pooled`),
    so a change of ``N`` alone moves no sum, and a change of some tokens' ``df`` moves only
    the sums of rows that hold them."""
    import numpy as np

    if n == 0:
        return 1.0, np.zeros(word_vectors().embedding.shape[0], dtype=np.float32)
    return float(np.log(n + 1)), np.log(np.maximum(df.astype(np.float64), 1.0) + 0.5).astype(np.float32)


@dataclass(frozen=True, eq=False)
class Pooled:
    """Per row, the sum of its embedded text's token vectors (``plain``) and the sum
    weighted by ``g`` (``weighted``; see :func:`weight_parts`), and ``sq``: per row, in
    float64, ``plain . plain``, ``plain . weighted`` and ``weighted . weighted``, so the
    norm of ``a * plain - weighted`` for any ``a`` is three products, not a pass over the
    sums (:func:`inverse_norms`)."""

    plain: np.ndarray
    weighted: np.ndarray
    sq: np.ndarray
    g: np.ndarray

    def vectors(self, a: float) -> np.ndarray:
        """The rows' unit vectors for the weights ``a - g`` (zero for an empty row)."""
        import numpy as np

        out = a * self.plain - self.weighted
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=np.zeros_like(out), where=norms > 1e-12)


def inverse_norms(sq: np.ndarray, a: float) -> np.ndarray:
    """Per row of products ``sq`` (:attr:`Pooled.sq`), one over the norm of ``a * plain -
    weighted`` (0 for an empty row): the cosine of a row with a unit vector ``q`` is ``(a *
    plain . q - weighted . q)`` times it (:meth:`keen.capabilities._sums.ToolSums.
    static_scores`), so a change of ``a`` (of the number of rows) costs a pass over ``n``
    numbers, not over ``n`` vectors."""
    import numpy as np

    pp, pw, ww = sq[:, 0], sq[:, 1], sq[:, 2]
    squared = np.maximum(a * a * pp - 2.0 * a * pw + ww, 0.0)
    norms = np.sqrt(squared)
    return np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 1e-12).astype(np.float32)


def squares(plain: np.ndarray, weighted: np.ndarray) -> np.ndarray:
    """:attr:`Pooled.sq` of rows: ``P.P``, ``P.W``, ``W.W`` (accumulated in float64)."""
    import numpy as np

    out = np.empty((len(plain), 3), dtype=np.float64)
    out[:, 0] = np.einsum("ij,ij->i", plain, plain, dtype=np.float64)
    out[:, 1] = np.einsum("ij,ij->i", plain, weighted, dtype=np.float64)
    out[:, 2] = np.einsum("ij,ij->i", weighted, weighted, dtype=np.float64)
    return out


_CORRECTION_CELLS = 1 << 22
"""Above this many (row, token) cells, rows whose tokens' weights changed are pooled again
rather than corrected (16 MB of float32)."""


def pool_parts(columns: Columns, g: np.ndarray) -> Pooled:
    """The :class:`Pooled` sums of ``columns``' rows."""
    import numpy as np

    both = np.stack([np.ones_like(g), g], axis=1)
    sums = _pool(columns, both)
    # Each its own contiguous array: later indexes copy them by slices, and a query reads
    # them whole (one row of each 2 x 256 floats apart would halve the memory throughput).
    plain, weighted = np.ascontiguousarray(sums[:, 0]), np.ascontiguousarray(sums[:, 1])
    return Pooled(plain, weighted, squares(plain, weighted), g)


def repool(old: Pooled, take: np.ndarray, columns: Columns, added: Columns, g: np.ndarray) -> Pooled:
    """The :class:`Pooled` sums of ``columns`` (:func:`splice` of ``take`` and ``added``
    over the rows ``old`` was pooled from): the added rows pooled, the old ones copied by
    runs, and those holding a token whose ``g`` changed corrected by the difference."""
    import numpy as np

    fresh = pool_parts(added, g)
    plain = _splice_arrays(old.plain, take, fresh.plain)
    weighted = _splice_arrays(old.weighted, take, fresh.weighted)
    sq = _splice_arrays(old.sq, take, fresh.sq)
    changed = np.flatnonzero(g != old.g)
    from_old = take >= 0
    if changed.size and from_old.any():
        is_changed = np.zeros(len(g), dtype=bool)
        is_changed[changed] = True
        hit = is_changed[columns.sem]
        if hit.any():
            # Only the hits' rows: a row per token of every row would be a pass of its own.
            spots = np.flatnonzero(hit)
            rows_hit = np.searchsorted(columns.sem_ptr, spots, side="right") - 1
            keep = from_old[rows_hit]
            rows, tokens = rows_hit[keep], columns.sem[spots[keep]]
        else:
            rows = tokens = np.zeros(0, dtype=np.int64)
        if rows.size:
            if weighted is old.weighted:
                weighted = weighted.copy()
            if sq is old.sq:
                sq = sq.copy()
            affected, local = np.unique(rows, return_inverse=True)
            if len(affected) * len(changed) > _CORRECTION_CELLS:
                weighted[affected] = _pool(columns.take(affected), g[:, None])[:, 0]
                sq[affected] = squares(plain[affected], weighted[affected])
            else:
                delta = (g[changed] - old.g[changed])[:, None] * word_vectors().embedding[changed]
                column = np.searchsorted(changed, tokens)
                if 2 * len(affected) > len(columns):
                    # Most rows hold a changed token (one every tool uses, as "a" or "the"):
                    # one product over the whole array, no gather and scatter of the rows.
                    cells = rows * len(changed) + column
                    counts = np.bincount(cells, minlength=len(columns) * len(changed))
                    weighted += counts.reshape(len(columns), len(changed)).astype(np.float32) @ delta
                    sq[:, 1] = np.einsum("ij,ij->i", plain, weighted, dtype=np.float64)
                    sq[:, 2] = np.einsum("ij,ij->i", weighted, weighted, dtype=np.float64)
                else:
                    cells = local * len(changed) + column
                    counts = np.bincount(cells, minlength=len(affected) * len(changed))
                    counts = counts.reshape(len(affected), len(changed)).astype(np.float32)
                    weighted[affected] += counts @ delta
                    sq[affected] = squares(plain[affected], weighted[affected])
    return Pooled(plain, weighted, sq, g)


def pool_with_dots(columns: Columns, g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The plain and ``g``-weighted sums of ``columns``' rows (as :func:`pool_parts`) and
    ``(occurrences, 2)``: per token of each row's embedded text (``columns.sem``), the dot
    product of its vector with the row's plain and weighted sum (what
    :mod:`keen.capabilities._sums` corrects a row's products with when ``g`` moves)."""
    import numpy as np

    both = np.stack([np.ones_like(g), g], axis=1)
    dots = np.zeros((len(columns.sem), 2), dtype=np.float32)
    sums = _pool(columns, both, dots)
    return np.ascontiguousarray(sums[:, 0]), np.ascontiguousarray(sums[:, 1]), dots


def _pool(columns: Columns, weights: np.ndarray, dots: np.ndarray | None = None) -> np.ndarray:
    """``(n, m, DIM)``: per row, its embedded text's token vectors summed with each of the
    ``m`` columns of ``weights`` (per token id) as weights. ``dots`` (``(occurrences,
    m)``, given): filled with each token vector's dot product with its row's ``m`` sums."""
    import numpy as np

    table = word_vectors().embedding
    n = len(columns)
    out = np.zeros((n, weights.shape[1], DIM), dtype=np.float32)
    ptr = columns.sem_ptr
    sizes = np.diff(ptr)
    # Rows of one length at a time, as a stack of (m x L) @ (L x DIM) products: one call
    # per length and block instead of one per row (a row's sum is the same product).
    order = np.argsort(sizes, kind="stable")
    bounds = np.flatnonzero(np.diff(sizes[order])) + 1
    for group in np.split(order, bounds):
        length = int(sizes[group[0]]) if len(group) else 0
        if length == 0:
            continue
        step = max(1, _POOL_BLOCK // length)
        for first in range(0, len(group), step):
            rows = group[first : first + step]
            spots = ptr[rows][:, None] + np.arange(length)
            ids = columns.sem[spots]
            vectors = table[ids]
            sums = np.matmul(weights[ids].transpose(0, 2, 1), vectors)
            out[rows] = sums
            if dots is not None:  # (rows, length, DIM) @ (rows, DIM, m)
                dots[spots] = np.matmul(vectors, sums.transpose(0, 2, 1))
    return out
