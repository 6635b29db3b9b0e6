"""ToolSearch's word vectors: IDF-weighted pooling over the catalog, and query words'
neighbours for BM25; both kept with the cached index."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import keen.capabilities._neighbours as neighbours_module  # pyright: ignore[reportPrivateUsage]
from keen.capabilities import Catalog
from keen.capabilities._embed import (  # pyright: ignore[reportPrivateUsage]
    embedder,
    idf_weights,
    pool,
    token_ids,
)
from keen.capabilities._neighbours import NeighbourTerms  # pyright: ignore[reportPrivateUsage]
from keen.capabilities._text import stem_tokens  # pyright: ignore[reportPrivateUsage]
from keen.capabilities.search import semantic_text
from keen.mcp.types import Tool

# Four tools worded alike ("Get the information about ...") and one that is not.
_INFO_TOOLS = [
    Tool("weather", "forecast", "Weather forecast for a city: rain, wind and temperature.", {}),
    Tool("files", "get_file_info", "Get the information about a file.", {}),
    Tool("db", "get_table_info", "Get the information about a table.", {}),
    Tool("accounts", "get_user_info", "Get the information about a user.", {}),
    Tool("calendar", "get_event_info", "Get the information about an event.", {}),
]


def test_idf_weights_favour_rare_tokens_and_cap_unseen_ones() -> None:
    vocab = embedder().tokenizer.get_vocab()
    [common, rare, unseen] = [vocab["\u2581" + w] for w in ("the", "weather", "river")]
    docs = [np.array([common, rare], dtype=np.int32), *[np.array([common], dtype=np.int32)] * 3]
    weights = idf_weights(docs)
    assert weights[common] < weights[rare]
    # A token no tool uses weighs as much as one that one tool uses, not more: in a small
    # catalog most words are unseen, and they would outweigh every word the catalog has.
    assert weights[unseen] == weights[rare]
    assert weights.shape == (embedder().embedding.shape[0],)


def test_pool_gives_unit_vectors_and_zero_for_an_empty_text() -> None:
    ones = np.ones(embedder().embedding.shape[0], dtype=np.float32)
    vectors = pool([*token_ids(["weather forecast"]), np.zeros(0, dtype=np.int32)], ones)
    assert abs(float(np.linalg.norm(vectors[0])) - 1.0) < 1e-5
    assert not vectors[1].any()
    # With equal weights, pooling is wordllama's own mean.
    plain = np.asarray(embedder().embed(["weather forecast"], norm=True), dtype=np.float32)[0]
    assert np.allclose(vectors[0], plain, atol=1e-5)


def test_idf_pooling_ranks_by_the_word_that_tells_tools_apart() -> None:
    catalog = Catalog.from_tools(_INFO_TOOLS, cache=False)
    index = catalog.index()
    caps = {c.id: c for c in catalog}
    texts = [semantic_text(caps[i]) for i in index.ids]
    query = "get the information about the temperature"
    ones = np.ones(embedder().embedding.shape[0], dtype=np.float32)
    # A plain mean of word vectors: the query's words it shares with the get_*_info tools
    # ("get the information about the") outweigh the one word that matters.
    plain = pool(token_ids(texts), ones) @ pool(token_ids([query]), ones)[0]
    assert index.ids[int(np.argmax(plain))] != "mcp__weather__forecast"
    # Weighted by IDF over the catalog, those shared words count little: the weather tool wins.
    weighted = index._static_scores(pool(token_ids([query]), index._token_weights)[0])  # pyright: ignore[reportPrivateUsage]
    assert index.ids[int(np.argmax(weighted))] == "mcp__weather__forecast"
    assert catalog.search(query, k=1)[0].id == "mcp__weather__forecast"


_DEPARTURES = [
    Tool("rail", "departures", "Departure times of the trains leaving a station.", {}),
    Tool("flights", "departures", "Departure times of the planes leaving an airport.", {}),
    Tool("bus", "departures", "Departure times of the buses leaving a stop.", {}),
    Tool("shop", "checkout", "Pay for the cart and place the order.", {}),
]


def test_a_query_words_neighbour_breaks_a_lexical_tie() -> None:
    # "railway" is no word of the catalog; its neighbour "train" is. BM25 of the query's own
    # words ties the three departure tools; with the neighbour, the rail tool leads.
    index = Catalog.from_tools(_DEPARTURES, cache=False).index()
    query = "railway departures"
    tokens = stem_tokens([query])
    rail, flights = index.ids.index("mcp__rail__departures"), index.ids.index("mcp__flights__departures")
    own = index._lexical(index._bm25, tokens, len(index.ids))  # pyright: ignore[reportPrivateUsage]
    assert own[rail] == own[flights] > 0
    expanded = index._expanded_lexical(query, tokens)  # pyright: ignore[reportPrivateUsage]
    assert expanded[rail] > expanded[flights] == own[flights]
    assert expanded[index.ids.index("mcp__shop__checkout")] == 0


def test_neighbours_leave_out_the_querys_own_words_and_unrelated_ones() -> None:
    index = Catalog.from_tools(_DEPARTURES, cache=False).index()
    terms = {v: k for k, v in index._bm25.vocab_dict.items()}  # pyright: ignore[reportPrivateUsage]
    neighbours = index._neighbours  # pyright: ignore[reportPrivateUsage]

    def found(query: str) -> list[str]:
        return [terms[t] for t, _ in neighbours.expand(query, set(stem_tokens([query])))]

    assert found("railway") == ["train"]
    assert "train" not in found("trains railway")  # the query says it already
    assert found("purchase the basket") == []  # no catalog word is close enough
    assert all(0.6 <= s <= 1.0 for _, s in neighbours.expand("aircraft railway", set()))


def test_the_neighbour_cache_stays_bounded_and_answers_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    index = Catalog.from_tools(_DEPARTURES, cache=False).index()
    queries = ["railway departures", "when does my aircraft leave", "coach to the airport", "railway"]
    fresh = [NeighbourTerms(index._bm25.vocab_dict).expand(q, set()) for q in queries]  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(neighbours_module, "_CACHED_TOKENS", 3)
    small = NeighbourTerms(index._bm25.vocab_dict)  # pyright: ignore[reportPrivateUsage]
    assert [small.expand(q, set()) for q in queries] == fresh
    assert len(small._near) <= 3 + 4  # pyright: ignore[reportPrivateUsage]  # cleared when full


def test_the_cached_index_keeps_its_token_weights(tmp_path: Path) -> None:
    # The static signal only: the transformer's readiness would differ between the two.
    built = Catalog.from_tools(_INFO_TOOLS, cache_dir=tmp_path, dense=False).index()
    loaded = Catalog.from_tools(_INFO_TOOLS, cache_dir=tmp_path, dense=False).index()
    assert loaded is not built
    assert np.array_equal(loaded._token_weights, built._token_weights)  # pyright: ignore[reportPrivateUsage]
    query = "get the information about the temperature"
    assert np.allclose(loaded.scores(query), built.scores(query), atol=1e-3)  # float16 vectors on disk
