"""wait() on the event stream: a deadline longer than one held request (50 s) reads the generation's
event stream, one connection for the whole wait, as the TypeScript client's wait() does; an API
without the stream, or a stream that drops and cannot be resumed, gets held GETs for the time left;
the deadline ends a wait on the stream even while its read waits for the next keep-alive. Against
the real API, behind a front that counts (and breaks) requests, with Client and AsyncClient alike."""

from __future__ import annotations

import time

import pytest

from generation_client import Generation, WaitTimeoutError

from .conftest import BehindFront, MakeClient, last_event_ids, resolve
from .relay import Rule, Seen

pytestmark = pytest.mark.anyio


def held(requests: list[Seen]) -> list[Seen]:
    return [r for r in requests if "\r\nprefer: wait=" in r.head]


async def test_a_wait_longer_than_one_held_request_reads_the_event_stream_and_no_held_gets(
    make_client: MakeClient, behind_front: BehindFront, kind: str
) -> None:
    client = make_client()
    behind, front = behind_front([])
    created = await resolve(
        client.generations.create(model="lumen-lite", prompt=f"streamed ({kind}) [sim:slow=2]")
    )
    updates: list[Generation] = []

    done = await resolve(behind.generations.wait(created.id, timeout=120, on_update=updates.append))

    assert (done.id, done.status) == (created.id, "succeeded")
    assert done == await resolve(client.generations.get(created.id))
    # Each visible change once: created, handed to its provider (the provider field), succeeded.
    assert [(g.status, g.provider) for g in updates] == [
        ("queued", None),
        ("queued", "simulated"),
        ("succeeded", "simulated"),
    ]
    streams = front.lines(f"GET /v1/generations/{created.id}/events ")
    assert len(streams) == 1
    assert "\r\naccept: text/event-stream" in streams[0].head
    assert front.lines(f"GET /v1/generations/{created.id} ") == []

    # A short wait is held GETs: no stream for it.
    quick = await resolve(client.generations.create(model="lumen-lite", prompt="held"))
    assert (await resolve(behind.generations.wait(quick.id, timeout=30))).status == "succeeded"
    assert front.lines(f"GET /v1/generations/{quick.id}/events") == []
    assert len(held(front.lines(f"GET /v1/generations/{quick.id} "))) >= 1


async def test_an_api_without_the_stream_gets_held_gets(
    make_client: MakeClient, behind_front: BehindFront
) -> None:
    client = make_client()
    created = await resolve(client.generations.create(model="lumen-lite", prompt="fallback [sim:slow=2]"))
    events = f"GET /v1/generations/{created.id}/events"
    behind, front = behind_front([Rule(events, "answer", status=404)])

    done = await resolve(behind.generations.wait(created.id, timeout=120))

    assert done.status == "succeeded"
    assert front.remaining() == [0]
    assert len(front.lines(events)) == 1
    gets = front.lines(f"GET /v1/generations/{created.id} ")
    assert len(gets) >= 1
    assert held(gets) == gets


async def test_a_stream_that_drops_and_cannot_be_resumed_falls_back_to_held_gets(
    make_client: MakeClient, behind_front: BehindFront
) -> None:
    client = make_client()
    created = await resolve(client.generations.create(model="lumen-lite", prompt="dropped [sim:slow=3]"))
    events = f"GET /v1/generations/{created.id}/events"
    # Cut after the first event; the resumption is refused (503) past the client's one retry.
    rules = [Rule(events, "cut-stream", after_events=1), Rule(events, "answer", status=503, times=5)]
    behind, front = behind_front(rules, max_retries=1)
    updates: list[Generation] = []

    done = await resolve(behind.generations.wait(created.id, timeout=120, on_update=updates.append))

    assert done.status == "succeeded"
    assert front.remaining() == [0, 4]
    assert last_event_ids(front.lines(events)) == [None, "1"]
    gets = front.lines(f"GET /v1/generations/{created.id} ")
    assert len(gets) >= 1
    assert held(gets) == gets
    # The stream's first state was reported, then the held GETs took over: each change once.
    assert updates[0].status == "queued"
    assert updates[-1].status == "succeeded"
    assert len({u.model_dump_json() for u in updates}) == len(updates)


async def test_the_deadline_ends_a_wait_on_the_stream_while_its_read_waits(
    make_client: MakeClient, behind_front: BehindFront
) -> None:
    client = make_client()
    behind, front = behind_front([])
    created = await resolve(client.generations.create(model="lumen-lite", prompt="late [sim:slow=4]"))
    started = time.monotonic()

    # The past events come at once; then each read waits for the next event or keep-alive (this
    # stack sends one every 250 ms, so no read ever times out by itself): the deadline must cut it.
    with pytest.raises(WaitTimeoutError) as raised:
        await resolve(behind.generations.wait(created.id, timeout=1.0, use_events=True))

    assert 0.9 <= time.monotonic() - started < 3
    error = raised.value
    assert error.generation is not None
    assert (error.generation.id, error.generation.status) == (created.id, "queued")
    assert len(front.lines(f"GET /v1/generations/{created.id}/events ")) == 1
    assert front.lines(f"GET /v1/generations/{created.id} ") == []
    # The generation goes on: waiting again picks it up.
    assert (await resolve(client.generations.wait(created.id, use_events=True))).status == "succeeded"
