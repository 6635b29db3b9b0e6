"""The wordllama signal's word vectors: per row, its token vectors pooled with IDF weights.

Each row's vector is kept as two sums (:class:`Pooled`, :func:`weight_parts`): its plain
sum of token vectors and its sum weighted by the token's document-frequency part of the
IDF, so a catalog that differs from the last one by one server pools only the new rows and
corrects the rows holding a token whose document frequency changed (:func:`repool`). The
tools' sums are kept in :mod:`keen.capabilities._sums`, which pools through
:func:`pool_with_dots`; :class:`Pooled` holds the servers'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from keen.capabilities._embed import DIM, word_vectors
from keen.capabilities._rows import Columns, runs

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Pooled",
    "idf_rows",
    "inverse_norms",
    "pool_parts",
    "pool_with_dots",
    "repool",
    "squares",
    "token_df",
    "weight_parts",
]

_POOL_BLOCK = 16384
"""Token vectors gathered at once while pooling (16 MB of float32)."""


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
    """The :class:`Pooled` sums of ``columns`` (:func:`~keen.capabilities._rows.splice` of
    ``take`` and ``added`` over the rows ``old`` was pooled from): the added rows pooled,
    the old ones copied by runs, and those holding a token whose ``g`` changed corrected by
    the difference."""
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


def _splice_arrays(old: np.ndarray, take: np.ndarray, added: np.ndarray) -> np.ndarray:
    """Rows of ``old`` and ``added`` as :func:`keen.capabilities._rows.splice` takes them, for one 2-d array."""
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
