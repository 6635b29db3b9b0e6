"""Secret redaction: API keys, tokens and auth headers never leave Keen in clear.

A ``Redactor`` holds the literal secrets Keen knows (configured keys, tokens it
obtained) and replaces each occurrence with ``[REDACTED]``. Pattern rules catch
common shapes Keen was not told about (``Bearer xyz``, ``Authorization: ...``,
``access_token=...``). Used at every boundary where text leaves: error messages,
log records, ``last_error``, generated files, the stderr logs of stdio servers.

URLs are redacted structurally as well (:func:`redact_url`): their userinfo and the
values of their query parameters, so a token in ``?token=...`` or ``https://TOKEN@host``
is hidden even when Keen was not told it is one.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

__all__ = [
    "REDACTED",
    "RedactingFilter",
    "Redactor",
    "looks_secret",
    "redact_url",
    "redactor",
    "register_value",
    "url_secrets",
]

REDACTED = "[REDACTED]"

# Each pattern's group 1 is the label kept in the output, so a message still says what was hidden.
_PATTERNS = [
    re.compile(r"(?i)(\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(
        r"(?i)(\b(?:authorization|x-api-key|api[-_]?key|proxy-authorization)\s*[:=]\s*)[^\s,;\"']{4,}"
    ),
    re.compile(
        r"(?i)(\b(?:access_token|refresh_token|id_token|client_secret|code|code_verifier)=)[^&\s\"']{4,}"
    ),
    re.compile(r"(?i)(\"(?:access_token|refresh_token|id_token|client_secret)\"\s*:\s*\")[^\"]+"),
    # URL userinfo (``https://user:pass@host``, ``https://TOKEN@host``): the scheme stays.
    # Bounded runs keep every pattern linear: "a.a.a.a..." (each "a" a word start, each start
    # scanning to the end for "://") made a 160 kB tool argument take 80 s to redact.
    re.compile(r"(?i)(\b[a-z][a-z0-9+.-]{0,31}://)[^/\s@?#]+(?=@)"),
    # Query parameters whose name says secret (``?token=``, ``&api_key=``, ``&sig=``).
    re.compile(
        r"(?i)([?&][a-z0-9_.-]{0,64}(?:token|key|secret|password|passwd|pwd|sig|signature|auth|session)"
        r"[a-z0-9_.-]{0,64}=)[^&\s\"'#]{4,}"
    ),
]

# Values that configure a server but are not secrets: redacting them would only blank
# ordinary words in every message ("info" in LOG_LEVEL=info).
_PLAIN_WORDS = frozenset(
    [
        "true",
        "false",
        "yes",
        "no",
        "on",
        "off",
        "none",
        "null",
        "debug",
        "info",
        "warn",
        "warning",
        "error",
        "trace",
        "fatal",
        "critical",
        "verbose",
        "quiet",
        "production",
        "development",
        "staging",
        "test",
        "local",
        "stdio",
        "http",
        "https",
        "json",
        "text",
    ]
)
_PATH_LIKE = re.compile(r"^(?:[/~]|\.{1,2}[/\\]|[A-Za-z]:[/\\])")
_NUMBER = re.compile(r"^[+-]?\d+(?:\.\d+)?$")
# An address a server is told to use ("DB_HOST": "127.0.0.1", "localhost:5432") is
# configuration: redacted, it blanked the host out of every error that names it, and out
# of any URL in a tool's schema (which then no longer parsed).
_ADDRESS = re.compile(r"^(?:localhost|\d{1,3}(?:\.\d{1,3}){3})(?::\d{1,5})?$", re.IGNORECASE)


_MEMO_CHARS = 1024
"""Texts up to this long have their redaction remembered (:meth:`Redactor.redact`)."""
_MEMO_ENTRIES = 4096
"""The memo is emptied when it holds this many texts (bounded memory)."""


def _keep_label(match: re.Match[str]) -> str:
    return match.group(1) + REDACTED


class Redactor:
    """Thread-safe set of known secrets plus pattern rules.

    ``add(secret)`` registers a literal (ignored if shorter than 4 characters, to
    avoid redacting ordinary words); ``redact(text)`` returns ``text`` with every
    registered secret and pattern match replaced by ``[REDACTED]``.
    """

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._longest_first: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self.memo: dict[str, str] = {}
        """Short texts redacted before, and their redaction: a call's server, tool and
        argument values are redacted for its call event, its result event and its audit
        record, and the next call sends the same ones. A caller redacting many short strings
        (an event's fields) looks each up here first and calls :meth:`redact` only on a miss,
        a call less per string. Emptied and replaced whenever a secret is added (an older one
        would not redact it), so a batch that read it before the secret came misses from then
        on; never write to it."""

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= 4:
            with self._lock:
                if secret not in self._secrets:
                    self._secrets.add(secret)
                    self._longest_first = tuple(sorted(self._secrets, key=len, reverse=True))
                    # Emptied in place too: a caller midway through a batch holds the old
                    # memo, whose texts were redacted without this secret; it then misses
                    # and calls redact, which never writes into a memo replaced since.
                    stale, self.memo = self.memo, {}
                    stale.clear()

    def redact(self, text: str) -> str:
        if not text:
            return text
        memo = self.memo
        hit = memo.get(text)
        if hit is not None:
            return hit
        out = self.redact_literals(text)
        for pattern in _PATTERNS:
            out = pattern.sub(_keep_label, out)
        if len(text) <= _MEMO_CHARS:
            with self._lock:
                # Only into the memo it was computed for: a secret added meanwhile replaced it.
                if memo is self.memo:
                    if len(memo) >= _MEMO_ENTRIES:
                        memo.clear()
                    memo[text] = out
        return out

    def redact_literals(self, text: str) -> str:
        """``text`` with only the registered secrets replaced (no pattern rules): for text
        that is data, such as a tool's schema, where a pattern could rewrite a regex or an
        example that merely mentions ``api_key=``."""
        if not text:
            return text
        for secret in self._longest_first:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def redact_json(self, value: Any, *, patterns: bool = False) -> Any:
        """A copy of the JSON value ``value`` with :meth:`redact_literals` (with
        ``patterns``: :meth:`redact`) applied to every string value; keys are names a call
        must send, so they stay as they are."""
        if isinstance(value, str):
            return self.redact(value) if patterns else self.redact_literals(value)
        if isinstance(value, dict):
            return {k: self.redact_json(v, patterns=patterns) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
        if isinstance(value, list):
            return [self.redact_json(v, patterns=patterns) for v in value]  # pyright: ignore[reportUnknownVariableType]
        return value

    def stream(self, held: str, delta: str) -> tuple[str, str]:
        """One chunk of streamed text, redacted: ``(to print now, to hold)``.

        ``held`` is what the previous chunk held back; the end of ``held + delta`` that could
        begin a secret (:meth:`unsafe_tail`) is held again, so a secret split across chunks
        is redacted whole. Print what is held when the stream ends.
        """
        pending = self.redact(held + delta)
        keep = self.unsafe_tail(pending)
        return pending[: len(pending) - keep], pending[len(pending) - keep :] if keep else ""

    def unsafe_tail(self, text: str) -> int:
        """How many characters at the end of ``text`` could begin a registered secret.

        A front end that prints streamed text holds those back until the next chunk (a
        secret split across chunks is then redacted whole); 0 when the end is safe.
        """
        with self._lock:
            secrets = list(self._secrets)
        longest = 0
        for secret in secrets:
            for size in range(min(len(secret) - 1, len(text)), longest, -1):
                if secret.startswith(text[-size:]):
                    longest = size
                    break
        return longest


redactor = Redactor()
"""The process-wide redactor every Keen boundary uses."""


def looks_secret(value: str | None) -> bool:
    """Whether a configured value (an env value, a query value) may be a secret.

    Everything is, except values too short to redact (< 4 characters), numbers, a few
    plain words (``true``, ``info``, ``production``...), file paths and addresses
    (``localhost``, an IPv4 address, either with a port): configuration, not credentials,
    and redacting them would blank ordinary words in every message.
    """
    if not value or len(value) < 4:
        return False
    bare = value.strip()
    return not (
        bare.lower() in _PLAIN_WORDS or _NUMBER.match(bare) or _PATH_LIKE.match(bare) or _ADDRESS.match(bare)
    )


def url_secrets(url: str) -> list[str]:
    """The parts of ``url`` that may be secrets: the userinfo (whole, and its password)
    and every query value :func:`looks_secret` accepts. ``[]`` for a URL without them."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found: list[str] = []
    userinfo, sep, _host = parts.netloc.rpartition("@")
    if sep and userinfo:
        found.append(userinfo)
        _user, colon, password = userinfo.partition(":")
        if colon and password:
            found.append(password)
    for _key, value in parse_qsl(parts.query, keep_blank_values=False):
        if looks_secret(value):
            found.append(value)
    return found


def redact_url(url: str) -> str:
    """``url`` for display: userinfo and every query value replaced by ``[REDACTED]``,
    scheme, host, port, path and query names kept (``https://h/mcp?token=[REDACTED]``).
    Text that is not a URL comes back with :meth:`Redactor.redact` applied."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redactor.redact(url)
    if not parts.scheme or not parts.netloc:
        return redactor.redact(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = REDACTED + "@" + netloc.rpartition("@")[2]
    query = "&".join(
        f"{key}={REDACTED}" if value else key for key, value in parse_qsl(parts.query, keep_blank_values=True)
    )
    return redactor.redact(urlunsplit((parts.scheme, netloc, parts.path, query, "")))


class RedactingFilter(logging.Filter):
    """Logging filter that redacts a record's formatted message in place."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redactor.redact(message)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True


def register_value(value: str | None) -> None:
    """Register one configured value: a URL's secret parts, or the value if it may be a secret."""
    if not value:
        return
    try:
        parts = urlsplit(value)
    except ValueError:
        parts = None
    if parts is not None and parts.scheme and parts.netloc:
        for secret in url_secrets(value):
            redactor.add(secret)
        return
    if looks_secret(value):
        redactor.add(value)
        # "Bearer <token>" and the like: the token alone may be quoted too.
        scheme, _, rest = value.strip().partition(" ")
        if scheme.lower() in ("bearer", "basic", "token", "bot") and rest:
            redactor.add(rest.strip())
