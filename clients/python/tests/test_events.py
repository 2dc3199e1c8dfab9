"""generations.events(): the Server-Sent Events stream of a generation, read against the real API
with Client and AsyncClient alike, directly and behind a front that cuts the stream."""

from __future__ import annotations

import pytest

from generation_client import GenerationEvent, NotFoundError

from .conftest import AnyClient, BehindFront, MakeClient, collect, last_event_ids, resolve
from .relay import Rule

pytestmark = pytest.mark.anyio


def summary(events: list[GenerationEvent]) -> list[tuple[int, str, str]]:
    return [(e.id, e.type, e.data.status) for e in events]


async def log_of(client: AnyClient, generation_id: str) -> list[GenerationEvent]:
    return await resolve(client.generations.event_log(generation_id))


async def test_the_events_of_a_generation_come_in_order_as_they_happen_and_end_after_the_terminal_one(
    make_client: MakeClient, kind: str
) -> None:
    client = make_client()
    # U+2028 is a line end for str.splitlines() but not for SSE, and JSON leaves it unescaped.
    prompt = f"a heron\u2028at dawn ({kind}) [sim:slow=2]"
    created = await resolve(client.generations.create(model="lumen-lite", prompt=prompt))

    events = await collect(client.generations.events(created.id))

    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert events[0].type == "generation.created"
    assert events[0].data.status == "queued"
    assert (events[-1].type, events[-1].data.status) == ("generation.succeeded", "succeeded")
    assert events[-1].data.output is not None
    assert {e.data.id for e in events} == {created.id}
    assert (events[0].data.input or {})["prompt"] == prompt
    # The stream ended by itself, and gave exactly the log.
    assert summary(events) == summary(await log_of(client, created.id))


async def test_last_event_id_starts_after_that_event_and_a_finished_log_read_to_its_end_is_empty(
    make_client: MakeClient,
) -> None:
    client = make_client()
    done = await resolve(client.generations.run(model="lumen-lite", prompt="a finished log"))
    log = await log_of(client, done.id)
    assert len(log) >= 3

    assert summary(await collect(client.generations.events(done.id))) == summary(log)
    after_first = await collect(client.generations.events(done.id, last_event_id=1))
    assert summary(after_first) == summary(log[1:])
    assert await collect(client.generations.events(done.id, last_event_id=log[-1].id)) == []


async def test_a_stream_cut_while_the_generation_runs_resumes_without_loss_or_repeat(
    make_client: MakeClient, behind_front: BehindFront
) -> None:
    client = make_client()
    created = await resolve(client.generations.create(model="lumen-lite", prompt="cut live [sim:slow=2]"))
    path = f"GET /v1/generations/{created.id}/events"
    behind, front = behind_front([Rule(path, "cut-stream", after_events=1)])

    events = await collect(behind.generations.events(created.id))

    assert front.remaining() == [0]  # the stream was cut after its first event
    assert summary(events) == summary(await log_of(client, created.id))
    assert events[-1].data.status == "succeeded"
    streams = front.lines(path)
    assert len(streams) == 2
    assert last_event_ids(streams) == [None, "1"]


async def test_a_stream_cut_in_the_middle_of_the_past_events_resumes_after_the_last_one_read(
    make_client: MakeClient, behind_front: BehindFront
) -> None:
    client = make_client()
    done = await resolve(client.generations.run(model="lumen-lite", prompt="cut in the log"))
    log = await log_of(client, done.id)
    path = f"GET /v1/generations/{done.id}/events"
    assert [e.type for e in log] == ["generation.created", "generation.processing", "generation.succeeded"]
    # The whole log comes in one write: the front cuts it after two events; the next stream is cut
    # right after the terminal event, which ends the iteration (nothing more was coming).
    rules = [Rule(path, "cut-stream", after_events=2), Rule(path, "cut-stream", after_events=1)]
    behind, front = behind_front(rules)

    events = await collect(behind.generations.events(done.id))

    assert front.remaining() == [0, 0]
    assert summary(events) == summary(log)
    assert last_event_ids(front.lines(path)) == [None, "2"]


async def test_an_unknown_generation_raises_not_found_without_retrying(make_client: MakeClient) -> None:
    retries: list[object] = []
    client = make_client(on_retry=retries.append)
    with pytest.raises(NotFoundError) as raised:
        await collect(client.generations.events("gen_doesnotexist0000"))
    assert (raised.value.status, raised.value.code) == (404, "not_found")
    assert retries == []
