"""A search query as people and models write it, made searchable (standard library only).

A task often names the file it works on: "save it to /root/markdown/cv.md", "what is in
my ~/music folder". The path's words (``root``, ``markdown``, ``cv``, ``md``) match tools
*about* markdown or music, while the task needs a tool that reads or writes files, whose
descriptions say "file" and "directory", words the query lacks. :func:`search_query`
puts the word ``file`` before each path; the path's own words stay (an extension such as
``xlsx`` still points at spreadsheet tools). URLs are left alone: their host names are
evidence of the service (``github.com``), and adding "web page" to them measured no gain
on bench/search.py.

A task may also carry data: a base64 image, a hash, a token, a UUID. Such a blob is no
description of a tool, yet it outweighs the words that are: one pasted image makes
hundreds of embedding tokens, and its pieces match tools named by ids. :func:`search_query`
drops every word that holds a run of 32 or more letters, digits, ``+``, ``=``, ``_`` or
``-`` with at least two digits in it (natural words and tool names never do), unless the
query holds nothing else: then ToolSearch ranks by the query as it is.
"""

from __future__ import annotations

import re

__all__ = ["search_query"]

# A URL (kept as it is; matched first so its path is not taken for a file path).
_URL = re.compile(r"\b(?:[a-z][a-z0-9+.-]*://|www\.)[^\s<>\"']+", re.IGNORECASE)
# A word holding data (see the module docstring); _is_blob checks the digits.
_WORD = re.compile(r"\S+")
_RUN = re.compile(r"[A-Za-z0-9+=_-]{32,}")
# A POSIX path with at least one '/' after its first segment or a leading '/', '~/', './'
# or '../'; or a Windows path (C:\...). Not preceded by a word character, '/', ':' or '.'
# (so "and/or" and the inside of a URL are not paths).
_PATH = re.compile(r"(?<![\w/:.])(?:~|\.{1,2})?(?:/[\w.\-]+)+/?|\b[A-Za-z]:\\[^\s]+")


def search_query(text: str) -> str:
    """``text`` with ``file`` put before every file path outside URLs (unless the word
    before the path is already ``file`` or ``files``), and without the words that hold
    data (base64, hashes, tokens; URLs are kept whole).

    Example: ``"save it to /root/markdown/cv.md"`` -> ``"save it to file /root/markdown/cv.md"``.
    """
    out: list[str] = []
    last = 0
    for url in _URL.finditer(text):
        out.append(_words(text[last : url.start()]))
        out.append(url.group(0))
        last = url.end()
    out.append(_words(text[last:]))
    return "".join(out)


def _words(text: str) -> str:
    return _PATH.sub(_mark, _WORD.sub(_drop_blob, text))


def _drop_blob(match: re.Match[str]) -> str:
    word = match.group(0)
    for run in _RUN.finditer(word):
        if sum(c.isdigit() for c in run.group(0)) >= 2:
            return " "
    return word


def _mark(match: re.Match[str]) -> str:
    if match.string[: match.start()].rstrip().lower().endswith(("file", "files")):
        return match.group(0)  # "the file /a/b.md" says it already
    return f"file {match.group(0)}"
