"""A search query as people and models write it, made searchable (standard library only).

A task often names the file it works on: "save it to /root/markdown/cv.md", "what is in
my ~/music folder". The path's words (``root``, ``markdown``, ``cv``, ``md``) match tools
*about* markdown or music, while the task needs a tool that reads or writes files, whose
descriptions say "file" and "directory", words the query lacks. :func:`search_query`
puts the word ``file`` before each path; the path's own words stay (an extension such as
``xlsx`` still points at spreadsheet tools). URLs are left alone: their host names are
evidence of the service (``github.com``), and adding "web page" to them measured no gain
on bench/search.py.
"""

from __future__ import annotations

import re

__all__ = ["search_query"]

# A URL (kept as it is; matched first so its path is not taken for a file path).
_URL = re.compile(r"\b(?:[a-z][a-z0-9+.-]*://|www\.)[^\s<>\"']+", re.IGNORECASE)
# A POSIX path with at least one '/' after its first segment or a leading '/', '~/', './'
# or '../'; or a Windows path (C:\...). Not preceded by a word character, '/', ':' or '.'
# (so "and/or" and the inside of a URL are not paths).
_PATH = re.compile(r"(?<![\w/:.])(?:~|\.{1,2})?(?:/[\w.\-]+)+/?|\b[A-Za-z]:\\[^\s]+")


def search_query(text: str) -> str:
    """``text`` with ``file`` put before every file path outside URLs (unless the word
    before the path is already ``file`` or ``files``).

    Example: ``"save it to /root/markdown/cv.md"`` -> ``"save it to file /root/markdown/cv.md"``.
    """
    out: list[str] = []
    last = 0
    for url in _URL.finditer(text):
        out.append(_PATH.sub(_mark, text[last : url.start()]))
        out.append(url.group(0))
        last = url.end()
    out.append(_PATH.sub(_mark, text[last:]))
    return "".join(out)


def _mark(match: re.Match[str]) -> str:
    if match.string[: match.start()].rstrip().lower().endswith(("file", "files")):
        return match.group(0)  # "the file /a/b.md" says it already
    return f"file {match.group(0)}"
