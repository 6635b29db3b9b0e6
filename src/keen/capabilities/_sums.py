"""The tools' word-vector sums under row numbers that last, so a refresh writes only what changed.

Each tool's static vector is ``a * P - W`` (:func:`keen.capabilities._pooling.weight_parts`:
``P`` its plain sum of token vectors, ``W`` its sum weighted by ``g = ln(max(df, 1) + 0.5)``).
A refresh of one server changes the document frequency of that server's tokens, so ``g``
moves for a few dozen tokens, among them words nearly every tool holds ("a", "the"), and
so the ``W`` of nearly every row. Writing the corrected ``W`` (and splicing ``P`` into a
new array for the new catalog order) copied two ``n x 256`` arrays per refresh: 102 MB at
50,000 tools, fresh pages of memory each time, and the refresh grew faster than the
catalog.

Here the rows live in a :class:`SumStore`: buffers with spare capacity, appended to and
never written again, so every index made from them shares them (an index still searched
keeps seeing its own rows). A catalog's :class:`ToolSums` names the store row of each of its
positions; a refresh appends its new documents' rows and leaves the rows of the tools it
dropped in place (tombstones), so no row is copied or renumbered. Rows are pooled with the
store's weights ``g0`` (those of the index that made the store); the change to the current
``g`` is a correction term kept apart: for each occurrence of a token whose weight moved,
its row, the token and ``d = g - g0``, so ``W = W0 + sum(d E[token])``. A query adds it by
one small product and a ``bincount`` over those occurrences, and a refresh corrects each
row's three products (``P.P``, ``P.W``, ``W.W``, :attr:`SumStore.sq`) from the dot
products of each token vector with its row's sums, kept per occurrence since the row was
pooled (:attr:`SumStore.pe`, :attr:`SumStore.we`), and the tokens' own products: no
``256``-wide pass over the rows. When the dropped rows pass :data:`TOMBSTONES` of the
store, or the corrected cells :data:`CELLS_PER_ROW` per row, the rows are pooled again
into a new compact store with the current weights (as a full build pools them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from keen.capabilities._embed import DIM, word_vectors
from keen.capabilities._pooling import inverse_norms, pool_with_dots, squares
from keen.capabilities._rows import Columns

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "CELLS_PER_ROW",
    "TOMBSTONES",
    "SumStore",
    "ToolSums",
    "build_sums",
    "load_sums",
    "refresh_sums",
    "spare_rows",
]

TOMBSTONES = 0.25
"""The share of a store's rows no longer used above which a refresh pools its rows again
into a compact store (the space the dropped rows keep, and the work a query spends on
them, stay below this share)."""
CELLS_PER_ROW = 12.0
"""The corrected cells (a row and a token whose weight moved that it holds) per row above
which a refresh pools its rows again with the current weights (a query's correction costs
a pass over them)."""
_DENSE_CELLS = 1 << 22
"""Up to this many (position, token) pairs, cells are counted in one ``bincount`` table
rather than by a sort."""
_DENSE_PRODUCT = 1 << 27
"""The most multiply-adds the table's product with the tokens' Gram matrix may take
(positions x tokens squared); past it the pairs of cells within each position, a few per
row, cost less than a table whose tokens are many (one large server's refresh)."""
_SPARE = 0.25
"""A store's room for rows appended later, as a share of its rows (grown by this share
when full: amortised, each row copied a bounded number of times)."""


class SumStore:
    """Rows of word-vector sums, appended and never written again (indexes share them):
    per row its plain sum (``plain``), its sum weighted by ``g0`` (``weighted``), their
    products ``P.P``, ``P.W0``, ``W0.W0`` (``sq``, float64), and per occurrence of a token
    in the row's embedded text (``occ_ptr``: each row's first occurrence) the dot products
    of that token's vector with ``P`` and ``W0`` (``pe``, ``we``)."""

    def __init__(self, g0: np.ndarray, rows: int, occurrences: int) -> None:
        import numpy as np

        self.g0 = g0
        self.plain = np.empty((rows, DIM), dtype=np.float32)
        self.weighted = np.empty((rows, DIM), dtype=np.float32)
        self.sq = np.empty((rows, 3), dtype=np.float64)
        self.occ_ptr = np.zeros(rows + 1, dtype=np.int64)
        self.pe = np.empty(occurrences, dtype=np.float32)
        self.we = np.empty(occurrences, dtype=np.float32)
        self.used = 0

    @classmethod
    def holding(
        cls,
        g0: np.ndarray,
        plain: np.ndarray,
        weighted: np.ndarray,
        sq: np.ndarray,
        occ_ptr: np.ndarray,
        dots: tuple[np.ndarray, np.ndarray],
    ) -> SumStore:
        """A store whose rows are ``sq``'s, in these arrays as they are (``plain`` and
        ``weighted`` may have more rows: room for rows appended later)."""
        import numpy as np

        self = cls.__new__(cls)
        self.g0 = g0
        self.used = len(sq)
        self.plain, self.weighted = plain, weighted
        self.sq = np.empty((len(plain), 3), dtype=np.float64)
        self.sq[: self.used] = sq
        self.occ_ptr = np.zeros(len(plain) + 1, dtype=np.int64)
        self.occ_ptr[: self.used + 1] = occ_ptr
        self.pe, self.we = dots
        return self

    @property
    def capacity(self) -> int:
        return len(self.plain)

    def append(
        self, plain: np.ndarray, weighted: np.ndarray, sq: np.ndarray, sizes: np.ndarray, dots: np.ndarray
    ) -> int:
        """Add rows (``sizes``: each one's occurrences; ``dots``: ``(occurrences, 2)``, the
        ``pe`` and ``we`` of each); returns the first new row's number. Grows the buffers by
        :data:`_SPARE` when full: the rows of the old ones stay as they are for the indexes
        that use them."""
        import numpy as np

        k, start = len(plain), self.used
        first_occ = int(self.occ_ptr[start])
        end_occ = first_occ + int(sizes.sum())
        if start + k > self.capacity:
            self._grow(start + k + int((start + k) * _SPARE) + 16, None)
        if end_occ > len(self.pe):
            self._grow(None, end_occ + int(end_occ * _SPARE) + 256)
        self.plain[start : start + k] = plain
        self.weighted[start : start + k] = weighted
        self.sq[start : start + k] = sq
        np.cumsum(sizes, out=self.occ_ptr[start + 1 : start + k + 1])
        self.occ_ptr[start + 1 : start + k + 1] += first_occ
        self.pe[first_occ:end_occ] = dots[:, 0]
        self.we[first_occ:end_occ] = dots[:, 1]
        self.used = start + k
        return start

    def _grow(self, rows: int | None, occurrences: int | None) -> None:
        """New, larger buffers holding the used rows (or occurrences)."""
        import numpy as np

        if rows is not None:
            used = self.used
            for name in ("plain", "weighted", "sq"):
                old = getattr(self, name)
                new = np.empty((rows, old.shape[1]), dtype=old.dtype)
                new[:used] = old[:used]
                setattr(self, name, new)
            ptr = np.zeros(rows + 1, dtype=np.int64)
            ptr[: used + 1] = self.occ_ptr[: used + 1]
            self.occ_ptr = ptr
        if occurrences is not None:
            n_occ = int(self.occ_ptr[self.used])
            for name in ("pe", "we"):
                old = getattr(self, name)
                new = np.empty(occurrences, dtype=old.dtype)
                new[:n_occ] = old[:n_occ]
                setattr(self, name, new)


@dataclass(frozen=True, eq=False)
class _Fix:
    """The correction from the store's weights to an index's: per cell (a position and a
    token whose weight moved that it holds), its position (``pos``, ascending), the token's
    column in ``tokens`` (``col``) and the change of the position's weighted sum along
    that token's vector (``weight``: its count times the weight's change, float64)."""

    pos: np.ndarray
    col: np.ndarray
    weight: np.ndarray
    tokens: np.ndarray


@dataclass(frozen=True, eq=False)
class ToolSums:
    """A catalog's tool vector sums: its store, the store rows it may read (``used``),
    the store row of each position (``rows``; None: row = position), the weights ``g`` of
    this index, its rows' corrected products (``sq``, per position) and the correction
    of the weighted sums (None: the store's weights are this index's); ``folded``: ``a``
    and the store's first ``used`` rows of ``a P - W0`` for it (:meth:`folded_for`), or
    None."""

    store: SumStore
    used: int
    rows: np.ndarray | None
    g: np.ndarray
    sq: np.ndarray
    fix: _Fix | None
    folded: tuple[float, np.ndarray] | None = None

    def folded_for(self, a: float) -> ToolSums:
        """These sums with ``a P - W0`` made once for ``a``, so a query reads one ``n x
        256`` array instead of two (at 50,000 tools, 6 of a query's 12 ms of static
        scores: the products are bound by memory). Made by a warm load, whose ``a`` stays
        until the next refresh; a refresh's sums are not folded (making it would cost
        the refresh what it saves its one search). The folded array is one more ``n x 256``
        float32 array beside the two it is made from, held until then: 51 MB at 50,000
        tools, in ``bench/index_scale.py``'s peak RSS."""
        import numpy as np

        store = self.store
        folded = np.multiply(store.plain[: self.used], np.float32(a))
        folded -= store.weighted[: self.used]
        return ToolSums(self.store, self.used, self.rows, self.g, self.sq, self.fix, (a, folded))

    def __len__(self) -> int:
        return len(self.sq)

    @property
    def tombstones(self) -> int:
        """The store rows this index may read and does not use."""
        return self.used - len(self.sq) if self.rows is not None else 0

    @property
    def cells(self) -> int:
        """The corrected cells (see :class:`_Fix`)."""
        return 0 if self.fix is None else len(self.fix.pos)

    def inverse_norms(self, a: float) -> np.ndarray:
        """Per position, one over the norm of ``a * P - W`` (0 for an empty row):
        :func:`keen.capabilities._pooling.inverse_norms`."""
        return inverse_norms(self.sq, a)

    def static_scores(self, a: float, inverse_norms: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Per position, the cosine of its vector for the weights ``a - g`` with the unit
        vector ``query``: ``(a P.q - W0.q - sum(d E.q)) * inverse_norms``, the products
        over the store's rows (those dropped included: fewer than :data:`TOMBSTONES`), then
        each position's taken."""
        import numpy as np

        store = self.store
        # A dot per row on this thread, not BLAS (as keen.capabilities.search._dot, and why).
        if self.folded is not None and self.folded[0] == a:
            scores = np.vecdot(self.folded[1], query)
        else:
            plain = np.vecdot(store.plain[: self.used], query)
            weighted = np.vecdot(store.weighted[: self.used], query)
            scores = np.float32(a) * plain - weighted
        if self.rows is not None:
            scores = scores[self.rows]
        fix = self.fix
        if fix is not None:
            along = np.vecdot(word_vectors().embedding[fix.tokens], query).astype(np.float64)
            shift = np.bincount(fix.pos, weights=fix.weight * along[fix.col], minlength=len(scores))
            scores = scores - shift.astype(np.float32)
        return scores * inverse_norms

    def arrays(self) -> dict[str, np.ndarray]:
        """The sums in position order, as :func:`load_sums` reads them: ``plain``,
        ``weighted`` (by ``g0``), ``sq`` (the store's products), ``g0``, ``pe``, ``we``,
        and this index's corrected products (``sq_now``) and correction (``fix_*``), so a
        load needs no scan for the tokens whose weight moved."""
        import numpy as np

        fix = self.fix
        empty = np.zeros(0, dtype=np.int64)
        own = {
            "sq_now": self.sq,
            "fix_pos": empty if fix is None else fix.pos,
            "fix_col": empty if fix is None else fix.col,
            "fix_weight": empty.astype(np.float64) if fix is None else fix.weight,
            "fix_tokens": empty if fix is None else fix.tokens,
        }
        store = self.store
        if self.rows is None:
            n = len(self)
            end = int(store.occ_ptr[n])
            return own | {
                "plain": store.plain[:n],
                "weighted": store.weighted[:n],
                "sq": store.sq[:n],
                "g0": store.g0,
                "pe": store.pe[:end],
                "we": store.we[:end],
            }
        rows = self.rows
        starts = store.occ_ptr[rows]
        sizes = store.occ_ptr[rows + 1] - starts
        ptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(sizes, out=ptr[1:])
        index = np.repeat(starts - ptr[:-1], sizes) + np.arange(int(ptr[-1]), dtype=np.int64)
        return own | {
            "plain": store.plain[rows],
            "weighted": store.weighted[rows],
            "sq": store.sq[rows],
            "g0": store.g0,
            "pe": store.pe[index],
            "we": store.we[index],
        }


def spare_rows(n: int) -> int:
    """The rows of a store made for ``n`` rows: room for :data:`_SPARE` more."""
    return n + int(n * _SPARE) + 16


def _store_of(columns: Columns, g: np.ndarray) -> SumStore:
    """A store of ``columns``' rows pooled with ``g``, with room for more."""
    import numpy as np

    n = len(columns)
    store = SumStore(g, spare_rows(n), len(columns.sem) + int(len(columns.sem) * _SPARE) + 256)
    if n:
        plain, weighted, dots = pool_with_dots(columns, g)
        store.append(plain, weighted, squares(plain, weighted), np.diff(columns.sem_ptr), dots)
    return store


def build_sums(columns: Columns, g: np.ndarray) -> ToolSums:
    """The sums of ``columns``' rows with the weights ``g``, in a new store."""
    store = _store_of(columns, g)
    n = len(columns)
    return ToolSums(store, n, None, g, store.sq[:n], None)


def refresh_sums(
    old: ToolSums, take: np.ndarray, columns: Columns, added: Columns, g: np.ndarray
) -> ToolSums:
    """The sums of ``columns``: per position ``take[i]``, a position of ``old`` (the same
    document), or ``-1``: the next row of ``added``. The added rows are pooled with the
    store's weights and appended; the others keep their store rows. Pooled again into a
    new store (as :func:`build_sums`) when the dropped rows or the corrections pass
    :data:`TOMBSTONES` or :data:`CELLS_PER_ROW`."""
    import numpy as np

    store = old.store
    n = len(columns)
    old_rows = old.rows if old.rows is not None else np.arange(len(old), dtype=np.int64)
    kept = take >= 0
    # The store's rows this index would not use: those of the tools dropped, and those
    # another index appended after ``old`` was made.
    if store.used - int(np.count_nonzero(kept)) > TOMBSTONES * (store.used + len(added)):
        return build_sums(columns, g)
    changed = np.flatnonzero(g != store.g0)
    spots = np.zeros(0, dtype=np.int64)
    if changed.size:
        is_changed = np.zeros(len(g), dtype=bool)
        is_changed[changed] = True
        spots = np.flatnonzero(is_changed[columns.sem])
    rows = np.empty(n, dtype=np.int64)
    rows[kept] = old_rows[take[kept]]
    if len(added):
        plain, weighted, dots = pool_with_dots(added, store.g0)
        start = store.append(plain, weighted, squares(plain, weighted), np.diff(added.sem_ptr), dots)
        rows[~kept] = np.arange(start, start + len(added), dtype=np.int64)
    sq = store.sq[rows]
    fix = _correct(store, rows, columns, g, changed, spots, sq)
    if fix is not None and len(fix.pos) > CELLS_PER_ROW * n:
        return build_sums(columns, g)  # the rows appended are left unused, as the store
    return ToolSums(store, store.used, rows, g, sq, fix)


def load_sums(arrays: dict[str, np.ndarray], columns: Columns, g: np.ndarray) -> ToolSums:
    """The sums :meth:`ToolSums.arrays` wrote for ``columns``' rows, with the weights
    ``g`` (``plain`` and ``weighted`` may hold more rows, unused: room to append to,
    :func:`spare_rows`). Raises ``ValueError`` when the arrays do not fit ``columns``."""
    import numpy as np

    n, n_occ = len(columns), len(columns.sem)
    plain, weighted, sq, g0 = arrays["plain"], arrays["weighted"], arrays["sq"], arrays["g0"]
    pe, we = arrays["pe"], arrays["we"]
    if (
        plain.shape[1:] != (DIM,)
        or len(plain) < n
        or weighted.shape != plain.shape
        or plain.dtype != np.float32
        or weighted.dtype != np.float32
        or sq.shape != (n, 3)
        or g0.shape != g.shape
        or pe.shape != (n_occ,)
        or we.shape != (n_occ,)
    ):
        raise ValueError("vector sums of another size")
    store = SumStore.holding(
        g0.astype(np.float32),
        plain,
        weighted,
        sq.astype(np.float64),
        columns.sem_ptr.astype(np.int64),
        (pe.astype(np.float32), we.astype(np.float32)),
    )
    now = arrays["sq_now"].astype(np.float64)
    pos, col = arrays["fix_pos"].astype(np.int64), arrays["fix_col"].astype(np.int64)
    weight, tokens = arrays["fix_weight"].astype(np.float64), arrays["fix_tokens"].astype(np.int64)
    if (
        now.shape != (n, 3)
        or not len(pos) == len(col) == len(weight)
        or (len(pos) and (pos.min() < 0 or pos.max() >= n or col.min() < 0 or col.max() >= len(tokens)))
        or (len(tokens) and (tokens.min() < 0 or tokens.max() >= len(g)))
        or (np.diff(pos) < 0).any()
    ):
        raise ValueError("a vector sums' correction that does not fit its rows")
    fix = _Fix(pos, col, weight, tokens) if len(pos) else None
    return ToolSums(store, n, None, g, now, fix)


def _correct(
    store: SumStore,
    rows: np.ndarray,
    columns: Columns,
    g: np.ndarray,
    changed: np.ndarray,
    spots: np.ndarray,
    sq: np.ndarray,
) -> _Fix | None:
    """The correction from the store's weights to ``g`` of the positions ``rows`` (store
    rows of ``columns``' positions): ``spots``, the occurrences in ``columns.sem`` of the
    tokens ``changed``. Corrects ``sq`` (per position) in place."""
    import numpy as np

    if not len(spots):
        return None
    n = len(columns)
    ptr = columns.sem_ptr
    pos = np.searchsorted(ptr, spots, side="right") - 1
    occ = store.occ_ptr[rows[pos]] + (spots - ptr[pos])
    # The changed tokens some row holds, numbered in token order (a table, not a sort).
    column = np.full(len(g), -1, dtype=np.int64)
    column[changed] = np.arange(len(changed))
    col = column[columns.sem[spots]]
    held = np.flatnonzero(np.bincount(col, minlength=len(changed)))
    renumber = np.zeros(len(changed), dtype=np.int64)
    renumber[held] = np.arange(len(held))
    col = renumber[col]
    tokens = changed[held]
    m = len(tokens)
    delta = g[tokens].astype(np.float64) - store.g0[tokens].astype(np.float64)
    d = delta[col]
    # P.W = P.W0 + sum d P.E; W.W = W0.W0 + 2 sum d W0.E + |sum d E|^2.
    sq[:, 1] += np.bincount(pos, weights=d * store.pe[occ], minlength=n)
    cross = 2.0 * np.bincount(pos, weights=d * store.we[occ], minlength=n)
    # One cell per position and token (a token held twice counts twice), in order.
    key = pos * m + col
    vectors = word_vectors().embedding[tokens]
    gram = (vectors @ vectors.T).astype(np.float64)
    if n * m <= _DENSE_CELLS and n * m * m <= _DENSE_PRODUCT:
        # |sum d E|^2 of every position at once: its cells' weights as a row of an n x m
        # table, times the tokens' Gram matrix (a product of m x m per position, no pair
        # of cells gathered).
        counts = np.bincount(key, minlength=n * m)
        table = counts.reshape(n, m) * delta
        sq[:, 2] += cross + np.einsum("ij,ij->i", table @ gram, table)
        cells = np.flatnonzero(counts)
        cell_pos, cell_col = cells // m, cells % m
        return _Fix(cell_pos, cell_col, table.ravel()[cells], tokens)
    cells, times = np.unique(key, return_counts=True)
    cell_pos, cell_col = cells // m, cells % m
    weight = times * delta[cell_col]
    # |sum d E|^2 over the pairs of cells within each position (positions ascending: runs).
    starts = np.flatnonzero(np.r_[True, cell_pos[1:] != cell_pos[:-1]])
    sizes = np.diff(np.r_[starts, len(cells)])
    each = np.repeat(sizes, sizes)  # per cell, its position's count
    left = np.repeat(np.arange(len(cells)), each)
    offsets = np.arange(len(left)) - np.repeat(np.cumsum(each) - each, each)
    right = np.repeat(np.repeat(starts, sizes), each) + offsets
    pairs = weight[left] * weight[right] * gram[cell_col[left], cell_col[right]]
    sq[:, 2] += cross + np.bincount(cell_pos[left], weights=pairs, minlength=n)
    return _Fix(cell_pos, cell_col, weight, tokens)
