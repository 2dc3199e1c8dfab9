"""A batch's results lines, without a server: a read the server could not finish ends with the error
envelope on a line of its own, raised as that 503 (``results`` retries it after the last line read)."""

from __future__ import annotations

import json

import pytest

from generation_client import ServiceUnavailableError
from generation_client._batch_requests import parse_line


def test_a_results_line_and_the_line_that_ends_a_read_cut_short() -> None:
    line = parse_line(json.dumps({"line": 3, "custom_id": "a", "generation": None, "error": None}))
    assert line is not None
    assert (line.line, line.custom_id) == (3, "a")
    assert parse_line("  ") is None
    cut = {"error": {"code": "service_unavailable", "message": "this read stops after line 3"}}
    with pytest.raises(ServiceUnavailableError) as raised:
        parse_line(json.dumps(cut))
    assert (raised.value.status, raised.value.code) == (503, "service_unavailable")
    assert "after line 3" in str(raised.value)
