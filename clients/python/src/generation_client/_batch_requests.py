"""What the sync and async batches resources share: the requests they send, the results file's lines,
the pause between reads, and the folder each line's files go to (their steps: ``_batch_steps``)."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

from pydantic import BaseModel

from ._core import Request
from ._download import SavedFile
from .errors import api_error_for
from .types import BatchResultLine

#: A JSONL body: a file's path (read as it is sent, opened again for each retry) or its bytes.
Jsonl = str | os.PathLike[str] | bytes
#: Request lines: mappings or models, each with its ``custom_id``.
Lines = Sequence[Mapping[str, Any] | BaseModel]

LONGEST_PAUSE = 30.0


def _line(line: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
    return line.model_dump(mode="json", exclude_unset=True) if isinstance(line, BaseModel) else dict(line)


def _upload(jsonl: Jsonl) -> bytes | Path:
    """The bytes, or the file (the driver reads it as it is sent, afresh for each attempt)."""
    if isinstance(jsonl, bytes):
        return jsonl
    path = Path(jsonl)
    if not path.is_file():
        raise FileNotFoundError(f"No JSONL file at {path}")
    return path


def batch_request(
    path: str,
    requests: Lines | None,
    jsonl: Jsonl | None,
    completion_window: str | None,
    metadata: Mapping[str, str] | None,
    *,
    idempotency_key: str | None = None,
    webhook: Mapping[str, Any] | None = None,
) -> Request:
    """POST /v1/batches (or /batches/quote): JSON ``requests``, or JSONL with the envelope in the query."""
    if requests is not None and jsonl is None:
        body: dict[str, Any] = {"requests": [_line(line) for line in requests]}
        if completion_window is not None:
            body["completion_window"] = completion_window
        if metadata is not None:
            body["metadata"] = dict(metadata)
        if webhook is not None:
            body["webhook"] = dict(webhook)
        return Request("POST", path, body=body, idempotency_key=idempotency_key)
    if jsonl is None or requests is not None:
        raise TypeError("batches: pass either requests= or jsonl=")
    query = {
        "completion_window": completion_window,
        "metadata": None if metadata is None else json.dumps(dict(metadata)),
        "webhook": None if webhook is None else json.dumps(dict(webhook)),
    }
    return Request(
        "POST",
        path,
        query=query,
        idempotency_key=idempotency_key,
        upload=_upload(jsonl),
    )


def batch_path(batch_id: str) -> str:
    return f"/batches/{quote(batch_id, safe='')}"


def list_request(limit: int | None, cursor: str | None) -> Request:
    query: Mapping[str, str | int | None] = {"limit": limit, "cursor": cursor}
    return Request("GET", "/batches", query=query)


def results_request(batch_id: str, after: int) -> Request:
    return Request(
        "GET",
        f"{batch_path(batch_id)}/results",
        query={"after": after if after >= 0 else None},
        headers={"accept": "application/x-ndjson"},
    )


def parse_line(text: str) -> BatchResultLine | None:
    """One line of the results; a read the server could not finish ends with the error envelope on a
    line of its own (``{"error": {"code": "service_unavailable", "message"}}``): raised as that 503,
    which ``results`` retries after the last line read."""
    text = text.strip()
    if not text:
        return None
    value: Any = json.loads(text)
    if isinstance(value, dict) and "line" not in value:
        error: Any = cast(dict[str, Any], value).get("error")
        if isinstance(error, dict):
            fields = cast(dict[str, Any], error)
            raise api_error_for(
                status=503,
                code=str(fields.get("code", "service_unavailable")),
                message=str(fields.get("message", "The results read was cut short.")),
                body=value,
            )
    return BatchResultLine.model_validate(value)


def next_pause(pause: float, first: float, changed: bool) -> float:
    """The pause before the next read: the first again after a change, else longer (up to 30 s)."""
    return first if changed else min(LONGEST_PAUSE, max(pause * 1.5, 0.1))


def jittered(pause: float) -> float:
    return pause * (1 + random.random() / 4)


def folder_of(custom_id: str) -> str:
    """A line's folder: its custom_id, percent-encoded where it is not a plain file name (``/``, ``\\``,
    ``%``, ``:``…), so that no custom_id leaves the download folder or names another's folder."""
    if custom_id in (".", ".."):
        return custom_id.replace(".", "%2E")
    return quote(custom_id, safe=" ")


@dataclass
class BatchDownload:
    """What ``batches.download`` did: the batch as it ended, each line seen once, the files written or
    already there, and the lines that ended without files (failed, rejected, refused, canceled, expired)."""

    batch_id: str
    lines: int = 0
    files: list[SavedFile] = field(default_factory=lambda: [])
    without_files: list[BatchResultLine] = field(default_factory=lambda: [])


@dataclass
class Seen:
    """Lines end out of order: every line up to ``read`` has been seen, later ones are in ``lines``."""

    read: int = -1
    lines: set[int] = field(default_factory=lambda: set[int]())

    def add(self, line: int) -> None:
        self.lines.add(line)
        while self.read + 1 in self.lines:
            self.read += 1
