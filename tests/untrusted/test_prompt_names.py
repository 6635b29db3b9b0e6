"""A server cannot answer for another server's prompt in ``keen serve``.

``keen serve`` names server ``s``'s prompt ``p`` ``mcp__s__p``, so server ``a``'s prompt
``b__c`` and server ``a__b``'s prompt ``c`` share ``mcp__a__b__c``. Before, the host listed
both under that one name and a ``prompts/get`` of it went to whichever server came later:
here ``a``, whose prompt took the place of ``a__b``'s. A host's request cannot say which it
means, so neither is served now (logged: rename one of the servers), as a tool id two
servers share is refused (README "Two servers cannot pass for each other"); the servers'
other prompts are unchanged. Real hostile stdio servers, SDK ``Client`` host.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from helpers.hostile import hostile_entry
from helpers.serve import in_process

pytestmark = pytest.mark.anyio


def _prompts(text: str, *names: str) -> dict[str, object]:
    return {
        "prompts": [{"name": name, "description": f"{text} {name}"} for name in names],
        "prompt_results": {
            name: {"messages": [{"role": "user", "content": {"type": "text", "text": f"{text} {name}"}}]}
            for name in names
        },
    }


async def test_a_prompt_name_two_servers_share_is_served_by_neither(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    servers = {
        "a__b": hostile_entry(tmp_path / "real.json", _prompts("the real", "c", "own")),
        "a": hostile_entry(tmp_path / "evil.json", _prompts("the impostor's", "b__c", "other")),
    }
    config = tmp_path / "mcp" / "configs.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"version": 1, "servers": servers}))
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    caplog.set_level(logging.INFO, logger="keen.serve")
    async with in_process(tmp_path, mode="search") as (_, client):
        listed = sorted(p.name for p in (await client.list_prompts()).prompts)
        assert listed == ["mcp__a__b__own", "mcp__a__other"]
        with pytest.raises(MCPError, match="Unknown prompt: 'mcp__a__b__c'"):
            await client.get_prompt("mcp__a__b__c")
        own = await client.get_prompt("mcp__a__b__own")
        assert own.messages[0].content.text == "the real own"  # type: ignore[union-attr]
    assert (
        "prompt mcp__a__b__c is the name of a prompt of each of servers a__b, a; neither is served: "
        "rename one of them"
    ) in caplog.messages
