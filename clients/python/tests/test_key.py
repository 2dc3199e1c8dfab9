"""The key in use (GET /v1/key) and its own rules, against the real API: the paging account's key
is limited by the test that starts the stack (0 credits a day, lumen-lite only)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from generation_client import KeyModelNotAllowedError, PermissionDeniedError

from .conftest import MakeClient, resolve, stack_env

pytestmark = pytest.mark.anyio


async def test_key_get_tells_the_rules_and_the_refusals_say_them(make_client: MakeClient) -> None:
    client = make_client(api_key=stack_env("GENERATION_PAGING_API_KEY"))
    key = await resolve(client.key.get())
    assert (key.spend_limit, key.limit_reset, key.limit_remaining) == (0, "daily", 0)
    assert key.models == ["lumen-lite"]
    assert key.access == "full"
    assert key.resets_at is not None
    assert (key.resets_at.hour, key.resets_at.minute, key.resets_at.utcoffset()) == (0, 0, timedelta(0))
    quote = await resolve(client.generations.quote({"model": "lumen-lite", "prompt": "x"}))
    assert (quote.affordable, quote.limited_by) == (False, "key_spend_limit")
    assert quote.key_limit is not None
    assert quote.key_limit.limit_remaining == 0
    with pytest.raises(KeyModelNotAllowedError) as refused:
        await resolve(client.generations.create({"model": "lumen-pro", "prompt": "x"}))
    assert isinstance(refused.value, PermissionDeniedError)
    assert refused.value.code == "key_model_not_allowed"


async def test_an_unlimited_key(make_client: MakeClient) -> None:
    key = await resolve(make_client().key.get())
    assert (key.spend_limit, key.limit_remaining, key.models, key.access) == (None, None, None, "full")
