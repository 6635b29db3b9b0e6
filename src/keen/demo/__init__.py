"""keen-demo, the MCP server shipped inside Keen (see :mod:`keen.demo.server`).

This package module stays light (it does not import the MCP SDK's server side), so the
CLI can build a configs.json entry without loading the server, and
``python -m keen.demo.server`` does not import its own module twice.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from keen import paths

__all__ = ["SERVER_NAME", "demo_server_entry"]

SERVER_NAME = "keen-demo"


def demo_server_entry(keen_home: Path | None = None) -> dict[str, Any]:
    """A configs.json server entry that runs keen-demo with this interpreter (stdio shape).

    ``KEEN_HOME`` is written into the entry: Keen passes its own to every stdio server
    (README "Configure servers"), but another MCP host given this entry starts the server
    with the SDK's minimal environment (HOME, PATH, ...), and the demo keeps its notes in
    that home. Default home: :func:`keen.paths.keen_home` at call time.
    """
    home = keen_home if keen_home is not None else paths.keen_home()
    return {
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-m", "keen.demo.server"],
        "env": {"KEEN_HOME": str(home)},
        "description": "Keen's built-in demo server: time, unit conversion, word count, notes.",
        # Keen's own code: its readOnlyHint is true (README "Security: what Keen trusts").
        "trust_annotations": True,
    }
