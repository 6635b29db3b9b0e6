"""A stdio "server" that dies at once: writes ``fatal: demo crash`` to stderr, exits with code 3."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    sys.stderr.write("fatal: demo crash\n")
    sys.stderr.flush()
    sys.exit(3)
