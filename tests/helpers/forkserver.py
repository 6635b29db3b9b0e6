"""A warm process that forks the suite's stdio test servers, so each skips the SDK's import.

Importing the MCP SDK costs a test server about a second of CPU, and the suite starts
hundreds of them: most of its time on two CPUs. :func:`launch_args` turns a test server's
command line into one for ``tests/servers/launch.py``, which asks this process (one per
pytest run, started on first use, SDK already imported) to fork a child that runs the
script on the launcher's own standard streams, environment and working directory. What a
client sees is unchanged: a process it started, speaking MCP on its pipes, ending as the
script ends, stopped by the signals it sends (the launcher forwards them).

Only scripts whose process is not itself under test go through it (:data:`FORKED`, through
:func:`script_args`): daemons, environments, CPU burns and hostile servers are started as
new interpreters, and so is ``keen`` where its own start is under test (``REAL_KEEN`` in
``tests/helpers/cli.py``). ``keen chat`` under tmux is forked too: the child gets the
terminal as its standard streams, and the launcher forwards the SIGINT a Ctrl-C sends it.

The warm process also holds the search model, loaded once (:func:`_warm_encoder`), and Keen's exact token counter, built once (``keen.tokens``: reading
the o200k vocabulary and building tiktoken's encoder cost a forked ``keen`` about 0.6 s of
CPU, most of a one-shot ``keen chat``): a child counts with it instead of building its own
in a fresh ``KEEN_HOME``, and so writes no rank cache there. The cache's own behaviour is
tested in ``tests/test_tokens.py``, and ``REAL_KEEN`` processes build it as users do.

With ``TESTS_CPU_LOG`` set, it writes each child's CPU there (``tests/helpers/cputime.py``).

One fork server serves a whole ``pytest -n`` run (:func:`_shared`): its warm-up (the imports,
the model, the counter: about 4 s of CPU) is paid once, not once per worker. The xdist
controller starts it and has the workers themselves forked from it (:func:`worker_python`:
each collects with the SDK and Keen already imported, instead of importing them again). A
process that starts it does not wait for it; a launcher waits until it listens, and so does
a worker before its first test (:func:`wait_warm`, from ``tests/conftest.py``), and a test that
starts it (in a run without xdist), so that its warm-up is not timed as a server's connect. Run as ``python forkserver.py SOCKET OWNER_PID LOCK_FD``: it holds an exclusive
``flock`` on the file ``warming`` beside ``SOCKET`` (inherited as ``LOCK_FD``) until it
listens, and serves until the process ``OWNER_PID`` ends.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import json
import logging
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

__all__ = [
    "FORKED",
    "OWN_VECTOR_CACHE",
    "forked",
    "launch_args",
    "mark_collected",
    "run_folder",
    "script_args",
    "wait_warm",
    "worker_python",
]

HERE = Path(__file__).resolve()
LAUNCH = HERE.parents[1] / "servers" / "launch.py"
PRELOAD = (
    "anyio",
    "anyio._backends._asyncio",
    "mcp",
    "mcp.server.mcpserver",
    "mcp.server.stdio",
    "mcp_types",
    # Keen's console script, for the tests that run it as a process without testing the
    # process itself (its start, tty, signals and exit codes stay covered by real starts).
    "keen.cli",
    "keen.cli.chat_cmd",
    "keen.cli.mcp_cmd",
    "keen.cli.serve_cmd",
    "keen.mcp.manager",
    "keen.serve.server",
    "keen.agent.providers",
    "keen.demo.server",
    "openai",
    # What a forked `keen chat` (and most other commands) imported on top of the above:
    # about 0.5 s of CPU in each child, with bytecode cached (prompt_toolkit, numpy, the
    # search stack, the skills sync, MCP auth, jsonschema, yaml).
    "keen.cli._app",
    "keen.cli._prompt",
    "keen.agent.repl",
    "keen.agent.slash",
    "keen.agent.providers.scripted",
    "keen.capabilities.search",
    "keen.capabilities.dense",
    "keen.capabilities.encoder",
    "keen.mcpskills.startup",
    "keen.mcp.auth.connect",
    "keen.mcp.calls.send",
    "keen.mcp.config.importer",
    "keen.mcp.connection.server",
    "keen.mcp.listing.watch",
    "prompt_toolkit.shortcuts",
    "jsonschema",
    "yaml",
    # FastMCP, which some test servers are written with (its package imports its server
    # lazily: about 0.7 s of CPU in each such server).
    "fastmcp.server.server",
    "fastmcp.server.context",
    "fastmcp.server.elicitation",
    "fastmcp.server.sessions",
    "fastmcp.server.middleware.dereference",
    "fastmcp.server.providers.prefab_synthesis",
    "fastmcp.server.transforms.catalog",
    "fastmcp.apps.app",
    # A FastMCP server's session-state store, made at its first request (about 0.3 s of CPU
    # a server: py-key-value and its pydantic adapter).
    "key_value.aio.adapters.pydantic",
    "key_value.aio.stores.memory",
    "griffe",
    # What Keen imports after its start (behind the first request, at a first server's
    # connect or HTTP client, at a first log record), that most forked `keen` children went
    # on to import each (the modules each child added to the warm ones, logged over the
    # heavy CLI and serve test files): the turn loop and its prompt, the CLI's logging,
    # signals and terminal, the config and pin models, httpx2's HTTP/1.1 stack, filelock.
    "anyio._core._signals",
    "filelock",
    "httpcore2",
    "truststore",
    "regex",
    "rich._emoji_codes",
    "typer._click.decorators",
    "keen.agent.compaction",
    "keen.agent.elicitation",
    "keen.agent.first",
    "keen.agent.loop",
    "keen.agent.model_events",
    "keen.agent.settings",
    "keen.agent.system_prompt",
    "keen.agent.unfinished",
    "keen.capabilities._section_store",
    "keen.capabilities.budget",
    "keen.capabilities.catalog_cache",
    "keen.cli._live",
    "keen.cli._logging",
    "keen.cli._signals",
    "keen.cli._terminal",
    "keen.mcp.config.load",
    "keen.mcp.config.validated",
    "keen.mcp.connection._stdio",
    "keen.mcp.listing._keywords",
    "keen.mcp.listing.validation",
    "keen.trust._pinmodels",
    # and what a forked `keen serve --transport http` imported on top: uvicorn's HTTP/1.1 and
    # websocket protocols (its "auto" choices here) and its lifespan.
    "encodings.utf_16_be",
    "uvicorn.lifespan.on",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.websockets.websockets_sansio_impl",
)

FORKED = frozenset(
    {
        "basic_stdio.py",
        "cancel_stdio.py",
        "changing_server.py",
        "chat_tools.py",
        "elicit_stdio.py",
        "empty_stdio.py",
        "handshake_only.py",
        "log_stdio.py",
        "no_result_type.py",
        "ask_stdio.py",
    }
)
"""Test servers written with the MCP SDK whose process is not itself under test."""

# Shared by both names this module is imported under (``helpers.`` and ``tests.helpers.``).
_state: dict[str, Any] = sys.modules.setdefault(
    "_keen_test_forkserver", type(sys)("_keen_test_forkserver")
).__dict__
_lock: threading.Lock = _state.setdefault("lock", threading.Lock())


def launch_args(script: str, *args: str) -> list[str]:
    """The ``args`` (after ``sys.executable``) that run ``script ARGS`` through this worker's
    fork server, started here on first use."""
    return ["-S", str(LAUNCH), _socket(), script, *args]


def script_args(script: str, *args: str) -> list[str]:
    """The ``args`` (after ``sys.executable``) of a ``tests/servers`` script: through the fork
    server when it is one of :data:`FORKED` (``KEEN_TEST_NO_FORK=1`` turns that off, to
    compare), else the script itself."""
    if os.path.basename(script) in FORKED and not os.environ.get("KEEN_TEST_NO_FORK"):
        return launch_args(script, *args)
    return [script, *args]


def forked(script: str, *args: str) -> list[str]:
    """A whole command line running the Python script ``script`` (a console script such as
    ``.venv/bin/keen``; or ``-c CODE``, ``-m MODULE`` as ``python`` takes them) through the
    fork server."""
    return [sys.executable, *launch_args(script, *args)]


def _socket() -> str:
    with _lock:
        proc: subprocess.Popen[bytes] | None = _state.get("proc")
        if "path" in _state and (proc is None or proc.poll() is None):
            return str(_state["path"])
        run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
        if run is None:  # one pytest process: its own fork server, gone with it
            folder = tempfile.mkdtemp(prefix="keen-fork-")
            proc = _start(folder, os.getpid())
            atexit.register(shutil.rmtree, folder, True)
            atexit.register(proc.kill)  # runs first: atexit is last in, first out
            _state.update(proc=proc, path=os.path.join(folder, "s"))
            if _state.get("collected"):
                # First asked for by a test: its warm-up (about 4 s of CPU, 15 s and more on a
                # loaded machine) would otherwise run inside the time limit of the connect
                # that launched it, and a server's default limit is 15 s.
                wait_warm()
        else:
            _state.update(path=_shared(run))
        return str(_state["path"])


def mark_collected() -> None:
    """Called once collection is over: a fork server first asked for after it (by a test,
    in a run without xdist) is waited for where it is started (:func:`_socket`)."""
    _state["collected"] = True


def wait_warm() -> None:
    """Return once this process's fork server (if one was asked for) has warmed up and
    listens: each worker's tests then start as they did when the server was waited for at
    its start. Raises ``RuntimeError`` if it ended without listening."""
    import fcntl

    path = _state.get("path")
    if path is None:
        return
    with open(os.path.join(os.path.dirname(path), "warming"), "rb") as warming:
        fcntl.flock(warming, fcntl.LOCK_SH)  # held exclusively by the server until it listens
    if not os.path.exists(path):
        raise RuntimeError(f"the test fork server did not start: nothing listens at {path}")


def worker_python(run: str) -> str:
    """In an xdist controller: the ``python`` of a ``popen`` worker spec (execnet appends
    ``-u -c BOOTSTRAP``) that forks the worker from the fork server of the run ``run``,
    started here. Every worker imported the MCP SDK, Keen and the libraries the test modules
    import (about 2.5 s of CPU each, before its first test); forked, it finds them imported."""
    import shlex

    path = _shared(run, os.getpid())
    return shlex.join([sys.executable, "-S", str(LAUNCH), path])


def run_folder(run: str) -> str:
    """The folder of the xdist run ``run``'s fork server: its socket and lock files, and
    what the run's workers share on disk. The run's controller deletes it as it ends
    (``tests/conftest.py``)."""
    return os.path.join(tempfile.gettempdir(), f"keen-fork-{run}")


def _shared(run: str, owner: int | None = None) -> str:
    """The socket of the fork server shared by every worker of the xdist run ``run``: the
    controller starts it (:func:`worker_python`), or else the first worker to ask; it serves
    until the run's controller (``owner``, by default this worker's parent) exits, whichever
    process started it (xdist shuts idle workers down early)."""
    import fcntl

    folder = run_folder(run)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "s")
    started = os.path.join(folder, "pid")
    with open(os.path.join(folder, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker starting it: wait for its "pid"
        try:
            with open(started) as mark:
                os.kill(int(mark.read()), 0)
            return path
        except (OSError, ValueError):  # not started yet (or gone): start it
            pass
        proc = _start(folder, os.getppid() if owner is None else owner)
        _state["server"] = proc  # kept: it outlives this worker, and is never waited for here
        with open(started, "w") as mark:
            mark.write(str(proc.pid))
    return path


# glibc's malloc asks for transparent huge pages (madvise) for what it maps: the search
# model's weights, most of this process's 390 MB, then take 2 MB pages. A fork copies the
# page tables and a child's exit tears its copy down, both in proportion to the pages mapped:
# medians of 21 forks of the warm process, 12.3 -> 5.4 ms in the parent and 16.9 -> 8.2 ms of
# CPU in a child that exits at once (glibc >= 2.35; older ones ignore the tunable). The suite
# forks about 580 children and its workers.
_HUGE_PAGES = "glibc.malloc.hugetlb=1"


def _start(folder: str, owner: int) -> subprocess.Popen[bytes]:
    """Start the fork server listening on ``folder``/s, serving while ``owner`` lives, and
    return at once: it warms up holding an exclusive lock on ``folder``/warming, taken here
    before it starts (so no launcher can come first) and handed to it as an inherited file
    descriptor (an ``flock`` belongs to the open file, not to the process that took it)."""
    import fcntl

    fd = os.open(os.path.join(folder, "warming"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return subprocess.Popen(
            [sys.executable, str(HERE), os.path.join(folder, "s"), str(owner), str(fd)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # it outlives the worker: it must not hold a pipe open
            cwd=folder,
            pass_fds=(fd,),
            env={
                **os.environ,
                "GLIBC_TUNABLES": ":".join(filter(None, (os.environ.get("GLIBC_TUNABLES"), _HUGE_PAGES))),
            },
        )
    finally:
        os.close(fd)  # the server's copy keeps the lock until it listens (or exits)


# -- the fork server itself ------------------------------------------------------


def _die_with_parent() -> None:
    """Linux: this process gets SIGKILL when the process that started it ends."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _warm_token_counter() -> None:
    """Build Keen's token counter here, for every child (module docstring); its rank cache
    goes to a home of this process's own, never a test's (children get their own env)."""
    from keen import tokens

    saved = os.environ.get("KEEN_HOME")
    os.environ["KEEN_HOME"] = os.path.join(os.getcwd(), "keen-home")
    try:
        tokens.token_counter()  # when it cannot be exact, each child tries (and says so) itself
    finally:
        if saved is None:
            del os.environ["KEEN_HOME"]
        else:
            os.environ["KEEN_HOME"] = saved


def _warm_encoder() -> None:
    """Load the search model (and its int8 query graph) here, for every child: about 1.1 s
    of CPU that each forked ``keen`` building a catalog spent again. Its ONNX sessions run
    on the calling thread (one intra- and inter-op thread, ``keen.capabilities.encoder``),
    so a fork inherits a usable copy; nothing is encoded here, so the tokenizer's thread
    pool never starts before a fork. Loading it stays tested where it is under test
    (``tests/capabilities``) and in every process started as a new interpreter."""
    from keen.capabilities import encoder

    loaded = encoder.sentence_encoder()  # when it cannot load, each child tries (and says so) itself
    if loaded is not None:
        loaded.wait_query_graph(60)
        # and its builder thread gone, so no lock it might hold is copied into a child held
        encoder._join_builders()  # pyright: ignore[reportPrivateUsage]
    else:
        encoder.reset()


def _warm_mcp_session() -> None:
    """Run one MCP session here, in memory, before any fork: ``tests/servers/basic_stdio.py``'s
    server and the SDK's client (handshake, ``tools/list``, two calls). What the SDK and
    pydantic build at a session's first messages (validators, serializers, the session
    machinery's first-use state) is then built once, not again in every forked test server
    and ``keen`` child that speaks MCP. Nothing a test looks at is kept: the server and the
    client are gone when it returns, and no thread is left running (a fork copies only the
    calling thread, so one holding a lock would leave it held in every child)."""
    import threading

    import anyio

    from mcp import Client

    sys.path.insert(0, str(HERE.parents[1] / "servers"))
    try:
        import basic_stdio  # pyright: ignore[reportMissingImports]
    finally:
        sys.path.pop(0)

    # The SDK's server sets up logging as it is made (``logging.basicConfig`` at INFO with a
    # rich handler): put the root logger back, or every forked child would start with it.
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level

    async def session() -> None:
        async with Client(basic_stdio.build()) as client:
            await client.list_tools()
            await client.call_tool("echo", {"text": "warm"})
            await client.call_tool("add", {"a": 1, "b": 2})

    try:
        with contextlib.suppress(Exception):  # a broken SDK: each child says so itself
            anyio.run(session)
            # The servers most tests start basic_stdio.py for, made once here (never run
            # here): a forked child of one of those command lines runs its copy
            # (``basic_stdio.main``) instead of registering the same tools again.
            _state["basic_stdio"] = basic_stdio.made_once()
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    sys.modules.pop("basic_stdio", None)  # the script runs as __main__ in a child, as ever
    # The server runs its plain (sync) tools in AnyIO worker threads, told to stop as the
    # loop closes: one may still be ending when anyio.run has returned.
    for thread in threading.enumerate():
        # A _DummyThread (a native thread that called into Python) cannot be joined.
        if thread is not threading.main_thread() and not isinstance(thread, threading._DummyThread):  # pyright: ignore[reportPrivateUsage]
            thread.join(30)
    if threading.active_count() != 1:
        raise RuntimeError(f"threads left by the warm-up: {threading.enumerate()}")


def _warm_tls_context() -> None:
    """httpx2's default TLS context built here once, for every child, as
    ``tests/conftest.py`` (``_one_tls_context``) does for the workers: each HTTP client a
    forked ``keen`` builds without a context of its own (a model provider's, an HTTP MCP
    transport's) loaded the CA bundle again, about 50-100 ms of CPU, to talk plain HTTP to
    127.0.0.1. The context is the one httpx2 builds from its inputs: ``_trust_env`` and, when
    it is true, the ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` it reads (``httpcore2._ssl``); a
    child whose environment gives other values builds its own, as httpx2 would."""
    import ssl

    import httpcore2

    original = httpcore2.default_ssl_context

    def inputs(trust: bool) -> tuple[bool, str | None, str | None]:
        if not trust:
            return (False, None, None)
        return (True, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))

    made = {inputs(trust): original(_trust_env=trust) for trust in (True, False)}

    def default_ssl_context(*, _trust_env: bool = True) -> ssl.SSLContext:
        key = inputs(_trust_env)
        if key not in made:
            made[key] = original(_trust_env=_trust_env)
        return made[key]

    httpcore2.default_ssl_context = default_ssl_context


def _warm_flag_patterns() -> None:
    """Compile the tool-text flag patterns here (``keen.trust.flags``), for every child: each
    is compiled at its first use, which every forked ``keen`` that pinned or listed a tool
    reached again (189 of the 505 ``re.compile`` calls profiled in 63 forked ``keen``
    children over three CLI test files). The compiled patterns are the ones that first use
    makes, put where it puts them."""
    from keen.trust import flags

    lazy = flags._LazyPattern  # pyright: ignore[reportPrivateUsage]
    for value in vars(flags).values():  # each pattern, and the (pattern, reason) rule lists
        for item in value if isinstance(value, list) else [value]:  # pyright: ignore[reportUnknownVariableType]
            for pattern in item if isinstance(item, tuple) else (item,):  # pyright: ignore[reportUnknownVariableType]
                if isinstance(pattern, lazy):
                    pattern.search  # noqa: B018 - the first use compiles it  # pyright: ignore[reportAttributeAccessIssue]


def _warm_models() -> None:
    """Build the validators of Keen's pydantic models here, for every child: Keen defers
    each one to its first use (pydantic's ``defer_build``: the config's, the pins', the skill
    marker's), which nearly every forked ``keen`` reached again (about 5 ms for configs.json's
    alone, 13 ms for all of them, in a warm process). The
    validators are the ones that first use builds; deferring them stays tested where it is
    under test, in new interpreters (``tests/test_architecture.py``, ``tests/mcp/test_config.py``)."""
    import pydantic

    def every(cls: type[pydantic.BaseModel]) -> list[type[pydantic.BaseModel]]:
        found: list[type[pydantic.BaseModel]] = []
        for sub in cls.__subclasses__():
            found += [sub, *every(sub)]
        return found

    for model in every(pydantic.BaseModel):
        if model.__module__.startswith("keen.") and not model.__pydantic_complete__:
            model.model_rebuild(raise_errors=False)


def _freeze() -> None:
    """Move what the warm-up made to the collector's permanent generation, once it is done.

    Every child and xdist worker inherits those objects (the SDK, Keen, their libraries: some
    hundred thousand), and each full collection in a child walked them all again: in a worker,
    about 0.17 s of CPU a collection, 1.21 CPU-s over five files' tests against 0.17 frozen. A
    walk also writes each object's header, copying the page it lies on into the child. They
    live as long as the process, as imports do; what the tests make is collected as before
    (a ``keen`` child freezes its own at its first Manager start, as the command does).
    No collection first: it took 0.12 s of the warm-up the workers wait for, to free next
    to nothing that the warm-up made.
    """
    import gc

    gc.freeze()


def _warm_word_vectors() -> None:
    """Read the keyword index's word vectors and its neighbour candidates here, for every
    child: about 0.25 s of CPU (the wordllama table, 16,000 words stemmed) that each forked
    ``keen`` spent again at its first search (``keen serve --mode search``, ``keen tools
    search``). Both are the same for every catalog and kept for the process; reading them
    parallelises nothing, so no tokenizer thread pool is started before a fork. A new
    process reads them as users' do (``tests/capabilities/test_search_index.py`` runs the
    folder-seeded path as one)."""
    from keen.capabilities import _embed, _refresh

    with contextlib.suppress(OSError):  # a broken install: each child says so itself
        _embed.word_vectors()
        _refresh._candidates()  # pyright: ignore[reportPrivateUsage]


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    fds = array.array("i")
    data, ancdata, _flags, _addr = conn.recvmsg(1 << 16, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    while not data.endswith(b"\n"):
        more = conn.recv(1 << 16)
        if not more:
            raise EOFError("the launcher closed before its request ended")
        data += more
    return json.loads(data), list(fds)


OWN_VECTOR_CACHE = "TESTS_OWN_VECTOR_CACHE"
"""Set (to anything) in a forked process's environment: its catalogs keep the vector cache of
its own ``KEEN_HOME`` (:func:`_one_vector_cache`), for a test of that cache."""


def _one_vector_cache(folder: str) -> None:
    """In a forked child (not an xdist worker, which ``tests/conftest.py`` sets up itself):
    every catalog it builds keeps its search model's vectors in ``folder``, the run's one
    cache, shared with the workers (``tests/conftest.py``'s ``_one_vector_cache``) and the
    other children, instead of its ``KEEN_HOME``'s. A vector is the same whichever process
    encodes it (the cache is keyed by each text's hash, model included), but each test's
    ``KEEN_HOME`` is new, so every forked ``keen`` that built a catalog encoded its tools
    again: about 0.3 s of CPU for basic_stdio.py's eight tools, in most of the suite's
    ``keen serve`` and ``keen chat`` processes. The cache's shards are written to a
    temporary name and renamed, for processes sharing a folder as users' do
    (``keen.capabilities.vector_cache``). New interpreters build their own, as users' do."""
    from keen.capabilities import dense, encoder
    from keen.capabilities.vector_cache import VectorCache

    shared = VectorCache(Path(folder), encoder.DIM)
    dense.shared_cache = lambda _folder: shared  # pyright: ignore[reportAttributeAccessIssue]


def _run_child(request: dict[str, Any], fds: list[int], keep: list[int]) -> None:
    """In the forked child: become the script's process, run it, never return."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for signum in (
            signal.SIGTERM,
            signal.SIGHUP,
            signal.SIGQUIT,
            signal.SIGUSR1,
            signal.SIGUSR2,
            signal.SIGCHLD,
        ):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in keep:
            with contextlib.suppress(OSError):
                os.close(fd)
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if not request.get("worker") and not os.environ.get(OWN_VECTOR_CACHE):
            _one_vector_cache(_state["vectors"])
        script, args = request["script"], request["args"]
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - the process's own stream
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False, buffering=1)  # noqa: SIM115
        import runpy

        try:
            if script == "-c":  # python -c CODE ARGS
                sys.argv = ["-c", *args[1:]]
                sys.path[0] = ""
                exec(compile(args[0], "<string>", "exec"), {"__name__": "__main__"})
            elif script == "-m":  # python -m MODULE ARGS
                sys.argv = [args[0], *args[1:]]
                sys.path[0] = os.getcwd()
                runpy.run_module(args[0], run_name="__main__", alter_sys=True)
            else:
                sys.argv = [script, *args]
                sys.path[0] = os.path.dirname(os.path.abspath(script))
                runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except KeyboardInterrupt:
            code = 128 + signal.SIGINT
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        # What the interpreter runs at exit, as the real script's process would (Keen saves
        # its token counts and prompt sections there); os._exit below skips the rest of a
        # finalization the fork's inherited state cannot go through.
        import atexit

        atexit._run_exitfuncs()  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


_CPU_LOG = os.environ.get("TESTS_CPU_LOG")
"""A folder where the fork server writes each child's CPU (``tests/helpers/cputime.py``)."""
_started: dict[int, dict[str, Any]] = {}


def _cpu_entry(request: dict[str, Any], pid: int, conn: socket.socket) -> dict[str, Any]:
    """What :func:`_log_cpu` says of a child: what it ran and for which test (the test's
    variables, when the process that asked for it passed them on; else the launcher's
    ancestors, from which ``tests/helpers/cputime.py`` finds the test or worker)."""
    import struct
    import time

    launcher = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
    parents: list[int] = []
    with contextlib.suppress(OSError, ValueError, IndexError):
        while launcher > 1 and len(parents) < 8:
            with open(f"/proc/{launcher}/stat") as stat:
                launcher = int(stat.read().rsplit(")", 1)[1].split()[1])
            parents.append(launcher)
    env = request["env"]
    return {
        "pid": pid,
        "parents": parents,
        "script": os.path.basename(request["script"]),
        "args": [arg[:80] for arg in request["args"][:3]],
        "test": env.get("PYTEST_CURRENT_TEST", ""),
        "worker": env.get("PYTEST_XDIST_WORKER", ""),
        "start": time.time(),
    }


def _log_cpu(entry: dict[str, Any], usage: Any) -> None:
    import time

    entry.update(cpu=usage.ru_utime + usage.ru_stime, system=usage.ru_stime, faults=usage.ru_minflt)
    entry["end"] = time.time()
    with open(os.path.join(str(_CPU_LOG), f"forkserver-{os.getpid()}.jsonl"), "a") as log:
        log.write(json.dumps(entry) + "\n")


def serve(path: str, owner: int, warming: int) -> None:
    """Listen on ``path`` and fork a child per launcher until the process ``owner`` ends (the
    pytest process, or an xdist run's controller: :func:`_shared`) or this one is killed.
    The file descriptor ``warming`` holds the lock launchers wait on: it is closed (the
    lock released) once ``path`` listens, before any child is forked."""
    import importlib

    from keen.cli._app import build_commands

    if owner == os.getppid():
        _die_with_parent()
    gone = os.pidfd_open(owner)  # readable once ``owner`` has ended
    _state["vectors"] = os.path.join(os.path.dirname(path), "vectors")  # the run's (tests/conftest.py)
    for name in PRELOAD:
        importlib.import_module(name)
    build_commands()  # keen's click commands, which typer builds on each run of its app
    _warm_token_counter()
    _warm_encoder()
    _warm_word_vectors()
    _warm_mcp_session()
    _warm_tls_context()
    _warm_flag_patterns()
    _warm_models()
    _freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(128)
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w.fileno())
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    selector.register(gone, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}
    os.close(warming)  # launchers and workers waiting on the lock go on
    while True:
        for key, _events in selector.select():
            if key.fileobj == gone:
                shutil.rmtree(os.path.dirname(path), ignore_errors=True)
                return
            if key.fileobj is listener:
                conn, _ = listener.accept()
                try:
                    request, fds = _receive(conn)
                except (OSError, EOFError, ValueError):
                    conn.close()
                    continue
                keep = [
                    listener.fileno(),
                    wake_r.fileno(),
                    wake_w.fileno(),
                    gone,
                    *(c.fileno() for c in children.values()),
                ]
                pid = os.fork()
                if pid == 0:
                    conn.close()
                    _run_child(request, fds, keep)
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
                if _CPU_LOG:
                    _started[pid] = _cpu_entry(request, pid, conn)
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
                selector.register(conn, selectors.EVENT_READ, pid)
            elif key.fileobj is wake_r:
                with contextlib.suppress(BlockingIOError):
                    while wake_r.recv(4096):
                        pass
                _reap(children, selector)
            else:  # the launcher went away (killed): its child goes too
                with contextlib.suppress(ProcessLookupError):
                    os.kill(key.data, signal.SIGKILL)
                selector.unregister(key.fileobj)


def _reap(children: dict[int, socket.socket], selector: selectors.BaseSelector) -> None:
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        entry = _started.pop(pid, None)
        if entry is not None:
            _log_cpu(entry, usage)
        conn = children.pop(pid, None)
        if conn is None:
            continue
        if os.WIFSIGNALED(status):
            reply = {"signal": os.WTERMSIG(status)}
        else:
            reply = {"code": os.WEXITSTATUS(status)}
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(conn)
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps(reply).encode() + b"\n")
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
