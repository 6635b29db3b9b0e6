"""A pin file that cannot be looked at gives every call of a server that reads pins a clear
ConfigError that says what to do, never a raw OSError out of the call pipeline (which raises
only Keen's errors); a server with pinning off is called as usual."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import stdio_server
from keen.errors import ConfigError
from keen.gateway import Gateway, allow_all
from keen.mcp import Manager
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio


async def test_a_pins_path_that_is_a_file_stops_calls_with_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "keen-home"
    path = home / "mcp" / "configs.json"
    path.parent.mkdir(parents=True)
    servers = {
        "strict": stdio_server("basic_stdio.py"),
        "loose": stdio_server("basic_stdio.py", pinning="off"),
    }
    path.write_text(json.dumps({"version": 1, "servers": servers}))
    monkeypatch.setenv("KEEN_HOME", str(home))
    # Where the pins folder should be, a file: looking at <pins>/<server>.json fails with
    # ENOTDIR (a permission bit would not: the tests may run as root).
    (home / "mcp" / "pins").write_text("not a folder")
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(20)
        gateway = Gateway(manager, approval=allow_all)
        for _ in range(2):  # a kept answer must not differ
            with pytest.raises(
                ConfigError, match=r"cannot look at pin file .*Not a directory.*make it a folder"
            ):
                await gateway.call("strict", "echo", {"text": "hi"})
            # Pinning off never reads pins: its calls go on while the folder is broken.
            result = await gateway.call("loose", "echo", {"text": "hi"})
            assert "hi" in result.text
        # A library caller asking for the view's change key: a server with pinning off needs
        # no pins, so it gets one (None: nothing to follow); a server that reads them is told.
        assert manager.view_stamp("loose") is None
        with pytest.raises(ConfigError, match=r"cannot look at pin file .*make it a folder"):
            manager.view_stamp("strict")
        # Once the folder is one again, the very next call goes through.
        (home / "mcp" / "pins").unlink()
        for server in ("strict", "loose"):
            result = await gateway.call(server, "echo", {"text": "hi"})
            assert "hi" in result.text
