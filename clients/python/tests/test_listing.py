"""Lists, the catalog, quotes, cancels and finding a generation by its key, against the real API."""

from __future__ import annotations

import math
import uuid

import pytest

from generation_client import NotFoundError, price_of

from .conftest import MakeClient, collect, resolve, stack_env

pytestmark = pytest.mark.anyio
SEEDED = 250


async def test_pagination_over_250_generations_yields_each_once_newest_first(make_client: MakeClient) -> None:
    client = make_client(api_key=stack_env("GENERATION_PAGING_API_KEY"))
    generations = await collect(client.generations.list(limit=37))
    ids = [g.id for g in generations]
    assert len(ids) == SEEDED
    assert len(set(ids)) == SEEDED
    stamps = [g.created_at for g in generations]
    assert stamps == sorted(stamps, reverse=True)
    pages = await collect(client.generations.list(limit=37).pages())
    assert len(pages) == math.ceil(SEEDED / 37)
    assert [g.id for p in pages for g in p.data] == ids
    assert not pages[-1].has_next_page()


async def test_the_status_filter(make_client: MakeClient) -> None:
    client = make_client(api_key=stack_env("GENERATION_PAGING_API_KEY"))
    rejected = await collect(client.generations.list(status="rejected", limit=100))
    assert rejected
    assert all(g.status == "rejected" for g in rejected)
    assert await collect(client.generations.list(status=["queued", "failed"])) == []


async def test_models_credits_and_a_quote_agree(make_client: MakeClient) -> None:
    client = make_client()
    models = await resolve(client.models.list())
    assert "lumen-pro" in [m.id for m in models]
    pro = await resolve(client.models.get("lumen-pro"))
    assert price_of(pro, {}) == pro.default_price
    with pytest.raises(NotFoundError):
        await resolve(client.models.get("no-such-model"))
    quote = await resolve(client.generations.quote(model="lumen-pro", prompt="x", resolution="2K"))
    assert quote.model == "lumen-pro"
    assert quote.affordable
    assert quote.credits == price_of(pro, {"resolution": "2K"})
    balance = await resolve(client.credits.get())
    assert quote.balance.total == balance.credits


async def test_cancel_refunds_a_queued_generation(make_client: MakeClient) -> None:
    client = make_client()
    created = await resolve(client.generations.create(model="lumen-lite", prompt="cancel me [sim:queued=20]"))
    canceled = await resolve(client.generations.cancel(created.id))
    assert (canceled.id, canceled.status, canceled.credits_refunded) == (created.id, "failed", True)
    assert canceled.error is not None
    assert canceled.error.code == "canceled"


async def test_find_by_idempotency_key(make_client: MakeClient) -> None:
    client = make_client()
    key = f"find-me-{uuid.uuid4()}"
    created = await resolve(
        client.generations.create(model="lumen-lite", prompt="find me", idempotency_key=key)
    )
    found = await resolve(client.generations.find_by_idempotency_key(key))
    assert found is not None
    assert found.id == created.id
    assert await resolve(client.generations.find_by_idempotency_key(f"never-used-{uuid.uuid4()}")) is None
