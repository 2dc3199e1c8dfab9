"""client.events(): the account's event stream (GET /v1/events), read against the real API with
Client and AsyncClient alike, behind a front that cuts it once."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Generator

import pytest

from generation_client import AccountEvent, Client, GenerationEvent

from .conftest import BehindFront, MakeClient, last_event_ids, resolve
from .relay import Rule

pytestmark = pytest.mark.anyio

STREAM = "GET /v1/events "


async def read_until(
    events: Generator[AccountEvent] | AsyncGenerator[AccountEvent],
    enough: Callable[[list[AccountEvent]], bool],
) -> list[AccountEvent]:
    """Reads the (endless) stream until ``enough``, then closes it."""
    seen: list[AccountEvent] = []
    if isinstance(events, Generator):
        for event in events:
            seen.append(event)
            if enough(seen):
                break
        events.close()
    else:
        async for event in events:
            seen.append(event)
            if enough(seen):
                break
        await events.aclose()
    return seen


def dumped(events: list[GenerationEvent]) -> list[dict[str, object]]:
    return [e.model_dump(mode="json") for e in events]


async def test_the_account_stream_gives_each_generation_in_order_resumes_after_a_cut_and_from_a_cursor(
    make_client: MakeClient,
    kind: str,
    api_key: str,
    base_url: str,
    behind_front: BehindFront,
) -> None:
    client, front = behind_front([Rule(STREAM, "cut-stream", after_events=2)])
    ids: list[str] = []

    def create_two() -> None:
        # Once the stream is open (from then on nothing is missed); a plain Client in both cases.
        if not ids:
            with Client(api_key, base_url=base_url) as creator:
                for n in (1, 2):
                    ids.append(
                        creator.generations.create(model="lumen-lite", prompt=f"{kind} account {n}").id
                    )

    def both_succeeded(seen: list[AccountEvent]) -> bool:
        done = {e.event.data.id for e in seen if e.event.type == "generation.succeeded"}
        return len(ids) == 2 and set(ids) <= done

    seen = await read_until(client.events(on_open=create_two), both_succeeded)

    # The account may have other generations still running: only these two are checked.
    for generation_id in ids:
        mine = [
            e.event for e in seen if isinstance(e.event, GenerationEvent) and e.event.data.id == generation_id
        ]
        assert [(e.id, e.type) for e in mine] == [
            (1, "generation.created"),
            (2, "generation.processing"),
            (3, "generation.succeeded"),
        ]
        log = await resolve(client.generations.event_log(generation_id))
        assert dumped(mine) == dumped(log)
    # The event's JSON as the API sent it; the item's JSON is the API's {cursor, event}.
    assert all(GenerationEvent.model_validate_json(item.raw) == item.event for item in seen)
    assert set(seen[0].model_dump()) == {"cursor", "event"}
    # Cut after two events, resumed after the second with its cursor: nothing lost, nothing twice.
    assert front.remaining() == [0]
    streams = front.lines(STREAM)
    assert len(streams) == 2
    first, resumed = last_event_ids(streams)
    assert first is not None  # "now", pinned before the first stream
    assert first.isdigit()
    assert resumed == seen[1].cursor
    cursors = [e.cursor for e in seen]
    assert len(set(cursors)) == len(cursors)
    assert all(cursors)

    # From a cursor: the events after it, as they came the first time.
    later = await read_until(
        make_client().events(last_event_id=seen[0].cursor), lambda got: len(got) == len(seen) - 1
    )
    assert [e.cursor for e in later] == cursors[1:]
