"""The MCP SDK's ``ClientSession`` with a bounded check of tool results.

``ClientSession.call_tool`` checks a result's ``structuredContent`` against the tool's
``outputSchema`` (MCP 2025-11-25 "Tools > Output Schema") by calling the public
``validate_tool_result``, whose jsonschema runs ``pattern`` with :mod:`re` and
``uniqueItems`` in quadratic time, on the event loop. An outputSchema is server text, as
untrusted as an inputSchema: :class:`CheckedSession` runs the same check with
:class:`~keen.mcp.listing.validation.StructuredContentValidator`, whose regex searches have a
time budget, so a server cannot freeze Keen (every server's calls, every ``keen serve`` host)
with one result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as mt
from mcp.client.session import ClientSession

if TYPE_CHECKING:
    from keen.mcp.listing.validation import StructuredContentValidator

__all__ = ["CheckedSession"]


class CheckedSession(ClientSession):
    """A ``ClientSession`` whose tool results are checked in bounded time.

    Args:
        server: the server's name (for log lines).
        *args, **kwargs: what ``ClientSession`` takes.
    """

    def __init__(self, *args: Any, server: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._server = server
        self._output_schemas: dict[str, dict[str, Any] | None] = {}
        # Made by the first result that has an outputSchema to meet: jsonschema (and regex)
        # cost every start of a session that never checks one.
        self._structured: StructuredContentValidator | None = None
        self.ended_by = ""
        """What Keen did when it ended this session itself ('Keen stopped MCP server "x" as
        ...'), set before the session closes; empty while it lasts or when the server ended
        it. A call it cuts short says this instead of "went away" (keen.mcp.calls.send)."""

    async def list_tools(self, *, params: mt.PaginatedRequestParams | None = None) -> mt.ListToolsResult:
        """``tools/list`` as the SDK sends it; each listed tool's ``outputSchema`` is kept
        for :meth:`validate_tool_result` (a later listing replaces it)."""
        result = await super().list_tools(params=params)
        for tool in result.tools:
            self._output_schemas[tool.name] = tool.output_schema
        return result

    async def validate_tool_result(self, name: str, result: mt.CallToolResult) -> None:
        """The SDK's check of a result against the tool's ``outputSchema``, bounded.

        Raises:
            RuntimeError: as the SDK's: no structured content where the tool declares an
                outputSchema, content that does not match it or cannot be checked in bounded
                time, or an invalid schema.
        """
        if name not in self._output_schemas:
            await self.list_tools()  # as the SDK does for a tool it has not seen listed
        schema = self._output_schemas.get(name)
        if schema is None:
            return
        if result.structured_content is None and "structured_content" not in result.model_fields_set:
            raise RuntimeError(f"Tool {name} has an output schema but did not return structured content")
        if self._structured is None:
            from keen.mcp.listing.validation import StructuredContentValidator

            self._structured = StructuredContentValidator(self._server)
        self._structured.validate(name, schema, result.structured_content)
