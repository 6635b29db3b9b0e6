"""A 2026-07-28 stdio server whose results leave out ``resultType`` (basic_stdio's tools).

MCP 2026-07-28 has a client read a result without ``resultType`` as ``"complete"``
(SEP-2322; the conformance package's ``sep-2322-client-request-state`` checks it). The SDK's
server always writes the field, so this one strips it from every result on the way out.
Usage: ``python no_result_type.py``.
"""

from __future__ import annotations

from typing import Any

import anyio
from basic_stdio import build
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCResponse


async def strip_result_type(receive: Any, write: Any) -> None:
    """Pass what the server writes on ``receive`` to ``write``, each result without ``resultType``."""
    async with receive:
        async for item in receive:
            message = getattr(item, "message", None)
            if isinstance(message, JSONRPCResponse) and "resultType" in message.result:
                result = {k: v for k, v in message.result.items() if k != "resultType"}
                item = SessionMessage(
                    JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result), item.metadata
                )
            await write.send(item)


async def main() -> None:
    lowlevel = build(name="no-result-type")._lowlevel_server  # pyright: ignore[reportPrivateUsage]
    async with stdio_server() as (read, write):
        send, receive = anyio.create_memory_object_stream[Any](100)
        async with anyio.create_task_group() as tg:
            tg.start_soon(strip_result_type, receive, write)
            async with send:
                await lowlevel.run(read, send, lowlevel.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
