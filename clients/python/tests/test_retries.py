"""Retries against the real API behind a faulty front: one Idempotency-Key per create, the same on
every attempt, so a lost answer or a 5xx never makes or charges a second generation."""

from __future__ import annotations

import socket

import pytest

from generation_client import (
    ConnectionError,
    InvalidRequestError,
    RateLimitError,
    RequestTimeoutError,
    RetryEvent,
)

from .conftest import AnyClient, BehindFront, MakeClient, header_of, resolve
from .relay import FaultyFront, Rule

pytestmark = pytest.mark.anyio
CREATE = "POST /v1/generations "


def behind(behind_front: BehindFront, rules: list[Rule]) -> tuple[AnyClient, FaultyFront, list[RetryEvent]]:
    """A client behind a front with ``rules``, and the retries it reports."""
    retries: list[RetryEvent] = []
    client, front = behind_front(rules, on_retry=retries.append)
    return client, front, retries


async def newest_ids(client: AnyClient) -> set[str]:
    page = await resolve(client.generations.list(limit=100).first_page())
    return {g.id for g in page.data}


async def test_a_lost_answer_is_retried_with_the_same_key_one_generation_one_debit(
    behind_front: BehindFront,
) -> None:
    client, front, retries = behind(behind_front, [Rule(CREATE, "drop-answer")])
    body = {"model": "lumen-lite", "prompt": "a lighthouse, answer lost"}
    price = (await resolve(client.generations.quote(body))).credits
    balance = (await resolve(client.credits.get())).credits
    before = await newest_ids(client)

    done = await resolve(client.generations.run(body))

    assert front.remaining() == [0]  # the answer was dropped after the API processed the POST
    assert len(retries) == 1
    assert isinstance(retries[0].error, ConnectionError)
    assert not isinstance(retries[0].error, RequestTimeoutError)  # the cut was heard, not waited out
    posts = front.lines(CREATE)
    assert len(posts) == 2
    assert [header_of(p.head, "idempotency-key") for p in posts] == [done.idempotency_key] * 2
    assert retries[0].idempotency_key == done.idempotency_key
    assert done.status == "succeeded"
    assert await newest_ids(client) - before == {done.id}  # one generation
    assert (await resolve(client.credits.get())).credits == balance - price  # one debit
    found = await resolve(client.generations.find_by_idempotency_key(done.idempotency_key))
    assert found is not None
    assert found.id == done.id


async def test_5xx_and_429_are_retried_with_backoff_honouring_retry_after(behind_front: BehindFront) -> None:
    rules = [Rule(CREATE, "answer", 503), Rule(CREATE, "answer", 429, {"retry-after": "1"})]
    client, front, retries = behind(behind_front, rules)
    before = await newest_ids(client)

    created = await resolve(client.generations.create(model="lumen-lite", prompt="after a 503 and a 429"))

    assert [r.status for r in retries] == [503, 429]
    assert 0 <= retries[0].delay < 0.5  # full jitter under 0.5 s x 2^0
    assert retries[1].delay == 1.0  # the server's Retry-After
    posts = front.lines(CREATE)
    assert len(posts) == 3
    assert posts[2].at - posts[1].at >= 0.95
    assert {header_of(p.head, "idempotency-key") for p in posts} == {created.idempotency_key}
    assert await newest_ids(client) - before == {created.id}


async def test_a_retry_after_beyond_60_s_is_raised_at_once(behind_front: BehindFront) -> None:
    rules = [Rule(CREATE, "answer", 429, {"retry-after": "120"})]
    client, front, retries = behind(behind_front, rules)
    with pytest.raises(RateLimitError) as raised:
        await resolve(client.generations.create(model="lumen-lite", prompt="too long to wait"))
    assert (raised.value.status, raised.value.code, raised.value.retry_after) == (429, "rate_limited", 120.0)
    assert raised.value.idempotency_key is not None
    assert retries == []
    assert len(front.requests) == 1


async def test_a_400_is_not_retried(behind_front: BehindFront, kind: str) -> None:
    client, front, retries = behind(behind_front, [])
    key = f"py-400-{kind}"
    with pytest.raises(InvalidRequestError) as raised:
        await resolve(
            client.generations.create(
                model="lumen-lite", prompt="x", quality="cinematic", idempotency_key=key
            )
        )
    error = raised.value
    assert (error.status, error.code, error.idempotency_key) == (400, "invalid_request", key)
    assert [i.field for i in error.issues or []] == ["quality"]
    assert (error.request_id or "").startswith("gen_")
    assert retries == []
    assert len(front.lines(CREATE)) == 1


async def test_network_errors_are_retried_then_raised_with_the_key(make_client: MakeClient) -> None:
    retries: list[RetryEvent] = []
    client = make_client(
        base_url=f"http://127.0.0.1:{unused_port()}/v1", max_retries=2, on_retry=retries.append
    )
    with pytest.raises(ConnectionError) as raised:
        await resolve(client.generations.create(model="lumen-lite", prompt="nobody home"))
    assert len(retries) == 2
    assert {r.idempotency_key for r in retries} == {raised.value.idempotency_key}
    assert retries[0].delay < 0.5
    assert retries[1].delay < 1.0


def unused_port() -> int:
    """A loopback port that was free a moment ago, with nothing listening on it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
