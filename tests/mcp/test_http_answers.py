"""A Streamable HTTP answer the SDK cannot read as an MCP one (a web page, no content type, an
error status without a JSON-RPC error, a JSON-RPC batch, a redirect to another origin, a
JSON body or event stream that breaks off, a JSON body that does not decode) fails its call
with words that say what came and what to do, names no secret, and the session goes on; at
connect, the server's status says the same (``translate.http_answer_fault``), from the
call's own answer when calls overlap. A JSON answer
under an id Keen never sent is its POST's request's, as one in an event stream is; an answer
httpx2 cannot read (a 200 KB header block) ends the session, saying why.

Before, each read as the server's own JSON-RPC error ('answered "tool" with JSON-RPC error
-32600: Unexpected content type: text/html'; -32603 "Server returned an error response" with
no status); an answer that broke off ended the session as "went away". A real FastMCP server
on 127.0.0.1, behind middleware that answers one tool (or every request) as the case says.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from fastmcp import FastMCP
from starlette.types import ASGIApp, Receive, Send

from helpers.http_servers import make_echo_server, serve_http
from keen._redact import register_value
from keen.errors import KeenError, RemoteProtocolError, ServerDisconnected
from keen.mcp import Manager, ServerState
from keen.mcp.connection._http_bounds import (
    JSON_BODY_BROKEN,
    JSON_BODY_STALLED,
    BoundedJsonBody,
    JsonBodyBroken,
)
from keen.mcp.connection._http_exchanges import _Exchange  # pyright: ignore[reportPrivateUsage]
from keen.trust import PinGuard
from servers.handshake_only import answering_posts

pytestmark = pytest.mark.anyio

KEY = "sk-answers-7f3e9a1c5b2d"


def echo_server() -> FastMCP:
    return make_echo_server("answers", "odd", "Answered by the middleware.")


ANSWERS: dict[str, tuple[int, list[tuple[bytes, bytes]], bytes]] = {
    "web page": (200, [(b"content-type", b"text/html")], b"<html>Sign in</html>"),
    "no content type": (200, [], b"hello"),
    "error page": (502, [(b"content-type", b"text/html")], b"<html>Bad gateway " + KEY.encode() + b"</html>"),
    "batch": (200, [(b"content-type", b"application/json")], b"[]"),
    "redirect": (307, [(b"location", b"http://127.0.0.2:9/elsewhere")], b""),
    "other id": (200, [(b"content-type", b"application/json")], b""),
    "huge header": (200, [(b"content-type", b"application/json"), (b"x-filler", b"f" * 200_000)], b"{}"),
    # The connection closes after 26 of the 1,000 bytes its header promised.
    "cut body": (
        200,
        [(b"content-type", b"application/json"), (b"content-length", b"1000")],
        b'{"jsonrpc": "2.0", "id": 3',
    ),
    "cut events": (
        200,
        [(b"content-type", b"text/event-stream"), (b"content-length", b"1000")],
        b"event: message\ndata: {",
    ),
    "accepted": (202, [], b""),
    "bad gzip": (200, [(b"content-type", b"application/json"), (b"content-encoding", b"gzip")], b"not gzip"),
    # A server's own error sent with a 404: the request's, not a session gone.
    "not found": (
        404,
        [(b"content-type", b"application/json")],
        b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32002, "message": "Resource not found"}}',
    ),
}


def answering(case: str, *, everything: bool = False) -> Callable[[ASGIApp], ASGIApp]:
    """Middleware answering ``tools/call`` of ``odd`` (every POST when ``everything``) with
    ``ANSWERS[case]``; the rest reaches the MCP app in the handshake era."""
    status, headers, content = ANSWERS[case]

    async def respond(request: Any, receive: Receive, send: Send) -> bool:
        if everything or (request.get("method") == "tools/call" and request["params"]["name"] == "odd"):
            if case == "batch" and "id" in request:  # the answer, in a batch of one
                answer = {"jsonrpc": "2.0", "id": request["id"], "result": {"content": []}}
                content_now = json.dumps([answer]).encode()
            elif case == "other id":  # the right answer, under an id Keen never sent
                result = {
                    "content": [{"type": "text", "text": "odd"}],
                    "structuredContent": {"result": "odd"},
                }
                content_now = json.dumps({"jsonrpc": "2.0", "id": 1_000_000, "result": result}).encode()
            else:
                content_now = content
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": content_now})
            return True
        return False

    return answering_posts(respond)


def entry(url: str) -> dict[str, Any]:
    return {"transport": "streamable_http", "url": url, "auth": {"type": "api_key", "key": KEY}}


BROKE_OFF = (
    r"it may have taken effect, so check before repeating a call that changes something; if it recurs, check "
    r"the server's logs and any proxy in front of it$"
)

CALL_ERRORS = {
    "web page": r"answered \"odd\" with content type 'text/html', not JSON or an event stream; check that the url "
    r"is its MCP endpoint \(often ending in /mcp\) and the server's logs$",
    "no content type": r"answered \"odd\" with no content type, not JSON or an event stream; check that the url",
    "error page": r"answered \"odd\" with HTTP 502 and no JSON-RPC error; check the server's logs$",
    "batch": r"answered \"odd\" with something that is not a JSON-RPC 2\.0 message; check the server's version "
    r"and logs$",
    "redirect": r"redirected \"odd\" to http://127\.0\.0\.2:9/elsewhere, which Keen does not follow; if that is the "
    r"same server, put that url in configs\.json$",
    "not found": r"answered \"odd\" with JSON-RPC error -32002: Resource not found$",
    "cut body": r"broke off its answer to \"odd\": the connection ended before its JSON body did \(.+\); "
    + BROKE_OFF,
    "cut events": r"broke off its answer to \"odd\": the event stream ended before the answer came; "
    + BROKE_OFF,
    "accepted": r"answered \"odd\" with 202 Accepted, which carries no answer; check the server's version and "
    r"logs$",
    "bad gzip": r"answered \"odd\" with a JSON body that could not be decoded \(.+\); check the server's logs "
    r"and any proxy in front of it$",
}


@pytest.mark.parametrize("case", sorted(CALL_ERRORS))
async def test_an_answer_that_is_no_mcp_answer_says_what_came_and_the_session_goes_on(
    write_config: Callable[..., Path], case: str
) -> None:
    with serve_http(echo_server(), wrap=answering(case), api_key=KEY) as srv:
        async with Manager(write_config({"answers": entry(srv.url)}), trust=PinGuard()) as manager:
            assert await manager.wait_ready(20), manager.status("answers").last_error
            assert manager.status("answers").protocol_version == "2025-11-25"
            with pytest.raises(
                RemoteProtocolError, match=r'^MCP server "answers" ' + CALL_ERRORS[case]
            ) as failed:
                await manager.call_tool("answers", "odd", {})
            assert KEY not in str(failed.value)
            status = manager.status("answers")
            assert status.state is ServerState.CONNECTED, status.last_error
            assert (await manager.call_tool("answers", "echo", {"text": "after"})).text == "after"


CONNECT_ERRORS = {
    "web page": "answered initialize with content type 'text/html', not JSON or an event stream; check that the "
    "url is its MCP endpoint",
    "cut body": "broke off its answer to initialize: the connection ended before its JSON body did (",
}


@pytest.mark.parametrize("case", sorted(CONNECT_ERRORS))
async def test_a_url_whose_answers_are_no_mcp_answers_says_so_at_connect(
    write_config: Callable[..., Path], case: str
) -> None:
    with serve_http(echo_server(), wrap=answering(case, everything=True), api_key=KEY) as srv:
        async with Manager(write_config({"answers": entry(srv.url)}), trust=PinGuard()) as manager:
            await manager.wait_ready(20)
            status = manager.status("answers")
            assert status.state is ServerState.DISCONNECTED
            assert status.last_error.startswith(f'MCP server "answers" {CONNECT_ERRORS[case]}'), (
                status.last_error
            )


async def test_a_json_answer_under_another_id_reaches_its_call(write_config: Callable[..., Path]) -> None:
    """As the SDK does for an answer in an event stream: a POST's answer is its request's.
    Before, the call waited out its whole ``timeouts.call_tool`` and said to raise it."""
    with serve_http(echo_server(), wrap=answering("other id"), api_key=KEY) as srv:
        config = entry(srv.url) | {"timeouts": {"call_tool": 5}}
        async with Manager(write_config({"answers": config}), trust=PinGuard()) as manager:
            assert await manager.wait_ready(20), manager.status("answers").last_error
            assert manager.status("answers").protocol_version == "2025-11-25"
            result = await manager.call_tool("answers", "odd", {})
            assert result.text == "odd" and not result.is_error


class _BreaksOff(httpx2.AsyncByteStream):
    """A body whose connection fails after its first bytes with ``error`` (as httpx2 raises it)."""

    def __init__(self, error: Exception) -> None:
        self._error = error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b'{"jsonrpc": "2.0", '
        raise self._error


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (httpx2.RemoteProtocolError("illegal chunk header: b'" + "x" * 140 + KEY + "'"), JSON_BODY_BROKEN),
        (httpx2.ReadError("reset"), JSON_BODY_BROKEN),
        (httpx2.ReadTimeout(""), JSON_BODY_STALLED),
    ],
)
async def test_a_json_body_that_breaks_off_says_how_and_names_no_secret(error: Exception, words: str) -> None:
    """httpx2's words can carry the server's bytes: redacted before they are cut (a cut secret
    no longer matches, and its head would survive)."""
    register_value(KEY)
    response = httpx2.Response(200, headers={"content-type": "application/json"}, stream=_BreaksOff(error))
    with pytest.raises(JsonBodyBroken, match=f"^{re.escape(words)} \\(") as broken:
        async for _chunk in BoundedJsonBody(response):
            pass
    assert KEY[:12] not in str(broken.value)


@pytest.mark.parametrize(
    ("body", "request_id"),
    [
        (
            b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{"a":"'
            + b"x" * 100_000
            + b'"}}}',
            7,
        ),
        (b'{"jsonrpc":"2.0","id":"a\\"b","method":"ping"}', 'a"b'),
        (b'{"jsonrpc":"2.0","id":-12,"method":"ping"}', -12),
        (b'{"jsonrpc": "2.0", "id": 3, "method": "ping"}', 3),  # not the SDK's form: parsed whole
        (b'{"method": "ping", "id": "late", "jsonrpc": "2.0"}', "late"),
        (b'{"jsonrpc":"2.0","method":"notifications/initialized"}', None),
        (b'{"jsonrpc":"2.0","id":4,"result":{}}', None),  # a response Keen sends: no request's
        (b"not json", None),
    ],
)
def test_a_posts_request_id_is_read_from_its_head_or_else_its_whole_body(
    body: bytes, request_id: object
) -> None:
    """The id of the request a POST carries (for its JSON answer's id, and to end it when given
    up on): from the head of the SDK's compact JSON, so that a call's megabytes of arguments
    are not parsed again; any other form parsed whole."""
    exchange = _Exchange(httpx2.Request("POST", "http://127.0.0.1/mcp", content=body))
    assert exchange.request_id() == request_id


async def test_an_answer_that_breaks_http_ends_the_session_saying_why(
    write_config: Callable[..., Path],
) -> None:
    """httpx2 cannot read a header block of 200 KB; the SDK then ends the session. The call and
    the status say why (before: only 'went away during "odd"')."""
    with serve_http(echo_server(), wrap=answering("huge header"), api_key=KEY) as srv:
        async with Manager(write_config({"answers": entry(srv.url)}), trust=PinGuard()) as manager:
            assert await manager.wait_ready(20), manager.status("answers").last_error
            why = (
                r"its HTTP answer to a request could not be read \(Receive buffer too long: a malformed answer, "
                r"headers longer than httpx2 reads, or a connection closed without one\), and the MCP SDK ends "
                r"the session on that; check the server's logs and any proxy in front of it"
            )
            with pytest.raises(
                ServerDisconnected, match=r'^MCP server "answers" went away during "odd": ' + why
            ):
                await manager.call_tool("answers", "odd", {})
            status = manager.status("answers")
            assert status.state is ServerState.DISCONNECTED
            assert status.last_error.endswith("check the server's logs and any proxy in front of it")
            assert KEY not in status.last_error


ODD_THEN_ECHO = {
    # odd's answer, then echo's (None: its own answer, 200).
    "error page": (
        (502, [(b"content-type", b"text/html")], b"<html>Bad gateway</html>"),
        None,
        'answered "odd" with HTTP 502 and no JSON-RPC error; check the server\'s logs',
    ),
    "accepted": (
        (202, [], b""),
        (403, [(b"content-type", b"text/plain")], b"forbidden"),
        'answered "odd" with 202 Accepted, which carries no answer; check the server\'s version and logs',
    ),
}


def odd_then_echo(case: str) -> Callable[[ASGIApp], ASGIApp]:
    """Middleware answering ``odd`` as ``ODD_THEN_ECHO[case]`` says once an ``echo`` call is in
    flight, and that ``echo`` right after: two answers of one connection, the later one
    another request's."""
    (odd_status, odd_headers, odd_body), echo_answer, _ = ODD_THEN_ECHO[case]
    echo_waits, odd_answered = anyio.Event(), anyio.Event()

    async def respond(request: Any, receive: Receive, send: Send) -> bool:
        if request.get("method") != "tools/call":
            return False
        if request["params"]["name"] == "odd":
            await echo_waits.wait()
            await send({"type": "http.response.start", "status": odd_status, "headers": odd_headers})
            await send({"type": "http.response.body", "body": odd_body})
            odd_answered.set()
            return True
        echo_waits.set()
        await odd_answered.wait()
        if echo_answer is None:
            text = request["params"]["arguments"]["text"]
            result = {"content": [{"type": "text", "text": text}], "structuredContent": {"result": text}}
            answer = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
            echo_answer_now = (200, [(b"content-type", b"application/json")], answer)
        else:
            echo_answer_now = echo_answer
        status, headers, body = echo_answer_now
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return True

    return answering_posts(respond)


@pytest.mark.parametrize("case", sorted(ODD_THEN_ECHO))
async def test_a_calls_error_is_worded_from_its_own_answers_status_not_another_calls(
    write_config: Callable[..., Path], case: str
) -> None:
    """Before, a call read the status of the last answer on its connection: another call's 200,
    come between a 502 and its error's wording, made it 'an HTTP error'; another call's 403
    after a 202 made it rejected credentials (in most runs: it is a race; the call's own status
    makes it certain)."""
    with serve_http(echo_server(), wrap=odd_then_echo(case), api_key=KEY) as srv:
        async with Manager(write_config({"answers": entry(srv.url)}), trust=PinGuard()) as manager:
            assert await manager.wait_ready(20), manager.status("answers").last_error
            results: dict[str, str] = {}

            async def call(tool: str, arguments: dict[str, Any]) -> None:
                try:
                    results[tool] = (await manager.call_tool("answers", tool, arguments)).text
                except KeenError as exc:
                    results[tool] = str(exc)

            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "odd", {})
                tg.start_soon(call, "echo", {"text": "hi"})
    assert results["odd"] == 'MCP server "answers" ' + ODD_THEN_ECHO[case][2]
    if case == "error page":
        assert results["echo"] == "hi"


async def test_a_redirect_to_a_manager_given_its_config_in_code_names_that_config() -> None:
    # The advice said to put the url "in configs.json", a file this Manager never read.
    given = "put that url in the config this Manager was given"
    with serve_http(echo_server(), wrap=answering("redirect"), api_key=KEY) as srv:
        config = {"version": 1, "servers": {"answers": entry(srv.url)}}
        async with Manager(config=config, trust=PinGuard()) as manager:
            assert await manager.wait_ready(20), manager.status("answers").last_error
            with pytest.raises(RemoteProtocolError, match=re.escape(f"same server, {given}") + "$"):
                await manager.call_tool("answers", "odd", {})
    with serve_http(echo_server(), wrap=answering("redirect", everything=True), api_key=KEY) as srv:
        config = {"version": 1, "servers": {"answers": entry(srv.url)}}
        async with Manager(config=config, trust=PinGuard()) as manager:
            await manager.wait_ready(20)
            status = manager.status("answers")
            assert status.state is ServerState.DISCONNECTED
            assert status.last_error.endswith(given), status.last_error
