"""Static word vectors for ToolSearch: wordllama's token vectors and IDF-weighted pooling.

The vectors are ``wordllama`` 0.4.0.post1's (the 256-d ``l2_supercat`` weights and
tokenizer shipped inside its wheel, loaded with downloads disabled: no network, no
torch). wordllama's own ``embed`` averages a text's token vectors; here each token
vector is weighted by the token's inverse document frequency over the catalog being
indexed (:func:`idf_weights`, :func:`pool`), so words that every tool shares ("get",
"the", "a", "data") stop pulling every tool and every query toward the same direction.
Measured with ``bench/search.py`` (docs/search.md): MRR up by about two points over the
plain mean, on both halves of the LiveMCPBench queries.

The same vectors give BM25 a query word's nearest index words
(:mod:`keen.capabilities._neighbours`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DIM",
    "WordVectors",
    "embedder",
    "idf_weights",
    "pool",
    "token_ids",
    "word_vectors",
]

DIM = 256
"""Width of the vectors."""
_BATCH = 256


@functools.cache
def embedder() -> Any:
    """The wordllama model from the installed wheel (``disable_download=True``).

    Raises ``FileNotFoundError`` when the wheel lacks its weights (a broken install).
    """
    with _root_logging_kept():
        import wordllama
        from wordllama import WordLlama

    return WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)


@dataclass(frozen=True)
class WordVectors:
    """wordllama's tokenizer (no padding, no truncation) and its ``(32000, DIM)`` float32
    token vectors: all that ToolSearch uses of the model."""

    tokenizer: Any
    embedding: np.ndarray


@functools.cache
def word_vectors() -> WordVectors:
    """The tokenizer and token vectors of the installed wordllama wheel, read without
    importing ``wordllama`` (its import alone took 0.5 to 1.2 s here: it loads its training
    configuration), so a search in a new process is ready sooner. The same files
    :func:`embedder` reads (``tests/capabilities/test_search_vectors.py`` compares them).

    Raises ``FileNotFoundError`` when the wheel lacks its files (a broken install).
    """
    import numpy as np
    from safetensors import safe_open
    from tokenizers import Tokenizer

    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the wordllama package is not installed; reinstall keen")
    root = Path(next(iter(spec.submodule_search_locations)))
    tokenizer_file = root / "tokenizers" / "l2_supercat_tokenizer_config.json"
    weights_file = root / "weights" / f"l2_supercat_{DIM}.safetensors"
    for path in (tokenizer_file, weights_file):
        if not path.is_file():
            raise FileNotFoundError(f"wordllama's {path.name} is missing from {root}; reinstall keen")
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    with safe_open(str(weights_file), framework="np", device="cpu") as f:  # pyright: ignore[reportUnknownVariableType]
        table = np.ascontiguousarray(f.get_tensor("embedding.weight").astype(np.float32))  # pyright: ignore[reportUnknownMemberType]
    return WordVectors(tokenizer, table)


def token_ids(texts: Sequence[str]) -> list[np.ndarray]:
    """The wordllama token ids of each of ``texts`` (``int32`` arrays, no padding)."""
    import numpy as np

    tokenizer = word_vectors().tokenizer
    if len(texts) == 1:  # a query: encode_batch would hand it to the tokenizer's thread pool
        return [np.asarray(tokenizer.encode(texts[0], add_special_tokens=False).ids, dtype=np.int32)]
    out: list[np.ndarray] = []
    for start in range(0, len(texts), _BATCH):
        for enc in tokenizer.encode_batch(list(texts[start : start + _BATCH]), add_special_tokens=False):
            out.append(np.asarray(enc.ids, dtype=np.int32))
    return out


def idf_weights(docs: Sequence[np.ndarray]) -> np.ndarray:
    """Per token id, ``log((N + 1) / (df + 0.5))`` over the ``N`` token-id arrays ``docs``
    (``df``: how many hold the token). A token no document holds gets the highest weight:
    in a query it is a word the catalog does not use, whose vector still points at the
    tools that use its synonyms."""
    import numpy as np

    df = np.zeros(word_vectors().embedding.shape[0], dtype=np.float64)
    if not docs:
        return np.ones(df.shape, dtype=np.float32)  # no catalog, no statistics: a plain mean
    for ids in docs:
        df[np.unique(ids)] += 1
    return np.log((len(docs) + 1) / (np.maximum(df, 1.0) + 0.5)).astype(np.float32)


def pool(docs: Sequence[np.ndarray], weights: np.ndarray) -> np.ndarray:
    """Unit vectors ``(len(docs), DIM)``: each document's token vectors averaged with
    ``weights`` (per token id); an empty document (or one whose weights are all zero) is
    the zero vector."""
    import numpy as np

    table = word_vectors().embedding
    out = np.zeros((len(docs), DIM), dtype=np.float32)
    for i, ids in enumerate(docs):
        if ids.size:
            w = weights[ids]
            out[i] = w @ table[ids]
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, norms, out=np.zeros_like(out), where=norms > 1e-12)


@contextlib.contextmanager
def _root_logging_kept() -> Iterator[None]:
    """wordllama calls ``logging.basicConfig(level=INFO)`` on import, which would give the
    program that embeds Keen a stderr handler printing every INFO line: undo it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
