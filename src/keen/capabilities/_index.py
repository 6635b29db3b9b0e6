"""The search index's parts: what each document contributes, tokenised once and reused.

A document (a capability, or a server's text) contributes to the keyword signal its
stemmed terms with their counts and length, and to the wordllama signal the token ids
of its embedded text and the set of token ids of its lexical text (for the IDF weights).
None of that depends on the other documents, so it is computed once per document
(:func:`tokenise`) and kept in :class:`Columns`: flat arrays with an offset per
document, one row per document, each row under a 16-byte key that is a hash of the texts
it was made from (:func:`doc_key`). What depends on the whole catalog (BM25's IDF and
average length, the IDF weights of the word vectors, the pooled vectors) is assembled
from the rows in a few vectorised passes (:class:`Lexical`, :func:`pool_rows`): a
catalog that differs from the last one by one server tokenises that server's documents
and reassembles, instead of tokenising every tool again.

:class:`Lexical` is BM25 as ``bm25s`` computes it (Lucene variant: ``idf = ln(1 + (N -
df + 0.5) / (df + 0.5))``, ``tf / (tf + k1 (1 - b + b dl / avgdl))``, ``k1`` 1.5, ``b``
0.75; Kamphuis et al., ECIR 2020), with the same float types and the same score sums,
built from the rows instead of from token lists.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from keen.capabilities._embed import DIM, token_ids, word_vectors
from keen.capabilities._text import stem_tokens

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Columns",
    "Doc",
    "Lexical",
    "doc_key",
    "idf_rows",
    "intern",
    "pool_rows",
    "term_words",
    "tokenise",
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
        out: list[int] = []
        for word in words:
            i = _terms.get(word)
            if i is None:
                i = _terms[word] = len(_words)
                _words.append(word)
            out.append(i)
        return out


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
    """The 16-byte key of ``doc``'s row: a hash of its texts."""
    return hashlib.sha256(json.dumps([list(doc.lexical), doc.embedded, doc.idf]).encode()).digest()[:16]


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
        raw = arrays.pop("words").tobytes().decode()
        words = raw.split("\0") if arrays["term_ids"].size else []
        mapping = np.array(intern(words), dtype=np.int32)
        local = arrays.pop("term_ids")
        if local.size and (local.min() < 0 or local.max() >= len(mapping)):
            raise ValueError("term ids outside the stored words")
        columns = cls(term_ids=mapping[local] if local.size else local.astype(np.int32), **arrays)
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


class Lexical:
    """BM25 over the rows of a :class:`Columns` (the interface ToolSearch used of bm25s:
    :attr:`vocab_dict` and :meth:`get_scores_from_ids`). The vocabulary holds the terms
    of these rows only, so a query word no document uses is not in it."""

    def __init__(self, columns: Columns) -> None:
        import numpy as np

        n = len(columns)
        if n == 0:  # bm25s indexed one empty document for an empty catalog
            columns = tokenise([Doc([], "", None)], [b"\0" * 16])
        term_ids = columns.term_ids
        used = np.zeros(len(_words), dtype=bool)
        used[term_ids] = True
        live = np.flatnonzero(used)
        remap = np.cumsum(used) - 1
        cols = remap[term_ids]
        words = _words
        self.vocab_dict: dict[str, int] = {words[g]: j for j, g in enumerate(live.tolist())}
        """Term -> column."""
        n_docs = len(columns)
        rows = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(columns.term_ptr))
        df = np.bincount(cols, minlength=len(live))
        idf = np.log(1 + (n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
        lengths = columns.length.astype(np.int64)
        avgdl = lengths.mean()
        # As bm25s computes it, operation for operation (float64, stored as float32).
        tf = columns.tf.astype(np.float32)
        tfc = tf / (K1 * ((1 - B) + B * lengths[rows] / avgdl) + tf)
        scores = (idf[cols] * tfc).astype(np.float32)
        order = np.argsort(cols, kind="stable")
        self._data = scores[order]
        self._indices = rows[order].astype(np.int32)
        self._indptr = np.zeros(len(live) + 1, dtype=np.int64)
        np.cumsum(df, out=self._indptr[1:])
        self._n = n_docs if n else 1

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The assembled matrix and vocabulary as arrays named ``prefix``-something
        (:meth:`from_arrays` reads them back)."""
        import numpy as np

        words = "\0".join(self.vocab_dict).encode()  # in column order (dicts keep it)
        return {
            f"{prefix}data": self._data,
            f"{prefix}indices": self._indices,
            f"{prefix}indptr": self._indptr,
            f"{prefix}n": np.array([self._n], dtype=np.int64),
            f"{prefix}words": np.frombuffer(words, dtype=np.uint8),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> Lexical:
        """The index :meth:`to_arrays` wrote. Raises ``ValueError`` or ``KeyError`` when the
        arrays do not fit together."""
        raw = arrays[f"{prefix}words"].tobytes().decode()
        words = raw.split("\0") if raw or len(arrays[f"{prefix}indptr"]) == 2 else []
        self = cls.__new__(cls)
        self.vocab_dict = {w: i for i, w in enumerate(words)}
        self._data = arrays[f"{prefix}data"]
        self._indices = arrays[f"{prefix}indices"]
        self._indptr = arrays[f"{prefix}indptr"]
        self._n = int(arrays[f"{prefix}n"][0])
        if len(self._indptr) != len(words) + 1 or int(self._indptr[-1]) != len(self._data):
            raise ValueError("a keyword index whose offsets do not fit its vocabulary")
        if len(self._indices) != len(self._data) or (
            self._indices.size and int(self._indices.max()) >= self._n
        ):
            raise ValueError("a keyword index with documents out of range")
        return self

    def get_scores_from_ids(self, ids: Sequence[int]) -> np.ndarray:
        """The BM25 score of every document for the query terms ``ids`` (columns; a term
        given twice counts twice)."""
        import numpy as np

        scores = np.zeros(self._n, dtype=np.float32)
        for t in ids:
            start, end = self._indptr[t], self._indptr[t + 1]
            scores[self._indices[start:end]] += self._data[start:end]  # a document once per term
        return scores


def idf_rows(columns: Columns) -> np.ndarray:
    """Per wordllama token id, :func:`keen.capabilities._embed.idf_weights` over the rows'
    IDF ids (every row counts in ``N``: tools' rows, never servers')."""
    import numpy as np

    size = word_vectors().embedding.shape[0]
    if len(columns) == 0:
        return np.ones(size, dtype=np.float32)  # no catalog, no statistics: a plain mean
    df = np.bincount(columns.lex, minlength=size).astype(np.float64)
    return np.log((len(columns) + 1) / (np.maximum(df, 1.0) + 0.5)).astype(np.float32)


def pool_rows(columns: Columns, weights: np.ndarray) -> np.ndarray:
    """Unit vectors ``(n, DIM)`` of the rows' embedded texts: their token vectors averaged
    with ``weights`` (per token id), as :func:`keen.capabilities._embed.pool` computes
    them."""
    import numpy as np

    table = word_vectors().embedding
    n = len(columns)
    out = np.zeros((n, DIM), dtype=np.float32)
    ptr = columns.sem_ptr
    sizes = np.diff(ptr)
    # Rows of one length at a time, as a stack of (1 x L) @ (L x DIM) products: one call
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
            ids = columns.sem[ptr[rows][:, None] + np.arange(length)]
            out[rows] = np.matmul(weights[ids][:, None, :], table[ids])[:, 0, :]
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, norms, out=np.zeros_like(out), where=norms > 1e-12)
