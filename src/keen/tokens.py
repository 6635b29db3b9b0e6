"""Token counts for prompt-size figures (``keen prompt --stats``, ``bench/footprint.py``).

Exact counts use tiktoken's ``o200k_base`` (the GPT-4o family tokenizer) when its
encoding file is on this machine; Keen never downloads it. Looked for, in order:

1. ``$KEEN_TOKENIZER_FILE`` (a path to ``o200k_base.tiktoken``),
2. tiktoken's own cache (``$TIKTOKEN_CACHE_DIR``, ``$DATA_GYM_CACHE_DIR`` or
   ``<tmp>/data-gym-cache``) under its cache key for this encoding,
3. ``$KEEN_HOME/tokenizers/o200k_base.tiktoken``.

Otherwise counts are an estimate, ``ceil(utf8_bytes / 4)`` (OpenAI's rule of thumb
for English text; JSON schemas tokenize a little denser, so the estimate runs ~10-25%
low on them), and ``TokenCounter.name`` says ``estimate:bytes/4``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from keen import paths

__all__ = ["O200K_CACHE_KEY", "O200K_SHA256", "TokenCounter", "find_o200k_file", "token_counter"]

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_CACHE_KEY = "fb374d419588a4632f3f557e76b4b70aebbca790"
"""sha1 of tiktoken's download URL for o200k_base: the file name in tiktoken's cache."""


@dataclass(frozen=True)
class TokenCounter:
    """``count(text) -> int``; ``name`` is ``tiktoken:o200k_base`` or ``estimate:bytes/4``."""

    name: str
    count: Callable[[str], int]

    @property
    def exact(self) -> bool:
        return self.name.startswith("tiktoken:")


def find_o200k_file() -> Path | None:
    """The first local o200k_base encoding file in the search order of the module doc."""
    candidates: list[Path] = []
    if explicit := os.environ.get("KEEN_TOKENIZER_FILE"):
        candidates.append(Path(explicit))
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if value := os.environ.get(var):
            candidates.append(Path(value) / O200K_CACHE_KEY)
    candidates.append(Path(tempfile.gettempdir()) / "data-gym-cache" / O200K_CACHE_KEY)
    candidates.append(paths.keen_home() / "tokenizers" / "o200k_base.tiktoken")
    for path in candidates:
        if path.is_file():
            return path
    return None


@functools.cache
def _load_o200k(path: str) -> Callable[[str], int] | None:
    try:
        import tiktoken
    except ImportError:
        return None
    data = Path(path).read_bytes()
    if hashlib.sha256(data).hexdigest() != O200K_SHA256:
        return None
    # tiktoken loads encodings only through its cache: point the cache at a private dir
    # holding this file under tiktoken's key, just for the load.
    with tempfile.TemporaryDirectory(prefix="keen-tiktoken-") as cache:
        (Path(cache) / O200K_CACHE_KEY).write_bytes(data)
        with _env("TIKTOKEN_CACHE_DIR", cache):
            encoding = tiktoken.get_encoding("o200k_base")
    return lambda text: len(encoding.encode(text, disallowed_special=()))


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _estimate(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / 4)


def token_counter() -> TokenCounter:
    """tiktoken o200k_base when its file is local (and tiktoken installed), else the estimate."""
    path = find_o200k_file()
    if path is not None:
        count = _load_o200k(str(path))
        if count is not None:
            return TokenCounter("tiktoken:o200k_base", count)
    return TokenCounter("estimate:bytes/4", _estimate)
