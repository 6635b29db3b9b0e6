"""The search index kept per document: a refreshed server's tools are found while the other
servers' rows are reused, a removed tool is gone, the cache folder stays bounded, and a
damaged cache entry is rebuilt (keen.capabilities._rows, _bm25, _pooling, _refresh, _index_cache)."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import bm25s
import numpy as np
import pytest

import keen.capabilities._bm25 as bm25_module
import keen.capabilities._documents as documents_module
import keen.capabilities._index_cache as index_cache
import keen.capabilities._pooling as pooling_module
import keen.capabilities._refresh as refresh_module
import keen.capabilities._rows as rows_module
import keen.capabilities._sums as sums_module
import keen.capabilities.search as search_module
from keen.capabilities import Catalog
from keen.capabilities._bm25 import Lexical  # pyright: ignore[reportPrivateUsage]
from keen.capabilities._rows import Columns, Doc, tokenise  # pyright: ignore[reportPrivateUsage]
from keen.capabilities._text import stem_tokens  # pyright: ignore[reportPrivateUsage]
from keen.capabilities.descriptor import Capability
from keen.capabilities.search import INDEX_FORMAT, MAX_INDEXES, flush, forget
from keen.mcp.types import Tool

_SERVERS = {
    "weather": [
        Tool("weather", "forecast", "Weather forecast for a city: rain, wind and temperature.", {}),
        Tool("weather", "alerts", "Severe weather alerts for a region.", {}),
    ],
    "git": [
        Tool("git", "git_commit", "Record staged changes in the repository with a message.", {}),
        Tool("git", "git_log", "Show the commit history of a branch.", {}),
    ],
    "mail": [
        Tool("mail", "send_email", "Send an email message to a recipient.", {}),
        Tool("mail", "list_inbox", "List the messages in the inbox.", {}),
    ],
}
_TEXTS = {"weather": "Weather data.", "git": "Git repositories.", "mail": "Electronic mail."}


@pytest.fixture(autouse=True)
def _fresh_rows() -> Iterator[None]:
    """Each test starts as a new process would: no rows kept from another test."""
    forget()
    yield
    forget()


@pytest.fixture
def tokenised(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The embedded text of every document the index tokenises (the real tokenise runs)."""
    seen: list[str] = []

    def spy(docs: Sequence[Doc], keys: Sequence[bytes] | None = None) -> Columns:
        seen.extend(d.embedded for d in docs)
        return tokenise(docs, keys)

    monkeypatch.setattr(refresh_module, "tokenise", spy)
    return seen


def _catalog(
    tools: dict[str, list[Tool]], cache_dir: Path, caps: dict[str, list[Capability]] | None = None
) -> Catalog:
    """A catalog of ``tools``; the descriptors of ``caps``' servers reused as CatalogCache reuses them."""
    built: list[Capability] = []
    for server, listed in tools.items():
        if caps is not None and server in caps:
            built += caps[server]
        else:
            built += list(Catalog.from_tools(listed, cache=False, dense=False))
    return Catalog(built, {s: _TEXTS.get(s, "") for s in tools}, cache_dir=cache_dir, dense=False)


def _by_server(catalog: Catalog) -> dict[str, list[Capability]]:
    out: dict[str, list[Capability]] = {}
    for cap in catalog:
        out.setdefault(cap.server or "", []).append(cap)
    return out


def _ids(catalog: Catalog, query: str, k: int = 3) -> list[str]:
    return [h.id for h in catalog.search(query, k=k)]


def test_a_refreshed_servers_new_tool_is_found_and_only_its_documents_are_tokenised(
    tmp_path: Path, tokenised: list[str]
) -> None:
    first = _catalog(_SERVERS, tmp_path)
    assert _ids(first, "weather forecast for Paris")[0] == "mcp__weather__forecast"
    tokenised.clear()
    # The mail server refreshes: a new tool, and list_inbox is gone.
    changed = dict(
        _SERVERS, mail=[_SERVERS["mail"][0], Tool("mail", "archive_thread", "Archive a mail thread.", {})]
    )
    second = _catalog(changed, tmp_path, {s: c for s, c in _by_server(first).items() if s != "mail"})
    assert _ids(second, "archive the mail thread")[0] == "mcp__mail__archive_thread"
    assert "mcp__mail__list_inbox" not in second.index().ids
    assert "mcp__mail__list_inbox" not in _ids(second, "list the messages in the inbox", k=6)
    # Only the new tool and the mail server's own text (its tool names changed) were read again.
    assert len(tokenised) == 2
    assert any("archive thread" in text for text in tokenised)
    assert _ids(second, "weather forecast for Paris")[0] == "mcp__weather__forecast"


def test_a_new_process_reuses_the_rows_of_the_last_cache_folder(
    tmp_path: Path, tokenised: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(refresh_module, "_SEED_ABOVE", 0)  # a catalog this small would be tokenised again
    _catalog(_SERVERS, tmp_path).index()
    forget()  # as a new process
    tokenised.clear()
    changed = dict(
        _SERVERS, git=[*_SERVERS["git"], Tool("git", "git_push", "Push commits to the remote.", {})]
    )
    catalog = _catalog(changed, tmp_path)
    assert _ids(catalog, "push my commits to the remote")[0] == "mcp__git__git_push"
    assert len(tokenised) == 2  # git_push and the git server's text
    # The same catalog again in a new process: loaded from its folder, nothing tokenised.
    forget()
    tokenised.clear()
    again = _catalog(changed, tmp_path)
    assert _ids(again, "push my commits to the remote")[0] == "mcp__git__git_push"
    assert tokenised == []


def test_a_loaded_index_ranks_as_the_one_built_in_memory(tmp_path: Path) -> None:
    queries = ["weather alerts", "send an email", "show the history of commits", "rain tomorrow"]
    built = _catalog(_SERVERS, tmp_path)
    fresh = [[(h.id, round(h.score, 5)) for h in built.search(q, k=6)] for q in queries]
    forget()
    loaded = _catalog(_SERVERS, tmp_path)
    assert [[(h.id, round(h.score, 5)) for h in loaded.search(q, k=6)] for q in queries] == fresh
    uncached = Catalog(list(built), dict(built.servers), cache=False, dense=False)
    assert [[(h.id, round(h.score, 5)) for h in uncached.search(q, k=6)] for q in queries] == fresh


def test_the_cache_keeps_the_most_recently_used_catalogs_and_drops_old_formats(tmp_path: Path) -> None:
    old = tmp_path / f"v{INDEX_FORMAT - 1}-0123456789abcdef"
    old.mkdir()
    (old / "ids.json").write_text("[]")
    stale = tmp_path / f".v{INDEX_FORMAT}-abandoned-x"
    stale.mkdir()
    an_hour_ago = time.time() - 7200
    os.utime(stale, (an_hour_ago, an_hour_ago))
    for i in range(MAX_INDEXES + 3):
        tools = dict(_SERVERS, extra=[Tool("extra", f"tool_{i}", f"Tool number {i}.", {})])
        _catalog(tools, tmp_path).index()
    flush()  # folders are written and evicted in the background
    folders = sorted(p.name for p in tmp_path.iterdir())
    assert len(folders) == MAX_INDEXES
    assert all(name.startswith(f"v{INDEX_FORMAT}-") for name in folders)
    # The most recent catalog is one of them, and still loads.
    forget()
    last = _catalog(dict(_SERVERS, extra=[Tool("extra", f"tool_{MAX_INDEXES + 2}", "x", {})]), tmp_path)
    assert last.index().ids


@pytest.mark.parametrize("damage", ["garbage", "cut", "offsets", "meta", "assembled", "sums", "no_rows"])
def test_a_damaged_cache_entry_is_rebuilt_not_a_crash(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    expected = _ids(_catalog(_SERVERS, tmp_path), "send an email")
    flush()  # the folder is written in the background
    [folder] = [p for p in tmp_path.iterdir() if p.name.startswith("v")]
    if damage == "garbage":
        (folder / "tools.npz").write_bytes(b"not an npz file")
    elif damage == "cut":  # a zip cut short (a disk that filled up): zipfile.BadZipFile, not ValueError
        whole = (folder / "assembled.npz").read_bytes()
        (folder / "assembled.npz").write_bytes(whole[: len(whole) // 2])
    elif damage == "offsets":  # a readable file whose offsets do not fit its values
        with np.load(folder / "tools.npz") as data:
            arrays = {k: data[k] for k in data.files}
        arrays["term_ptr"] = arrays["term_ptr"] * 2
        with (folder / "tools.npz").open("wb") as handle:
            np.savez(handle, **arrays)
    elif damage == "assembled":  # the BM25 matrix's offsets past its values
        with np.load(folder / "assembled.npz") as data:
            arrays = {k: data[k] for k in data.files}
        arrays["bm25_indptr"] = arrays["bm25_indptr"] + 1
        with (folder / "assembled.npz").open("wb") as handle:
            np.savez(handle, **arrays)
    elif damage == "sums":  # the tools' vector sums of another type (read into a buffer of rows)
        with np.load(folder / "assembled.npz") as data:
            arrays = {k: data[k] for k in data.files}
        arrays["plain"] = arrays["plain"].astype(np.float64)
        with (folder / "assembled.npz").open("wb") as handle:
            np.savez(handle, **arrays)
    elif damage == "no_rows":  # the tools' sums cut to no rows while the catalog has tools
        with np.load(folder / "assembled.npz") as data:
            arrays = {k: data[k] for k in data.files}
        arrays["plain"], arrays["weighted"] = arrays["plain"][:0], arrays["weighted"][:0]
        with (folder / "assembled.npz").open("wb") as handle:
            np.savez(handle, **arrays)
    else:
        (folder / "meta.json").write_text(json.dumps({"ids": "not a list"}))
    forget()
    with caplog.at_level("WARNING", logger="keen.capabilities._index_cache"):
        assert _ids(_catalog(_SERVERS, tmp_path), "send an email") == expected
    assert "unreadable" in caplog.text
    # Rebuilt in place: a new process now loads it without a warning.
    forget()
    caplog.clear()
    with caplog.at_level("WARNING", logger="keen.capabilities._index_cache"):
        assert _ids(_catalog(_SERVERS, tmp_path), "send an email") == expected
    assert "unreadable" not in caplog.text


_KEYWORD_TEXTS: list[list[str]] = [
    ["Weather forecast for a city", "rain wind and temperature forecast"],
    ["Send an email message", "to a recipient"],
    [],
    ["List the files of a folder", "files and folders, recursively"],
    ["forecast of the stock market"],
]
"""Five documents' texts for the keyword index's own tests (one empty)."""


def _keyword_rows(texts: list[list[str]]) -> Columns:
    """The keyword index's rows of documents with these texts."""
    return tokenise([Doc(t, " ".join(t), None) for t in texts])


def test_keyword_scores_are_bm25s_lucene_scores() -> None:
    texts = _KEYWORD_TEXTS
    rows = _keyword_rows(texts)
    ours = Lexical(rows)
    reference = bm25s.BM25()
    reference.index([stem_tokens(t) or [""] for t in texts], show_progress=False)
    assert set(ours.vocab_dict) == set(reference.vocab_dict)
    for query in (["forecast"], ["file", "folder"], ["email", "forecast", "forecast"], ["citi"]):
        mine = ours.get_scores_from_ids([ours.vocab_dict[t] for t in query])
        theirs = reference.get_scores_from_ids([reference.vocab_dict[t] for t in query])
        assert np.array_equal(mine, theirs), query


def _mail_refresh(tmp_path: Path) -> tuple[Catalog, dict[str, list[Tool]]]:
    """The mail server refreshed (a new tool, list_inbox gone) after a first index, the
    other servers' descriptors reused as CatalogCache reuses them."""
    first = _catalog(_SERVERS, tmp_path)
    first.index()
    changed = dict(
        _SERVERS, mail=[_SERVERS["mail"][0], Tool("mail", "archive_thread", "Archive a mail thread.", {})]
    )
    return _catalog(changed, tmp_path, {s: c for s, c in _by_server(first).items() if s != "mail"}), changed


@pytest.fixture
def pooled(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of rows of every pooling of word vectors (the real pooling runs)."""
    seen: list[int] = []
    real_pool = pooling_module._pool  # pyright: ignore[reportPrivateUsage]

    def spy(columns: Columns, weights: np.ndarray, dots: np.ndarray | None = None) -> np.ndarray:
        seen.append(len(columns))
        return real_pool(columns, weights, dots)

    monkeypatch.setattr(pooling_module, "_pool", spy)
    return seen


def test_a_refresh_pools_only_the_changed_rows_and_ranks_as_a_full_build(
    tmp_path: Path, pooled: list[int]
) -> None:
    refreshed, changed = _mail_refresh(tmp_path)
    pooled.clear()
    index = refreshed.index()
    # The new tool and the mail server's text; the other rows' sums were kept and corrected.
    assert sum(pooled) == 2
    forget()
    full = Catalog(list(refreshed), dict(refreshed.servers), cache=False, dense=False).index()
    assert full.ids == index.ids
    queries = ["archive the mail thread", "weather forecast for Paris", "show the commit history", "rain"]
    for query in queries:
        mine, theirs = index.signals(query), full.signals(query)
        assert np.array_equal(mine["lexical"], theirs["lexical"]), query  # BM25: bit for bit
        for name in ("static", "server"):
            assert np.allclose(mine[name], theirs[name], atol=1e-5), (query, name)
        assert [i for i, _ in index.top(query, 6)] == [i for i, _ in full.top(query, 6)]
    assert set(changed) == set(refreshed.servers)


def _same_ranking(
    index: search_module.ToolSearch, full: search_module.ToolSearch, queries: list[str]
) -> None:
    """``index`` ranks as ``full``: BM25 bit for bit, the other signals to float32's
    precision, the same top 10."""
    assert index.ids == full.ids
    for query in queries:
        mine, theirs = index.signals(query), full.signals(query)
        assert np.array_equal(mine["lexical"], theirs["lexical"]), query
        for name in ("static", "server"):
            assert np.allclose(mine[name], theirs[name], atol=1e-4), (query, name)
        assert [i for i, _ in index.top(query, 10)] == [i for i, _ in full.top(query, 10)], query


def test_a_refresh_appends_its_rows_and_leaves_every_other_row_where_it_was(tmp_path: Path) -> None:
    tools = _synthetic(40, seed=3)
    _TEXTS.update({s: f"Server {s}." for s in tools})
    queries = ["send the weekly email", "zap a widget", "delete an archived ticket", "repo of server 12"]
    try:
        first_catalog = _catalog(tools, tmp_path)
        first = first_catalog.index()
        before = {q: first.signals(q)["static"].copy() for q in queries}
        sums = first._parts.tools.sums  # pyright: ignore[reportPrivateUsage]
        store, used = sums.store, sums.used
        kept_plain = store.plain[:used].copy()
        kept_weighted = store.weighted[:used].copy()
        # srv010 gains a tool and srv020 loses one: one row appended, one left unused.
        changed = dict(
            tools,
            srv010=[*tools["srv010"], Tool("srv010", "zap_widget", "Zap a widget.", {})],
            srv020=tools["srv020"][1:],
        )
        unchanged = {s: c for s, c in _by_server(first_catalog).items() if changed[s] == tools[s]}
        catalog = _catalog(changed, tmp_path, unchanged)
        index = catalog.index()
        after = index._parts.tools.sums  # pyright: ignore[reportPrivateUsage]
        assert after.store is store  # the same buffers: nothing copied
        assert after.used == used + 1 and after.tombstones == 1
        assert after.rows is not None
        by_id = dict(zip(first.ids, range(len(first.ids)), strict=True))
        for position, cap_id in enumerate(index.ids):
            if cap_id in by_id:  # an unchanged tool keeps its row number
                assert after.rows[position] == by_id[cap_id], cap_id
        assert after.rows[index.ids.index("mcp__srv010__zap_widget")] == used
        # The rows the first index reads were not written, and it still ranks as it did.
        assert np.array_equal(store.plain[:used], kept_plain)
        assert np.array_equal(store.weighted[:used], kept_weighted)
        for query in queries:
            assert np.array_equal(first.signals(query)["static"], before[query]), query
        assert after.cells > 0  # the weights moved ("a" is in more documents): corrected
        _same_ranking(index, _fresh(catalog), queries)
    finally:
        for s in list(_TEXTS):
            if s not in ("weather", "git", "mail"):
                del _TEXTS[s]


@pytest.mark.parametrize("limit", ["tombstones", "corrections"])
def test_a_refresh_past_the_limits_pools_a_compact_store_that_ranks_as_a_fresh_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pooled: list[int], limit: str
) -> None:
    tools = _synthetic(40, seed=5)
    _TEXTS.update({s: f"Server {s}." for s in tools})
    queries = ["send the weekly email", "read a remote invoice", "export a table", "repo of server 3"]
    try:
        catalog = _catalog(tools, tmp_path)
        first = catalog.index()._parts.tools.sums  # pyright: ignore[reportPrivateUsage]
        # Three refreshes under the limit: rows appended and dropped in the same store.
        steps = [
            lambda t: dict(t, srv010=[*t["srv010"], Tool("srv010", "zap_widget", "Zap a widget.", {})]),
            lambda t: dict(t, srv020=t["srv020"][2:]),
            lambda t: dict(t, srv030=[Tool("srv030", "only", "Read a remote invoice.", {})]),
        ]
        for step in steps:
            changed = step(tools)
            unchanged = {s: c for s, c in _by_server(catalog).items() if changed.get(s) == tools.get(s)}
            catalog, tools = _catalog(changed, tmp_path, unchanged), changed
            sums = catalog.index()._parts.tools.sums  # pyright: ignore[reportPrivateUsage]
            assert sums.store is first.store
        assert sums.tombstones > 0 and sums.cells > 0
        _same_ranking(catalog.index(), _fresh(catalog), queries)
        # Past a limit, the next refresh pools every row again into a new, compact store.
        if limit == "tombstones":
            monkeypatch.setattr(sums_module, "TOMBSTONES", sums.tombstones / (sums.used + 2))
        else:
            monkeypatch.setattr(sums_module, "CELLS_PER_ROW", sums.cells / len(sums) / 2)
        changed = dict(tools, srv035=tools["srv035"][1:])
        unchanged = {s: c for s, c in _by_server(catalog).items() if changed.get(s) == tools.get(s)}
        catalog = _catalog(changed, tmp_path, unchanged)
        pooled.clear()
        index = catalog.index()
        compact = index._parts.tools.sums  # pyright: ignore[reportPrivateUsage]
        assert compact.store is not first.store
        assert compact.rows is None and compact.fix is None and compact.tombstones == 0
        assert len(catalog) in pooled  # every tool's row pooled with the current weights
        full = _fresh(catalog)
        _same_ranking(index, full, queries)
        # Pooled as a full build pools: the static scores are the full build's bit for bit.
        for query in queries:
            assert np.array_equal(index.signals(query)["static"], full.signals(query)["static"]), query
    finally:
        for s in list(_TEXTS):
            if s not in ("weather", "git", "mail"):
                del _TEXTS[s]


def test_a_refreshed_index_saved_and_loaded_ranks_as_it_did(tmp_path: Path) -> None:
    tools = _synthetic(30, seed=9)
    _TEXTS.update({s: f"Server {s}." for s in tools})
    queries = ["send the weekly email", "zap a widget", "export a table"]
    try:
        first = _catalog(tools, tmp_path)
        first.index()
        changed = dict(
            tools,
            srv010=[*tools["srv010"], Tool("srv010", "zap_widget", "Zap a widget.", {})],
            srv011=tools["srv011"][1:],
        )
        unchanged = {s: c for s, c in _by_server(first).items() if changed.get(s) == tools.get(s)}
        refreshed_catalog = _catalog(changed, tmp_path, unchanged)
        refreshed = refreshed_catalog.index()
        sums = refreshed._parts.tools.sums  # pyright: ignore[reportPrivateUsage]
        assert sums.rows is not None and sums.cells > 0  # rows out of order, weights corrected
        flush()
        forget()  # a new process: the refreshed catalog's folder, loaded
        loaded = _catalog(changed, tmp_path).index()
        kept = loaded._parts.tools.sums  # pyright: ignore[reportPrivateUsage]
        assert kept.rows is None and kept.cells == sums.cells  # in order, the correction kept
        assert kept.folded is not None and sums.folded is None  # a load folds a P - W once
        for query in queries:
            mine, theirs = loaded.signals(query), refreshed.signals(query)
            # The folded sums round once more: static scores equal to a few float32 units.
            for name, atol in (("lexical", 1e-6), ("static", 1e-5), ("server", 1e-6)):
                assert np.allclose(mine[name], theirs[name], atol=atol), (query, name)
        _same_ranking(loaded, _fresh(refreshed_catalog), queries)
    finally:
        for s in list(_TEXTS):
            if s not in ("weather", "git", "mail"):
                del _TEXTS[s]


def test_merged_keyword_postings_score_as_a_fresh_index() -> None:
    texts = _KEYWORD_TEXTS
    before = _keyword_rows(texts)
    # Row 1 is gone, row 3 moved up, and two new rows, one a word no row held before.
    after_texts = [
        texts[0],
        ["Archive a mail thread", "email forecast"],
        texts[2],
        texts[3],
        texts[4],
        ["zyzzyva"],
    ]
    after = _keyword_rows(after_texts)
    src = np.array([0, -1, 2, 3, 4, -1], dtype=np.int64)
    merged = Lexical(before).refresh(src, after, before)
    fresh = Lexical(after)
    assert set(merged.vocab_dict) == set(fresh.vocab_dict)
    assert "recipient" not in merged.vocab_dict  # only the removed row held it
    for term in fresh.vocab_dict:
        ids = [merged.vocab_dict[term]]
        assert np.array_equal(merged.get_scores_from_ids(ids), fresh.get_scores_from_ids(ids)), term


def test_a_terms_added_scores_and_holders_are_its_full_scores() -> None:
    texts = _KEYWORD_TEXTS
    before = _keyword_rows(texts)
    after_texts = [texts[0], texts[2], texts[3], texts[4], ["email forecast zyzzyva"]]
    after = _keyword_rows(after_texts)
    # A refreshed index (rows mapped to documents, a dropped row's postings left in place) and
    # a fresh one: each term's sparse addition and holders match the dense scores bit for bit.
    merged = Lexical(before).refresh(np.array([0, 2, 3, 4, -1], dtype=np.int64), after, before)
    assert merged._rows is not None  # pyright: ignore[reportPrivateUsage]
    base = np.linspace(0.0, 2.0, len(after_texts), dtype=np.float32)
    for index in (merged, Lexical(after)):
        for word in index.vocab_dict:
            term = index.vocab_dict[word]
            full = index.get_scores_from_ids([term])
            for weight in (0.3, 0.27 * 0.61):
                scores = base.copy()
                index.add_scores(scores, term, weight)
                assert np.array_equal(scores, base + weight * full), (word, weight)
            assert np.array_equal(index.holding(term), full > 0), word
            assert index.holding(term).any(), word


def _same_scores(index: Lexical, fresh: Lexical) -> None:
    """``index`` scores every term, alone and with others, as ``fresh`` does, bit for bit."""
    assert set(index.vocab_dict) == set(fresh.vocab_dict)
    terms = [fresh.vocab_dict[t] for t in fresh.vocab_dict]
    for term in terms:
        assert np.array_equal(index.get_scores_from_ids([term]), fresh.get_scores_from_ids([term]))
    assert np.array_equal(index.get_scores_from_ids(terms * 2), fresh.get_scores_from_ids(terms * 2))


def test_keyword_rows_keep_their_number_across_refreshes_and_score_as_fresh_indexes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Limits a few dozen documents stay under for six refreshes (the default is a quarter).
    monkeypatch.setattr(bm25_module, "LEXICAL_TOMBSTONES", 0.6)
    monkeypatch.setattr(bm25_module, "LEXICAL_APPENDED", 0.6)
    rng = np.random.default_rng(17)
    words = [f"{v} {n}" for v in _VERBS for n in _NOUNS]
    docs = [list(rng.choice(words, size=int(rng.integers(1, 4)))) for _ in range(40)]
    rows = tokenise([Doc(d, " ".join(d), None) for d in docs])
    index = first = Lexical(rows)
    for step in range(6):
        # A document dropped, one moved (dropped and added again), two added, one new word.
        keep = [i for i in range(len(docs)) if i not in (step, 2 * step + 5)]
        new_docs = [[f"{words[step]} zyzzyva{step}"], docs[2 * step + 5], [words[3 * step]]]
        after_docs = [docs[i] for i in keep[:10]] + new_docs + [docs[i] for i in keep[10:]]
        after = tokenise([Doc(d, " ".join(d), None) for d in after_docs])
        src = np.array(keep[:10] + [-1] * len(new_docs) + keep[10:], dtype=np.int64)
        index = index.refresh(src, after, rows)
        # The first segment is shared, not copied; only the rows added are appended.
        assert index._indices is first._indices  # pyright: ignore[reportPrivateUsage]
        fresh = Lexical(after)
        _same_scores(index, fresh)
        assert index.documents == len(after_docs)
        # Saved and read back, it is the compact index of its documents.
        _same_scores(Lexical.from_arrays(index.to_arrays("x_"), "x_"), fresh)
        docs, rows = after_docs, after
    # Past the share of rows dropped, the next refresh builds the index again compact.
    monkeypatch.setattr(bm25_module, "LEXICAL_TOMBSTONES", 0.25)
    keep = list(range(len(docs) // 2))
    after = tokenise([Doc(docs[i], " ".join(docs[i]), None) for i in keep])
    compact = index.refresh(np.array(keep, dtype=np.int64), after, rows)
    assert compact._indices is not first._indices  # pyright: ignore[reportPrivateUsage]
    assert compact._rows is None  # pyright: ignore[reportPrivateUsage]
    _same_scores(compact, Lexical(after))


def test_copies_are_grouped_by_their_whole_key_not_by_a_hash() -> None:
    caps = list(Catalog.from_tools(_SERVERS["weather"] + _SERVERS["git"], cache=False, dense=False))
    # Two different tools whose hashes collide stay apart; equal ones are one group.
    colliding = np.full(len(caps), 7, dtype=np.int64)
    groups = refresh_module.copy_groups(caps, colliding)
    assert groups.tolist() == list(range(len(caps)))
    twin = Catalog.from_tools([Tool("fork", "forecast", _SERVERS["weather"][0].description, {})], cache=False)
    both = [*caps, *twin]
    groups = refresh_module.copy_groups(both, refresh_module.copy_hashes(both))
    forecast = next(i for i, c in enumerate(both) if c.id == "mcp__weather__forecast")
    assert groups.tolist()[-1] == forecast


def test_the_process_keeps_only_the_last_catalogs_objects(tmp_path: Path) -> None:
    # Each catalog is made of new descriptor objects (a server listed again): what the
    # process keeps for the next refresh is the last catalog's, not every one seen.
    for _ in range(3):
        catalog = _catalog(_SERVERS, tmp_path)
        assert _ids(catalog, "send an email")[0] == "mcp__mail__send_email"
        last = refresh_module.last_index()
        assert last is not None
        assert [id(c) for c in last.caps] == [id(c) for c in catalog]
        assert len(last.tools.rows) == len(catalog)


_VERBS = ["get", "list", "create", "delete", "update", "search", "send", "read", "convert", "export"]
_NOUNS = ["file", "issue", "email", "event", "invoice", "image", "table", "ticket", "note", "user", "repo"]
_ADJ = ["recent", "shared", "archived", "public", "draft", "remote", "local", "weekly"]


def _synthetic(n_servers: int, seed: int) -> dict[str, list[Tool]]:
    """``n_servers`` servers of 4 to 12 tools of overlapping words (a deterministic draw)."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[Tool]] = {}
    for s in range(n_servers):
        name = f"srv{s:03d}"
        tools = []
        for t in range(int(rng.integers(4, 13))):
            verb, noun, adj = rng.choice(_VERBS), rng.choice(_NOUNS), rng.choice(_ADJ)
            schema = {
                "type": "object",
                "properties": {"id": {"type": "string", "description": f"The {noun} id."}},
            }
            tools.append(
                Tool(name, f"{verb}_{noun}_{t}", f"{verb.title()} a {adj} {noun} of server {s}.", schema)
            )
        out[name] = tools
    return out


_FULL_BUILDS: dict[str, search_module.ToolSearch] = {}
""":func:`_fresh`'s full builds by catalog hash (descriptors and server texts). A full build
is made of nothing but its catalog (the limits these tests change steer refreshes only, and
a splice by runs or row by row gives the same rows), so a catalog several tests compare
with is built once: the four variants of the scale test walk the same six catalogs."""


def _fresh(catalog: Catalog) -> search_module.ToolSearch:
    """A full build of ``catalog`` as a new process makes it, leaving this process's kept
    index (the refreshes' base) as it was."""
    full = _FULL_BUILDS.get(catalog.hash)
    if full is not None:
        return full
    kept = refresh_module.last_index()
    try:
        forget()
        full = Catalog(list(catalog), dict(catalog.servers), cache=False, dense=False).index()
    finally:
        refresh_module.remember(kept)
    _FULL_BUILDS[catalog.hash] = full
    return full


# max_runs 0: every splice gathers row by row; tombstones 0.02: the store is compacted when
# a server goes, and the refreshes after it start from the compact store; dense_cells 0: the
# corrections' products summed over pairs of cells, not as a table of positions by tokens.
@pytest.mark.parametrize(
    ("max_runs", "tombstones", "dense_cells"),
    [(4096, 0.25, 1 << 22), (0, 0.25, 1 << 22), (4096, 0.02, 1 << 22), (4096, 0.25, 0)],
)
def test_refreshes_at_scale_rank_as_fresh_builds_and_touch_only_what_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_runs: int, tombstones: float, dense_cells: int
) -> None:
    monkeypatch.setattr(rows_module, "_MAX_RUNS", max_runs)
    monkeypatch.setattr(sums_module, "TOMBSTONES", tombstones)
    monkeypatch.setattr(sums_module, "_DENSE_CELLS", dense_cells)
    # Only the dropped rows compact the store here: these servers' few words are in every
    # row, so the corrections would pass their own limit (tested on its own above).
    monkeypatch.setattr(sums_module, "CELLS_PER_ROW", float("inf"))
    made: list[str] = []
    real_doc = documents_module.server_doc

    def spy_doc(name: str, text: str, members: list[str]) -> Doc:
        made.append(name)
        return real_doc(name, text, members)

    monkeypatch.setattr(documents_module, "server_doc", spy_doc)  # a whole catalog's documents
    monkeypatch.setattr(refresh_module, "server_doc", spy_doc)  # a refresh's changed servers
    vectors: list[int] = []
    real_vectors = pooling_module.Pooled.vectors
    monkeypatch.setattr(
        pooling_module.Pooled,
        "vectors",
        lambda self, a: vectors.append(len(self.plain)) or real_vectors(self, a),
    )
    tools = _synthetic(80, seed=7)
    tools["copy"] = [Tool("copy", t.name, t.description, t.input_schema) for t in tools["srv001"]]
    _TEXTS.update({s: f"Server {s}." for s in tools})
    catalog = _catalog(tools, tmp_path)
    catalog.index()
    n_tools = len(catalog)
    assert n_tools > 500
    queries = ["send the weekly email", "delete an archived ticket", "export a table", "repo of server 12"]
    steps: list[tuple[str, dict[str, list[Tool]]]] = [
        (
            "a tool added",
            dict(tools, srv010=[*tools["srv010"], Tool("srv010", "zap_widget", "Zap a widget.", {})]),
        ),
        ("a tool gone", dict(tools, srv020=tools["srv020"][1:])),
        ("a description changed", dict(tools, srv030=[Tool("srv030", "only", "Read a remote invoice.", {})])),
        ("a server gone", {s: t for s, t in tools.items() if s != "srv040"}),
        ("a server added", dict(tools, srv999=[Tool("srv999", "get_email", "Get a recent email.", {})])),
        (
            "a copy made",
            dict(
                tools, copy2=[Tool("copy2", t.name, t.description, t.input_schema) for t in tools["srv002"]]
            ),
        ),
    ]
    stores = [catalog.index()._parts.tools.sums.store]  # pyright: ignore[reportPrivateUsage]
    try:
        for label, changed in steps:
            unchanged = {
                s: c for s, c in _by_server(catalog).items() if s in changed and changed[s] == tools.get(s)
            }
            made.clear()
            vectors.clear()
            refreshed = _catalog(changed, tmp_path, unchanged)
            index = refreshed.index()
            # Only the changed servers' documents were made again, and no tool vectors at all.
            assert len(made) <= 2, (label, made)
            assert all(v < n_tools for v in vectors), (label, vectors)
            stores.append(index._parts.tools.sums.store)  # pyright: ignore[reportPrivateUsage]
            full = _fresh(refreshed)
            assert index.ids == full.ids, label
            assert index._groups.tolist() == full._groups.tolist(), label  # pyright: ignore[reportPrivateUsage]
            for query in queries:
                mine, theirs = index.signals(query), full.signals(query)
                assert np.array_equal(mine["lexical"], theirs["lexical"]), (label, query)  # BM25 bit for bit
                for name in ("static", "server"):
                    assert np.allclose(mine[name], theirs[name], atol=1e-4), (label, query, name)
                assert [i for i, _ in index.top(query, 10)] == [i for i, _ in full.top(query, 10)], (
                    label,
                    query,
                )
            catalog, tools = refreshed, changed
        # The rows stay in one store, but for the compaction when the dropped rows pass the
        # limit (a server of 4 to 12 tools gone, after 6 other rows dropped, passes 2%).
        compactions = sum(a is not b for a, b in itertools.pairwise(stores))
        assert compactions == (0 if tombstones == 0.25 else 1), stores
        assert stores[1] is stores[0]
    finally:
        for s in list(_TEXTS):
            if s not in ("weather", "git", "mail"):
                del _TEXTS[s]


def test_a_new_process_derives_a_changed_catalog_from_the_last_folder_as_a_fresh_build(
    tmp_path: Path, pooled: list[int]
) -> None:
    tools = _synthetic(60, seed=11)
    _TEXTS.update({s: f"Server {s}." for s in tools})
    try:
        _catalog(tools, tmp_path).index()
        steps: list[Callable[[dict[str, list[Tool]]], dict[str, list[Tool]]]] = [
            lambda t: dict(t, srv010=[*t["srv010"], Tool("srv010", "zap_widget", "Zap a widget.", {})]),
            lambda t: dict(t, srv020=t["srv020"][1:]),
            lambda t: {s: tools for s, tools in t.items() if s != "srv040"},
            lambda t: dict(t, srv030=[Tool("srv030", "only", "Read a remote invoice.", {})]),
        ]
        queries = ["send the weekly email", "zap a widget", "read a remote invoice", "repo of server 12"]
        for step in steps:
            changed = tools = step(tools)
            flush()  # the last catalog's folder written, then forgotten: a new process
            forget()
            pooled.clear()
            catalog = _catalog(changed, tmp_path)  # new objects, as a new process has
            index = catalog.index()
            # The changed server's rows pooled (its new tool, its text): not every row.
            assert sum(pooled) <= 2, pooled
            full = _fresh(catalog)
            assert index.ids == full.ids
            assert index._groups.tolist() == full._groups.tolist()  # pyright: ignore[reportPrivateUsage]
            for query in queries:
                mine, theirs = index.signals(query), full.signals(query)
                assert np.array_equal(mine["lexical"], theirs["lexical"]), query  # BM25 bit for bit
                for name in ("static", "server"):
                    assert np.allclose(mine[name], theirs[name], atol=1e-4), (query, name)
                assert [i for i, _ in index.top(query, 10)] == [i for i, _ in full.top(query, 10)], query
    finally:
        for s in list(_TEXTS):
            if s not in ("weather", "git", "mail"):
                del _TEXTS[s]


def test_a_new_process_takes_unchanged_servers_rows_by_their_digest_and_keys_only_the_changed_server(
    tmp_path: Path, tokenised: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from keen.capabilities import _index_cache

    keyed: list[str] = []
    real_keys = documents_module.tool_keys

    def spy(caps: Sequence[Capability]) -> list[bytes]:
        keyed.extend(c.id for c in caps)
        return real_keys(caps)

    monkeypatch.setattr(documents_module, "tool_keys", spy)
    monkeypatch.setattr(_index_cache, "tool_row_keys", spy)
    tools = _synthetic(30, seed=17)
    _TEXTS.update({s: f"Server {s}." for s in tools})
    try:
        _catalog(tools, tmp_path).index()
        flush()
        [folder] = [p for p in tmp_path.iterdir() if p.name.startswith(f"v{INDEX_FORMAT}-")]
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        assert sorted(meta["blocks"]) == sorted(tools)  # one digest per server, with its tools' runs
        assert meta["server_names"] == sorted(tools)
        starts = sorted(span[0] for _, spans in meta["blocks"].values() for span in spans)
        assert starts[0] == 0 and len(starts) == len(tools)  # each server's tools one run, in id order
        srv007 = [*tools["srv007"], Tool("srv007", "zap_widget", "Zap a widget of server 7.", {})]
        changed = dict(tools, srv007=srv007)
        forget()  # a new process: new objects, the last folder on disk
        keyed.clear()
        tokenised.clear()
        catalog = _catalog(changed, tmp_path)
        index = catalog.index()
        # Only the changed server's tools were keyed, and only its new tool and its own text
        # tokenised: every other server's rows were taken by one digest.
        assert sorted(keyed) == sorted(f"mcp__srv007__{t.name}" for t in srv007)
        assert len(tokenised) == 2
        assert any("zap widget" in text for text in tokenised)
        full = _fresh(catalog)
        assert index.ids == full.ids
        for query in ["zap a widget", "send the weekly email", "repo of server 12"]:
            mine, theirs = index.signals(query), full.signals(query)
            assert np.array_equal(mine["lexical"], theirs["lexical"]), query  # BM25 bit for bit
            for name in ("static", "server"):
                assert np.allclose(mine[name], theirs[name], atol=1e-4), (query, name)
            assert [i for i, _ in index.top(query, 10)] == [i for i, _ in full.top(query, 10)], query
        # A server's text changed: its tools keep their rows by key, its own row is made again.
        flush()
        forget()
        keyed.clear()
        tokenised.clear()
        _TEXTS["srv012"] = "Server srv012, now with a longer text."
        again = _catalog(changed, tmp_path)
        again.index()
        assert sorted(keyed) == sorted(f"mcp__srv012__{t.name}" for t in changed["srv012"])
        assert len(tokenised) == 1  # the server's document
    finally:
        for s in list(_TEXTS):
            if s not in ("weather", "git", "mail"):
                del _TEXTS[s]


def _saved_folder(tmp_path: Path) -> Path:
    """The cache folder of ``_SERVERS``' index, built and written in ``tmp_path``."""
    _catalog(_SERVERS, tmp_path).index()
    flush()
    [folder] = [p for p in tmp_path.iterdir() if p.name.startswith(f"v{INDEX_FORMAT}-")]
    return folder


def _as_a_new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget this process's last index and every neighbour candidate it knows."""
    forget()
    refresh_module._candidates.cache_clear()  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(refresh_module, "_stored_candidates", None)


def _refreshed_with_a_new_mail_tool(loaded: Catalog, tmp_path: Path) -> Catalog:
    """``loaded`` refreshed with one new tool on the mail server, which it finds first."""
    changed = dict(
        _SERVERS, mail=[*_SERVERS["mail"], Tool("mail", "archive_thread", "Archive a mail thread.", {})]
    )
    refreshed = _catalog(changed, tmp_path, {s: c for s, c in _by_server(loaded).items() if s != "mail"})
    assert _ids(refreshed, "archive the mail thread")[0] == "mcp__mail__archive_thread"
    assert refreshed.index()._neighbours.stems  # pyright: ignore[reportPrivateUsage]
    return refreshed


def test_a_refresh_after_a_warm_load_takes_the_neighbour_candidates_from_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _saved_folder(tmp_path)
    stored = json.loads((folder / "meta.json").read_text(encoding="utf-8"))["candidates"]
    tokens, stems = refresh_module.known_candidates() or ([], ())
    assert stored["tokens"] == list(tokens) and stored["stems"] == list(stems)
    # A new process: nothing of the candidates known, none may be stemmed again.
    _as_a_new_process(monkeypatch)
    stemmed: list[int] = []
    monkeypatch.setattr(refresh_module, "neighbour_candidates", lambda: stemmed.append(1) or ([], ()))
    loaded = _catalog(_SERVERS, tmp_path)
    loaded.index()
    _refreshed_with_a_new_mail_tool(loaded, tmp_path)
    assert stemmed == []


def test_row_keys_and_folder_names_tell_apart_fields_that_join_to_the_same_text(tmp_path: Path) -> None:
    import dataclasses

    from keen.capabilities import _index_cache

    [cap] = list(Catalog.from_tools([Tool("mail", "send", "Send a message.", {})], cache=False, dense=False))
    moved = dataclasses.replace(cap, title=cap.title + cap.summary[:1], summary=cap.summary[1:])
    assert cap.title + cap.summary == moved.title + moved.summary
    keys = documents_module.tool_keys([cap, moved, cap])
    assert keys[0] != keys[1]
    assert keys[0] == keys[2]  # a key per content, not per position
    assert len(keys[0]) == 16
    servers = {"mail": "Electronic mail."}
    name = _index_cache._folder_name  # pyright: ignore[reportPrivateUsage]
    assert name([cap], servers) != name([moved], servers)
    assert name([cap], servers) != name([cap], {"mail": "Electronic mail!"})
    assert name([cap], servers) == name([cap], dict(servers))
    assert name([cap], servers).startswith(f"v{INDEX_FORMAT}-")


def _caps_of(server: str, tools: list[Tool]) -> list[Capability]:
    """``server``'s descriptors in id order, as CatalogCache keeps a server's part."""
    made = list(Catalog.from_tools(tools, cache=False, dense=False))
    return sorted((c for c in made if c.server == server), key=lambda c: c.id)


def test_a_catalog_with_servers_replaced_is_the_whole_catalog_and_its_index_matches_no_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tokenised: list[str]
) -> None:
    tools = _synthetic(40, seed=13)
    _TEXTS.update({s: f"Server {s}." for s in tools})
    queries = ["send the weekly email", "zap a widget", "get a recent email", "repo of server 12"]
    try:
        first = _catalog(tools, tmp_path)
        first.index()
        srv010 = [*tools["srv010"], Tool("srv010", "zap_widget", "Zap a widget.", {})]
        added = [Tool("srv999", "get_email", "Get a recent email.", {})]
        replaced = first.with_servers(
            {
                "srv010": ("Server srv010, now zapping.", _caps_of("srv010", srv010)),
                "srv020": None,
                "srv999": ("Server srv999.", _caps_of("srv999", added)),
            }
        )
        kept = [c for c in first if c.server not in ("srv010", "srv020")]
        texts = {s: t for s, t in first.servers.items() if s != "srv020"}
        texts |= {"srv010": "Server srv010, now zapping.", "srv999": "Server srv999."}
        whole = Catalog(
            [*kept, *_caps_of("srv010", srv010), *_caps_of("srv999", added)], texts, cache=False, dense=False
        )
        assert [c.id for c in replaced] == [c.id for c in whole]
        assert list(replaced.servers.items()) == list(whole.servers.items())  # sorted, as made whole
        assert dict(replaced.names) == dict(whole.names)
        assert len(replaced) == len(whole) and "mcp__srv020__" not in "".join(c.id for c in replaced)
        assert replaced.get(whole.names["mcp__srv999__get_email"]).id == "mcp__srv999__get_email"
        assert all(replaced.get(c.id) is c for c in replaced)
        assert replaced.hash == whole.hash
        # Its index is derived from the last one by position: no object matched, only the
        # replaced servers' new documents tokenised (their tools and their texts).
        monkeypatch.setattr(refresh_module, "object_table", _no_object_table)
        tokenised.clear()
        index = replaced.index()
        assert len(tokenised) == 4, tokenised  # zap_widget, get_email, srv010's and srv999's texts
        assert _ids(replaced, "zap a widget", k=1) == ["mcp__srv010__zap_widget"]
        monkeypatch.undo()
        _same_ranking(index, _fresh(replaced), queries)
    finally:
        for s in list(_TEXTS):
            if s not in ("weather", "git", "mail"):
                del _TEXTS[s]


def _no_object_table(caps: Sequence[Capability]) -> tuple[np.ndarray, np.ndarray]:
    raise AssertionError("the index matched the catalog's objects one by one")


def test_a_catalog_with_servers_replaced_is_made_whole_when_ids_nest_or_names_clash(tmp_path: Path) -> None:
    # "a"'s ids run holds "a__b"'s ("mcp__a__b__..." sorts among "mcp__a__..."), and a new
    # tool of "s" is named what an older one's id projects to: both are placed again.
    clash = "mcp__s__x_y_" + hashlib.sha256(b"mcp__s__x.y").hexdigest()[:8]
    tools = {
        "a": [Tool("a", "zeta", "Zeta of a.", {}), Tool("a", "alpha", "Alpha of a.", {})],
        "a__b": [Tool("a__b", "mid", "Mid of a b.", {})],
        "s": [Tool("s", "x.y", "A dotted tool.", {})],
    }
    first = Catalog(
        [c for s, t in tools.items() for c in _caps_of(s, t)], {s: s for s in tools}, cache_dir=tmp_path
    )
    assert first.names["mcp__s__x.y"] == clash
    changes: list[dict[str, tuple[str, list[Capability]] | None]] = [
        {"a": ("a", _caps_of("a", [*tools["a"], Tool("a", "b__zz", "Deep.", {})]))},
        {"s": ("s", _caps_of("s", [*tools["s"], Tool("s", clash.removeprefix("mcp__s__"), "Clash.", {})]))},
        {"a__b": None, "a": None},
    ]
    expected = [
        ["mcp__a__alpha", "mcp__a__b__mid", "mcp__a__b__zz", "mcp__a__zeta", "mcp__s__x.y"],
        ["mcp__a__alpha", "mcp__a__b__mid", "mcp__a__b__zz", "mcp__a__zeta", "mcp__s__x.y", clash],
        ["mcp__s__x.y", clash],
    ]
    catalog = first
    for change, ids in zip(changes, expected, strict=True):
        catalog = catalog.with_servers(change)
        assert [c.id for c in catalog] == ids
        # The same catalog as made whole from the same descriptors and texts.
        whole = Catalog(list(catalog), dict(catalog.servers), cache=False, dense=False)
        assert [c.id for c in whole] == ids
        assert dict(catalog.names) == dict(whole.names)
        assert [h.id for h in catalog.search("dotted tool", k=3)] == [
            h.id for h in whole.search("dotted tool", k=3)
        ]
    assert catalog.names["mcp__s__x.y"] != clash  # the clash resolved as model_names resolves it
    assert catalog.names[clash] == clash


def test_stored_neighbour_candidates_this_vocabulary_cannot_hold_are_computed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _saved_folder(tmp_path)
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    meta["candidates"]["tokens"][0] = 10**9  # a damaged or foreign folder of the same format
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    # A new process: the candidates come from the folder.
    _as_a_new_process(monkeypatch)
    loaded = _catalog(_SERVERS, tmp_path)
    loaded.index()
    seeded = refresh_module.known_candidates()
    assert seeded is not None and int(seeded[0][0]) == 10**9  # what the test is about was read
    _refreshed_with_a_new_mail_tool(loaded, tmp_path)


def test_an_empty_catalogs_cache_folder_loads_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A catalog with no tools (keen chat's first step while every server still connects)
    is saved with zero-row arrays; a new process reads them back, not "unreadable"."""
    assert Catalog([], {}, cache_dir=tmp_path, dense=False).search("current time", k=3) == []
    flush()  # the folder is written in the background
    assert [p for p in tmp_path.iterdir() if p.name.startswith("v")]
    forget()  # a new process
    with caplog.at_level("WARNING", logger="keen.capabilities._index_cache"):
        assert Catalog([], {}, cache_dir=tmp_path, dense=False).search("current time", k=3) == []
    assert "unreadable" not in caplog.text


def test_an_index_is_not_saved_into_a_keen_home_removed_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``keen demo`` removes its temporary KEEN_HOME when it ends; the index its searches
    left to be written in the background (or at exit) must not make that folder again."""
    monkeypatch.setattr(index_cache, "_WRITE_DELAY_S", 3600.0)  # only flush() writes
    home = tmp_path / "home"
    home.mkdir()
    cache = home / "cache" / "toolsearch"
    assert _ids(_catalog(_SERVERS, cache), "weather forecast for Paris")[0] == "mcp__weather__forecast"
    shutil.rmtree(home)
    flush()  # what the process does at exit
    assert not home.exists()
    # A KEEN_HOME still there gets its index, its cache folder made as ever.
    kept = tmp_path / "kept"
    kept.mkdir()
    assert (
        _ids(_catalog(_SERVERS, kept / "cache" / "toolsearch"), "send an email")[0] == "mcp__mail__send_email"
    )
    flush()
    assert [p for p in (kept / "cache" / "toolsearch").iterdir() if p.name.startswith("v")]


class _WatchedLock:
    """The index writers' lock, telling when a write has come to it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reached = threading.Event()

    def __enter__(self) -> None:
        self.reached.set()
        self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def test_a_write_waiting_for_another_does_not_make_a_keen_home_removed_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write held up by another (an eviction, a second catalog's) while ``keen demo``
    removes its KEEN_HOME finds the home gone once its turn comes."""
    monkeypatch.setattr(index_cache, "_WRITE_DELAY_S", 3600.0)  # only flush() writes
    watched = _WatchedLock()
    monkeypatch.setattr(index_cache, "_one_writer", watched)
    home = tmp_path / "home"
    home.mkdir()
    with watched.lock:  # another write in progress
        assert _ids(_catalog(_SERVERS, home / "cache" / "toolsearch"), "weather forecast")[0] == (
            "mcp__weather__forecast"
        )
        flushing = threading.Thread(target=flush)
        flushing.start()
        assert watched.reached.wait(60)  # the write waits for the lock now
        shutil.rmtree(home)
    flushing.join(60)
    assert not flushing.is_alive()
    assert not home.exists(), sorted(str(p) for p in home.rglob("*"))


def test_a_keen_home_removed_during_a_write_is_not_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The home removed once the write has begun: the folders below it are made one at a
    time, never the home itself, and the write gives up without a warning."""
    monkeypatch.setattr(index_cache, "_WRITE_DELAY_S", 3600.0)  # only flush() writes
    home = tmp_path / "home"
    home.mkdir()
    known = refresh_module.known_candidates

    def removing_the_home() -> object:
        # _save asks for the candidates before it makes any folder: remove the home there.
        if threading.current_thread().name == "keen-toolsearch-save" and home.exists():
            shutil.rmtree(home)
        return known()

    monkeypatch.setattr(refresh_module, "known_candidates", removing_the_home)
    assert (
        _ids(_catalog(_SERVERS, home / "cache" / "toolsearch"), "send an email")[0] == "mcp__mail__send_email"
    )
    with caplog.at_level("WARNING", logger="keen.capabilities._index_cache"):
        flush()
    assert not home.exists(), sorted(str(p) for p in home.rglob("*"))
    assert "cannot cache" not in caplog.text
