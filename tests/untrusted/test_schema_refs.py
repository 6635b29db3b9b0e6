"""A tool's inputSchema never makes Keen fetch or read anything.

A hostile raw JSON-RPC server lists tools whose schemas ``$ref`` a loopback listener that
counts connections and never answers, and a local file. The calls go through; the
listener counts zero; the file's content appears nowhere; local ``#/$defs`` still validate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from helpers.hostile import counting_listener, hostile_entry
from keen.errors import InvalidArguments
from keen.gateway import Gateway, allow_all
from keen.mcp import Manager
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

FILE_SECRET = "file-content-7d1e0c9b"


def _tool(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description": f"{name} tool", "inputSchema": schema}


async def test_remote_and_file_refs_are_never_followed(
    write_config: Callable[..., Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    local = tmp_path / "local.json"
    local.write_text('{"$defs": {"x": {"type": "string", "const": "' + FILE_SECRET + '"}}}')
    with counting_listener() as listener:
        tools = [
            _tool("remote", {"type": "object", "properties": {"a": {"$ref": listener.url("/a.json")}}}),
            _tool("remote_root", {"type": "object", "$ref": listener.url("/root.json")}),
            _tool(
                "relative",
                {"$id": listener.url("/base/"), "type": "object", "properties": {"a": {"$ref": "b.json"}}},
            ),
            _tool("metaschema", {"$schema": listener.url("/meta"), "type": "object"}),
            _tool("file", {"type": "object", "properties": {"a": {"$ref": f"{local.as_uri()}#/$defs/x"}}}),
            _tool(
                "local_defs",
                {
                    "type": "object",
                    "$defs": {"n": {"type": "integer", "minimum": 1}},
                    "properties": {"a": {"$ref": "#/$defs/n"}},
                    "required": ["a"],
                },
            ),
        ]
        path = write_config({"h": hostile_entry(tmp_path / "spec.json", {"tools": tools})})
        caplog.set_level(logging.WARNING)
        async with Manager(path, trust=PinGuard()) as manager:
            assert await manager.wait_ready(20)
            gateway = Gateway(manager, approval=allow_all)
            # A fetch would hang: the listener never answers. Bound the test, not Keen.
            with anyio.fail_after(20):
                for name in ("remote", "remote_root", "relative", "metaschema", "file"):
                    result = await gateway.call("h", name, {"a": "anything"})
                    assert result.text == "ok", name
                assert (await gateway.call("h", "local_defs", {"a": 3})).text == "ok"
                with pytest.raises(InvalidArguments, match="less than the minimum") as info:
                    await gateway.call("h", "local_defs", {"a": 0})
                assert FILE_SECRET not in info.value.message
        assert listener.connections == 0
    logged = caplog.text
    assert FILE_SECRET not in logged
    assert "unresolvable $ref" in logged  # the warning says why Keen did not validate


async def test_a_ref_cycle_lets_the_server_validate_and_a_recursive_schema_still_checks(
    write_config: Callable[..., Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # "#/$defs/a" -> "#/$defs/b" -> "#/$defs/a" never reaches a type: jsonschema recursed
    # until RecursionError, which escaped the gateway (`keen mcp call` printed "internal
    # error: ExceptionGroup"). A schema that recurses through the data (a tree) still checks.
    cycle = {
        "type": "object",
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
        "properties": {"x": {"$ref": "#/$defs/a"}},
    }
    tree = {
        "type": "object",
        "$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}}},
        "properties": {"n": {"$ref": "#/$defs/node"}},
    }
    tools = [_tool("cycle", cycle), _tool("tree", tree)]
    path = write_config({"h": hostile_entry(tmp_path / "spec.json", {"tools": tools})})
    caplog.set_level(logging.WARNING)
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(20)
        gateway = Gateway(manager, approval=allow_all)
        assert (await gateway.call("h", "cycle", {"x": 1})).text == "ok"
        assert (await gateway.call("h", "cycle", {"x": 2})).text == "ok"  # again, from the cache
        assert (await gateway.call("h", "tree", {"n": {"child": {"child": {}}}})).text == "ok"
        with pytest.raises(InvalidArguments, match=r"\$\.n\.child\.child: 5 is not of type 'object'"):
            await gateway.call("h", "tree", {"n": {"child": {"child": 5}}})
    assert "$ref cycle" in caplog.text and "cycle" in caplog.text


async def test_a_ref_that_is_not_a_uri_lets_the_server_validate(
    write_config: Callable[..., Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # urljoin raises ValueError for "http://[x/" (a bracketed host that is no IP address);
    # it escaped the gateway as a traceback instead of leaving the check to the server.
    tools = [
        _tool("bad_ref", {"type": "object", "properties": {"a": {"$ref": "http://[not-an-ip/a.json"}}}),
        _tool(
            "bad_id", {"$id": "http://[nope]/s.json", "type": "object", "properties": {"a": {"$ref": "b"}}}
        ),
    ]
    path = write_config({"h": hostile_entry(tmp_path / "spec.json", {"tools": tools})})
    caplog.set_level(logging.WARNING)
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(20)
        gateway = Gateway(manager, approval=allow_all)
        for name in ("bad_ref", "bad_id", "bad_ref"):
            assert (await gateway.call("h", name, {"a": "anything"})).text == "ok", name
    assert "not a usable URI" in caplog.text
