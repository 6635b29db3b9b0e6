"""A call refused with ``-32042`` (URL elicitation required) and sent again once the server
reports its pages done (MCP 2025-11-25 "Elicitation > URL Mode > URL Elicitation Required
Error", "Completion Notifications for URL Mode Elicitation").

The server is a real SDK ``MCPServer`` run in this process over memory streams, in the
2025-11-25 handshake era (the 2026-07-28 era has no completion notice): its tool fails with
``-32042`` until a "third party" (the test, once the person opened the page) signs the user
in and the server sends ``notifications/elicitation/complete``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp.shared.memory import create_client_server_memory_streams
from mcp_types import ElicitRequestURLParams

from keen.errors import UserActionRequired
from keen.mcp import Manager
from keen.mcp.connection.elicitation import ElicitAnswer
from keen.trust import PinGuard
from servers.handshake_only import refuse_discover

pytestmark = pytest.mark.anyio

PAGE = "https://auth.example.com/connect?state=abc123"
# What the model reads when "files" needs the user to open the page first.
NEEDS_PAGE = (
    r'needs the user to open a page before "files" can run: Sign in to Example Cloud first\. '
    r".*then call the tool again"
)
FILES = "files: a.txt, b.txt"


class Cloud:
    """The server's state: signed in or not, the calls it saw, the session to notify."""

    def __init__(self) -> None:
        self.signed_in = False
        self.calls = 0
        self.session: Any = None
        self.server = MCPServer("cloud", version="1.0.0")

        @self.server.tool(description="List the user's files (fails until the user has signed in).")
        async def files(ctx: Context) -> str:
            self.calls += 1
            if not self.signed_in:
                self.session = ctx.session
                page = ElicitRequestURLParams(
                    message="Sign in to Example Cloud first.", url=PAGE, elicitation_id="s-1"
                )
                raise UrlElicitationRequiredError([page])
            return FILES

    async def finish_sign_in(self, elicitation_id: str = "s-1") -> None:
        """What happens out of band once the person finished at the page."""
        self.signed_in = True
        await self.session.send_elicit_complete(elicitation_id)


@asynccontextmanager
async def handshake_only(server: MCPServer) -> AsyncIterator[Any]:
    """``server`` over memory streams, refusing ``server/discover`` (-32601) as a
    handshake-only server does, so the client falls back to ``initialize``."""
    lowlevel = server._lowlevel_server  # pyright: ignore[reportPrivateUsage]
    async with create_client_server_memory_streams() as (client, (server_read, server_write)):
        send, receive = anyio.create_memory_object_stream[Any](100)
        async with anyio.create_task_group() as tg:
            tg.start_soon(refuse_discover, server_read, server_write, send)
            tg.start_soon(lowlevel.run, receive, server_write, lowlevel.create_initialization_options())
            try:
                yield client
            finally:
                tg.cancel_scope.cancel()


def _manager(write_config: Callable[..., Path], cloud: Cloud, **options: Any) -> Manager:
    path = write_config({"cloud": {"transport": "stdio", "command": "unused-in-memory"}})
    return Manager(
        path, transports={"cloud": lambda: handshake_only(cloud.server)}, **options, trust=PinGuard()
    )


async def test_the_call_is_sent_again_once_the_accepted_page_is_reported_done(
    write_config: Callable[..., Path],
) -> None:
    cloud, opened = Cloud(), anyio.Event()
    asked: list[tuple[str, str, str]] = []
    done: list[str] = []

    async def page(server: str, message: str, url: str) -> ElicitAnswer:
        asked.append((server, message, url))
        opened.set()  # the person opens the page; the sign-in finishes out of band
        return ElicitAnswer("accept", on_complete=lambda: done.append(url))

    async def third_party() -> None:
        await opened.wait()
        await cloud.finish_sign_in()

    async with _manager(write_config, cloud, elicitation_url=page) as manager:
        assert await manager.wait_ready(30)
        assert manager.status("cloud").protocol_version == "2025-11-25"
        async with anyio.create_task_group() as tg:
            tg.start_soon(third_party)
            with anyio.fail_after(20):
                result = await manager.call_tool("cloud", "files", {})
        assert result.text == FILES and not result.is_error
        assert cloud.calls == 2  # refused once, sent once more
        assert asked == [("cloud", "Sign in to Example Cloud first.", PAGE)]
        assert done == [PAGE]  # the person's on_complete heard of it too, once


async def test_a_caller_showing_the_pages_itself_waits_for_the_notice_then_retries(
    write_config: Callable[..., Path],
) -> None:
    cloud = Cloud()
    async with _manager(write_config, cloud) as manager:  # no elicitation_url: nobody asked
        assert await manager.wait_ready(30)
        with pytest.raises(
            UserActionRequired,
            match=NEEDS_PAGE,
        ) as caught:
            await manager.call_tool("cloud", "files", {})
        error = caught.value
        assert error.elicitation_ids == ["s-1"] and error.pages == [("Sign in to Example Cloud first.", PAGE)]
        assert cloud.calls == 1
        # The notice comes before the caller waits: it is not lost.
        await cloud.finish_sign_in()
        with anyio.fail_after(20):
            assert await manager.wait_user_action(error, timeout=10)
        assert (await manager.call_tool("cloud", "files", {})).text == FILES
        # An id the server never named, or one already reported, is not waited for.
        assert not await manager.wait_user_action(
            UserActionRequired("x", server="cloud", pages=[("", PAGE)], elicitation_ids=["other"]),
            timeout=0.1,
        )


@pytest.mark.parametrize("outcome", ["decline", "no notice"])
async def test_no_retry_without_consent_or_without_the_notice(
    write_config: Callable[..., Path], outcome: str
) -> None:
    cloud = Cloud()

    async def page(server: str, message: str, url: str) -> ElicitAnswer:
        return ElicitAnswer("decline" if outcome == "decline" else "accept")

    async with _manager(write_config, cloud, elicitation_url=page, url_elicitation_wait=0.3) as manager:
        assert await manager.wait_ready(30)
        with (
            anyio.fail_after(20),
            pytest.raises(
                UserActionRequired,
                match=NEEDS_PAGE,
            ) as caught,
        ):
            await manager.call_tool("cloud", "files", {})
        assert PAGE in caught.value.message and "then call the tool again" in caught.value.message
        assert cloud.calls == 1  # never sent again


async def test_a_notice_for_another_id_does_not_release_the_call(write_config: Callable[..., Path]) -> None:
    cloud, opened = Cloud(), anyio.Event()

    async def page(server: str, message: str, url: str) -> ElicitAnswer:
        opened.set()
        return ElicitAnswer("accept")

    async def wrong_notice() -> None:
        await opened.wait()
        await cloud.finish_sign_in("s-999")

    async with _manager(write_config, cloud, elicitation_url=page, url_elicitation_wait=0.5) as manager:
        assert await manager.wait_ready(30)
        async with anyio.create_task_group() as tg:
            tg.start_soon(wrong_notice)
            with (
                anyio.fail_after(20),
                pytest.raises(
                    UserActionRequired,
                    match=NEEDS_PAGE,
                ),
            ):
                await manager.call_tool("cloud", "files", {})
        assert cloud.calls == 1
