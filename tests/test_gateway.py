"""call_mcp_tool: every refusal in the order of docs/architecture.md "The data flow of one call", the approval callback, result shaping,
audit events, and the tool definitions for LLM APIs. Real stdio servers throughout."""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import numpy
import pytest

from conftest import stdio_server
from keen.errors import (
    ApprovalDenied,
    InvalidArguments,
    Remedy,
    ServerDisabled,
    ServerDisconnected,
    ServerMisconfigured,
    ServerNotConfigured,
    ToolNotFound,
)
from keen.gateway import ApprovalRequest, Gateway, allow_all, allow_read_only, for_model, tool_definition
from keen.mcp import Manager
from keen.skills import SkillsConfig
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so that one :func:`manager` serves every test of the module."""
    return "asyncio"


@pytest.fixture(scope="module")
async def manager(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Manager]:
    """One Manager for the module, in its own KEEN_HOME (set for every test that uses it):
    its servers start once, not once a test. The tests only call through it; none
    reconnects, stops or reconfigures a server."""
    home = tmp_path_factory.mktemp("gateway") / "keen-home"
    path = home / "mcp" / "configs.json"
    path.parent.mkdir(parents=True)
    servers = {
        "local": stdio_server("basic_stdio.py", trust_annotations=True),
        "claims": stdio_server("basic_stdio.py"),
        "off": stdio_server("basic_stdio.py", enabled=False),
        "gone": {"transport": "stdio", "command": "keen-no-such-binary"},
    }
    path.write_text(json.dumps({"version": 1, "servers": servers}))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KEEN_HOME", str(home))
        async with Manager(path, trust=PinGuard()) as m:
            assert await m.wait_ready(20)
            yield m


class Recorder:
    def __init__(self, verdict: Any = True) -> None:
        self.verdict = verdict
        self.requests: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> Any:
        self.requests.append(request)
        if isinstance(self.verdict, Exception):
            raise self.verdict
        return self.verdict


async def test_refusals_come_in_order_and_never_reach_approval(manager: Manager) -> None:
    approval = Recorder()
    events: list[dict[str, Any]] = []
    gateway = Gateway(manager, approval=approval, audit=events.append)
    cases: list[tuple[str, str, Any, type[Exception], str]] = [
        ("ghost", "echo", {}, ServerNotConfigured, "not configured"),
        ("off", "echo", {"text": "x"}, ServerDisabled, '"enabled": false'),
        (
            "gone",
            "echo",
            {"text": "x"},
            ServerDisconnected,
            '"gone" is disconnected',
        ),
        ("local", "nope", {}, ToolNotFound, "no tool"),
        ("local", "add", {"a": 1}, InvalidArguments, "'b' is a required property"),
        ("local", "add", "not an object", InvalidArguments, "must be a JSON object"),
    ]
    for server, tool, args, error, text in cases:
        with pytest.raises(error, match=text):
            await gateway.call(server, tool, args)
    assert approval.requests == []  # nothing unchecked is ever put to the user
    assert [e["decision"] for e in events] == ["refused"] * len(cases)
    assert [e["error_code"] for e in events] == [
        "server_not_configured",
        "server_disabled",
        "server_disconnected",
        "tool_not_found",
        "invalid_arguments",
        "invalid_arguments",
    ]


async def test_a_config_given_in_code_is_what_the_model_is_told_to_fix(keen_home: Path) -> None:
    # The remedy for the model said "in configs.json" after a message naming the config the
    # Manager was given: the user was sent to a file the library never read.
    config = {
        "version": 1,
        "servers": {"off": stdio_server("basic_stdio.py", enabled=False), "bad": {"transport": "stdio"}},
    }
    async with Manager(config=config, trust=PinGuard()) as given:
        assert await given.wait_ready(20)
        gateway = Gateway(given, approval=allow_all)
        with pytest.raises(ServerDisabled, match="the config this Manager was given") as disabled:
            await gateway.call("off", "echo", {"text": "x"})
        with pytest.raises(ServerMisconfigured, match="the config this Manager was given") as broken:
            await gateway.call("bad", "echo", {"text": "x"})
    for caught, server in ((disabled, "off"), (broken, "bad")):
        text = for_model(caught.value, server)
        assert "configs.json" not in text and "the config this Manager was given" in text, text
        assert text.endswith("as the message says; tell them.") or text.endswith(
            "where the message says; tell them."
        ), text


async def test_approval_sees_the_call_and_can_deny(manager: Manager) -> None:
    deny = Recorder(verdict=False)
    events: list[dict[str, Any]] = []
    gateway = Gateway(manager, approval=deny, audit=events.append)
    pid_before = (await Gateway(manager, approval=allow_all).call("local", "pid", {})).text
    with pytest.raises(ApprovalDenied, match="not approved, so nothing was sent"):
        await gateway.call("local", "echo", {"text": "secret plan"})
    request = deny.requests[0]
    assert (request.server, request.tool, request.arguments) == ("local", "echo", {"text": "secret plan"})
    assert request.read_only and "unchanged" in request.description
    assert json.loads(request.arguments_json()) == {"text": "secret plan"}
    assert events[-1]["decision"] == "denied" and events[-1]["outcome"] == "error"
    # a raising callback counts as a denial, told apart from a no (a crash is not the user's
    # answer); an async one works
    with pytest.raises(
        ApprovalDenied,
        match=r'the call to "local/echo" was not sent: the approval callback failed \(RuntimeError\)',
    ):
        await Gateway(manager, approval=Recorder(RuntimeError("ui crashed"))).call(
            "local", "echo", {"text": "x"}
        )

    async def slow_yes(_: ApprovalRequest) -> bool:
        await anyio.sleep(0.01)
        return True

    assert (await Gateway(manager, approval=slow_yes).call("local", "echo", {"text": "ok"})).text == "ok"
    assert (
        await Gateway(manager, approval=allow_all).call("local", "pid", {})
    ).text == pid_before  # same session throughout


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        ("no", "a value of type str"),
        (None, "None"),
        (1, "a value of type int"),
        # Named "of type bool, not True or False": numpy's bool must be told from Python's.
        (numpy.True_, "a value of type numpy.bool"),
    ],
)
@pytest.mark.parametrize("asynchronous", [False, True])
async def test_only_true_from_the_approval_callback_lets_a_call_run(
    manager: Manager, answer: object, kind: str, asynchronous: bool
) -> None:
    # bool(verdict) approved a callback's "no" (the user's answer passed on as text) and ran
    # the call.
    def ask(_: ApprovalRequest) -> Any:
        return answer

    async def ask_async(request: ApprovalRequest) -> Any:
        await anyio.lowlevel.checkpoint()
        return ask(request)

    events: list[dict[str, Any]] = []
    gateway = Gateway(manager, approval=ask_async if asynchronous else ask, audit=events.append)
    with pytest.raises(
        ApprovalDenied,
        match=rf'the call to "local/echo" was not sent: the approval callback returned {kind}, '
        r"not True or False \(it must return a Python bool: bool\(x\)\); treated as no\. Nobody said no",
    ):
        await gateway.call("local", "echo", {"text": "x"})
    assert (events[-1]["decision"], events[-1]["outcome"]) == ("denied", "error")


@pytest.mark.parametrize(
    ("server", "tool", "got"),
    [
        (None, "echo", "server a NoneType"),
        ("local", None, "tool a NoneType"),
        (3, "", "server a int, tool empty"),
    ],
)
async def test_a_call_whose_server_or_tool_is_no_name_says_so(
    manager: Manager, server: Any, tool: Any, got: str
) -> None:
    # A server or tool of None (a model's arguments.get("server") passed on) passed every
    # stage as no MCP call: Gateway.call raised a bare AssertionError, call_for_model too.
    gateway = Gateway(manager, approval=allow_all)
    said = rf"a call names its server and tool by their names \(non-empty strings\), got {got}; pass"
    with pytest.raises(InvalidArguments, match=said):
        await gateway.call(server, tool, {"text": "x"})
    shaped = await gateway.call_for_model(server, tool, {"text": "x"})
    assert shaped.is_error and shaped.error_code == "invalid_arguments" and re.search(said, shaped.text)


async def test_results_errors_truncation_and_structured_content(manager: Manager) -> None:
    events: list[dict[str, Any]] = []
    gateway = Gateway(manager, approval=allow_all, max_result_chars=100, audit=events.append)
    failed = await gateway.call_for_model("local", "fail", {"message": "disk full"})
    assert failed.is_error and "disk full" in failed.text
    assert events[-1]["outcome"] == "tool_error"
    long = await gateway.call_for_model("local", "echo", {"text": "x" * 1000})
    assert long.truncated_chars == 900
    assert long.text.startswith("x" * 100) and "900 of 1000 characters cut" in long.text
    added = await gateway.call_for_model("local", "add", {"a": 2, "b": 3})
    assert added.text == "5" and added.structured_content == {"result": 5}
    refused = await gateway.call_for_model("ghost", "x", {})
    assert refused.is_error and refused.error_code == "server_not_configured"
    assert refused.text.startswith('Error: MCP server "ghost" is not configured')


async def test_handle_tool_call_parses_model_input(manager: Manager) -> None:
    gateway = Gateway(manager, approval=allow_all)
    ok = await gateway.handle_tool_call('{"server": "local", "tool": "echo", "arguments": {"text": "hi"}}')
    assert not ok.is_error and ok.text == "hi"
    as_string = await gateway.handle_tool_call(
        {"server": "local", "tool": "echo", "arguments": '{"text": "s"}'}
    )
    assert as_string.text == "s"
    for bad in ("{not json", '{"tool": "echo"}', "[1, 2]"):
        result = await gateway.handle_tool_call(bad)
        assert result.is_error and '"server"' in result.text


async def test_disabled_skill_stays_callable_while_connected(manager: Manager) -> None:
    # The manager's home, which KEEN_HOME names for this test too (the module's manager).
    path = Path(os.environ["KEEN_HOME"]) / "skills" / "config.json"
    assert path.parent.parent == manager.config_path.parent.parent
    config = SkillsConfig.load(path)
    config.set_enabled("mcp:local", False)
    config.save()
    try:
        assert (
            await Gateway(manager, approval=allow_all).call("local", "echo", {"text": "still"})
        ).text == "still"
    finally:
        config.set_enabled("mcp:local", True)
        config.save()


async def test_audit_redacts_known_secrets(manager: Manager) -> None:
    from keen._redact import redactor

    secret = "sk-live-audit-123456789"
    redactor.add(secret)
    events: list[dict[str, Any]] = []
    await Gateway(manager, approval=allow_all, audit=events.append).call(
        "local", "echo", {"text": f"token {secret}"}
    )
    assert secret not in json.dumps(events)
    assert events[0]["arguments"] == {"text": "token [REDACTED]"}


def test_tool_definitions_for_llm_apis() -> None:
    openai = tool_definition("openai", skills_dir="/home/me/.keen/skills")
    fn = openai["function"]
    assert openai["type"] == "function" and fn["name"] == "call_mcp_tool"
    assert "/home/me/.keen/skills/mcp:<server>/SKILL.md" in fn["description"]
    assert "schemas/<tool>.json" in fn["description"]
    assert fn["parameters"]["required"] == ["server", "tool"]
    anthropic = tool_definition("anthropic")
    assert set(anthropic) == {"name", "description", "input_schema"}
    assert tool_definition("mcp")["inputSchema"] == anthropic["input_schema"]
    with pytest.raises(ValueError, match="openai, anthropic or mcp"):
        tool_definition("gemini")


def test_the_tool_definition_names_the_real_skills_directory_by_default(keen_home: Path) -> None:
    # README's tool_definition("anthropic") told the model to read "<skills>/mcp:<server>/SKILL.md",
    # a path no model can open; the default is now $KEEN_HOME/skills, where the sync writes.
    description = tool_definition("anthropic")["description"]
    assert f"{keen_home / 'skills'}/mcp:<server>/SKILL.md" in description and "<skills>" not in description
    assert "<skills>/mcp:<server>" in tool_definition("mcp", skills_dir="<skills>")["description"]


async def test_without_approval_only_read_only_tools_run(manager: Manager) -> None:
    events: list[dict[str, Any]] = []
    gateway = Gateway(manager, audit=events.append)  # no approval callback: safe by default
    assert (await gateway.call("local", "echo", {"text": "hi"})).text == "hi"  # readOnlyHint
    pid_before = (await Gateway(manager, approval=allow_all).call("local", "pid", {})).text
    with pytest.raises(ApprovalDenied, match="approval=") as caught:
        await gateway.call("local", "pid", {})  # not annotated read-only: refused, nothing sent
    assert "readOnlyHint" in caught.value.message
    assert events[-1]["decision"] == "denied"
    assert (await Gateway(manager, approval=allow_read_only).call("local", "echo", {"text": "x"})).text == "x"
    with pytest.raises(ApprovalDenied, match='the call to "local/pid" was not approved, so nothing was sent'):
        await Gateway(manager, approval=allow_read_only).call("local", "pid", {})
    assert (await Gateway(manager, approval=allow_all).call("local", "pid", {})).text == pid_before
    # A server not trusted for its annotations: its readOnlyHint is a claim, not a grant, and
    # the refusal says so (with the two ways to trust it), not only the rule the claim seems to meet.
    with pytest.raises(ApprovalDenied, match="by a server trusted for its annotations") as claimed:
        await gateway.call("claims", "echo", {"text": "hi"})
    assert '"claims" claims readOnlyHint for it' in claimed.value.message
    assert '"trust_annotations": true in its configs.json entry' in claimed.value.message
    assert "keen mcp trust claims" in claimed.value.message


async def test_a_read_only_claim_of_a_config_given_in_code_is_not_sent_to_keen_mcp_trust(
    keen_home: Path,
) -> None:
    # keen mcp trust knows configs.json's servers only, and the mcpServers shape drops
    # "trust_annotations": the remedy for a config given in code said both would work.
    config = {"mcpServers": {"claims": stdio_server("basic_stdio.py")}}
    async with Manager(config=config, trust=PinGuard()) as manager:
        assert await manager.wait_ready(20)
        with pytest.raises(ApprovalDenied, match="claims readOnlyHint for it") as claimed:
            await Gateway(manager).call("claims", "echo", {"text": "hi"})
    assert "keen mcp trust" not in claimed.value.message
    assert "in configs.json's shape" in claimed.value.message


def test_a_remedy_starts_its_own_sentence_after_a_servers_text() -> None:
    # A crashed stdio server's last stderr line ends the message with no full stop: the model
    # read "... running on stdio The user has to fix and reconnect this server".
    down = ServerDisconnected(
        'MCP server "memory" is disconnected. Last error: MCP server "memory" exited unexpectedly; '
        "last stderr: Knowledge Graph MCP Server running on stdio",
        server="memory",
        remedy=Remedy.RECONNECT,
    )
    assert for_model(down, "memory").endswith(
        "running on stdio. The user has to fix and reconnect this server; tell them."
    )
    closed = ServerDisconnected(
        'MCP server "memory" is disconnected.', server="memory", remedy=Remedy.RECONNECT
    )
    assert (
        for_model(closed, "memory")
        == 'MCP server "memory" is disconnected. The user has to fix and reconnect this server; tell them.'
    )
    bare = ServerDisconnected("no remedy here", server="memory")
    assert for_model(bare, "memory") == "no remedy here"
