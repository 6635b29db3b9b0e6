"""The MCP SDK's private names Keen uses (keen.mcp.connection.sdk_private) are where they were read.

An SDK upgrade that moves or reshapes one fails here, naming what to re-read, instead of
failing at a user's first 2026-07-28 connection or input round.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import pathlib
import re

import httpx2
import pytest

from keen.mcp.connection import sdk_private as _sdk_private

SRC = pathlib.Path(_sdk_private.__file__).resolve().parents[2]


def test_the_installed_sdk_is_the_minor_version_the_private_names_were_read_from() -> None:
    installed = importlib.metadata.version("mcp")
    assert installed.split(".")[:2] == _sdk_private.SDK_READ.split("."), (
        f"mcp {installed} is installed; keen/mcp/connection/sdk_private.py was read against {_sdk_private.SDK_READ}: "
        "re-read its three private names in the new SDK, then update SDK_READ"
    )


def test_each_private_name_keeps_the_shape_keen_calls() -> None:
    probe = inspect.signature(_sdk_private.negotiate_auto)
    assert list(probe.parameters)[:1] == ["session"], probe
    driver = inspect.signature(_sdk_private.run_input_required_driver)
    assert {"dispatch", "retry", "max_rounds"} <= set(driver.parameters), driver
    assert isinstance(_sdk_private.DEFAULT_INPUT_REQUIRED_MAX_ROUNDS, int)
    transport = _sdk_private.in_memory_transport_class()
    assert hasattr(transport, "__aenter__") or hasattr(transport, "connect"), transport
    assert list(inspect.signature(_sdk_private.parse_stdio_line).parameters) == ["line"]
    parsed = _sdk_private.parse_stdio_line('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    assert type(parsed).__name__ == "SessionMessage", parsed
    assert isinstance(_sdk_private.parse_stdio_line("not json"), Exception)


_IMPORTS_MCP = re.compile(r"^\s*(?:from|import)\s+mcp\b", re.MULTILINE)


def _private_sdk_imports(source: str) -> list[str]:
    """The SDK modules or names an import in ``source`` reaches that start with ``_``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "mcp":
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.split(".")[0] == "mcp"]
        else:
            continue
        found += [n for n in names if any(part.startswith("_") for part in n.split(".")[1:])]
    return found


def test_the_private_import_check_sees_private_modules_and_private_names() -> None:
    assert _private_sdk_imports("from mcp.client._probe import negotiate_auto") == [
        "mcp.client._probe",
        "mcp.client._probe.negotiate_auto",
    ]
    assert _private_sdk_imports("def f():\n    from mcp.client.stdio import _parse_line\n") == [
        "mcp.client.stdio._parse_line"
    ]
    assert _private_sdk_imports("import mcp.client._memory\nfrom mcp.client.stdio import stdio_client") == [
        "mcp.client._memory"
    ]


def test_no_other_keen_module_imports_a_private_sdk_module_or_name() -> None:
    texts = {
        path: path.read_text(encoding="utf-8") for path in SRC.rglob("*.py") if path.name != "sdk_private.py"
    }
    offenders = {
        str(path.relative_to(SRC)): found
        for path, text in texts.items()
        # Only a file that imports from the SDK at all is parsed (most of Keen's do not).
        if _IMPORTS_MCP.search(text) and (found := _private_sdk_imports(text))
    }
    assert offenders == {}, (
        f"import the SDK's private names through keen.mcp.connection.sdk_private: {offenders}"
    )


def test_the_sdks_limits_keen_words_are_the_ones_it_applies() -> None:
    """Keen names the size where a message stops being read (keen.mcp.connection.message_size):
    on HTTP+SSE the SDK's own fixed limit, which ``sse_client`` does not let a caller set; on
    Streamable HTTP Keen's, through ``max_sse_event_size``, whose failure Keen recognises by
    the SDK's words."""
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import sse_within_origin  # pyright: ignore[reportPrivateUsage]

    from keen.mcp.connection import message_size
    from keen.mcp.connection.message_size import SSE_EVENT_TOO_LARGE

    limit = _sdk_private.sse_transport_max_event_size()
    assert limit == inspect.signature(sse_within_origin).parameters["max_event_size"].default == 1024 * 1024
    assert "max_event_size" not in inspect.signature(sse_client).parameters
    # httpx2's parser, as Keen makes it, fails where the SDK's reader does: past the limit.
    parser = _sdk_private.sse_event_parser(10)
    assert len(list(parser.decode("data: 0123\n\n"))) == 1  # its line of 10 bytes: at the limit, read
    with pytest.raises(httpx2.SSEError, match="exceeded the 10 byte limit"):
        list(_sdk_private.sse_event_parser(10).decode("data: 0123456789\n"))
    assert "max_sse_event_size" in inspect.signature(streamable_http_client).parameters
    source = inspect.getsource(importlib.import_module("mcp.client.streamable_http"))
    assert 'f"SSE stream failed: {exc}"' in source, "the SDK words a failed event stream otherwise now"
    assert f'f"{message_size.SDK_JSON_BODY_FAILED}{{exc}}"' in source, (
        "the SDK words an unread JSON body otherwise now"
    )
    assert SSE_EVENT_TOO_LARGE.startswith("SSE stream failed: ")
