"""The loopback listener that receives the browser's OAuth redirect
(``http://127.0.0.1:1456/auth/mcp/callback``, up to 5 minutes).

The redirect URI names the loopback IP literal the listener binds, not ``localhost``: a
browser may resolve ``localhost`` to ``::1`` and miss a listener on 127.0.0.1 (RFC 8252
section 7.3 recommends the IP literal for exactly this reason).

:meth:`CallbackListener.open` binds ``127.0.0.1:<port>`` before the browser is sent
anywhere, so a port in use fails at once with a clear error. :meth:`CallbackListener.wait`
then serves until the callback arrives: it checks ``state`` itself (a mismatch is a stale
tab or a forged request, and fails the sign-in), turns ``error=`` into a clear refusal,
answers anything else with 404, and always closes the socket on the way out, on success,
failure, timeout or cancellation (Ctrl-C), so the port is free again. The authorization
code never reaches a log, an error message or the page shown in the browser.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import secrets
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
from mcp.shared.auth import AuthorizationCodeResult

from keen._redact import redactor
from keen._text import one_line
from keen.errors import AuthFailed, AuthRequired, Remedy

__all__ = ["CALLBACK_PATH", "DEFAULT_CALLBACK_PORT", "CallbackListener", "redirect_uri"]

logger = logging.getLogger(__name__)

CALLBACK_PATH = "/auth/mcp/callback"
DEFAULT_CALLBACK_PORT = 1456
_MAX_REQUEST_BYTES = 16_384
_READ_TIMEOUT = 10.0

_PAGE = (
    "<!doctype html><html><head><meta charset='utf-8'><title>Keen</title></head>"
    "<body style='font-family:sans-serif;margin:3em'><h2>{title}</h2><p>{body}</p></body></html>"
)


def redirect_uri(port: int = DEFAULT_CALLBACK_PORT) -> str:
    """The redirect URI Keen registers: ``http://127.0.0.1:<port>/auth/mcp/callback`` (RFC 8252 7.3)."""
    return f"http://127.0.0.1:{port}{CALLBACK_PATH}"


class CallbackListener:
    """One sign-in's callback endpoint on ``127.0.0.1:<port>``; use once.

    ``open()`` raises :class:`~keen.errors.AuthRequired` when the port cannot be bound.
    ``wait(expected_state, timeout)`` returns the code (and RFC 9207 ``iss``) or raises
    :class:`~keen.errors.AuthFailed` (wrong ``state``, ``error=`` from the server) or
    :class:`~keen.errors.AuthRequired` (no answer within ``timeout`` seconds).
    """

    def __init__(
        self,
        *,
        server: str,
        port: int = DEFAULT_CALLBACK_PORT,
        host: str = "127.0.0.1",
        config_name: str = "configs.json",
    ) -> None:
        self.server = server
        self.port = port
        self.host = host
        self.config_name = config_name  # where the server's entry is, as a busy port's fix names it
        self._listener: anyio.abc.Listener[anyio.abc.SocketStream] | None = None

    @property
    def is_open(self) -> bool:
        return self._listener is not None

    async def open(self) -> None:
        try:
            listener = await anyio.create_tcp_listener(local_host=self.host, local_port=self.port)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                why = "the port is already in use (is another sign-in running?)"
            elif exc.errno == errno.EACCES:
                why = "permission denied"
            else:
                why = exc.strerror or exc.__class__.__name__
            raise AuthRequired(
                f'cannot listen for the sign-in callback of MCP server "{self.server}" on 127.0.0.1:{self.port}: '
                f'{why}; stop the program using it or set "callback_port" in the server\'s "auth" in '
                f"{self.config_name}",
                server=self.server,
                remedy=Remedy.SIGN_IN,
            ) from None
        self._listener = listener

    async def aclose(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with anyio.CancelScope(shield=True):
                await listener.aclose()

    async def wait(self, expected_state: str, timeout: float) -> AuthorizationCodeResult:
        if self._listener is None:
            raise RuntimeError("CallbackListener.wait() needs open() first")
        outcome: list[AuthorizationCodeResult | AuthFailed] = []
        done = anyio.Event()

        async def handle(stream: anyio.abc.SocketStream) -> None:
            async with stream:
                result = await self._handle(stream, expected_state)
            if result is not None and not done.is_set():
                outcome.append(result)
                done.set()

        try:
            with anyio.move_on_after(timeout):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._listener.serve, handle, tg)
                    await done.wait()
                    tg.cancel_scope.cancel()
        finally:
            await self.aclose()
        if not outcome:
            minutes = f"{timeout / 60:g} minutes" if timeout >= 60 else f"{timeout:g} s"
            raise AuthRequired(
                f'sign-in for MCP server "{self.server}" timed out: no answer from the browser within {minutes}',
                server=self.server,
                remedy=Remedy.SIGN_IN,
            )
        result = outcome[0]
        if isinstance(result, AuthFailed):
            raise result
        return result

    async def _handle(
        self, stream: anyio.abc.ByteStream, expected_state: str
    ) -> AuthorizationCodeResult | AuthFailed | None:
        target: str | None = None
        with anyio.move_on_after(_READ_TIMEOUT):
            target = await _read_request_target(stream)
        if target is None:
            await _respond(stream, 400, "Bad request", "Keen could not read this request.")
            return None
        parts = urlsplit(target)
        if parts.path != CALLBACK_PATH:
            await _respond(
                stream, 404, "Not found", "This is Keen's sign-in callback; nothing else lives here."
            )
            return None
        query = {key: values[0] for key, values in parse_qs(parts.query, keep_blank_values=True).items()}
        code, state = query.get("code"), query.get("state")
        redactor.add(code)
        if state is None or not secrets.compare_digest(state.encode(), expected_state.encode()):
            await _respond(
                stream,
                400,
                "Sign-in not accepted",
                "This answer does not belong to the sign-in Keen started. Start the sign-in again.",
            )
            return AuthFailed(
                f'the sign-in callback for MCP server "{self.server}" carried a state that does not match the '
                "request Keen made (a stale browser tab, or a forged request); nothing was saved",
                server=self.server,
                remedy=Remedy.SIGN_IN,
            )
        if "error" in query:
            reason = one_line(query["error"], 200) + (
                f" ({one_line(query['error_description'], 200)})" if query.get("error_description") else ""
            )
            await _respond(
                stream, 200, "Sign-in refused", f"The server said: {_html(reason)}. You can close this tab."
            )
            return AuthFailed(
                f'the authorization server of MCP server "{self.server}" refused the sign-in: {reason}',
                server=self.server,
                remedy=Remedy.SIGN_IN,
            )
        if not code:
            await _respond(stream, 400, "Sign-in incomplete", "The answer carried no authorization code.")
            return AuthFailed(
                f'the sign-in callback for MCP server "{self.server}" carried no authorization code',
                server=self.server,
                remedy=Remedy.SIGN_IN,
            )
        await _respond(stream, 200, "Signed in", "Keen received the sign-in. You can close this tab.")
        logger.debug("server %s: sign-in callback received", self.server)
        return AuthorizationCodeResult(code=code, state=state, iss=query.get("iss"))


async def _read_request_target(stream: anyio.abc.ByteStream) -> str | None:
    """The request target of an HTTP/1.x ``GET``; None if the request is not one."""
    buffer = b""
    while b"\r\n\r\n" not in buffer and b"\n\n" not in buffer:
        if len(buffer) > _MAX_REQUEST_BYTES:
            return None
        try:
            chunk = await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            break
        buffer += chunk
    line = buffer.split(b"\n", 1)[0].strip().decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or parts[0] != "GET" or not parts[2].startswith("HTTP/1."):
        return None
    return parts[1]


async def _respond(stream: anyio.abc.ByteStream, status: int, title: str, body: str) -> None:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    page = _PAGE.format(title=_html(title), body=body).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(page)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
    ).encode()
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await stream.send(head + page)


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
