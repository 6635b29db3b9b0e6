"""The MCP SDK's private names Keen uses (keen.mcp.connection.sdk_private) are where they were read.

An SDK upgrade that moves or reshapes one fails here, naming what to re-read, instead of
failing at a user's first 2026-07-28 connection or input round.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import pathlib

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


def test_no_other_keen_module_imports_a_private_sdk_module() -> None:
    offenders = [
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if path.name != "sdk_private.py"
        and any(
            line.lstrip().startswith(("from mcp.", "import mcp."))
            and any(part.startswith("_") for part in line.split()[1].split(".")[1:])
            for line in path.read_text(encoding="utf-8").splitlines()
        )
    ]
    assert offenders == [], (
        f"import the SDK's private names through keen.mcp.connection.sdk_private: {offenders}"
    )
