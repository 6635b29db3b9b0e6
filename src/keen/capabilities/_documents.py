"""The documents of the search index: what text each capability and each server contributes.

A tool contributes three texts: its lexical fields for BM25 (:func:`lexical_text`), its head
for the static word vectors (:func:`semantic_text`) and its views for the transformer
(:func:`dense_views`); a server contributes its name, its text (catalog description,
instructions) and its tools' names as one document (:func:`server_docs`). Which fields go
where, and why, was measured with ``bench/search.py`` (docs/search.md).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from keen.capabilities._rows import Doc
from keen.capabilities._text import split_identifier
from keen.capabilities.descriptor import Capability

__all__ = [
    "DENSE_VIEWS",
    "MAX_DOC_CHARS",
    "NAME_REPEAT",
    "VERB_SYNONYMS",
    "dense_text",
    "dense_views",
    "lexical_text",
    "name_phrases",
    "semantic_text",
    "server_blocks",
    "server_doc",
    "server_docs",
    "split_name",
    "tool_doc",
    "tool_keys",
]

NAME_REPEAT = 2
"""How many times the split name counts in the lexical document (names are the densest signal)."""
MAX_DOC_CHARS = 2000
"""A tool's description counts up to this many characters in its lexical document (a
server's text up to twice as many)."""


def lexical_text(cap: Capability) -> list[str]:
    """The fields of ``cap``'s lexical document. Parameter names stay out: they are
    generic (``query``, ``id``, ``path``) and cost recall (bench/search.py); their
    descriptions are part of ``search_text``."""
    name = split_identifier(cap.name)
    return [*([name] * NAME_REPEAT), cap.title, cap.search_text[:MAX_DOC_CHARS]]


def semantic_text(cap: Capability) -> str:
    """``cap``'s text for the embedding: split server name, split tool name (twice),
    title and one-line summary.

    Static embeddings are averages of word vectors: the long tail of a description or of
    parameter descriptions dilutes them (measured with bench/search.py: recall@5 drops
    about 3 points with the full text), so only the head goes in; BM25 gets the rest.
    The server name places the tool among its siblings (tool-to-agent retrieval: a tool
    embedded with its server)."""
    name = split_identifier(cap.name)
    server = split_identifier(cap.server or "")
    return ". ".join(p for p in (server, name, name, cap.title, cap.summary) if p)


def dense_text(cap: Capability) -> str:
    """``cap``'s text for the transformer encoder: ``how to tool name with server: title.
    description`` (split names; the encoder reads the first :data:`~keen.capabilities.
    encoder.MAX_TOKENS` word pieces).

    Said as what a request asks for ("how to git diff staged with git: ..."), a tool's
    name and server meet requests in their own form: on bench/search.py's even halves
    recall@1 and MRR rose on both natural-request sets (recall@5 equal) against
    ``server: tool name. title. description``; the request is read as "how to <request>"
    to match (recall@5 one request higher on both even halves; docs/search.md)."""
    head = _how_to(cap)
    rest = ". ".join(p for p in (cap.title, cap.search_text[:400]) if p)
    return f"{head}: {rest}" if rest else head


def _how_to(cap: Capability) -> str:
    """``how to <tool name> with <server>`` (split names; no server for a local skill)."""
    name = split_identifier(cap.name)
    server = split_identifier(cap.server or "")
    return f"how to {name} with {server}" if server else f"how to {name}"


DENSE_VIEWS = 4
"""Transformer vectors per tool (:func:`dense_views`)."""

VERB_SYNONYMS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "list": ("show", "get all"),
        "get": ("show", "fetch", "find"),
        "create": ("make", "new", "add"),
        "delete": ("remove", "drop"),
        "remove": ("delete", "drop"),
        "read": ("open", "show", "view"),
        "write": ("save", "store"),
        "update": ("change", "edit", "modify"),
        "edit": ("change", "modify"),
        "search": ("find", "look up"),
        "find": ("search", "look up"),
        "add": ("insert", "create", "put"),
        "move": ("put", "relocate"),
        "set": ("change", "configure"),
        "query": ("ask", "look up"),
        "execute": ("run",),
        "run": ("execute",),
        "fetch": ("get", "download"),
        "open": ("read", "view"),
        "insert": ("add", "put"),
        "merge": ("combine", "join"),
        "split": ("divide", "break up"),
        "convert": ("turn into", "transform"),
        "extract": ("pull out", "get"),
        "send": ("post", "submit"),
        "check": ("verify", "see"),
        "watch": ("monitor", "follow"),
        "copy": ("duplicate",),
        "rename": ("change the name of",),
        "navigate": ("go to", "open"),
        "click": ("press",),
        "upload": ("attach",),
        "export": ("save as",),
        "crawl": ("scrape all pages",),
        "scrape": ("grab",),
    }
)
"""Everyday words for the verbs tool names are made of (a general table, the same for every
catalog): :func:`name_phrases` says a tool's name with them."""


def name_phrases(cap: Capability) -> str:
    """``cap``'s name said with everyday verbs: each word of the split name found in
    :data:`VERB_SYNONYMS` gives its synonyms, each followed by the name's other words
    (``list_directory`` -> ``show directory, get all directory``); ``""`` when no word of
    the name is in the table."""
    words = split_identifier(cap.name).split()
    synonyms = [s for word in words for s in VERB_SYNONYMS.get(word.lower(), ())]
    if not synonyms:
        return ""
    rest = " ".join(word for word in words if word.lower() not in VERB_SYNONYMS)
    return ", ".join(f"{synonym} {rest}".strip() for synonym in synonyms)


def dense_views(cap: Capability) -> tuple[str, str, str, str]:
    """``cap``'s :data:`DENSE_VIEWS` texts for the transformer: the whole text
    (:func:`dense_text`), its head (``how to tool name with server: title``), its
    description (``search_text``, with the parameters' descriptions, cut as in the whole
    text; the head when it has none) and its head with the name said in everyday verbs
    (``how to list directory with filesystem (show directory, get all directory): title``,
    :func:`name_phrases`; the head when the name has no verb of the table). A query's
    cosine with a tool is the best of the four.

    One vector of the whole text averages the head and the description: a request in the
    words of either matches it less than that part alone. With the best of the three first
    views, bench/search.py's even halves (where the method is tuned) rose on the real
    servers from recall@1 0.534 and @5 0.849 to 0.603 and 0.890; the fourth meets a request
    that asks for the tool's action in other words ("remove", "show") and was lower in no
    figure of either half of either natural-request set, with LiveMCPBench's task questions
    up (docs/search.md, "Fourth round on the real servers' misses")."""
    head = f"{_how_to(cap)}: {cap.title}" if cap.title else _how_to(cap)
    phrases = name_phrases(cap)
    if phrases:
        said = f"{_how_to(cap)} ({phrases})"
        said = f"{said}: {cap.title}" if cap.title else said
    else:
        said = head
    return dense_text(cap), head, cap.search_text[:400] or head, said


def tool_doc(cap: Capability) -> Doc:
    """``cap``'s document: its lexical fields, its embedded text and the text its IDF
    weights are counted over."""
    lexical = lexical_text(cap)
    return Doc(tuple(lexical), semantic_text(cap), " ".join(lexical))


def tool_keys(caps: Sequence[Capability]) -> list[bytes]:
    """The 16-byte row key of each of ``caps``' documents (:func:`tool_doc`): a hash of the
    fields the document is made from (name, server, title, summary, the head of
    ``search_text``), each after its length so no text a server sends can make two tools'
    inputs equal. Hashing the fields, not the document, spares making the documents of
    every tool a new process keys to find its cache folder (2.5 times the cost at 20,000
    tools: the document repeats the name and the description)."""
    blake = hashlib.blake2b
    out: list[bytes] = []
    for cap in caps:
        text = cap.search_text
        if len(text) > MAX_DOC_CHARS:
            text = text[:MAX_DOC_CHARS]
        name, server, title, summary = cap.name, cap.server or "", cap.title, cap.summary
        head = f"{len(name)},{len(server)},{len(title)},{len(summary)},{len(text)}|"
        data = f"{head}{name}{server}{title}{summary}{text}".encode("utf-8", "surrogatepass")
        out.append(blake(data, digest_size=16).digest())
    return out


def server_blocks(
    caps: Sequence[Capability], servers: Mapping[str, str]
) -> dict[str, tuple[str, list[tuple[int, int]]]]:
    """Per server (``""``: capabilities without one), a digest of its text and of every field
    its tools' rows are made from, and where its tools are in ``caps``.

    The digest covers the server's name and text (``servers``; none told apart from an
    empty one) and, for each of its tools in order, the fields :func:`tool_keys` hashes and
    the id, each tool's field lengths first (no text a server sends can make two blocks'
    inputs equal). Two catalogs whose blocks of one server have one digest have that
    server's tool rows in the same order and its server row the same, so a new process
    takes them from a cache folder by comparing one digest per server (one hash per server,
    not per tool; every field is still read once).

    Returns:
        ``{server: (digest as 64 hex digits, runs)}``, ``runs`` the ``(start, end)`` position
        ranges of its tools in ``caps``, ascending (one run when ``caps`` is in id order).
    """
    import numpy as np

    owner = [cap.server or "" for cap in caps]
    n = len(owner)
    runs: dict[str, list[tuple[int, int]]] = {}
    start = 0
    for end in [i for i in range(1, n) if owner[i] != owner[i - 1]] + [n]:
        if n:
            runs.setdefault(owner[start], []).append((start, end))
        start = end
    heads = [cap.search_text[:MAX_DOC_CHARS] for cap in caps]
    fields = [
        [c.id for c in caps],
        [c.name for c in caps],
        owner,
        [c.title for c in caps],
        [c.summary for c in caps],
        heads,
    ]
    lengths = np.array([np.fromiter(map(len, values), dtype=np.int64, count=n) for values in fields])
    out: dict[str, tuple[str, list[tuple[int, int]]]] = {}
    for name in sorted({*runs, *servers}):
        spans = runs.get(name, [])
        text = servers.get(name)
        count = sum(b - a for a, b in spans)
        head = f"{len(name)},{-1 if text is None else len(text)},{count}|{name}{text or ''}"
        digest = hashlib.sha256(head.encode("utf-8", "surrogatepass"))
        # Field by field (each field's lengths, then its values joined): a join per field
        # and server, not per tool.
        if len(spans) == 1:
            ((a, b),) = spans
            digest.update(lengths[:, a:b].tobytes())
            for values in fields:
                digest.update("".join(values[a:b]).encode("utf-8", "surrogatepass"))
        elif spans:
            digest.update(np.concatenate([lengths[:, a:b] for a, b in spans], axis=1).tobytes())
            for values in fields:
                joined = "".join(v for a, b in spans for v in values[a:b])
                digest.update(joined.encode("utf-8", "surrogatepass"))
        out[name] = (digest.hexdigest(), spans)
    return out


split_name = functools.lru_cache(maxsize=1 << 16)(split_identifier)
"""A tool name split into words, kept: every catalog splits every tool's name again."""


def server_doc(name: str, text: str, members: list[str]) -> Doc:
    """The document of server ``name``: its split name, its ``text`` and its tools' split
    names ``members``."""
    fields = (split_identifier(name), text, " ".join(members))
    return Doc(fields, ". ".join(p for p in fields if p)[: MAX_DOC_CHARS * 2], None)


def server_docs(caps: Sequence[Capability], servers: dict[str, str]) -> tuple[list[Doc], list[str]]:
    """Per server (sorted by name): its name, text and tool names, as one document; and the
    names."""
    names = sorted(servers)
    members: dict[str, list[str]] = {name: [] for name in names}
    for cap in caps:
        if cap.server in members:
            members[cap.server].append(split_name(cap.name))
    return [server_doc(name, servers[name], members[name]) for name in names], names
