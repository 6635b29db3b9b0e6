"""Secret redaction: API keys, tokens and auth headers never leave Keen in clear.

A ``Redactor`` holds the literal secrets Keen knows (configured keys, tokens it
obtained) and replaces each occurrence with ``[REDACTED]``. Pattern rules catch
common shapes Keen was not told about (``Bearer xyz``, ``Authorization: ...``,
``access_token=...``). Used at every boundary where text leaves: error messages,
log records, ``last_error``, generated files.
"""

from __future__ import annotations

import logging
import re
import threading

__all__ = ["REDACTED", "RedactingFilter", "Redactor", "redactor"]

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
]


class Redactor:
    """Thread-safe set of known secrets plus pattern rules.

    ``add(secret)`` registers a literal (ignored if shorter than 4 characters, to
    avoid redacting ordinary words); ``redact(text)`` returns ``text`` with every
    registered secret and pattern match replaced by ``[REDACTED]``.
    """

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._lock = threading.Lock()

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= 4:
            with self._lock:
                self._secrets.add(secret)

    def redact(self, text: str) -> str:
        if not text:
            return text
        with self._lock:
            secrets = sorted(self._secrets, key=len, reverse=True)
        for secret in secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        for pattern in _PATTERNS:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
        return text


redactor = Redactor()
"""The process-wide redactor every Keen boundary uses."""


class RedactingFilter(logging.Filter):
    """Logging filter that redacts a record's formatted message in place."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redactor.redact(message)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True
