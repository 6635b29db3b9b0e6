"""ToolSearch's transformer signal: the installed model, its hash check and fallback, the
vector cache keyed by each tool's text, and searches that never wait for indexing."""

from __future__ import annotations

import hashlib
import shutil
import sysconfig
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from keen.capabilities import Catalog, encoder
from keen.capabilities import dense as dense_module
from keen.capabilities.dense import shared_cache
from keen.mcp.types import Tool

# These tests are of the vector cache (its folder, what it holds when): not the worker's shared one.
pytestmark = pytest.mark.own_vector_cache

TOOLS = [
    Tool("git", "git_status", "Show the working tree status: staged, unstaged and untracked files.", {}),
    Tool("time", "get_current_time", "Get the current time in a given IANA timezone.", {}),
    Tool("files", "move_file", "Move or rename a file or a directory.", {}),
]


@pytest.fixture(autouse=True)
def _fresh_vector_cache() -> Iterator[None]:
    """Each test starts with no vectors in memory, as a new process would."""
    shared_cache.cache_clear()
    yield
    shared_cache.cache_clear()


@pytest.fixture
def fresh_encoder() -> Iterator[None]:
    """The test loads the encoder as a new process would (what a load checks and does is
    under test), and leaves the installed one to be loaded again. The other tests use the
    process's encoder, loaded once: about 0.5 s of CPU a load, its int8 query graph included."""
    encoder.reset()
    yield
    encoder.reset()


@pytest.mark.usefixtures("fresh_encoder")
def test_the_model_comes_from_the_installed_package_and_its_hashes_are_checked() -> None:
    files = encoder.model_files()
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert files.model.resolve().is_relative_to(site), files.model  # never ../shared
    assert "shared" not in files.tokenizer.resolve().parts
    assert hashlib.sha256(files.model.read_bytes()).hexdigest() == encoder.MODEL_SHA256
    model = encoder.sentence_encoder()
    assert model is not None, encoder.unavailable_reason()
    vectors = model.encode(
        ["list the files in a folder", "show what is inside a directory", "weather in Paris", ""]
    )
    assert vectors.shape == (4, encoder.DIM)
    assert np.allclose(np.linalg.norm(vectors[:3], axis=1), 1.0, atol=1e-4) and not vectors[3].any()
    # Meaning, not shared words: the two folder requests share no content word.
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2


@pytest.mark.usefixtures("fresh_encoder")
@pytest.mark.parametrize("which", ["model", "tokenizer"])
def test_a_corrupted_file_falls_back_to_wordllama_with_a_note(tmp_path: Path, which: str) -> None:
    files = encoder.model_files()
    model, tokenizer = tmp_path / "model.onnx", tmp_path / "tokenizer.json"
    shutil.copyfile(files.model, model)
    shutil.copyfile(files.tokenizer, tokenizer)
    target = model if which == "model" else tokenizer
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte
    target.write_bytes(bytes(data))
    encoder.reset(encoder.ModelFiles(model, tokenizer))
    catalog = Catalog.from_tools(TOOLS, cache=False)
    assert not catalog.wait_ready(30)
    hits = catalog.search("show the staged and unstaged changes", k=2)
    assert hits[0].id == "mcp__git__git_status"  # keywords and wordllama still rank
    assert "dense" not in hits[0].signals and {"lexical", "static"} <= set(hits[0].signals)
    status = catalog.search_status()
    assert "wordllama" in status and "SHA-256" in status and str(target) in status


def test_the_cache_encodes_only_a_changed_tool(tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "toolsearch"
    first = Catalog.from_tools(TOOLS, cache_dir=cache)
    assert first.wait_ready(60)
    dense = first.index().dense
    assert dense is not None and dense.missing == len(TOOLS)  # three tools, all new
    folder = cache.parent / "embeddings" / encoder.MODEL_ID
    assert list(folder.glob("*.npz"))
    # A new process (nothing in memory) with one tool's description changed.
    shared_cache.cache_clear()
    changed = [*TOOLS[:2], Tool("files", "move_file", "Move a file or folder to another path.", {})]
    second = Catalog.from_tools(changed, cache_dir=cache)
    again = second.index().dense
    assert again is not None and again.missing == 1
    assert second.wait_ready(60)
    # Unchanged tools kept their vectors; only the changed one differs.
    a, b = first.index().dense, second.index().dense
    assert a is not None and b is not None
    for position, cap_id in enumerate(second.index().ids):
        same = np.allclose(a.docs[position], b.docs[position], atol=1e-3)
        assert same == (cap_id != "mcp__files__move_file"), cap_id
    # The same catalog again: nothing to encode.
    shared_cache.cache_clear()
    third = Catalog.from_tools(changed, cache_dir=cache)
    assert third.index().dense is not None and third.index().dense.missing == 0  # pyright: ignore[reportOptionalMemberAccess]


def test_search_answers_before_the_vectors_are_ready_and_says_so() -> None:
    catalog = Catalog.from_tools(TOOLS, cache=False)
    # Another catalog's encoding holds the process's encoder: this one's must wait its turn.
    with dense_module._encoding:  # pyright: ignore[reportPrivateUsage]
        hits = catalog.search("what time is it in Tokyo", k=1)
        assert hits[0].id == "mcp__time__get_current_time"
        assert "dense" not in hits[0].signals
        status = catalog.search_status()
        assert "not ready (0 of 3 tools encoded)" in status and "keywords and wordllama" in status
    assert catalog.wait_ready(60)
    assert catalog.search_status() == ""
    hit = catalog.search("what time is it in Tokyo", k=1)[0]
    assert hit.id == "mcp__time__get_current_time" and "dense" in hit.signals
    assert "time" in hit.why


def test_with_every_vector_cached_the_status_says_the_model_loads_not_to_index(tmp_path: Path) -> None:
    """Every tool's vector from the cache, the encoder still busy (loading, or another
    catalog's turn): the note must not say "not ready (3 of 3 tools encoded) ... `keen tools
    index` finishes the index", which contradicts itself and sends the user to a command
    that has nothing to do."""
    cache = tmp_path / "cache" / "toolsearch"
    assert Catalog.from_tools(TOOLS, cache_dir=cache).wait_ready(60)
    shared_cache.cache_clear()  # a new process: the vectors on disk only
    catalog = Catalog.from_tools(TOOLS, cache_dir=cache)
    with dense_module._encoding:  # pyright: ignore[reportPrivateUsage]
        assert catalog.search("what time is it in Tokyo", k=1)[0].id == "mcp__time__get_current_time"
        status = catalog.search_status()
        assert "3 of 3" not in status and "keen tools index" not in status, status
        assert "model is still loading" in status and "keywords and wordllama" in status, status
    assert catalog.wait_ready(60)
    assert catalog.search_status() == ""


def test_cache_keys_ending_in_a_nul_byte_are_found_again(tmp_path: Path) -> None:
    from keen.capabilities.vector_cache import VectorCache

    keys = [b"\x01" * 15 + b"\x00", b"\x02" * 14 + b"\x00\x00", bytes(range(16))]
    vectors = np.eye(3, encoder.DIM, dtype=np.float32)
    VectorCache(tmp_path, encoder.DIM).store(keys, vectors)
    found = VectorCache(tmp_path, encoder.DIM).lookup(keys)  # a new process: read from disk
    assert all(v is not None for v in found)
    assert np.allclose(np.stack([v for v in found if v is not None]), vectors)


QUERIES = [
    "which files did I touch but not stage yet in my repo?",
    "combine chapter1.pdf and chapter2.pdf into one file",
    "what time is it in Tokyo",
    "a",
]


def test_queries_are_encoded_by_an_int8_graph_close_to_the_exact_one() -> None:
    from keen.capabilities._onnx import int8_graph

    data = encoder.model_files().model.read_bytes()
    rewritten, replaced = int8_graph(data)
    assert (
        replaced == 38
    )  # 6 layers x (query, key, value, output, two feed-forward products); word and position tables
    assert len(rewritten) != len(data)
    model = encoder.sentence_encoder()
    assert model is not None, encoder.unavailable_reason()
    assert model.wait_query_graph(60) and model.query_graph == "int8"
    exact = model.encode(QUERIES)  # tools' texts: the exact graph
    fast = np.stack([model.encode_one(q) for q in QUERIES])
    cosines = (exact * fast).sum(axis=1)
    assert cosines.min() > 0.998 and cosines.max() < 1.0 - 1e-7  # close, and not the same graph
    assert np.allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-4)


def test_a_query_vector_is_encoded_once_and_kept_read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # A cache of 8 (the limit is read at each query): pushing out 256 queries encoded 256.
    monkeypatch.setattr(encoder, "QUERY_CACHE", 8)
    model = encoder.sentence_encoder()
    assert model is not None and model.wait_query_graph(60)
    first = model.encode_one(QUERIES[0])
    assert model.encode_one(QUERIES[0]) is first and not first.flags.writeable
    for i in range(encoder.QUERY_CACHE):
        model.encode_one(f"query number {i}")
    again = model.encode_one(QUERIES[0])  # pushed out by newer queries: encoded again, equal
    assert again is not first and np.allclose(again, first)
    model.forget_queries()  # as bench/search.py does before each timed search
    fresh = model.encode_one(QUERIES[0])
    assert fresh is not again and np.array_equal(fresh, again)


@pytest.mark.usefixtures("fresh_encoder")
def test_queries_move_to_the_threaded_session_after_the_second_with_the_same_vectors() -> None:
    model = encoder.sentence_encoder()
    assert model is not None and model.wait_query_graph(60)
    one_thread = model._query_session  # pyright: ignore[reportPrivateUsage]
    before = [model.encode_one(q) for q in QUERIES]  # the second starts the threaded build
    encoder._join_builders()  # pyright: ignore[reportPrivateUsage]
    threaded = model._query_session  # pyright: ignore[reportPrivateUsage]
    assert threaded is not one_thread
    assert threaded.get_session_options().intra_op_num_threads == encoder.QUERY_THREADS
    model.forget_queries()
    after = [model.encode_one(q) for q in QUERIES]  # encoded again, by the threaded session
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))


@pytest.mark.usefixtures("fresh_encoder")
def test_a_threaded_session_that_cannot_be_built_leaves_queries_on_one_thread(tmp_path: Path) -> None:
    copy = tmp_path / "model.onnx"
    shutil.copyfile(encoder.model_files().model, copy)
    files = encoder.ModelFiles(copy, encoder.model_files().tokenizer)
    encoder.reset(files)
    model = encoder.sentence_encoder()
    assert model is not None and model.wait_query_graph(60) and model.query_graph == "int8"
    one_thread = model._query_session  # pyright: ignore[reportPrivateUsage]
    first = model.encode_one(QUERIES[0])
    copy.write_bytes(b"not the model any more")  # its hash is checked again before the build
    model.encode_one(QUERIES[1])  # the second: the build starts, and fails
    encoder._join_builders()  # pyright: ignore[reportPrivateUsage]
    assert model._query_session is one_thread  # pyright: ignore[reportPrivateUsage]
    model.forget_queries()
    assert np.array_equal(model.encode_one(QUERIES[0]), first)


def test_a_model_without_int8_products_is_left_as_it_is() -> None:
    from keen.capabilities._onnx import int8_graph

    # ModelProto{ir_version: 8, graph: {node: [Relu(x) -> y]}}: nothing to rewrite.
    node = b"\x0a\x01x\x12\x01y\x22\x04Relu"
    graph = b"\x0a" + bytes([len(node)]) + node
    model = b"\x08\x08\x3a" + bytes([len(graph)]) + graph
    assert int8_graph(model) == (model, 0)


@pytest.mark.parametrize("data", [b"\x0a\xff\xff", b"\x3a\x05abc", b"\x08\x01"])
def test_a_malformed_model_is_refused_by_the_rewrite(data: bytes) -> None:
    from keen.capabilities._onnx import int8_graph

    with pytest.raises(ValueError, match=r"truncated|no graph"):
        int8_graph(data)


def test_each_tool_has_four_vectors_and_its_best_cosine_counts(tmp_path: Path) -> None:
    from keen.capabilities.search import DENSE_VIEWS, dense_views

    cache = tmp_path / "cache" / "toolsearch"
    catalog = Catalog.from_tools(TOOLS, cache_dir=cache)
    assert catalog.wait_ready(60)
    index = catalog.index()
    dense = index.dense
    assert dense is not None and dense.views == DENSE_VIEWS == 4
    assert dense.all_docs.shape == (4 * len(TOOLS), encoder.DIM) and dense.total == len(TOOLS)
    model = encoder.sentence_encoder()
    assert model is not None and model.wait_query_graph(60)  # both queries below by one graph
    texts = {cap.id: dense_views(cap) for cap in catalog}
    # The whole text, its head, the description and the head in everyday verbs: four
    # vectors per tool (the last is the head's when the name has no verb of the table).
    n = len(TOOLS)
    for position, cap_id in enumerate(index.ids):
        whole, head, description, said = texts[cap_id]
        assert head.startswith("how to ") and description in whole and head in whole
        expected = model.encode([whole, head, description, said])
        got = dense.all_docs[[position + view * n for view in range(4)]]
        assert np.allclose(got, expected, atol=1e-4), cap_id
        assert np.allclose(dense.docs[position], expected[0], atol=1e-4)
    # The signal is the z-score of each tool's best cosine of the four.
    query = "move report.txt into the archive folder"
    from keen.capabilities._query import search_query, value_kinds

    vector = dense.query_vector(f"how to {value_kinds(search_query(query))}")
    assert vector is not None
    best = (dense.all_docs @ vector).reshape(4, -1).max(axis=0)
    z = (best - best.mean()) / best.std()
    signals = index.signals(query)
    assert np.allclose(signals["dense"], index.weights.dense * z, atol=1e-3)
    assert not np.allclose(best, dense.docs @ vector, atol=1e-3)  # not the whole text's alone
    # A changed description re-encodes that tool's whole text and description, not its head
    # nor its head in everyday verbs.
    shared_cache.cache_clear()
    changed = [*TOOLS[:2], Tool("files", "move_file", "Move a file or folder to another path.", {})]
    again = Catalog.from_tools(changed, cache_dir=cache)
    assert again.index().dense is not None and again.index().dense.missing == 1  # pyright: ignore[reportOptionalMemberAccess]
    assert again.wait_ready(60)
    after = again.index().dense
    assert after is not None
    spot = again.index().ids.index("mcp__files__move_file")
    before_spot = index.ids.index("mcp__files__move_file")
    for view in (1, 3):  # the head and the head in everyday verbs
        assert np.allclose(after.all_docs[spot + view * n], dense.all_docs[before_spot + view * n], atol=1e-4)
    for view in (0, 2):
        assert not np.allclose(
            after.all_docs[spot + view * n], dense.all_docs[before_spot + view * n], atol=1e-3
        )


def test_a_request_in_everyday_verbs_meets_the_name_said_in_them(tmp_path: Path) -> None:
    from keen.capabilities._query import search_query, value_kinds
    from keen.capabilities.search import dense_views, name_phrases

    tools = [
        Tool("notes", "delete_note", "Delete a note by its id.", {}),
        Tool("notes", "archive_note", "Archive a note so that it no longer shows in the list.", {}),
        Tool("notes", "list_notes", "List the notes of a notebook.", {}),
    ]
    catalog = Catalog.from_tools(tools, cache_dir=tmp_path / "cache" / "toolsearch")
    assert catalog.wait_ready(60)
    index = catalog.index()
    dense = index.dense
    assert dense is not None
    delete = catalog.get("mcp__notes__delete_note")
    assert name_phrases(delete) == "remove note, drop note"
    assert dense_views(delete)[3] == "how to delete note with notes (remove note, drop note)"
    archive = catalog.get("mcp__notes__archive_note")  # no verb of the table: the head again
    assert name_phrases(archive) == "" and dense_views(archive)[3] == dense_views(archive)[1]
    # "drop" is the request's word, not the tool's: the name said in everyday verbs meets it
    # best of the four texts, and that cosine is the one the signal counts.
    query = "drop the shopping note"
    vector = dense.query_vector(f"how to {value_kinds(search_query(query))}")
    assert vector is not None
    cosines = (dense.all_docs @ vector).reshape(4, -1)
    spot = index.ids.index(delete.id)
    assert cosines[3, spot] > cosines[:3, spot].max() + 0.02
    best = cosines.max(axis=0)
    assert np.allclose(
        index.signals(query)["dense"], index.weights.dense * (best - best.mean()) / best.std(), atol=1e-3
    )
    assert catalog.search(query, k=1)[0].id == delete.id


def test_the_server_term_counts_how_well_its_tools_match_on_average(tmp_path: Path) -> None:
    from dataclasses import replace

    from keen.capabilities.search import server_trust

    tools = [
        *TOOLS,
        Tool("git", "git_log", "Show the commit history of the repository.", {}),
        Tool("files", "read_file", "Read the whole text of a file.", {}),
    ]
    servers = {"git": "Git repositories.", "time": "Clocks and time zones.", "files": "Local files."}
    catalog = Catalog.from_tools(tools, servers, cache_dir=tmp_path / "cache" / "toolsearch")
    assert catalog.wait_ready(60)
    # Both searches must read the same query vector: until the int8 query graph is built a
    # query is encoded by the exact graph (and not remembered), after it by the int8 one.
    model = encoder.sentence_encoder()
    assert model is not None and model.wait_query_graph(60)
    index = catalog.index()
    query = "which files did I change since the last commit?"
    signals = index.signals(query)
    tools_score = signals["lexical"] + signals["static"] + signals["dense"]
    of = [catalog.get(i).server for i in index.ids]
    means = {s: float(np.mean([v for v, t in zip(tools_score, of, strict=True) if t == s])) for s in servers}
    spread = np.array(list(means.values()))
    z = {s: (m - spread.mean()) / spread.std() for s, m in means.items()}
    expected = np.array([z[s] for s in of]) * index.weights.server_tools
    expected *= index.weights.server * server_trust(len(means))
    # The same search without the term: the server signal differs by exactly that.
    without = Catalog.from_tools(tools, servers, cache_dir=tmp_path / "cache" / "toolsearch")
    plain = without.index(replace(index.weights, server_tools=0.0))
    assert plain.dense is not None and plain.dense.wait(60)
    assert index.weights.server_tools > 0
    assert np.allclose(signals["server"] - plain.signals(query)["server"], expected, atol=1e-4)


def test_a_repeated_text_is_encoded_stored_and_multiplied_once(tmp_path: Path) -> None:
    from keen.capabilities.dense import DenseVectors
    from keen.capabilities.vector_cache import VectorCache

    class RecordingCache(VectorCache):
        """A vector cache that remembers the keys it was asked to store."""

        stored: list[bytes]

        def store(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
            self.stored = [*getattr(self, "stored", []), *keys]
            super().store(keys, vectors)

    move, status = "how to move file with files: Move File", "how to git status with git: Git Status"
    # Two documents, two views each, view-major: the second document's second view repeats
    # the first document's text, as a name in no other verbs repeats the head.
    texts = [move, status, move, move]
    cache = RecordingCache(tmp_path, encoder.DIM)
    dense = DenseVectors(texts, cache, views=2)
    assert dense.wait(60), dense.status()
    assert len(cache.stored) == len(set(cache.stored)) == 2
    assert dense.distinct.shape == (2, encoder.DIM)
    assert dense.rows.tolist() == [0, 1, 0, 0]
    model = encoder.sentence_encoder()
    assert model is not None
    assert np.allclose(dense.all_docs, model.encode(texts), atol=1e-4)
    assert np.allclose(dense.docs, model.encode([move, status]), atol=1e-4)


def test_a_refreshed_catalog_makes_texts_and_keys_only_for_the_refreshed_servers_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import keen.capabilities.search as search_module
    from keen.capabilities import tool_capability

    # A refresh of one server (Catalog.with_servers) takes the other tools' transformer
    # texts and cache keys from the catalog it was made from: the same as a whole catalog
    # makes, and the new tool ranked by the transformer once its vector is there.
    cache = tmp_path / "cache" / "toolsearch"
    first = Catalog.from_tools(TOOLS, cache_dir=cache)
    assert first.wait_ready(60)
    made: list[str] = []
    views = search_module.dense_views
    monkeypatch.setattr(search_module, "dense_views", lambda cap: made.append(cap.id) or views(cap))
    new = Tool("files", "copy_file", "Copy a file to another path, leaving the original.", {})
    caps = sorted((tool_capability("files", t.to_dict()) for t in (TOOLS[2], new)), key=lambda c: c.id)
    second = first.with_servers({"files": (first.servers.get("files", ""), caps)})
    assert second.wait_ready(60)
    assert sorted(made) == ["mcp__files__copy_file", "mcp__files__move_file"]  # the refreshed server's
    whole = Catalog.from_tools([*TOOLS, new], cache_dir=cache)
    a, b = second.index().dense, whole.index().dense
    assert a is not None and b is not None and second.index().ids == whole.index().ids
    assert a._texts == b._texts and a._keys == b._keys  # pyright: ignore[reportPrivateUsage]
    assert second.search("duplicate a file, keeping the first one", k=1)[0].id == "mcp__files__copy_file"
    # A refresh of the refresh keeps them too.
    made.clear()
    third = second.with_servers(
        {"time": (second.servers.get("time", ""), [tool_capability("time", TOOLS[1].to_dict())])}
    )
    assert third.wait_ready(60) and made == ["mcp__time__get_current_time"]


def test_with_the_encoder_loaded_a_refresh_starts_its_vectors_after_its_keyword_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from keen.capabilities import tool_capability
    from keen.capabilities.search import ToolSearch

    # The vectors' thread gathers every cached vector in Python: started first, it held the
    # GIL while a refresh's keyword index was made, and the new tool was findable later.
    # With the encoder still to load, it starts first, so that the load overlaps the index.
    cache = tmp_path / "cache" / "toolsearch"
    order: list[str] = []
    cached, start = ToolSearch.cached, dense_module.DenseVectors.start

    def index(*args: object, **kwargs: object) -> ToolSearch:
        order.append("keyword index")
        return cached(*args, **kwargs)  # pyright: ignore[reportArgumentType]

    def vectors(self: dense_module.DenseVectors) -> None:
        order.append("vectors")
        start(self)

    monkeypatch.setattr(ToolSearch, "cached", staticmethod(index))
    monkeypatch.setattr(dense_module.DenseVectors, "start", vectors)
    # The first catalog as in a process that has not loaded the encoder yet; the process's
    # own encoder stays loaded (`fresh_encoder` is for the tests of a load itself).
    with monkeypatch.context() as first_start:
        first_start.setattr(encoder, "tried", lambda: False)
        first = Catalog.from_tools(TOOLS, cache_dir=cache)
        first.index()
    assert first.wait_ready(60)
    assert order[:2] == ["vectors", "keyword index"], order
    assert encoder.tried()
    order.clear()
    new = Tool("files", "copy_file", "Copy a file to another path, leaving the original.", {})
    caps = sorted((tool_capability("files", t.to_dict()) for t in (TOOLS[2], new)), key=lambda c: c.id)
    second = first.with_servers({"files": (first.servers.get("files", ""), caps)})
    assert second.search("duplicate a file, keeping the first one", k=1)[0].id == "mcp__files__copy_file"
    assert order[:2] == ["keyword index", "vectors"], order
    assert second.wait_ready(60)
    assert "dense" in second.search("duplicate a file, keeping the first one", k=1)[0].signals


def test_refreshes_back_to_back_make_texts_only_for_their_servers_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import keen.capabilities.search as search_module
    from keen.capabilities import tool_capability

    # Servers' lists arriving one after another: each refresh is made from the last before
    # its index is asked for; the last one still takes the other tools' texts and keys.
    first = Catalog.from_tools(TOOLS, cache_dir=tmp_path / "cache" / "toolsearch")
    assert first.wait_ready(60)
    made: list[str] = []
    views = search_module.dense_views
    monkeypatch.setattr(search_module, "dense_views", lambda cap: made.append(cap.id) or views(cap))
    second = first.with_servers({"time": ("", [tool_capability("time", TOOLS[1].to_dict())])})
    third = second.with_servers({"git": ("", [tool_capability("git", TOOLS[0].to_dict())])})
    assert third.wait_ready(60)
    assert sorted(made) == ["mcp__git__git_status", "mcp__time__get_current_time"]
    whole = Catalog.from_tools(TOOLS, cache_dir=tmp_path / "cache" / "toolsearch")
    a, b = third.index().dense, whole.index().dense
    assert a is not None and b is not None
    assert a._keys == b._keys  # pyright: ignore[reportPrivateUsage]


def test_a_shard_another_process_is_still_writing_is_not_read(tmp_path: Path) -> None:
    # pathlib's glob("*.npz") matches a leading dot: a reader took another process's
    # half-written temporary shard (.shard-*.npz) and the search failed with zipfile's "File
    # is not a zip file"; it now reads only shards renamed into place, and skips one cut short.
    from keen.capabilities.vector_cache import VectorCache

    keys = [bytes([n]) * 16 for n in range(3)]
    vectors = np.ones((3, encoder.DIM), dtype=np.float32)
    VectorCache(tmp_path, encoder.DIM).store(keys[:2], vectors[:2])
    other = tmp_path / "other"
    VectorCache(other, encoder.DIM).store(keys[2:], vectors[2:])
    [whole] = other.glob("*.npz")
    cut = whole.read_bytes()[:60]  # a zip's first bytes: "PK", a local header, no directory
    (tmp_path / ".shard-inflight.npz").write_bytes(cut)
    found = VectorCache(tmp_path, encoder.DIM).lookup(keys)
    assert [v is not None for v in found] == [True, True, False]
    (tmp_path / "cut.npz").write_bytes(cut)  # one cut short under a shard's name: skipped
    assert [v is not None for v in VectorCache(tmp_path, encoder.DIM).lookup(keys)] == [True, True, False]
