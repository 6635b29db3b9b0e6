"""gc.freeze at the first Manager start happens only where asked (keen._gcfreeze).

Each case runs in a fresh interpreter: the freeze acts on the whole process, and the
collector's permanent generation of the pytest worker is not this test's to change.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_SCRIPT = textwrap.dedent(
    """
    import asyncio, gc, sys
    import keen
    from keen.mcp import Manager
    from keen.mcp.config import parse_config
    from keen.trust import PinGuard

    if sys.argv[1] == "asked":
        keen.freeze_at_first_start()
    before = gc.get_freeze_count()

    async def main():
        config = parse_config({"mcpServers": {}})
        async with Manager(config=config, trust=PinGuard()):
            pass
        async with Manager(config=config, trust=PinGuard()):  # a second Manager freezes nothing more
            pass

    asyncio.run(main())
    print(before, gc.get_freeze_count())
    """
)


@pytest.mark.parametrize("mode", ["asked", "not-asked"])
def test_the_first_manager_start_freezes_only_when_asked(mode: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, mode], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    before, after = (int(n) for n in done.stdout.split())
    assert before == 0
    if mode == "asked":
        # The imports alone made tens of thousands of tracked objects.
        assert after > 10_000
    else:
        assert after == 0


def test_the_keen_command_asks() -> None:
    script = "import keen.cli, keen._gcfreeze as g, sys; sys.argv = ['keen', '--version']\n"
    script += "try:\n    keen.cli.main()\nexcept SystemExit:\n    pass\nprint(g._asked)"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "True"
