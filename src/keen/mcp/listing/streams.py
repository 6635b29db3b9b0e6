"""A base for proxies that wrap one of a session's anyio memory streams.

The SDK's dispatcher uses the stream as an async context manager and probes optional
attributes (``last_context``) with ``getattr``; a proxy must pass all of that through.
Subclasses override only the one method they watch (``receive`` or ``send``).
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

import anyio

__all__ = ["EOFWatch", "ReadStreamProxy", "StreamProxy"]


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

    @property
    def last_context(self) -> Any:
        """The inner stream's ``last_context`` (the sender's context of the last message, on
        the SDK's own context streams), ``None`` when it keeps none. The dispatcher asks for
        it at every message: answered here, not by :meth:`__getattr__`, whose failed lookup
        on a plain memory stream raised and caught an ``AttributeError`` each time."""
        return getattr(self._inner, "last_context", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class ReadStreamProxy(StreamProxy):
    """A proxy of a read stream: ``async for`` goes through :meth:`receive`, which
    subclasses override to watch what the session reads."""

    async def receive(self) -> Any:
        return await self._inner.receive()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None


class EOFWatch(ReadStreamProxy):
    """Read-stream proxy that reports the end of the stream (server exit, connection closed).

    The SDK's dispatcher treats EOF as a closed connection but tells no one outside;
    the owner needs to know to mark the server disconnected.
    """

    def __init__(
        self, inner: Any, on_eof: Callable[[], None], transform: Callable[[Any], Any] = lambda item: item
    ) -> None:
        super().__init__(inner)
        self._on_eof = on_eof
        self._transform = transform

    async def receive(self) -> Any:
        try:
            return self._transform(await self._inner.receive())
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_eof()
            raise
