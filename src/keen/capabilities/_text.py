"""Text for the search index: identifier splitting, word tokens, English stemming.

Standard library only at import time; PyStemmer is loaded on first use (the CLI and the
catalog must import fast). Tokens are lowercase. A name such as ``getPullRequest``,
``get_pull_request``, ``get-pull-request``, ``repo.get`` or ``github/get`` splits into
its words; CJK text becomes one token per character (no word segmenter ships here).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable

__all__ = ["STOPWORDS", "split_identifier", "stem_tokens", "stem_words", "words"]

# camelCase / PascalCase / acronym boundaries and letter-digit boundaries.
_CAMEL = re.compile(
    r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])"
)
_WORD = re.compile(r"[A-Za-z0-9]+|[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")

# A short English stopword list: words that occur in most tool descriptions and queries
# and carry no intent ("the", "a", "using", "tool").
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "such",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "this",
        "those",
        "to",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "will",
        "with",
        "you",
        "your",
        "please",
        "using",
        "use",
        "used",
        "via",
        "tool",
        "tools",
        "mcp",
        "server",
    ]
)


@functools.lru_cache(maxsize=65536)  # names, split again for every catalog that holds them
def split_identifier(name: str) -> str:
    """``name`` with ``_ - . / :`` and case changes turned into spaces (``getPR_list`` ->
    ``get PR list``)."""
    return " ".join(_CAMEL.sub(" ", part) for part in re.split(r"[\s_\-./:]+", name) if part)


def words(text: str) -> list[str]:
    """Lowercase word tokens of ``text`` (identifiers split first), stopwords kept.

    The same words as ``_WORD.findall(split_identifier(text))``: a separator split on there
    is never part of a word, and a case or digit boundary needs letters or digits on both
    sides, so splitting at separators first changes nothing. One substitution over the
    whole text is several times faster on a long description (the index tokenises every
    tool's)."""
    return [w.lower() for w in _WORD.findall(_CAMEL.sub(" ", text))]


@functools.cache
def _stemmer() -> Callable[[list[str]], list[str]]:
    import Stemmer  # PyStemmer: Snowball English

    return Stemmer.Stemmer("english").stemWords


def stem_tokens(texts: Iterable[str]) -> list[str]:
    """Stemmed, stopword-free tokens of ``texts`` joined (bm25s input)."""
    tokens = [w for text in texts for w in words(text) if w not in STOPWORDS]
    return _stemmer()(tokens) if tokens else []


def stem_words(items: list[str]) -> list[str]:
    """The Snowball English stem of each of ``items`` (lowercase words), in order."""
    return _stemmer()(items) if items else []
