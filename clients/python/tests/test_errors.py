"""One error class per error code of the API, read from the committed OpenAPI document (kept equal
to the live GET /v1/openapi.json by the repository's test/clients/python-client.test.ts): a code the
API adds fails here until ``ERROR_CLASSES`` has its class. That the names and parents match the
TypeScript client's is checked by test/client/error-classes.test.ts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

import pytest

from generation_client import ERROR_CLASSES, RateLimitError
from generation_client.errors import api_error_for

DOCUMENT: dict[str, Any] = json.loads((Path(__file__).parent.parent / "openapi.json").read_text())
CODES: list[str] = DOCUMENT["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"][
    "enum"
]


def _documented_statuses() -> dict[str, int]:
    """The status each code is answered with, where an operation's responses name it
    (a response's description lists its codes as "`code`: ...")."""
    found: dict[str, int] = {}

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in cast("dict[str, object]", node).items():
                if key == "responses":
                    for status, response in cast("dict[str, dict[str, object]]", value).items():
                        for code in re.findall(r"`([a-z_]+)`:", str(response.get("description", ""))):
                            found[code] = int(status)
                walk(value)
        elif isinstance(node, list):
            for item in cast("list[object]", node):
                walk(item)

    walk(DOCUMENT["paths"])
    return found


STATUSES = _documented_statuses()


def test_the_document_lists_the_codes() -> None:
    # A misread document would make the per-code test below check nothing.
    assert len(CODES) >= 20
    assert {"invalid_request", "stream_limit_exceeded", "internal_error"} <= set(CODES)
    assert STATUSES["stream_limit_exceeded"] == 429


@pytest.mark.parametrize("code", CODES)
def test_each_code_has_a_class_of_its_own_carrying_the_ids(code: str) -> None:
    assert code in ERROR_CLASSES, f"the Python client has no error class for {code}"
    status = STATUSES.get(code, 400)
    error = api_error_for(status=status, code=code, message="m", request_id="gen_req", idempotency_key="k-1")
    assert type(error) is ERROR_CLASSES[code]
    assert (error.code, error.request_id, error.idempotency_key) == (code, "gen_req", "k-1")
    if code in STATUSES:
        # Within its status family: an existing `except RateLimitError:` still catches it.
        family = type(api_error_for(status=status, code="a_code_this_client_does_not_know", message="m"))
        assert isinstance(error, family)


def test_no_two_codes_share_a_class_and_no_class_for_a_code_the_api_lacks() -> None:
    assert sorted(ERROR_CLASSES) == sorted(CODES)
    assert len(set(ERROR_CLASSES.values())) == len(CODES)


def test_a_new_limit_code_is_still_a_rate_limit() -> None:
    error = api_error_for(status=429, code="stream_limit_exceeded", message="m", retry_after=3.0)
    with pytest.raises(RateLimitError) as raised:
        raise error
    assert type(raised.value).__name__ == "StreamLimitError"
    assert raised.value.retry_after == 3.0
