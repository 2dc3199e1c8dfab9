"""The one-line run and its files, waiting with a deadline, errors, keys and configuration, against
the real API, with Client and AsyncClient alike."""

from __future__ import annotations

import os
import struct
import time
import uuid
from pathlib import Path

import pytest

from generation_client import (
    AuthenticationError,
    DownloadError,
    GenerationFailedError,
    IdempotencyConflictError,
    MissingApiKeyError,
    WaitTimeoutError,
)

from .conftest import MakeClient, resolve

pytestmark = pytest.mark.anyio


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (the first after the 8-byte signature)."""
    with path.open("rb") as file:
        head = file.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert head[12:16] == b"IHDR", f"{path} has no IHDR first"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


async def test_run_returns_the_succeeded_generation_and_download_streams_its_png(
    make_client: MakeClient, tmp_path: Path
) -> None:
    client = make_client()
    seen: list[str] = []
    done = await resolve(
        client.generations.run(
            model="lumen-pro",
            prompt="a red kite",
            aspect_ratio="16:9",
            on_update=lambda g: seen.append(g.status),
        )
    )
    assert (done.status, done.model, done.credits) == ("succeeded", "lumen-pro", 4)
    assert seen[0] == "queued"
    assert seen[-1] == "succeeded"
    uuid.UUID(done.idempotency_key)
    assert "idempotency_key" not in done.model_dump()  # the JSON is the API's

    saved = await resolve(client.download(done, tmp_path / "out"))
    assert len(saved) == 1
    assert (saved[0].width, saved[0].height) == (1024, 576)
    assert saved[0].path.stat().st_size == saved[0].size > 0
    assert png_size(saved[0].path) == (1024, 576)
    with pytest.raises(DownloadError):  # never overwritten
        await resolve(client.download(done, tmp_path / "out"))


async def test_a_failed_generation_raises_with_its_code_refund_and_key(make_client: MakeClient) -> None:
    client = make_client()
    with pytest.raises(GenerationFailedError) as raised:
        await resolve(client.generations.run(model="lumen-lite", prompt="this one breaks [sim:fail]"))
    error = raised.value
    assert (error.code, error.credits_refunded, error.credits) == ("generation_failed", True, 2)
    assert error.generation_id.startswith("gen_")
    assert error.idempotency_key is not None


async def test_wait_past_its_deadline_raises_a_timeout_carrying_the_generation(
    make_client: MakeClient,
) -> None:
    client = make_client()
    created = await resolve(client.generations.create(model="lumen-lite", prompt="slowly [sim:slow=3]"))
    started = time.monotonic()
    with pytest.raises(WaitTimeoutError) as raised:
        await resolve(client.generations.wait(created.id, timeout=1.5))
    assert 1.4 <= time.monotonic() - started < 6
    error = raised.value
    assert error.generation_id == created.id
    assert error.generation is not None
    assert (error.generation.id, error.generation.status) == (created.id, "queued")
    # The generation goes on: waiting again from just the id picks it up.
    done = await resolve(client.generations.wait(created.id, timeout=30))
    assert done.status == "succeeded"


async def test_a_bad_key_raises_the_authentication_error(make_client: MakeClient) -> None:
    client = make_client(api_key="gsk_live_" + "x" * 32)
    with pytest.raises(AuthenticationError) as raised:
        await resolve(client.credits.get())
    assert (raised.value.status, raised.value.code) == (401, "unauthorized")
    with pytest.raises(AuthenticationError) as on_create:
        await resolve(client.generations.create(model="lumen-lite", prompt="x", idempotency_key="bad-key"))
    assert on_create.value.idempotency_key == "bad-key"


async def test_one_key_per_create_never_reused_across_calls_and_a_replay_is_the_same_generation(
    make_client: MakeClient, kind: str
) -> None:
    client = make_client()
    body = {"model": "lumen-lite", "prompt": f"keys {kind}"}
    first = await resolve(client.generations.create(body))
    second = await resolve(client.generations.create(body))
    assert first.idempotency_key != second.idempotency_key
    assert first.id != second.id
    replay = await resolve(client.generations.create(body, idempotency_key=first.idempotency_key))
    assert replay.id == first.id
    with pytest.raises(IdempotencyConflictError):
        await resolve(
            client.generations.create(
                model="lumen-lite", prompt="another body", idempotency_key=first.idempotency_key
            )
        )


async def test_cancel_after_is_sent_as_the_header_and_shown_as_the_deadline(
    make_client: MakeClient, kind: str
) -> None:
    client = make_client()
    body = {"model": "lumen-lite", "prompt": f"deadline {kind}"}
    created = await resolve(client.generations.create(body, cancel_after="1m"))
    assert created.cancel_after is not None
    assert (created.cancel_after - created.created_at).total_seconds() == 60
    # Part of the request: the same key with another deadline is another request.
    with pytest.raises(IdempotencyConflictError):
        await resolve(
            client.generations.create(body, idempotency_key=created.idempotency_key, cancel_after=90)
        )
    assert (await resolve(client.generations.create(body))).cancel_after is None


async def test_configuration_comes_from_the_environment(
    kind: str, api_key: str, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from generation_client import AsyncClient, Client

    monkeypatch.setenv("GENERATION_API_KEY", api_key)
    monkeypatch.setenv("GENERATION_BASE_URL", base_url + "/")
    client = Client() if kind == "sync" else AsyncClient()
    assert client.base_url == base_url
    balance = await resolve(client.credits.get())
    assert balance.credits == balance.one_time_credits + balance.subscription_credits
    await resolve(client.close())
    monkeypatch.delenv("GENERATION_API_KEY")
    with pytest.raises(MissingApiKeyError):
        Client() if kind == "sync" else AsyncClient()


def test_the_package_under_test_is_the_installed_wheel() -> None:
    import generation_client

    if os.environ.get("GENERATION_CLIENT_FROM_WHEEL") != "1":
        pytest.skip("run from the source tree")
    location = Path(generation_client.__file__)
    assert "site-packages" in location.parts, location
