"""When a request is tried again, and after how long: one policy for every method, POST included.

A create always carries an Idempotency-Key, so a retried POST can never make (or charge) a second
generation.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

#: Answers worth another try: the request may not have been processed, or the server asks for patience.
RETRYABLE_STATUSES: frozenset[int] = frozenset({408, 429, 500, 502, 503, 504})
#: The longest Retry-After the client sleeps through, in seconds; a longer one is raised to the caller.
MAX_RETRY_AFTER = 60.0
_BASE_DELAY = 0.5
_MAX_BACKOFF = 8.0
_SECONDS = re.compile(r"^\d+(\.\d+)?$")


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After in seconds: delta-seconds (fractions accepted) or an HTTP date. None when absent
    or unreadable; never negative."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if _SECONDS.match(text):
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


def backoff(retry: int, rand: Callable[[], float] = random.random) -> float:
    """Exponential backoff with full jitter: a random delay in [0, min(8 s, 0.5 s x 2**retry))."""
    return rand() * min(_MAX_BACKOFF, _BASE_DELAY * 2**retry)


def is_retryable_status(status: int) -> bool:
    """Whether an HTTP status is retried (never another 4xx, never 409 idempotency_conflict)."""
    return status in RETRYABLE_STATUSES


@dataclass(frozen=True)
class RetryEvent:
    """What the ``on_retry`` hook is told before each sleep."""

    method: str
    path: str
    #: 1 for the first retry.
    attempt: int
    #: Seconds slept before the retry.
    delay: float
    #: The HTTP status, or None for a network error or a timeout.
    status: int | None
    error: Exception
    idempotency_key: str | None
