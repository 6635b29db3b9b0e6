"""BLAKE2b and SHA-256 without importing :mod:`hashlib` where CPython has them built in.

``import hashlib`` loads OpenSSL's ``_hashlib`` first, about 3.5 ms of CPU at each start
(about a tenth of the 100 ms a usable prompt may cost, ``bench/prompt_start.py``); the prompt's caches only
hash with BLAKE2b and SHA-256, which CPython also builds as its own modules (``_blake2``,
and ``_sha256``, called ``_sha2`` from Python 3.12). The digests are the same algorithms,
so they are byte for byte :mod:`hashlib`'s; when a build lacks those modules, hashlib's
are used.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["blake2b", "sha256"]

blake2b: Callable[..., Any]
sha256: Callable[..., Any]

try:
    from _blake2 import blake2b
except ImportError:  # a build without CPython's own BLAKE2
    from hashlib import blake2b

if sys.version_info >= (3, 12):
    try:
        from _sha2 import sha256  # pyright: ignore[reportMissingImports, reportUnknownVariableType]
    except ImportError:
        from hashlib import sha256
else:
    try:
        from _sha256 import sha256  # pyright: ignore[reportMissingImports, reportUnknownVariableType]
    except ImportError:
        from hashlib import sha256
