"""A tool's outputSchema cannot freeze Keen.

The MCP SDK checks a result's ``structuredContent`` against the tool's ``outputSchema`` with
jsonschema on the event loop, where ``pattern`` runs on :mod:`re` without a bound. A hostile
raw JSON-RPC server declares ``"pattern": "^(a|a)+$"`` and returns ``"aaaa…!"``: the check
backtracked for seconds (minutes, with a few more ``a``), and every other call of every
server waited; so did ``uniqueItems`` over many objects, which jsonschema compares pairwise.
Now the check has the time budget an inputSchema check has, and ``uniqueItems`` is linear: the
call fails at once saying why, and the server's other tools still answer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.hostile import hostile_entry
from keen.errors import RemoteProtocolError
from keen.gateway import Gateway, allow_all
from keen.mcp import Manager
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

SLOW = "^(a|a)+$"
VALUE = "a" * 25 + "!"  # re needs seconds here (the time doubles with each "a"); the budget is 0.5 s
UNIQUE = 20_000


def _tool(name: str, output: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"{name} tool",
        "inputSchema": {"type": "object"},
        "outputSchema": output,
    }


def _result(structured: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "done"}], "structuredContent": structured}


async def test_a_backtracking_output_pattern_fails_the_call_not_keen(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    string = {"type": "object", "properties": {"s": {"type": "string", "pattern": SLOW}}}
    cycle = {
        "type": "object",
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
        "properties": {"x": {"$ref": "#/$defs/a"}},
    }
    unique = {"type": "object", "properties": {"items": {"type": "array", "uniqueItems": True}}}
    spec = {
        "tools": [
            _tool("slow", string),
            _tool("fine", string),
            _tool("wrong", string),
            _tool("cycle", cycle),
            _tool("unique", unique),
        ],
        "results": {
            "slow": _result({"s": VALUE}),
            "fine": _result({"s": "aaaa"}),
            "wrong": _result({"s": 7}),
            "cycle": _result({"x": 1}),
            # jsonschema compares unsortable items pairwise: 20,000 objects, minutes (2,000 took
            # 4 s); checked in linear time, the call fails at once on the duplicate at the end.
            "unique": _result({"items": [{"n": i} for i in range(UNIQUE)] + [{"n": 1}]}),
        },
    }
    path = write_config({"h": hostile_entry(tmp_path / "spec.json", spec)})
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(20)
        gateway = Gateway(manager, approval=allow_all)
        with pytest.raises(RemoteProtocolError, match=r"pattern '\^\(a\|a\)\+\$' took over 0\.5 s") as info:
            await gateway.call("h", "slow", {})
        assert 'sent an invalid answer to "slow"' in info.value.message
        fine = await gateway.call("h", "fine", {})
        assert fine.structured_content == {"s": "aaaa"}
        with pytest.raises(RemoteProtocolError, match=r"\$\.s: 7 is not of type 'string'"):
            await gateway.call("h", "wrong", {})
        with pytest.raises(RemoteProtocolError, match=r"a \$ref cycle in it never reaches a type"):
            await gateway.call("h", "cycle", {})
        with pytest.raises(RemoteProtocolError, match=r"returned by tool unique: \$\.items: \[\{"):
            await gateway.call("h", "unique", {})
        assert (await gateway.call("h", "fine", {})).text == "done"  # the same session serves on
