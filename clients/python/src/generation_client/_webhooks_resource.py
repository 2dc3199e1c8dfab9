"""client.webhooks (sync and async): the account's webhook signing secret, and ``verify`` / ``unwrap``
of a delivery, which are the public ``generation_client.webhooks`` module's (they read no network)."""

from __future__ import annotations

from ._core import Request
from ._http import AsyncHttp, SyncHttp
from ._steps import fetch
from .types import WebhookSecret
from .webhooks import unwrap, verify

_WEBHOOK_SECRET = Request("GET", "/webhooks/secret")
_ROTATE_WEBHOOK_SECRET = Request("POST", "/webhooks/secret/rotate")


class Webhooks:
    """The webhook signing secret: ``secret()`` (made on first read), ``rotate_secret()``; and
    ``verify`` / ``unwrap`` of a delivery (no request: also ``generation_client.webhooks``)."""

    verify = staticmethod(verify)
    unwrap = staticmethod(unwrap)

    def __init__(self, http: SyncHttp) -> None:
        self._http = http

    def secret(self) -> WebhookSecret:
        return self._http.run(fetch(_WEBHOOK_SECRET, WebhookSecret.model_validate))

    def rotate_secret(self) -> WebhookSecret:
        return self._http.run(fetch(_ROTATE_WEBHOOK_SECRET, WebhookSecret.model_validate))


class AsyncWebhooks:
    #: Not coroutines: verifying reads no network.
    verify = staticmethod(verify)
    unwrap = staticmethod(unwrap)

    def __init__(self, http: AsyncHttp) -> None:
        self._http = http

    async def secret(self) -> WebhookSecret:
        return await self._http.run(fetch(_WEBHOOK_SECRET, WebhookSecret.model_validate))

    async def rotate_secret(self) -> WebhookSecret:
        return await self._http.run(fetch(_ROTATE_WEBHOOK_SECRET, WebhookSecret.model_validate))
