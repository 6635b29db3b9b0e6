"""Cutting text to a length, the one way every layer does it (a leaf: imports nothing of Keen)."""

from __future__ import annotations

__all__ = ["ELLIPSIS", "one_line", "shorten"]

ELLIPSIS = "…"


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``…`` when cut.

    Args:
        text: any text.
        limit: the most characters returned (>= 1); the ellipsis counts as one.

    Returns:
        ``text`` unchanged when it fits, else its head (trailing spaces dropped) and ``…``.
    """
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + ELLIPSIS


def one_line(text: str | None, limit: int) -> str:
    """``text`` with every run of whitespace (newlines too) made one space, then :func:`shorten`."""
    return shorten(" ".join((text or "").split()), limit)
