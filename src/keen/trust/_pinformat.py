"""The pin file format's version, below both the store (:mod:`keen.trust.pinstore`) and the
models (:mod:`keen.trust._pinmodels`), which the store imports only when it reads a file."""

from __future__ import annotations

__all__ = ["PIN_FILE_VERSION"]

PIN_FILE_VERSION = 1
"""The version of ``mcp/pins/<server>.json`` (and of its reviews) this Keen reads and writes."""
