"""Verifying a webhook delivery, per Standard Webhooks 1.0: ``webhook-signature`` holds one or more
``v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">`` (two, space-separated, for
a day after the secret was rotated); one that matches, over the exact bytes received, with a
timestamp within 5 minutes of now, passes. The standard library only: no client or network needed.

    from generation_client import webhooks

    event = webhooks.unwrap(request.body, request.headers, secret)  # raises WebhookVerificationError
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import time
from collections.abc import Mapping
from datetime import datetime

from .errors import WebhookVerificationError
from .types import GenerationEvent

__all__ = ["DEFAULT_TOLERANCE", "WebhookVerificationError", "unwrap", "verify"]

#: How far a delivery's timestamp may be from now, in seconds (the spec's 5 minutes).
DEFAULT_TOLERANCE = 300.0
_SECRET_PREFIX = "whsec_"
_TIMESTAMP = re.compile(r"^\d{1,15}$")


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """A header by name, whatever the case its framework keeps (Starlette, Django and Flask headers
    match any case; a plain dict may hold ``Webhook-Id``)."""
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    return value


def _base64(text: str) -> bytes | None:
    try:
        # Unpadded base64 is accepted, as the reference implementation accepts it.
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def _key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_…`` secret: the base64-decoded part after the prefix."""
    key = _base64(secret.removeprefix(_SECRET_PREFIX))
    if not key:
        raise ValueError("a webhook secret is whsec_ followed by base64")
    return key


def _epoch(now: datetime | float | None) -> float:
    if now is None:
        return time.time()
    return now.timestamp() if isinstance(now, datetime) else float(now)


def verify(
    body: bytes | str,
    headers: Mapping[str, str],
    secret: str,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: datetime | float | None = None,
) -> None:
    """Raises WebhookVerificationError unless ``body`` (the raw bytes received, never a parsed and
    re-serialized copy) carries a valid signature by ``secret`` made within ``tolerance`` seconds of
    ``now`` (default: the clock). A malformed secret raises ValueError (a bug of the receiver, not
    a bad delivery)."""
    key = _key(secret)
    message_id = _header(headers, "webhook-id")
    timestamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    if not message_id or not timestamp or not signatures:
        raise WebhookVerificationError(
            "The webhook-id, webhook-timestamp and webhook-signature headers are required."
        )
    if not _TIMESTAMP.match(timestamp):
        raise WebhookVerificationError("The webhook-timestamp is not a number.")
    if abs(_epoch(now) - int(timestamp)) > tolerance:
        raise WebhookVerificationError(
            "The webhook-timestamp is too far from now (a replay, or a clock off)."
        )
    data = body.encode() if isinstance(body, str) else bytes(body)
    expected = hmac.new(key, f"{message_id}.{timestamp}.".encode() + data, hashlib.sha256).digest()
    for candidate in signatures.split(" "):
        version, _, value = candidate.partition(",")
        if version != "v1" or not value:
            continue
        signature = _base64(value)
        # compare_digest takes as long whatever the first differing byte: no timing oracle.
        if signature is not None and hmac.compare_digest(expected, signature):
            return
    raise WebhookVerificationError(
        "No signature matches: not signed with this secret, or the body was changed."
    )


def unwrap(
    body: bytes | str,
    headers: Mapping[str, str],
    secret: str,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: datetime | float | None = None,
) -> GenerationEvent:
    """verify, then the event the body holds (``id``, ``type``, ``created_at``, ``data``: the
    generation as it was). Deduplicate on the ``webhook-id`` header: a retried delivery repeats it."""
    verify(body, headers, secret, tolerance=tolerance, now=now)
    return GenerationEvent.model_validate_json(body)
