"""Cached sentence vectors, keyed by a hash of the text each was encoded from.

A tool's vector is encoded from its definition (server, name, title, description), so a
hash of that text is a hash of the definition as the encoder sees it: a re-index of a
catalog encodes only the tools that are new or changed, and two servers' identical tools
share one vector. Stored under ``$KEEN_HOME/cache/embeddings/<model id>/`` as shards
(``<n>.npz``: ``keys`` as ``(n, 16)`` bytes of digests, ``vectors`` as float16), each written to a
temporary name and renamed, so a reader never sees half a shard and writers in several
processes never overwrite each other. When more than :data:`MAX_SHARDS` pile up they are
merged into one that keeps at most :data:`MAX_ENTRIES` vectors, the ones used most
recently first: the folder stays bounded (about 0.8 kB a vector).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["MAX_ENTRIES", "MAX_SHARDS", "VectorCache", "text_key"]

logger = logging.getLogger(__name__)

MAX_SHARDS = 16
MAX_ENTRIES = 100_000


def text_key(model_id: str, text: str) -> bytes:
    """The 16-byte cache key of ``text`` encoded by ``model_id``."""
    return hashlib.sha256(f"{model_id}\0{text}".encode()).digest()[:16]


class VectorCache:
    """Vectors by text key, in memory and (when ``folder`` is given) on disk.

    Args:
        folder: the model's cache folder, or ``None`` to keep vectors in memory only.
        dim: the vectors' width.

    Thread-safe. Disk errors are logged and never raised: the cache only saves work.
    """

    def __init__(self, folder: Path | None, dim: int) -> None:
        self.folder = folder
        self.dim = dim
        self._lock = threading.Lock()
        self._vectors: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._loaded: set[str] = set()

    def _read_shards(self) -> None:
        """Take in any shard on disk not read yet (another process may have written one)."""
        import numpy as np

        if self.folder is None or not self.folder.is_dir():
            return
        for path in sorted(self._shards()):
            if path.name in self._loaded:
                continue
            try:
                with np.load(path) as data:
                    keys, vectors = data["keys"], data["vectors"]
                if keys.dtype != np.uint8 or keys.ndim != 2 or keys.shape[1] != 16:
                    raise ValueError(f"keys of shape {keys.shape} and type {keys.dtype}")
                if vectors.ndim != 2 or vectors.shape[1] != self.dim or len(keys) != len(vectors):
                    raise ValueError(f"shape {vectors.shape} for {len(keys)} keys")
            except FileNotFoundError:  # merged away by another process meanwhile
                continue
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
                logger.warning("embedding cache: skipping unreadable %s (%s)", path, exc)
                self._loaded.add(path.name)
                continue
            self._loaded.add(path.name)
            for key, vector in zip(keys, vectors, strict=True):
                self._vectors.setdefault(key.tobytes(), vector)

    def lookup(self, keys: Sequence[bytes]) -> list[np.ndarray | None]:
        """The vector of each key (float16), or ``None`` when it is not cached."""
        with self._lock:
            get = self._vectors.get
            found = list(map(get, keys))  # one pass over the keys, in C
            missing = [i for i, vector in enumerate(found) if vector is None]
            if missing:  # another process may have written them: only those looked up again
                self._read_shards()
                for i in missing:
                    found[i] = get(keys[i])
            recent = self._vectors.move_to_end
            for key, vector in zip(keys, found, strict=True):
                if vector is not None:
                    recent(key)
            return found

    def __len__(self) -> int:
        with self._lock:
            return len(self._vectors)

    def store(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Keep ``vectors`` (one row per key) in memory and write them as a new shard."""
        import numpy as np

        if not keys:
            return
        half = np.asarray(vectors, dtype=np.float16)
        with self._lock:
            for key, vector in zip(keys, half, strict=True):
                self._vectors[key] = vector
                self._vectors.move_to_end(key)
            if self.folder is None:
                return
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                name = self._write(list(keys), half)
                self._loaded.add(name)
                if len(self._shards()) > MAX_SHARDS:
                    self._merge()
            except OSError as exc:
                logger.warning("embedding cache: cannot write in %s (%s)", self.folder, exc)

    def _shards(self) -> list[Path]:
        """The shards in the folder, without the temporary files (``.shard-*.npz``) other
        processes are writing: :meth:`pathlib.Path.glob`'s ``*`` matches a leading dot, so a
        reader took one half-written and failed (``File is not a zip file``)."""
        assert self.folder is not None
        return [p for p in self.folder.glob("*.npz") if not p.name.startswith(".")]

    def _write(self, keys: Iterable[bytes], vectors: np.ndarray) -> str:
        import numpy as np

        assert self.folder is not None
        fd, tmp = tempfile.mkstemp(prefix=".shard-", suffix=".npz", dir=self.folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                # Raw bytes, not numpy's "S16": that type drops a key's trailing NUL bytes.
                raw = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(-1, 16)
                np.savez(handle, keys=raw, vectors=vectors)
            name = f"{os.getpid()}-{os.urandom(6).hex()}.npz"
            os.replace(tmp, self.folder / name)
            return name
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _merge(self) -> None:
        """All shards into one of the :data:`MAX_ENTRIES` most recently used vectors."""
        import numpy as np

        assert self.folder is not None
        self._read_shards()
        old = [p for p in self._shards() if p.name in self._loaded]
        while len(self._vectors) > MAX_ENTRIES:
            self._vectors.popitem(last=False)
        keys = list(self._vectors)
        vectors = np.stack([self._vectors[k] for k in keys]) if keys else np.zeros((0, self.dim), np.float16)
        name = self._write(keys, vectors)
        for path in old:
            path.unlink(missing_ok=True)
        self._loaded = {name}
