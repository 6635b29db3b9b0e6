"""``keen serve`` answers the protocol the way the specification words it (docs/serve.md),
and says where it listens when it starts (item 7).

Real processes: ``keen serve --transport http`` on 127.0.0.1 in front of stdio servers, the
SDK's ``Client`` as the host, in both protocol eras.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import UnsupportedProtocolVersionErrorData
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from helpers import server_script
from helpers.loopback import redis_server, wait_until
from helpers.serve import MODERN, KeenServeProcess, connect, in_process, read_json, write_upstream

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeenServeProcess]:
    """``keen serve --transport http`` with its defaults, once for the module (no test changes it)."""
    home = tmp_path_factory.mktemp("protocol")
    write_upstream(home)
    with KeenServeProcess(home) as proc:
        yield proc


async def test_an_unsupported_version_gets_32022_and_the_client_retries_with_a_named_one(
    served: KeenServeProcess,
) -> None:
    """Before, a 400 with -32600 and id null: an SDK client took Keen for a server of the old
    era and fell back to ``initialize`` instead of retrying at a version Keen serves."""
    async with connect(served, "stateless") as client:
        with pytest.raises(MCPError, match="unsupported MCP-Protocol-Version '2099-01-01'") as refused:
            await client.session.send_discover("2099-01-01")
        assert refused.value.code == -32022
        data = UnsupportedProtocolVersionErrorData.model_validate(refused.value.error.data)
        assert data.requested == "2099-01-01"
        # What the SDK's negotiation does with it: the newest version both sides speak.
        mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in data.supported]
        assert mutual[-1] == MODERN
        found = await client.session.send_discover(mutual[-1])
        assert MODERN in found["supportedVersions"]


@pytest.mark.parametrize("era", ["session", "stateless"])
async def test_an_unknown_resource_is_32602_naming_the_uri(
    tmp_path: Path, era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MCP 2026-07-28 (SEP-2164): a resource that does not exist is -32602 with ``data.uri``;
    before, the error had no data. (keen serve's server in this process, over memory streams.)"""
    write_upstream(tmp_path)
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    async with in_process(tmp_path, era, mode="extension") as (_, client):
        with pytest.raises(MCPError, match=r"Resource not found: 'file:///nope\.txt'") as refused:
            await client.read_resource("file:///nope.txt")
        assert refused.value.code == -32602
        assert refused.value.error.data == {"uri": "file:///nope.txt"}


async def test_search_tools_names_the_servers_still_connecting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, ``search_tools`` answered from the servers connected so far without a word on
    the one still starting, as if its tools did not exist. (keen serve's server in this
    process, over memory streams.)"""
    hang = {
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(server_script("hang_init"))],
        "timeouts": {"connect": 60},
    }
    write_upstream(tmp_path, extra={"slow": hang})
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    async with in_process(tmp_path, "stateless", mode="search", ready_wait=0.5) as (_, client):
        with anyio.fail_after(60):
            while True:
                found = read_json(await client.call_tool("search_tools", {"query": "add two integers"}))
                # basic may still be starting too (then both are named), or its tools
                # still being indexed: search again until they are found.
                if found["tools"]:
                    break
                assert "slow" in found["connecting_servers"], found
                assert set(found["connecting_servers"]) <= {"basic", "slow"}, found
                await anyio.sleep(0.05)  # a poll of the starts and the index, bounded above
    assert found["tools"][0]["name"] == "mcp__basic__add"
    assert found["connecting_servers"] == ["slow"]
    assert found["note"].startswith("1 upstream server is still connecting (slow): its tools are not")


def test_http_start_up_says_where_it_listens(served: KeenServeProcess, tmp_path: Path) -> None:
    """Before, ``keen serve --transport http`` printed nothing until it was stopped."""
    line = f"keen serve: listening on {served.url} (extension mode, store memory, 1 upstream server)"
    assert wait_until(lambda: line in served.log(), 15), served.log()
    write_upstream(tmp_path)
    with redis_server(tmp_path) as url, KeenServeProcess(tmp_path, ["--store", url]) as proc:
        line = f"keen serve: listening on {proc.url} (search mode, store {url}, 1 upstream server)"
        assert wait_until(lambda: line in proc.log(), 15), proc.log()
