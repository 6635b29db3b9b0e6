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

A request also carries the values its tool will be called with: a file name
(``draft_v2.md``, ``server.log``), a URL, a host name, a quoted text (a commit message, a
cell's value, a search phrase). Their words say what the call works on, not which tool
makes it: to a sentence embedder "how many lines does server.log have?" is about servers
and logging. :func:`value_kinds` replaces each value by the kind of value it is (``md
file``, ``log file``, ``web page``, ``web site``, ``text``) in the query that ToolSearch
compares with the tools' vectors (transformer and wordllama) and the servers'
transformer vectors; keywords and the servers' wordllama vectors still see the values
themselves (a host name or an extension is evidence there). Measured on the
natural-request sets of ``bench/queries`` (docs/search.md).
"""

from __future__ import annotations

import re

__all__ = ["search_query", "value_kinds"]

# A URL (kept as it is; matched first so its path is not taken for a file path). A scheme
# starts where a run of scheme characters starts: tried inside "a.a.a..." at every
# position, the scan to the run's end made a 2,000-character query cost 24 ms.
_URL = re.compile(r"(?<![\w+.-])(?:[a-z][a-z0-9+.-]*://|www\.)[^\s<>\"']+", re.IGNORECASE)
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


# value_kinds: a quoted text (straight or curly quotes; an apostrophe inside a word does not
# open one), a host name without a scheme under a common generic top-level domain (a
# country code would take file extensions such as .md, .py, .sh for hosts), and a file
# name with an extension of one letter and up to four more letters or digits (after any
# POSIX or Windows directories). "v1.2", "e.g." and a dotted name such as "crm.deal.add"
# or "b.tar.gz" are left as they are; a product name such as "Node.js" reads "js file".
_QUOTED = re.compile(r"(?<!\w)(['\"\u2018\u201c])[^'\"\u2018\u2019\u201c\u201d]+?['\"\u2019\u201d](?!\w)")
_HOST = re.compile(
    r"(?<![\w@./-])(?:[a-z0-9-]+\.)+(?:com|org|net|io|gov|edu|dev|app|ai|co|info|biz)\b(?![./\w-])",
    re.IGNORECASE,
)
_FILE_NAME = re.compile(
    r"(?:\bfile\s+)?(?<![\w/\\@.:-])(?:~|\.{1,2}|[A-Za-z]:)?[/\\]?(?:[\w.\-]+[/\\])*"
    r"([\w\-]+)\.([A-Za-z][A-Za-z0-9]{0,4})(?![\w/\\:-]|\.\w)"
)


def value_kinds(text: str) -> str:
    """``text`` (a :func:`search_query` result) with each value a tool would be called with
    replaced by its kind: a URL by ``web page``, a host name by ``web site``, a quoted text
    by ``text``, a file name by its extension and ``file``.

    Example: ``"commit with the message 'fix login' and push notes/todo.txt"`` ->
    ``"commit with the message text and push txt file"``.
    """
    text = _URL.sub("web page", text)
    text = _HOST.sub("web site", text)
    text = _QUOTED.sub("text", text)
    # A "file" that search_query put before a path goes with it: "txt file", not "file txt file".
    return _FILE_NAME.sub(_file_kind, text)


def _file_kind(match: re.Match[str]) -> str:
    stem, extension = match.group(1), match.group(2)
    if len(stem) == 1 and len(extension) == 1:
        return match.group(0)  # an abbreviation: "e.g.", "i.e.", "a.m."
    return f"{extension.lower()} file"


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
