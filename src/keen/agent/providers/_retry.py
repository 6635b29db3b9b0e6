"""Bounded retries of a model call, the same for both SDKs.

Keen retries, not the SDKs (they are built with ``max_retries=0``): the ``anthropic`` SDK
waits as long as a ``retry-after`` header says, even hours, and the ``openai`` one gives up
at once past two minutes without saying why. Here a call is tried at most
``1 + retries`` times, for connection errors, timeouts, 408, 409, 429, 5xx and Anthropic's
529 (also when they arrive as an error event inside the stream), unless the response says
``x-should-retry: false``. Between tries it waits what ``retry-after`` asks when that is at
most ``max_wait`` seconds, else it gives up at once and the message says how long the
provider asked to wait; without ``retry-after`` it backs off exponentially
(``backoff``, doubling, at most 8 s, with jitter).

A call whose stream already showed text is never retried: the user saw it, and a second
answer would not continue it. A connection that breaks once the answer began is said so
("broke during the answer"), not as a server that cannot be reached.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from keen.agent.models import ModelEvent, TextDelta
from keen.agent.providers._errors import is_model_failure, names_of, retry_after, status_of, translate

__all__ = ["Attempt", "Retry", "with_retries"]

_MAX_BACKOFF = 8.0


@dataclass
class Retry:
    """How a model call is retried (module doc).

    Attributes:
        retries: tries after the first, at most.
        backoff: seconds before the first retry when the provider names no wait.
        max_wait: the longest ``retry-after`` waited for, in seconds.
    """

    retries: int = 2
    backoff: float = 0.5
    max_wait: float = 60.0

    def delay(self, exc: BaseException, tries: int) -> float | None:
        """Seconds to wait before trying again after ``exc`` ended try number ``tries``,
        or None to give up."""
        if tries > self.retries or not _retryable(exc):
            return None
        asked = retry_after(exc)
        if asked is not None:
            return asked if asked <= self.max_wait else None
        return min(self.backoff * 2 ** (tries - 1), _MAX_BACKOFF) * (1 - 0.25 * random.random())


@dataclass
class Attempt:
    """One try's progress, set by the adapter: ``began`` once the provider's response
    started (an error after that broke a stream; before, the request never got an answer)."""

    began: bool = False


def _retryable(exc: BaseException) -> bool:
    response: Any = getattr(exc, "response", None)
    headers: Any = getattr(response, "headers", None)
    if headers is not None and headers.get("x-should-retry") == "false":
        return False
    status = status_of(exc)
    if status is not None and status >= 400:
        return status in (408, 409, 429) or status >= 500
    return bool(names_of(exc) & {"APIConnectionError", "APITimeoutError"})


async def with_retries(
    attempt: Callable[[Attempt], AsyncGenerator[ModelEvent, None]],
    policy: Retry,
    *,
    provider: str,
    endpoint: str,
) -> AsyncIterator[ModelEvent]:
    """The events of ``attempt()``, tried again per ``policy`` when it fails before any
    text was shown; the SDK's final error translated (:func:`~._errors.translate`).

    Args:
        attempt: one try of the call: opens the stream and yields its events; it sets
            :attr:`Attempt.began` when the response started.
        policy: the retry policy.
        provider: ``openai`` or ``anthropic``; only that SDK's exceptions are handled.
        endpoint: named in the error message.
    """
    tries = 0
    while True:
        tries += 1
        shown = False
        progress = Attempt()
        try:
            # Closed here when the caller stops early (a cancelled turn), not left to the GC.
            async with contextlib.aclosing(attempt(progress)) as events:
                async for event in events:
                    shown = shown or isinstance(event, TextDelta)
                    yield event
            return
        except Exception as exc:
            if not is_model_failure(exc, provider):
                raise
            wait = None if shown else policy.delay(exc, tries)
            if wait is None:
                asked = retry_after(exc)
                too_long = asked if asked is not None and asked > policy.max_wait else None
                raise translate(
                    exc,
                    provider=provider,
                    endpoint=endpoint,
                    tries=tries,
                    wait=too_long,
                    began=progress.began,
                ) from None
        await anyio.sleep(wait)
