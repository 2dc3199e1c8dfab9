"""webhooks.verify / unwrap against the reference implementation of Standard Webhooks 1.0 (the
``standardwebhooks`` package): what it signs verifies here, what is signed by the service's own
signer (src/webhook-signing.ts, through the fixture the repository's test writes) verifies with both,
and both refuse the same bad deliveries: a rotated-out secret, a stale timestamp, a tampered body."""

from __future__ import annotations

import base64
import json
import os
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import standardwebhooks
import standardwebhooks.webhooks as reference_module

from generation_client import GenerationEvent, WebhookVerificationError, webhooks

from .conftest import MakeClient, resolve

T0 = datetime(2026, 11, 27, 3, 0, 0, tzinfo=timezone.utc)
BODY = json.dumps({"id": 3, "type": "generation.succeeded", "note": "bytes as sent: é, \u2028"})
Verify = Callable[[str | bytes, dict[str, str], str], Any]


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def signed(
    secret: str, body: str | bytes = BODY, at: datetime = T0, message_id: str = "msg_1"
) -> dict[str, str]:
    """Headers as a sender using the reference implementation makes them."""
    text = body if isinstance(body, str) else body.decode()
    signature = standardwebhooks.Webhook(secret).sign(message_id, at, text)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
    }


@pytest.fixture
def reference_at(monkeypatch: pytest.MonkeyPatch) -> Callable[[datetime], None]:
    """Sets the reference implementation's clock (it reads datetime.now, with no option)."""

    def freeze(moment: datetime) -> None:
        class Frozen(datetime):
            @classmethod
            def now(cls, tz: Any = None) -> Frozen:  # type: ignore[override]
                return cls.fromtimestamp(moment.timestamp(), tz)

        monkeypatch.setattr(reference_module, "datetime", Frozen)

    freeze(T0)
    return freeze


def ours(at: datetime = T0) -> Verify:
    return lambda body, headers, secret: webhooks.verify(body, headers, secret, now=at)


def reference(body: str | bytes, headers: dict[str, str], secret: str) -> Any:
    return standardwebhooks.Webhook(secret).verify(body, headers, json_parse=False)


REFERENCE_ERRORS = (standardwebhooks.WebhookVerificationError,)


def test_what_the_reference_signs_verifies_with_ours_as_bytes_or_text_whatever_the_header_case() -> None:
    secret = new_secret()
    headers = signed(secret)
    webhooks.verify(BODY, headers, secret, now=T0)
    webhooks.verify(BODY.encode(), headers, secret, now=T0)
    webhooks.verify(BODY, {k.title(): v for k, v in headers.items()}, secret, now=T0)
    # An unpadded secret, as the reference accepts it.
    webhooks.verify(BODY, headers, secret.rstrip("="), now=T0)


@pytest.mark.usefixtures("reference_at")
@pytest.mark.parametrize("check", [ours(), reference], ids=["ours", "reference"])
def test_both_refuse_a_tampered_body_another_secret_and_missing_headers(check: Verify) -> None:
    secret = new_secret()
    headers = signed(secret)
    check(BODY, headers, secret)  # the control: this one passes
    errors = (WebhookVerificationError, *REFERENCE_ERRORS)
    with pytest.raises(errors):
        check(BODY.replace("3", "4", 1), headers, secret)
    with pytest.raises(errors):
        check(BODY + " ", headers, secret)  # re-serialized JSON is another body
    with pytest.raises(errors):
        check(BODY, headers, new_secret())
    with pytest.raises(errors):
        check(BODY, {**headers, "webhook-id": "msg_2"}, secret)
    for missing in headers:
        with pytest.raises(errors):
            check(BODY, {k: v for k, v in headers.items() if k != missing}, secret)


@pytest.mark.parametrize("check_name", ["ours", "reference"])
@pytest.mark.parametrize(
    ("offset", "passes"),
    [
        (timedelta(minutes=-4, seconds=-59), True),
        (timedelta(minutes=-5, seconds=-1), False),
        (timedelta(minutes=4, seconds=59), True),
        (timedelta(minutes=5, seconds=1), False),
    ],
)
def test_a_timestamp_more_than_5_minutes_from_now_is_refused_by_both(
    check_name: str, offset: timedelta, passes: bool, reference_at: Callable[[datetime], None]
) -> None:
    secret = new_secret()
    headers = signed(secret, at=T0 + offset)
    reference_at(T0)
    check = ours(T0) if check_name == "ours" else reference
    if passes:
        check(BODY, headers, secret)
    else:
        with pytest.raises((WebhookVerificationError, *REFERENCE_ERRORS)):
            check(BODY, headers, secret)


@pytest.mark.usefixtures("reference_at")
@pytest.mark.parametrize("check", [ours(), reference], ids=["ours", "reference"])
def test_after_a_rotation_either_secret_verifies_a_delivery_signed_with_both(check: Verify) -> None:
    previous, current = new_secret(), new_secret()
    headers = signed(current)
    headers["webhook-signature"] = f"{signed(previous)['webhook-signature']} {headers['webhook-signature']}"
    check(BODY, headers, previous)
    check(BODY, headers, current)
    with pytest.raises((WebhookVerificationError, *REFERENCE_ERRORS)):
        check(BODY, headers, new_secret())
    # Once the previous secret stops signing, a receiver still holding it refuses the delivery.
    only_current = signed(current)
    with pytest.raises((WebhookVerificationError, *REFERENCE_ERRORS)):
        check(BODY, only_current, previous)


def test_a_malformed_secret_is_a_value_error_not_a_bad_delivery() -> None:
    with pytest.raises(ValueError, match="whsec_"):
        webhooks.verify(BODY, signed(new_secret()), "whsec_not base64!", now=T0)
    assert not issubclass(WebhookVerificationError, ValueError)


def test_unsupported_versions_and_garbage_signatures_are_skipped_not_crashed_on() -> None:
    secret = new_secret()
    headers = signed(secret)
    headers["webhook-signature"] = f"v1a,abc v1,!!! v1, {headers['webhook-signature']}"
    webhooks.verify(BODY, headers, secret, now=T0)
    headers["webhook-signature"] = "v2,abc v1,!!!"
    with pytest.raises(WebhookVerificationError, match="No signature matches"):
        webhooks.verify(BODY, headers, secret, now=T0)


def service_fixtures() -> list[dict[str, Any]]:
    path = os.environ.get("GENERATION_WEBHOOK_FIXTURES")
    if not path:
        pytest.skip("GENERATION_WEBHOOK_FIXTURES is not set: the repository's test writes it")
    return list(json.loads(Path(path).read_text()))


@pytest.mark.parametrize("name", ["one secret", "rotated"])
def test_deliveries_signed_by_the_service_verify_with_ours_and_the_reference(
    name: str, reference_at: Callable[[datetime], None]
) -> None:
    [case] = [c for c in service_fixtures() if c["name"] == name]
    at = datetime.fromtimestamp(int(case["headers"]["webhook-timestamp"]), timezone.utc)
    reference_at(at)
    for secret in case["secrets"]:
        event = webhooks.unwrap(case["body"], case["headers"], secret, now=at)
        assert event.data.id == json.loads(case["body"])["data"]["id"]
        assert reference(case["body"], case["headers"], secret) is None
    generation_id = json.loads(case["body"])["data"]["id"]
    # Another generation's id, and the same JSON re-serialized with a space: other bytes, refused.
    for tampered in (case["body"].replace(generation_id, generation_id[:-1] + "X"), case["body"][:-1] + " }"):
        assert tampered != case["body"]
        with pytest.raises(WebhookVerificationError):
            webhooks.verify(tampered, case["headers"], case["secrets"][0], now=at)
        with pytest.raises(REFERENCE_ERRORS):
            reference(tampered, case["headers"], case["secrets"][0])


@pytest.mark.anyio
async def test_unwrap_gives_the_event_signed_with_the_accounts_secret(make_client: MakeClient) -> None:
    client = make_client()
    assert client.webhooks.verify is webhooks.verify
    done = await resolve(client.generations.run(model="lumen-lite", prompt="a signed event"))
    event = (await resolve(client.generations.event_log(done.id)))[-1]
    secret = (await resolve(client.webhooks.secret())).secret
    assert secret.startswith("whsec_")
    body = event.model_dump_json().encode()
    now = datetime.now(timezone.utc)
    headers = signed(secret, body, at=now, message_id=f"{done.id}_{event.id}")

    unwrapped = client.webhooks.unwrap(body, headers, secret)

    assert isinstance(unwrapped, GenerationEvent)
    assert (unwrapped.id, unwrapped.type, unwrapped.data.id) == (event.id, "generation.succeeded", done.id)
    with pytest.raises(WebhookVerificationError):
        client.webhooks.unwrap(body, headers, secret, now=now + timedelta(minutes=6))
