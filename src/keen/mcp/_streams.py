"""A base for proxies that wrap one of a session's anyio memory streams.

The SDK's dispatcher uses the stream as an async context manager and probes optional
attributes (``last_context``) with ``getattr``; a proxy must pass all of that through.
Subclasses override only the one method they watch (``receive`` or ``send``).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

__all__ = ["StreamProxy"]


class StreamProxy:
    """Forward everything to ``inner``; subclasses intercept what they watch."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc_val, exc_tb)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
