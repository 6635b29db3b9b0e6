"""Test helpers for skill directories: write a SKILL.md, and wait out the timestamp tick in
which a change could go unseen by the discovery cache."""

from __future__ import annotations

import time
from pathlib import Path

from keen.skills.cache import RACY_SECONDS

__all__ = ["settle", "write_skill"]


def write_skill(folder: Path, description: str, name: str | None = None) -> Path:
    """Write ``folder/SKILL.md`` (its frontmatter ``name``: ``name``, default the folder's)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "SKILL.md"
    path.write_text(
        f"---\nname: {name or folder.name}\ndescription: {description}\n---\n\nBody.\n", encoding="utf-8"
    )
    return path


def settle() -> None:
    """Let every file written so far leave the racy window, so that a cache hit is possible."""
    time.sleep(RACY_SECONDS * 2)
