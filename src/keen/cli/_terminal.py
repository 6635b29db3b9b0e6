"""The CLI's name for :mod:`keen._terminal` (server text escaped for a terminal).

The helpers live in a shared leaf so ``keen.agent``'s REPL renders server text the same
way without importing the CLI (docs/architecture.md "Package map").
"""

from __future__ import annotations

from keen._terminal import HUMAN_OUTPUT_CHARS, cap, cell, human_result, safe_json, shell_word, terminal_text

__all__ = ["HUMAN_OUTPUT_CHARS", "cap", "cell", "human_result", "safe_json", "shell_word", "terminal_text"]
