"""The harness against real MCP servers (keen-demo over stdio, server-everything from npm):
the five test categories of the discovery design (skills not preloaded, read-only hides
write tools, disconnect removes tools, search is not authorization, replay restores every
turn), approval through the permission gate, truncation, and no secret in the log."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import peer
from helpers.forkserver import launch_args
from keen import paths
from keen.capabilities import Catalog
from keen.errors import ApprovalDenied
from keen.gateway import ApprovalRequest, Gateway
from keen.harness import Harness, approvals, read_events, replay
from keen.mcp import Manager
from keen.mcp.types import ServerState
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

DEMO = "keen-demo"
SECRET = "sk-live-4f9a8c7e6d5b4a39281706f5e4d3c2b1"
TEST_FIX_BODY = "Reproduce the failure first: run the smallest failing test before changing code."
REVIEW_BODY = "Read the diff twice; comment on behaviour, not style."

# Start keen-demo through a shim that records its pid, so a test can kill the real process.
_SHIM = (
    "import os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); "
    "from keen.demo.server import main; main()"
)


def write_skill(root: Path, name: str, description: str, body: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n{body}\n")


@dataclass
class Session:
    manager: Manager
    home: Path
    workspace: Path
    pidfile: Path

    def harness(self, mode: Any = "ask", approve: Any = None, **options: Any) -> Harness:
        def catalog() -> Catalog:
            return Catalog.from_manager(self.manager, skills_root=paths.skills_dir(), cache=False)

        return Harness(
            catalog, Gateway(self.manager), mode=mode, approve=approve, workspace=self.workspace, **options
        )


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so that one :func:`everything_session` serves the tests that need it."""
    return "asyncio"


@pytest.fixture
async def session(keen_home: Path, tmp_path: Path) -> AsyncIterator[Session]:
    """Keen's demo server alone, for the tests that use no other (some kill it)."""
    async with _session(keen_home, tmp_path, everything=False) as opened:
        yield opened


@pytest.fixture(scope="module")
async def everything_session(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Session]:
    """The demo server and server-everything, started once for the module: a node start (and,
    at the end, the SDK's wait for a stdio server to exit) costs about 0.7 s of CPU. The
    tests that use it (:func:`full_session`) only search and call; none kills a server."""
    root = tmp_path_factory.mktemp("pipeline-everything")
    home = root / "keen-home"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KEEN_HOME", str(home))
        async with _session(home, root, everything=True) as opened:
            yield opened


@pytest.fixture
def full_session(everything_session: Session, keen_home: Path) -> Session:
    """:func:`everything_session`, with this test's own ``KEEN_HOME`` (``keen_home``) for its
    harness's event log."""
    return everything_session


@contextlib.asynccontextmanager
async def _session(keen_home: Path, tmp_path: Path, *, everything: bool) -> AsyncIterator[Session]:
    skills = keen_home / "skills"
    write_skill(skills, "test-fix", "Fix failing tests (reproduce, locate, fix, rerun).", TEST_FIX_BODY)
    write_skill(skills, "code-review", "Review a change before it lands.", REVIEW_BODY)
    workspace = tmp_path / "project"
    (workspace / "tests").mkdir(parents=True)
    (workspace / "tests" / "test_button.py").write_text("def test_label():\n    assert label() == 'Save'\n")
    pidfile = tmp_path / "demo.pid"
    servers: dict[str, Any] = {
        DEMO: {
            "transport": "stdio",
            "command": sys.executable,
            "args": launch_args("-c", _SHIM, str(pidfile)),
            "env": {"KEEN_HOME": str(keen_home), "DEMO_TOKEN": SECRET},
            "trust_annotations": True,  # the demo server: Keen's own
        },
    }
    if everything:
        # Trusted for its annotations: these tests are about the gates, and a readOnlyHint
        # grants a call only from such a server (tests/untrusted/test_annotations.py).
        servers["everything"] = {
            "command": peer("node", "mcp-server-everything"),
            "args": ["stdio"],
            "trust_annotations": True,
            # The 15 s default connect limit is a healthy start's: a loaded machine took longer.
            "timeouts": {"connect": 60},
        }
    config = keen_home / "mcp" / "configs.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"version": 1, "servers": servers}, indent=2))
    async with Manager(config, trust=PinGuard()) as manager:
        assert await manager.wait_ready(60)
        assert manager.status(DEMO).state is ServerState.CONNECTED
        if everything:
            assert manager.status("everything").state is ServerState.CONNECTED
        yield Session(manager, keen_home, workspace, pidfile)


def events(h: Harness, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_events(h.log.path) if e["type"] == kind]


async def kill_demo(session: Session) -> None:
    """SIGKILL the demo server and wait until its Manager no longer has it connected."""
    down = anyio.Event()
    unsubscribe = session.manager.subscribe(
        lambda status: (
            down.set() if status.name == DEMO and status.state is not ServerState.CONNECTED else None
        )
    )
    os.kill(int(session.pidfile.read_text()), signal.SIGKILL)
    with anyio.fail_after(30):
        await down.wait()
    unsubscribe()


def names(tools: list[dict[str, Any]]) -> set[str]:
    return {t["name"] for t in tools}


async def test_skills_are_not_preloaded(session: Session) -> None:
    h = session.harness()
    tools = h.begin_step()
    model_input = json.dumps(tools) + h.skill_index()
    assert "test-fix: Fix failing tests (reproduce" in h.skill_index()
    assert TEST_FIX_BODY not in model_input and REVIEW_BODY not in model_input
    assert not any(n.startswith("mcp__") for n in names(tools)), "no MCP tool before the model asks"
    loaded = await h.call("load_skill", {"name": "test-fix"})
    assert not loaded.is_error and TEST_FIX_BODY in loaded.text and REVIEW_BODY not in loaded.text
    assert [e["id"] for e in events(h, "capability.loaded")] == ["skill__test-fix"]
    missing = await h.call("load_skill", {"name": "deploy"})
    assert missing.is_error and "no skill 'deploy'" in missing.text
    # A control character in the name is escaped once: its backslash not doubled (by repr).
    escaped = await h.call("load_skill", {"name": "dep\x1bloy"})
    assert escaped.is_error and "no skill 'dep\\x1bloy' in" in escaped.text, escaped.text


async def test_read_only_hides_write_tools_and_search_returns_none_of_them(full_session: Session) -> None:
    h = full_session.harness(mode="read-only")
    h.begin_step()
    found = await h.call("search_tools", {"query": "add write delete a note", "limit": 10})
    assert "search_notes" in found.text or "list_notes" in found.text
    assert "add_note" not in found.text and "delete_note" not in found.text
    visible = names(h.begin_step())
    assert {"mcp__keen-demo__add_note", "mcp__keen-demo__delete_note"}.isdisjoint(visible)
    assert visible & {"mcp__keen-demo__search_notes", "mcp__keen-demo__list_notes"}
    # server-everything annotates toggle-simulated-logging as a write and most of its other
    # tools read-only: the filter drops that one tool, not its server.
    toggles = await h.call("search_tools", {"query": "toggle simulated logging", "limit": 10})
    assert "mcp__everything__" in toggles.text
    assert "toggle-simulated-logging" not in toggles.text
    denied = await h.call(
        "call_mcp_tool", {"server": DEMO, "tool": "add_note", "arguments": {"title": "x", "body": "x"}}
    )
    assert denied.denied == "visibility" and "read-only mode forbids tools that may write" in denied.text


async def test_disconnect_removes_tools_with_a_capability_diff(session: Session) -> None:
    h = session.harness(mode="auto")
    h.begin_step()
    await h.call("search_tools", {"query": "convert units of measurement"})
    assert "mcp__keen-demo__convert_units" in names(h.begin_step())
    ok = await h.call("mcp__keen-demo__convert_units", {"value": 1, "from_unit": "km", "to_unit": "m"})
    assert not ok.is_error and "1000" in ok.text, ok.text
    await kill_demo(session)
    assert "mcp__keen-demo__convert_units" not in names(h.begin_step())
    removed = events(h, "capability.diff")[-1]
    assert removed["step"] == 3
    gone = {e["name"]: e["reason"] for e in removed["removed"]}
    assert gone["mcp__keen-demo__convert_units"] == f"server {DEMO} is not connected"
    assert DEMO not in removed["policy_inputs"]["connected_servers"]
    late = await h.call("mcp__keen-demo__convert_units", {"value": 1, "from_unit": "km", "to_unit": "m"})
    assert late.denied == "visibility"
    # The refusal says why: the server is down (searching cannot bring its tools back), by
    # its model name or through call_mcp_tool.
    by_id = await h.call(
        "call_mcp_tool",
        {
            "server": DEMO,
            "tool": "convert_units",
            "arguments": {"value": 1, "from_unit": "km", "to_unit": "m"},
        },
    )
    for refused in (late, by_id):
        assert refused.denied == "visibility" and refused.code == "server_disconnected", refused.text
        assert f'MCP server "{DEMO}"' in refused.text and "search_tools" not in refused.text
        assert refused.text.endswith("The user has to fix and reconnect this server; tell them.")


async def test_refusals_and_failures_tell_the_model_what_to_do(session: Session) -> None:
    """A call the gateway's checks refuse (or that fails) carries its remedy, worded for the
    model: the harness used to pass the bare message, so the model never learnt what to do."""
    h = session.harness(mode="auto")
    h.begin_step()
    await h.call("search_tools", {"query": "convert units of measurement"})
    h.begin_step()
    invalid = await h.call("mcp__keen-demo__convert_units", {"value": "one"})
    assert invalid.denied == "validate" and invalid.code == "invalid_arguments", invalid.text
    assert invalid.text.endswith(
        "Read the tool's schema file and pass arguments that match its inputSchema exactly."
    )
    await kill_demo(session)
    # Still offered this turn: the gateway's "connected" check refuses it, with the remedy.
    gone = await h.call("mcp__keen-demo__convert_units", {"value": 1, "from_unit": "km", "to_unit": "m"})
    assert gone.denied == "validate" and gone.code == "server_disconnected", gone.text
    assert gone.text.endswith("The user has to fix and reconnect this server; tell them.")
    assert events(h, "result")[-1]["text"] == gone.text


async def test_search_is_not_authorization(session: Session) -> None:
    h = session.harness(mode="auto")
    h.begin_step()
    found = await h.call("search_tools", {"query": "delete a note by id"})
    assert "mcp__keen-demo__delete_note" in found.text
    assert "not available: auto mode hides destructive tools" in found.text
    assert "mcp__keen-demo__delete_note" not in names(h.begin_step())
    denied = await h.call(
        "call_mcp_tool", {"server": DEMO, "tool": "delete_note", "arguments": {"note_id": 1}}
    )
    assert denied.is_error and denied.denied == "visibility"
    # The refusal says the mode forbids it (so searching again will not help).
    assert "may not run in auto mode: auto mode forbids destructive tools" in denied.text
    assert events(h, "result")[-1]["outcome"] == "denied"


async def test_the_permission_gate_asks_the_calls_approver(full_session: Session) -> None:
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return len(asked) > 1  # no the first time, yes the second

    h = full_session.harness(mode="ask", approve=approve)
    h.begin_step()
    await h.call("search_tools", {"query": "toggle simulated logging"})
    assert "mcp__everything__toggle-simulated-logging" in names(h.begin_step())
    refused = await h.call("call_mcp_tool", {"server": "everything", "tool": "toggle-simulated-logging"})
    assert refused.denied == "permission" and "did not approve" in refused.text
    ran = await h.call("mcp__everything__toggle-simulated-logging", {})
    assert not ran.is_error and "logging" in ran.text.lower(), ran.text
    assert [r.tool for r in asked] == ["toggle-simulated-logging"] * 2
    assert asked[0].annotations and asked[0].annotations["level"] == "medium"
    assert [(e["decision"], e["by"]) for e in approvals(read_events(h.log.path))] == [
        ("deny", "user"),
        ("allow", "user"),
    ]
    # Read-only tools need no approval; schema-invalid calls stop at validate.
    await h.call("search_tools", {"query": "echo back the input message"})
    h.begin_step()
    echoed = await h.call("mcp__everything__echo", {"message": "hello"})
    assert not echoed.is_error and "hello" in echoed.text and len(asked) == 2
    invalid = await h.call("mcp__everything__echo", {"message": 7})
    assert invalid.denied == "validate" and len(asked) == 2
    # The gateway alone (not through the gate) asks its own approval, never the harness's:
    # here none, so a tool not annotated read-only is refused, and nothing was asked of the
    # harness's approver.
    with pytest.raises(
        ApprovalDenied, match="without an approval callback only tools annotated readOnlyHint"
    ):
        await h.gateway.call("everything", "toggle-simulated-logging", {})  # type: ignore[union-attr]
    assert len(asked) == 2


async def test_large_results_are_cut_with_a_note(full_session: Session) -> None:
    (full_session.workspace / "big.txt").write_text("\n".join(f"line {i}" for i in range(5000)))
    h = full_session.harness(mode="ask", approve=lambda _: True, max_result_chars=500)
    h.begin_step()
    read = await h.call("read_file", {"path": "big.txt"})
    assert read.truncated_chars > 0 and "read_file on big.txt with a later offset" in read.text
    await h.call("search_tools", {"query": "echo back the input message"})
    h.begin_step()
    echoed = await h.call("mcp__everything__echo", {"message": "x" * 2000})
    assert echoed.truncated_chars > 0 and "[truncated:" in echoed.text
    assert events(h, "result")[-1]["text"] == echoed.text, "the log keeps the text as the model saw it"


async def test_call_mcp_tool_takes_arguments_sent_as_json_text(full_session: Session) -> None:
    # Some models send call_mcp_tool's "arguments" object as a JSON string: the gateway's
    # handle_tool_call took it, the harness (keen chat's path) refused the same call.
    h = full_session.harness(mode="auto")
    h.begin_step()
    await h.call("search_tools", {"query": "echo back the input message"})
    h.begin_step()
    call = {"server": "everything", "tool": "echo", "arguments": json.dumps({"message": "as text"})}
    echoed = await h.call("call_mcp_tool", call)
    assert not echoed.is_error and "as text" in echoed.text, echoed.text
    broken = await h.call("call_mcp_tool", {**call, "arguments": "{not json"})
    assert broken.denied == "validate" and '"arguments": {...}' in broken.text
    # The whole input as JSON text, as the OpenAI SDK gives a tool call's arguments (the
    # gateway took it; the harness said they were "not another JSON value" than an object).
    whole = await h.call("call_mcp_tool", json.dumps({**call, "arguments": {"message": "all text"}}))
    assert not whole.is_error and "all text" in whole.text, whole.text
    found = await h.call("search_tools", json.dumps({"query": "echo back the input message"}))
    assert not found.is_error and "everything" in found.text, found.text
    listed = await h.call("search_tools", json.dumps(["echo"]))
    assert listed.denied == "validate" and "not another JSON value" in listed.text
    # Nested past Python's recursion limit: the decoder's RecursionError left Harness.call.
    deep = "[" * 100000
    for name, arguments in (
        ("search_tools", deep),
        ("call_mcp_tool", deep),
        ("mcp__everything__echo", deep),
        ("call_mcp_tool", {**call, "arguments": deep}),
    ):
        refused = await h.call(name, arguments)
        assert refused.denied == "validate" and not refused.raw, (name, refused.text[:300])
        assert ("these are not JSON (nested too deep)" in refused.text) or (
            "is not of type 'object'" in refused.text
        ), (name, refused.text[:300])


async def test_a_cancelled_call_is_audited_as_cancelled(full_session: Session) -> None:
    # A host that cancels a running call (a timeout, Ctrl-C) left a `call` event with no
    # `result`: the audit could not tell a cancelled call from a crash mid-write.
    h = full_session.harness(mode="auto")
    h.begin_step()
    await h.call("search_tools", {"query": "long running operation with progress updates"})
    await h.call("search_tools", {"query": "echo back the input message"})
    h.begin_step()
    long = "mcp__everything__trigger-long-running-operation"
    # Cancelled once it runs (its `call` event is on disk as execute starts), however long a
    # loaded machine takes to get it there: a fixed second could end it before execute.
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.call, long, {"duration": 30, "steps": 3})
            with anyio.fail_after(60):
                while not any(e["name"] == long for e in events(h, "call")):  # noqa: ASYNC110 (a file has no event)
                    await anyio.sleep(0.05)
            scope.cancel()
    assert scope.cancelled_caught
    result = events(h, "result")[-1]
    assert result["capability"] == "mcp__everything__trigger-long-running-operation"
    # Its server and tool, as every other result event names them (they were left out).
    assert (result["server"], result["tool"]) == ("everything", "trigger-long-running-operation")
    assert result["outcome"] == "cancelled" and result["code"] == "cancelled"
    assert result["stages"][-2:] == ["execute", "audit"]
    after = await h.call("mcp__everything__echo", {"message": "still here"})
    assert not after.is_error and "still here" in after.text
    replayed = replay(h.log.path)
    assert replayed.ok and replayed.steps[-1].calls[0]["result"]["outcome"] == "cancelled"


async def test_replay_restores_every_turns_visible_set(session: Session) -> None:
    h = session.harness(mode="ask", approve=lambda _: True)
    seen: list[set[str]] = []

    def turn() -> None:
        seen.append(names(h.begin_step()))

    turn()
    await h.call("load_skill", {"name": "test-fix"})
    await h.call("grep", {"pattern": "label", "path": "tests"})
    await h.call("search_tools", {"query": "add a note"})
    h.end_step()
    turn()
    await h.call(
        "call_mcp_tool",
        {"server": DEMO, "tool": "add_note", "arguments": {"title": "label", "body": "label is Save"}},
    )
    h.set_mode("read-only")
    h.end_step()
    turn()
    stale = await h.call("mcp__keen-demo__add_note", {"title": "x", "body": "y"})  # last turn's name
    assert stale.denied == "visibility" and "may not run in read-only mode" in stale.text
    h.end_step()
    rebuilt = replay(h.log.path)
    assert rebuilt.ok and len(rebuilt.steps) == 3
    assert [set(t.rebuilt) for t in rebuilt.steps] == seen
    assert "mcp__keen-demo__add_note" in seen[1] and "mcp__keen-demo__add_note" not in seen[2]
    diff = rebuilt.steps[2].diffs[0]
    assert {
        "name": "mcp__keen-demo__add_note",
        "reason": "read-only mode hides tools that may write",
    }.items() <= {
        k: v for e in diff["removed"] if e["name"] == "mcp__keen-demo__add_note" for k, v in e.items()
    }.items()
    assert diff["policy_inputs"]["permission_mode"] == "read-only"
    assert "tests" in diff["policy_inputs"]["touched_paths"]
    # The check can fail: drop one diff line and the rebuilt set no longer matches.
    lines = h.log.path.read_text().splitlines()
    tampered = session.home / "tampered.jsonl"
    tampered.write_text(
        "\n".join(line for line in lines if '"step": 2' not in line or "capability.diff" not in line)
    )
    assert not replay(tampered).ok


async def test_no_secret_reaches_the_log(session: Session) -> None:
    h = session.harness(mode="ask", approve=lambda _: True)
    h.begin_step()
    await h.call("search_tools", {"query": "add a note"})
    h.begin_step()
    note = await h.call(
        "call_mcp_tool",
        {
            "server": DEMO,
            "tool": "add_note",
            "arguments": {"title": "creds", "body": f"token {SECRET} Authorization: Bearer abcdefgh123456"},
        },
    )
    assert not note.is_error and SECRET in note.text, "the model sees the result; the log does not"
    h.end_step()
    raw = h.log.path.read_text()
    assert SECRET not in raw and "abcdefgh123456" not in raw and "[REDACTED]" in raw
    assert oct(h.log.path.stat().st_mode & 0o777) == "0o600"


async def test_the_runtime_opens_a_harness(
    keen_home: Path, write_config: Callable[..., Path], tmp_path: Path
) -> None:
    from keen.demo import demo_server_entry
    from keen.runtime import open_runtime

    # Forked (tests/helpers/forkserver.py): the runtime is under test, not the demo's start.
    entry = {**demo_server_entry(keen_home), "args": launch_args("-m", "keen.demo.server")}
    config = write_config({DEMO: entry})
    async with open_runtime(config_path=config, wait=60, sync=True) as rt:
        h = rt.harness(mode="read-only", workspace=tmp_path)
        assert rt.gateway.approval is None, "a harness lends the gateway no approval"
        h.begin_step()
        await h.call("search_tools", {"query": "what time is it in a timezone"})
        assert "mcp__keen-demo__current_time" in names(h.begin_step())
        now = await h.call("mcp__keen-demo__current_time", {"timezone": "UTC"})
        assert not now.is_error and "UTC" in now.text, now.text
        h.close()
    assert replay(h.log.path).ok


def test_a_calls_observation_is_the_dataclass_made_with_every_field_of_the_call() -> None:
    from dataclasses import FrozenInstanceError, fields

    from keen.calls import Call
    from keen.harness import Observation
    from keen.harness.pipeline import _observation  # pyright: ignore[reportPrivateUsage]

    # The observation is made without the frozen dataclass's __init__ (one object.__setattr__
    # per field): it must be the same object, every field set, still frozen.
    call = Call("call_mcp_tool", {}, call_id="0.1", server="s", tool="t", capability_id="mcp__s__t")
    call.text, call.is_error, call.code, call.truncated_chars = "cut", True, "tool_error", 3
    obs = _observation(call)
    made = Observation(
        "0.1", "call_mcp_tool", "cut", is_error=True, denied=None, truncated_chars=3,
        capability="mcp__s__t", code="tool_error", server="s", tool="t", raw=None,
    )  # fmt: skip
    assert obs == made and hash(obs) == hash(made) and repr(obs) == repr(made)
    assert set(vars(obs)) == {f.name for f in fields(Observation)}
    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'text'"):
        obs.text = "x"  # type: ignore[misc]
