"""A stream proxy passes the sender's context through as the SDK's dispatcher reads it."""

from __future__ import annotations

import contextvars

import anyio
from mcp.shared._context_streams import create_context_streams  # pyright: ignore[reportPrivateUsage]

from keen.mcp.listing.streams import EOFWatch

_SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="")


def test_a_proxy_gives_the_senders_context_of_a_context_stream_and_none_for_a_plain_one() -> None:
    async def main() -> None:
        send, receive = create_context_streams[str](1)
        proxy = EOFWatch(receive, lambda: None)
        _SEEN.set("sender")
        await send.send("m")
        assert await proxy.receive() == "m"
        # What jsonrpc_dispatcher reads after every message (getattr with a default).
        context = getattr(proxy, "last_context", None)
        assert context is not None and context[_SEEN] == "sender"
        plain_send, plain_receive = anyio.create_memory_object_stream[str](1)
        plain = EOFWatch(plain_receive, lambda: None)
        await plain_send.send("n")
        assert await plain.receive() == "n" and getattr(plain, "last_context", None) is None
        for stream in (send, receive, plain_send, plain_receive):
            await stream.aclose()

    anyio.run(main)
