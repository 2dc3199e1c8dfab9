"""Batches against the real API: a list and a JSONL file, results in input order, wait, cancel, and
every image downloaded into a folder per custom_id (a second download keeps what is there)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from generation_client import Batch, BatchWaitTimeoutError, InvalidRequestError, folder_of

from .conftest import MakeClient, collect, resolve

pytestmark = pytest.mark.anyio


def lines(n: int, prompt: str = "a batch line {i}") -> list[dict[str, str]]:
    tag = uuid.uuid4().hex[:6]
    return [
        {"custom_id": f"{tag}-{i}", "model": "lumen-pro", "prompt": prompt.format(i=i), "aspect_ratio": "1:1"}
        for i in range(n)
    ]


async def test_a_list_waited_for_its_results_in_order_and_downloaded_per_custom_id(
    make_client: MakeClient, tmp_path: Path
) -> None:
    client = make_client()
    requests = lines(3)
    requests[0]["custom_id"] = f"../{requests[0]['custom_id']}"
    created = await resolve(client.batches.create(requests, metadata={"run": "python"}))
    assert created.request_counts.total == 3
    assert created.metadata == {"run": "python"}
    updates: list[Batch] = []
    done = await resolve(client.batches.wait(created.id, poll_interval=0.1, on_update=updates.append))
    assert done.status == "completed"
    assert done.request_counts.succeeded == 3
    assert updates[-1] == done
    results = await collect(client.batches.results(created.id))
    assert [(r.line, r.custom_id) for r in results] == [(i, r["custom_id"]) for i, r in enumerate(requests)]
    assert all(r.generation and r.generation.batch_id == created.id for r in results)
    assert [r.line for r in await collect(client.batches.results(created.id, after=0))] == [1, 2]

    first = await resolve(client.batches.download(created.id, tmp_path))
    assert len(first.files) == 3
    assert sorted(os.listdir(tmp_path)) == sorted(folder_of(r["custom_id"]) for r in requests)
    assert all(f.path.parent.parent == tmp_path for f in first.files)  # none outside it
    written = {f.path: os.stat(f.path).st_mtime_ns for f in first.files}
    again = await resolve(client.batches.download(created.id, tmp_path))
    assert {f.path: os.stat(f.path).st_mtime_ns for f in again.files} == written


async def test_a_batch_s_own_events_end_with_it_and_resume_after_an_id(make_client: MakeClient) -> None:
    client = make_client()
    created = await resolve(client.batches.create(lines(2)))
    events = await collect(client.batches.events(created.id))
    assert (events[0].id, events[0].type) == (1, "batch.created")
    assert (events[-1].type, events[-1].data.status) == ("batch.completed", "completed")
    assert all(e.data.id == created.id for e in events)
    rest = await collect(client.batches.events(created.id, last_event_id=1))
    assert [e.id for e in rest] == [e.id for e in events[1:]]


async def test_a_jsonl_file_is_quoted_and_created_once_per_key_and_listed(
    make_client: MakeClient, tmp_path: Path
) -> None:
    client = make_client()
    file = tmp_path / "requests.jsonl"
    file.write_text("".join(json.dumps(line) + "\n" for line in lines(3)))
    quote = await resolve(client.batches.quote(jsonl=file))
    assert (quote.lines, quote.affordable) == (3, True)
    key = str(uuid.uuid4())
    created = await resolve(client.batches.create(jsonl=file, completion_window="2h", idempotency_key=key))
    replay = await resolve(client.batches.create(jsonl=file, completion_window="2h", idempotency_key=key))
    assert replay.id == created.id
    assert created.completion_window == "2h"
    listed = await collect(client.batches.list(limit=1))
    assert listed[0].id == created.id  # newest first
    assert len(listed) >= 2  # every page walked, one batch a page
    first = await resolve(client.batches.list(limit=1).first_page())
    assert [b.id for b in first.data] == [created.id]
    assert first.has_next_page()
    with pytest.raises(InvalidRequestError) as refused:
        await resolve(client.batches.create(jsonl=b'{"custom_id":"x","model":"lumen-pro"}\n'))
    assert "line 0" in json.dumps([i.model_dump() for i in refused.value.issues or []])
    await resolve(client.batches.wait(created, poll_interval=0.1))


async def test_cancel_ends_lines_not_started_uncharged_and_wait_times_out_cheaply(
    make_client: MakeClient,
) -> None:
    client = make_client()
    created = await resolve(client.batches.create(lines(6, "slow {i} [sim:slow=2]")))
    with pytest.raises(BatchWaitTimeoutError):
        await resolve(client.batches.wait(created.id, timeout=0.2, poll_interval=0.05))
    canceling = await resolve(client.batches.cancel(created.id))
    assert canceling.status in ("canceling", "canceled")
    done = await resolve(client.batches.wait(created.id, poll_interval=0.1))
    assert done.status == "canceled"
    assert done.request_counts.canceled > 0
    results = await collect(client.batches.results(created.id))
    assert len(results) == 6
    canceled = [r for r in results if r.error and r.error.code == "batch_canceled"]
    assert len(canceled) == done.request_counts.canceled
    assert all(r.generation is None for r in canceled)  # never started: no generation, no charge
