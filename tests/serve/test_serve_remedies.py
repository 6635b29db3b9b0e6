"""``keen serve`` errors tell the host's model what to do, in terms of keen serve's own tools.

The host's model has no skill files and cannot reconnect a server: a refusal says to use
``describe_tools`` / ``search_tools`` (search mode) or the ``tool_descriptions`` resource
(extension mode), and a server that crashed says keen serve reconnects it on the next call,
which it does (the stdio server is respawned).
Real ``keen serve`` over stdio in front of ``tests/servers/basic_stdio.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers.serve import connect, read_json, write_upstream

pytestmark = pytest.mark.anyio

RECONNECTS = "keen serve reconnects this server on the next call to it"


async def test_search_mode_errors_point_at_its_tools_and_a_crashed_server_comes_back(tmp_path: Path) -> None:
    write_upstream(tmp_path, extra_tools=0)
    async with connect("stdio", "session", home=tmp_path, serve_args=["--mode", "search"]) as client:

        async def call(tool: str, arguments: dict[str, object]) -> dict[str, str]:
            result = await client.call_tool(
                "call_tool", {"server": "basic", "tool": tool, "arguments": arguments}
            )
            assert result.is_error
            return read_json(result)["error"]

        wrong = await call("add", {"a": "x"})
        assert wrong["code"] == "invalid_arguments"
        assert wrong["message"].endswith(
            "Call describe_tools for its inputSchema and pass arguments that match it exactly."
        )
        unknown = await call("ad", {})
        assert unknown["code"] == "tool_not_found"
        assert unknown["message"].endswith("Use search_tools to find the tool's exact server and name.")
        assert "SKILL.md" not in json.dumps([wrong, unknown])
        # The server dies mid-call: that call fails (it is never repeated) and says keen serve
        # reconnects; the next call respawns the server and runs on the new process.
        pid = await client.call_tool("call_tool", {"server": "basic", "tool": "pid", "arguments": {}})
        died = await call("die", {})
        assert died["code"] == "server_disconnected", died
        assert RECONNECTS in died["message"]
        assert "restart keen serve" not in died["message"]
        assert "keen mcp connect" not in json.dumps(died)
        later = await client.call_tool(
            "call_tool", {"server": "basic", "tool": "echo", "arguments": {"text": "hi"}}
        )
        assert not later.is_error, later
        assert "hi" in json.dumps(later.model_dump(mode="json"))
        again = await client.call_tool("call_tool", {"server": "basic", "tool": "pid", "arguments": {}})
        assert _text(again) != _text(pid)
    audit = (tmp_path / "logs" / "serve-audit.jsonl").read_text()
    assert RECONNECTS in audit


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def test_extension_mode_errors_point_at_the_tool_descriptions_resource(tmp_path: Path) -> None:
    write_upstream(tmp_path, extra_tools=0)
    async with connect("stdio", "stateless", home=tmp_path, serve_args=["--mode", "extension"]) as client:
        await client.read_resource("resource:///tool_descriptions?tools=mcp__basic__add")
        wrong = await client.call_tool("mcp__basic__add", {"a": "x"})
        assert wrong.is_error
        error = read_json(wrong)["error"]
        assert error["code"] == "invalid_arguments"
        assert error["message"].endswith(
            "Read resource:///tool_descriptions?tools=NAME for its inputSchema and pass arguments"
            " that match it exactly."
        )
