"""The search index's rows: what each document contributes, tokenised once and reused.

A document (a capability, or a server's text) contributes to the keyword signal its
stemmed terms with their counts and length, and to the wordllama signal the token ids
of its embedded text and the set of token ids of its lexical text (for the IDF weights).
None of that depends on the other documents, so it is computed once per document
(:func:`tokenise`) and kept in :class:`Columns`: flat arrays with an offset per
document, one row per document, each row under a 16-byte key that is a hash of the texts
it was made from (:func:`doc_key`). Terms are held as process-wide ids (:func:`intern`),
so assembling an index never looks words up again. A catalog that differs from the last
one by one server tokenises that server's documents and takes the other rows from the
last index by runs of slices (:func:`splice`).

What depends on the whole catalog is made from the rows elsewhere: the keyword index in
:mod:`keen.capabilities._bm25`, the word-vector sums in :mod:`keen.capabilities._pooling`.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from keen.capabilities._embed import token_ids, word_vectors
from keen.capabilities._text import stem_tokens

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Columns",
    "Doc",
    "Vocab",
    "doc_key",
    "gather_ragged",
    "intern",
    "runs",
    "splice",
    "stored_terms",
    "term_words",
    "tokenise",
]

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
"""The last stored vocabulary read (:func:`stored_terms`) and its ids."""


def stored_terms(raw: bytes, some: bool) -> np.ndarray:
    """The process-wide ids of a stored vocabulary: words joined by NUL, as
    :meth:`Columns.save` and :meth:`keen.capabilities._bm25.Lexical.to_arrays` write them
    (``some``: it holds a word, so no bytes are the one empty word). A cache folder holds
    the same words twice (the rows' and the keyword index's, each in id order), so the
    second is not looked up again: a word's id never changes in a process."""
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
        term_ptr, term_ids, tf = gather_ragged(self.term_ptr, rows, self.term_ids, self.tf)
        lex_ptr, lex = gather_ragged(self.lex_ptr, rows, self.lex)
        sem_ptr, sem = gather_ragged(self.sem_ptr, rows, self.sem)
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
        mapping = stored_terms(raw, bool(arrays["term_ids"].size))
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


def gather_ragged(ptr: np.ndarray, rows: np.ndarray, *flats: np.ndarray) -> list[np.ndarray]:
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
    """The terms of a :class:`~keen.capabilities._bm25.Lexical` index: term -> its process-wide id (:func:`intern`),
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
