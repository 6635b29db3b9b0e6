"""Keen as the client under test for the official MCP conformance suite.

The runner (``npx @modelcontextprotocol/conformance client --command "<this> " ...``)
starts a scenario's test server, then runs this program with the server URL as the last
argument, the scenario name in ``MCP_CONFORMANCE_SCENARIO`` and scenario data (e.g.
pre-registered client credentials) as JSON in ``MCP_CONFORMANCE_CONTEXT``. Exit 0 means
the client did its part; the runner judges the traffic.

Everything goes through Keen's own code, the way a user's session would:

* non-auth scenarios: ``configs.json`` with the server, ``keen.mcp.Manager`` (the era as
  negotiated: ``server/discover``, else initialize; every tools/list page), then
  ``Manager.call_tool`` for each of the scenario's tools (:data:`SCENARIO_CALLS`, or the
  ``toolCalls`` its context names). The Manager
  gets ``keen chat``'s accept-defaults elicitor (:func:`keen.agent.accept_defaults`, what
  ``keen chat -p ... --yes`` uses): it stands for a user who is shown the server's form
  with the schema's defaults pre-filled and submits it unchanged, which is what the
  elicitation scenario (SEP-1034, client-applied defaults) checks;
* ``auth/*`` scenarios: the Manager starts in the background (no browser: the server
  ends up ``auth_required``), then ``authorize_interactively`` (what ``keen mcp connect``
  runs) signs in through the loopback callback listener, ``Manager.refresh`` reconnects
  with the saved token, and the first tool is called. A call refused for scope (step-up)
  is answered the way a user would answer it: connect again (at most 3 sign-ins), refresh,
  retry. The "browser" is :func:`follow_redirect`: it GETs the authorization URL from the
  test authorization server (which approves at once) and follows its redirect to Keen's
  callback over real HTTP.

``KEEN_HOME`` is a fresh temporary directory per run. Logs go to stderr.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import httpx2

from keen.agent import accept_defaults
from keen.errors import AuthFailed, AuthRequired, KeenError
from keen.mcp import Manager, ServerState
from keen.mcp.auth import authorize_interactively, oauth_auth_factory
from keen.mcp.config import HttpServerConfig, load_config
from keen.trust import PinGuard

NAME = "conformance"
# The URL-based client id the conformance authorization server expects (SEP-991 scenario).
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
MAX_SIGN_INS = 3
SIGN_IN_TIMEOUT = 20.0

# The tools each non-auth scenario's server expects to be called, in order, with their arguments
# (a scenario whose context carries ``toolCalls`` names its own).
SCENARIO_CALLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "tools_call": [("add_numbers", {"a": 5, "b": 3})],
    "sse-retry": [("test_reconnection", {})],
    "elicitation-sep1034-client-defaults": [("test_client_elicitation_defaults", {})],
    # SEP-2322 (2026-07-28): two tools answer InputRequiredResult (with and without
    # requestState), one is called between rounds, one answers without resultType.
    "sep-2322-client-request-state": [
        ("test_mrtr_echo_state", {}),
        ("test_mrtr_no_state", {}),
        ("test_mrtr_unrelated", {}),
        ("test_mrtr_no_result_type", {}),
    ],
    # SEP-2243: the tools with malformed x-mcp-header annotations are dropped at listing;
    # the valid one must still be callable.
    "http-invalid-tool-headers": [("valid_tool", {"region": "us-west1"})],
}

log = logging.getLogger("keen.conformance")


def follow_redirect(url: str) -> bool:
    """The scripted browser: approve at the authorization server, deliver its redirect to Keen."""
    with httpx2.Client(timeout=15) as client:
        answer = client.get(url)
        location = answer.headers.get("location")
        if answer.status_code not in (301, 302, 303, 307, 308) or not location:
            log.error("authorization endpoint answered HTTP %s without a redirect", answer.status_code)
            return True
        callback = client.get(location)
        log.info("callback answered HTTP %s", callback.status_code)
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_config(home: Path, url: str, scenario: str, context: dict[str, Any]) -> Path:
    server: dict[str, Any] = {
        "transport": "streamable_http",
        "url": url,
        "timeouts": {"connect": 15, "list_tools": 15},
    }
    if scenario.startswith("auth/"):
        auth: dict[str, Any] = {"type": "oauth", "callback_port": free_port()}
        if context.get("client_id"):
            auth["client_id"] = context["client_id"]
            if context.get("client_secret"):
                auth["client_secret"] = context["client_secret"]
        server["auth"] = auth
    path = home / "mcp" / "configs.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "servers": {NAME: server}}, indent=2))
    return path


def scenario_calls(scenario: str, context: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    listed = context.get("toolCalls")
    if isinstance(listed, list):
        return [(str(call["name"]), dict(call.get("arguments") or {})) for call in listed]
    return SCENARIO_CALLS.get(scenario, [])


async def run_plain(config_path: Path, scenario: str, context: dict[str, Any]) -> int:
    async with Manager(config_path, elicitation=accept_defaults, trust=PinGuard()) as manager:
        await manager.wait_ready(30)
        status = manager.status(NAME)
        if status.state is not ServerState.CONNECTED:
            log.error("not connected: %s (%s)", status.state.value, status.last_error)
            return 1
        log.info("connected (%s); %d tools", status.protocol_version, status.tool_count)
        for tool, arguments in scenario_calls(scenario, context):
            result = await manager.call_tool(NAME, tool, arguments, validate=False)
            log.info("%s -> isError=%s %s", tool, result.is_error, result.text[:200])
    return 0


async def run_auth(config_path: Path) -> int:
    config = load_config(config_path).servers[NAME]
    assert isinstance(config, HttpServerConfig)
    factory = oauth_auth_factory(open_browser=None, client_metadata_url=CLIENT_METADATA_URL)
    async with Manager(config_path, auth_factory=factory, trust=PinGuard()) as manager:
        await manager.wait_ready(30)
        status = manager.status(NAME)
        log.info("background start: %s (%s)", status.state.value, status.last_error)
        sign_ins = 0
        need_sign_in = status.state is not ServerState.CONNECTED
        while True:
            if need_sign_in:
                if sign_ins >= MAX_SIGN_INS:
                    log.error("giving up after %d sign-ins: %s", sign_ins, manager.status(NAME).last_error)
                    return 1
                sign_ins += 1
                signed = await authorize_interactively(
                    NAME,
                    config,
                    open_browser=follow_redirect,
                    timeout=SIGN_IN_TIMEOUT,
                    client_metadata_url=CLIENT_METADATA_URL,
                )
                log.info("sign-in %d: signed_in=%s scope=%s", sign_ins, signed.signed_in, signed.scope)
                status = await manager.refresh(NAME)
                log.info("after sign-in: %s (%s)", status.state.value, status.last_error)
                need_sign_in = status.state is not ServerState.CONNECTED
                continue
            tools = manager.list_tools(NAME)
            if not tools:
                return 0
            try:
                result = await manager.call_tool(NAME, tools[0].name, {}, validate=False)
            except (AuthRequired, AuthFailed) as exc:
                # Step-up: the token lacks a scope this tool needs; a user would connect again.
                log.info("call refused: %s", exc)
                if sign_ins >= MAX_SIGN_INS:
                    return 0  # the server keeps asking: a client must stop (scope-retry-limit)
                need_sign_in = True
                continue
            log.info("%s -> isError=%s %s", tools[0].name, result.is_error, result.text[:200])
            return 0


async def main(url: str) -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="keen-conformance-") as home:
        os.environ["KEEN_HOME"] = home
        config_path = write_config(Path(home), url, scenario, context)
        log.info("scenario %s against %s", scenario, url)
        if scenario.startswith("auth/"):
            return await run_auth(config_path)
        return await run_plain(config_path, scenario, context)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    logging.getLogger("keen").setLevel(logging.DEBUG)
    if len(sys.argv) < 2:
        print("usage: adapter.py SERVER_URL", file=sys.stderr)
        sys.exit(2)
    try:
        sys.exit(anyio.run(main, sys.argv[-1]))
    except KeenError as exc:
        log.error("%s: %s", type(exc).__name__, exc)
        sys.exit(1)
