"""A Manager with a Relay passes what a server asks during a call to that call's peer
(``keen.mcp.connection.relay``), and declines, with a message, what it cannot place.

Real stdio server: ``elicit_stdio.py`` (2025-11-25 only: its requests name no call).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as mt
import pytest

from conftest import stdio_server
from keen.mcp import Manager, ServerState
from keen.mcp.connection.relay import CALL_PEER, Relay
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio


class Peer:
    """A caller that answers every form with a party of 4 at 20:00 and accepts every page."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.asked: list[mt.InputRequest] = []

    async def ask(self, server: str, request: mt.InputRequest) -> mt.InputResponse | mt.ErrorData:
        self.asked.append(request)
        if isinstance(request, mt.ElicitRequest) and isinstance(request.params, mt.ElicitRequestURLParams):
            return mt.ElicitResult(action="accept")
        return mt.ElicitResult(action="accept", content={"party_size": 4, "time": "20:00"})

    async def log(self, server: str, params: mt.LoggingMessageNotificationParams) -> None:
        pass

    async def completed(self, server: str, elicitation_id: str) -> None:
        pass


async def _call(manager: Manager, peer: Peer | None, tool: str, arguments: dict[str, Any]) -> str:
    token = CALL_PEER.set(peer)
    try:
        return (await manager.call_tool("cloud", tool, arguments)).text
    finally:
        CALL_PEER.reset(token)


async def test_a_request_goes_to_the_calls_peer_or_is_declined_with_why(
    write_config: Callable[..., Path],
) -> None:
    path = write_config({"cloud": stdio_server("elicit_stdio.py")})
    async with Manager(path, relay=Relay(), trust=PinGuard()) as manager:
        assert await manager.wait_ready(30)
        assert manager.status("cloud").state is ServerState.CONNECTED, manager.status("cloud").last_error
        ada = Peer("ada")
        assert await _call(manager, ada, "book_table", {"restaurant": "Sol"}) == "booked Sol for 4 at 20:00"
        assert [r.params.message for r in ada.asked] == ["Booking Sol: how many people, and when?"]  # type: ignore[union-attr]
        # A call made for nobody: the server's question is declined, saying why.
        alone = await _call(manager, None, "book_table", {"restaurant": "Sol"})
        assert "asked outside any call" in alone, alone
        # A page Keen would not show a person is declined before any peer sees it.
        assert await _call(manager, ada, "sign_in", {"url": "javascript:alert(1)"}) == "decline"
        assert len(ada.asked) == 1
        assert await _call(manager, ada, "sign_in", {"url": "https://example.com/in"}) == "accept"
        assert len(ada.asked) == 2


async def test_calls_of_two_hosts_at_once_make_a_request_nobodys() -> None:
    relay = Relay()
    ada, bob = Peer("ada"), Peer("bob")
    with relay.calling("cloud", ada), relay.calling("cloud", bob):
        found = relay.peer("cloud")
        assert isinstance(found, str) and "calls of 2 MCP hosts" in found
        # The calling task's own peer is exact (2026-07-28 rounds are answered in it).
        token = CALL_PEER.set(bob)
        try:
            assert relay.peer("cloud") is bob
        finally:
            CALL_PEER.reset(token)
    with relay.calling("cloud", ada), relay.calling("cloud", Peer("ada")):
        assert relay.peer("cloud") is ada  # two calls of one host: its request may go to either
    assert isinstance(relay.peer("cloud"), str)
