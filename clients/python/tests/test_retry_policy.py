"""The retry policy's pieces, without a server."""

from __future__ import annotations

from datetime import datetime, timezone

from generation_client import RETRYABLE_STATUSES, backoff, parse_retry_after


def test_retry_after_in_seconds_or_as_a_date() -> None:
    now = datetime(2026, 11, 26, 12, 0, 0, tzinfo=timezone.utc)
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after("Thu, 26 Nov 2026 12:00:30 GMT", now) == 30.0
    assert parse_retry_after("Thu, 26 Nov 2026 11:00:00 GMT", now) == 0.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None


def test_backoff_is_full_jitter_under_a_doubling_cap() -> None:
    assert backoff(0, lambda: 0.999) < 0.5
    assert backoff(3, lambda: 1.0) == 4.0
    assert backoff(10, lambda: 1.0) == 8.0
    assert backoff(2, lambda: 0.0) == 0.0


def test_which_statuses_are_retried() -> None:
    assert {408, 429, 500, 502, 503, 504} == RETRYABLE_STATUSES
