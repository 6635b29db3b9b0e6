"""Shared pytest fixtures: a private KEEN_HOME per test, config writing, peer-server paths.

Async tests run on asyncio only (anyio's pytest plugin). Peer servers are installed by
``make test`` (``make peers``) into ``.peers/``; a test that needs one fails with a message
saying so instead of skipping.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "tests" / "servers"
PEERS = ROOT / ".peers"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def keen_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh ``KEEN_HOME`` under the test's tmp dir."""
    home = tmp_path / "keen-home"
    home.mkdir()
    monkeypatch.setenv("KEEN_HOME", str(home))
    return home


@pytest.fixture
def write_config(keen_home: Path) -> Callable[[dict[str, Any]], Path]:
    """Write ``{"version": 1, "servers": servers}`` to ``$KEEN_HOME/mcp/configs.json``."""

    def write(servers: dict[str, Any]) -> Path:
        path = keen_home / "mcp" / "configs.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"version": 1, "servers": servers}, indent=2))
        return path

    return write


def stdio_server(script: str, *args: str, **extra: Any) -> dict[str, Any]:
    """A config entry running ``tests/servers/<script>`` with this interpreter (forked from a
    warm process when the script allows: ``tests/helpers/forkserver.py``)."""
    from tests.helpers.forkserver import script_args

    return {
        "transport": "stdio",
        "command": sys.executable,
        "args": script_args(str(SERVERS / script), *args),
        **extra,
    }


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "own_vector_cache: the test's catalogs keep the vector cache of their own KEEN_HOME"
        " (tests of that cache), not the worker's shared one (`_one_vector_cache`)",
    )
    config.addinivalue_line(
        "markers",
        "slow_file: the file's few tests take long (a terminal, real processes, a type checker):"
        " xdist hands it out first, so that it does not end the run alone (`pytest_collection_modifyitems`)",
    )
    # xdist's --dist loadfile hands files out in the order its workers collected them, or by
    # default reordered by their number of tests (most first). That put the files of one or
    # two long tests (tmux sessions, the README install, 24 servers starting) last, where
    # one worker still ran one of them for up to 20 s after the others had finished. The
    # order is ours instead: `slow_file` files first, then the rest by number of tests.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    if hasattr(config, "workerinput"):
        config.pluginmanager.register(_HypothesisConstantsAtFirstDraw(), "hypothesis constants at first draw")
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None):
        if config.option.testrunuid is None:  # the run's id names its fork server's folder
            import uuid

            config.option.testrunuid = uuid.uuid4().hex
        _one_worker_compiles_first(config)
        _workers_forked(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    """In an xdist controller: delete the run's fork-server folder (its socket, the token
    counter's cache of its warm-up, the workers' vector cache). The fork server dies with
    the controller (``PR_SET_PDEATHSIG``, SIGKILL) before it can; every run left about
    3.5 MB in the temporary folder."""
    run = getattr(config.option, "testrunuid", None)
    if not hasattr(config, "workerinput") and run is not None:
        import shutil

        from tests.helpers.forkserver import run_folder

        shutil.rmtree(run_folder(run), ignore_errors=True)


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):
        _old_tmp_dirs_deleted_early(session.config)


def _old_tmp_dirs_deleted_early(config: pytest.Config) -> None:
    """Delete the numbered ``tmp_path`` folders of past runs that pytest deletes at the
    session's end (those beyond ``tmp_path_retention_count``) now, in a thread.

    pytest deletes them in the controller after the last test, with nothing else left to
    run: a past suite run's tree (tens of thousands of files on disk) held the end of a run
    3 to 23 s with both CPUs idle (the rmtree's stack, sampled). At the start, the fork
    server's warm-up leaves a CPU free. It is pytest's own cleanup with the arguments pytest
    gives it: a folder a live run still locks is kept, and one another process is deleting
    is skipped (pytest renames a folder to ``garbage-*`` before deleting it); at the session's
    end pytest's call finds what is left, if anything."""
    import threading

    from _pytest.pathlib import LOCK_TIMEOUT, cleanup_numbered_dir

    factory = getattr(config, "_tmp_path_factory", None)  # none with -p no:tmpdir
    keep = int(config.getini("tmp_path_retention_count"))
    if factory is None or config.option.basetemp or config.getini("tmp_path_retention_policy") == "none":
        return  # pytest deletes nothing old then
    if keep == 0:  # pytest then makes this run's folder without a lock: left to pytest's end
        return
    basetemp: Path = factory.getbasetemp()  # pyright: ignore[reportUnknownMemberType]
    dead_before = basetemp.stat().st_mtime - LOCK_TIMEOUT
    args = (basetemp.parent, "pytest-", keep, dead_before)
    threading.Thread(target=cleanup_numbered_dir, args=args, name="old tmp_path dirs", daemon=True).start()


def _workers_forked(config: pytest.Config) -> None:
    """In an xdist controller (``-n N``): start the workers as forks of the fork server
    (``tests/helpers/forkserver.py``: :func:`~helpers.forkserver.worker_python`), which has
    imported what every worker would import again before collecting. ``KEEN_TEST_NO_FORK=1``
    starts them as new interpreters."""
    tx = config.getoption("tx")
    if os.environ.get("KEEN_TEST_NO_FORK") or not tx or any(spec != "popen" for spec in tx):
        return
    from tests.helpers.forkserver import worker_python

    config.option.tx = [f"popen//python={worker_python(config.option.testrunuid)}"] * len(tx)


# Files that one xdist worker runs together (`pytest_xdist_make_scheduler`), by what they
# load in the worker's own process: the tests that talk to the anthropic SDK in-process
# (importing it costs about 1.9 s of CPU on top of the MCP SDK); each file on a worker of
# its own paid it once more.
SAME_WORKER = {
    "anthropic SDK": (
        "tests/agent/test_provider_behaviour.py",
        "tests/agent/test_loop_providers.py",
        "tests/agent/test_providers.py",
        "tests/cli/test_chat_cmd.py",
    ),
}


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadfile``, xdist's own file scheduling, except that the files of each
    :data:`SAME_WORKER` group are one unit of work, handed to one worker."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    unit = {path: f"same worker: {name}" for name, paths in SAME_WORKER.items() for path in paths}

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return unit.get(path, path)

    return Scheduling(config, log)


_COLLECT_LOCK = "TESTS_COLLECT_LOCK"  # not KEEN_*: Keen reads those
_collect_lock = pytest.StashKey[int]()


def _one_worker_compiles_first(config: pytest.Config) -> None:
    """In an xdist controller, when nothing is compiled yet (a fresh clone: uv installs no
    bytecode), let one worker collect before the others.

    Every worker imports every test module; with no bytecode cached, each compiled the same
    packages and rewrote the same test modules' asserts, side by side: about 10 CPU-s a
    worker instead of 4. Here gw0 collects alone and writes the caches, the others wait on a
    lock this process holds until a worker's collection ends, then collect from the cache.
    With bytecode cached (any run after the first) nothing waits."""
    import fcntl
    import importlib.util
    import tempfile

    if sys.dont_write_bytecode:  # the first worker would write nothing the others could read
        return
    origins = [spec.origin for spec in map(importlib.util.find_spec, ("keen", "mcp")) if spec and spec.origin]
    if all(os.path.exists(importlib.util.cache_from_source(origin)) for origin in origins):
        return
    fd, path = tempfile.mkstemp(prefix="keen-collect-")
    fcntl.flock(fd, fcntl.LOCK_EX)
    config.stash[_collect_lock] = fd
    config.add_cleanup(lambda: os.unlink(path))
    os.environ[_COLLECT_LOCK] = path  # the workers, started after this, inherit it


def _release_collect_lock(config: pytest.Config) -> None:
    fd = config.stash.get(_collect_lock, None)
    if fd is not None:
        del config.stash[_collect_lock]
        os.close(fd)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """A worker has collected (and cached what it compiled): the others may go on."""
    _release_collect_lock(node.config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    _release_collect_lock(node.config)  # the first worker died collecting: never hold the rest


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    """An xdist worker other than gw0 waits here for the lock of :func:`_one_worker_compiles_first`."""
    workerinput: dict[str, Any] | None = getattr(session.config, "workerinput", None)
    if workerinput is None:
        return
    path = os.environ.pop(_COLLECT_LOCK, None)  # not passed on to the processes tests start
    if path is None or workerinput.get("workerid") == "gw0":
        return
    import fcntl

    with open(path, "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before the first test, wait for the fork server if collection started it: it warms
    up while the rest is collected instead of holding collection up; one a test starts is
    waited for where it starts, outside the test's connect limits
    (``tests/helpers/forkserver.py``)."""
    if not session.config.option.collectonly:
        from helpers.forkserver import mark_collected, wait_warm

        wait_warm()
        mark_collected()
    # What collection made (every test module, item and fixture definition: they live as long
    # as the session) out of the collector's sight, as the fork server does with its warm-up:
    # each full collection during the tests walked them all again. In a worker over
    # tests/capabilities and tests/mcpskills (-n 2), the collector's CPU 0.99 -> 0.62 s.
    import gc

    gc.freeze()


class _HypothesisConstantsAtFirstDraw:
    """Hypothesis's own plugin reads, in ``pytest_collection_modifyitems``, the constants of
    every local module (Keen's and the tests': their source parsed; 0.20 to 0.25 s of CPU
    measured in a worker) when the items hold a property test, so that the first one is not
    charged for it. Every xdist worker collects every file and so paid it, six times a run,
    though one or two workers run the property tests. Here it is left to the first draw,
    which reads them anyway (``hypothesis.internal.conjecture.providers.
    _get_local_constants``): the same constants, read only where a property test runs."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(self) -> Iterator[None]:
        try:
            from hypothesis.internal.conjecture import providers
        except ImportError:
            return (yield)
        read = providers._get_local_constants  # pyright: ignore[reportPrivateUsage]
        providers._get_local_constants = lambda: providers._local_constants  # pyright: ignore[reportPrivateUsage]
        try:
            return (yield)
        finally:
            providers._get_local_constants = read  # pyright: ignore[reportPrivateUsage]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker, order whole files as the run hands them out: ``slow_file`` files
    first, then by number of tests, most first (xdist's own order); a file's tests keep
    their order. A run without xdist keeps the collection order."""
    if not hasattr(config, "workerinput"):
        return
    files: dict[Path, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.path, []).append(item)
    slow = {path for path, tests in files.items() if any(t.get_closest_marker("slow_file") for t in tests)}
    order = sorted(files, key=lambda path: (path not in slow, -len(files[path])))
    items[:] = [item for path in order for item in files[path]]


@pytest.fixture(scope="session", autouse=True)
def _one_vector_cache() -> Iterator[Callable[[Path | None], Any]]:
    """One transformer vector cache for every catalog this worker builds, on disk shared by
    the run's workers (in memory without xdist).

    A catalog's vectors are cached by the hash of each tool's text (model id included),
    so a vector is the same whichever test encodes it; but each test has its own
    ``KEEN_HOME``, and so its own cache folder, and re-encoded the same tools (three
    texts a tool) on every search: CPU spent for nothing on two cores. Kept per worker,
    the workers still encoded the same texts: 398 of the 971 texts a ``-n 6`` run encoded
    had been encoded by another worker (15 CPU-s of encoding in all). The cache's shards
    are written to a temporary name and renamed, for processes sharing a folder as users'
    do (``keen.capabilities.vector_cache``); the folder goes with the run's fork server
    (:func:`helpers.forkserver.run_folder`). Tests of the cache itself are marked
    ``own_vector_cache`` (:func:`_own_vector_cache`). The processes a test forks from the
    fork server share the same folder (``helpers.forkserver._one_vector_cache``; its
    ``OWN_VECTOR_CACHE`` variable gives one its ``KEEN_HOME``'s back); new interpreters a
    test starts build their own cache in its ``KEEN_HOME`` as users do."""
    from keen.capabilities import dense, encoder
    from keen.capabilities.vector_cache import VectorCache

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    folder: Path | None = None
    if run is not None:
        from tests.helpers.forkserver import run_folder

        folder = Path(run_folder(run)) / "vectors"
    original = dense.shared_cache
    shared = VectorCache(folder, encoder.DIM)
    dense.shared_cache = lambda folder: shared  # type: ignore[assignment]
    yield original
    dense.shared_cache = original


@pytest.fixture(autouse=True)
def _own_vector_cache(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    _one_vector_cache: Callable[[Path | None], Any],
) -> None:
    """A test marked ``own_vector_cache`` gets the cache of its own folder back (the
    product's :func:`keen.capabilities.dense.shared_cache`)."""
    if request.node.get_closest_marker("own_vector_cache") is not None:
        from keen.capabilities import dense

        monkeypatch.setattr(dense, "shared_cache", _one_vector_cache)


@pytest.fixture(scope="session", autouse=True)
def _one_tls_context() -> Iterator[None]:
    """httpx2's default TLS context built once per worker, not once per client.

    Every httpx2 client built without a context of its own (Keen's model providers, the
    SDK's, a test's) loads the CA bundle again: about 50 ms of CPU each, and the suite
    builds hundreds, all talking plain HTTP to 127.0.0.1. The context is the one httpx2
    builds (``httpcore2.default_ssl_context``), made on first use, one per ``_trust_env``
    value; processes a test starts build their own."""
    import ssl

    import httpcore2

    original = httpcore2.default_ssl_context
    made: dict[bool, ssl.SSLContext] = {}

    def default_ssl_context(*, _trust_env: bool = True) -> ssl.SSLContext:
        if _trust_env not in made:
            made[_trust_env] = original(_trust_env=_trust_env)
        return made[_trust_env]

    httpcore2.default_ssl_context = default_ssl_context
    yield
    httpcore2.default_ssl_context = original


def peer(kind: str, name: str) -> str:
    """Path of an installed peer server binary (``kind`` is ``node`` or ``py``)."""
    path = PEERS / kind / ("node_modules/.bin" if kind == "node" else "bin") / name
    if not path.exists():
        pytest.fail(f"peer server {name} is not installed at {path}; run `make peers` (make test does it)")
    return str(path)


@pytest.fixture(autouse=True)
def _redactor_per_test() -> Iterator[None]:
    """Each test starts with the secrets the process had before it: Keen's redactor is one
    per process, and a secret another test registered (an env value, a key) would blank its
    words out of this test's messages."""
    from keen._redact import redactor

    before = set(redactor._secrets)  # pyright: ignore[reportPrivateUsage]
    yield
    with redactor._lock:  # pyright: ignore[reportPrivateUsage]
        redactor._secrets.intersection_update(before)  # pyright: ignore[reportPrivateUsage]
        redactor._secrets.update(before)  # pyright: ignore[reportPrivateUsage]
        # The redactor's derived state too: its longest-first order and its memo of redacted
        # texts still held the removed secrets (a later test's message came out blanked).
        redactor._longest_first = tuple(sorted(before, key=len, reverse=True))  # pyright: ignore[reportPrivateUsage]
        redactor.memo = {}
