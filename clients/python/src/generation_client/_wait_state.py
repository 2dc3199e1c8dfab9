"""The decisions of one wait (``generations.wait()``), shared by its loops: the held GETs'
(``_waiting``) and the event stream's (``_event_waiting``), for both clients, so that they cannot
drift apart. Its own module: both loops import it, and neither imports the other's state.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from urllib.parse import quote

from ._core import Request, Response
from .errors import WaitTimeoutError
from .retry_policy import parse_retry_after
from .types import Generation

#: The longest a held request asks for: with its margin, no connection stays open past 60 s.
MAX_HOLD_SECONDS = 50
_HOLD_MARGIN = 10.0
DEFAULT_WAIT_TIMEOUT = 15 * 60.0
_WAIT_APPLIED = re.compile(r"wait=", re.IGNORECASE)

OnUpdate = Callable[[Generation], None]


class WaitState:
    def __init__(
        self,
        start: str | Generation,
        timeout: float | None,
        on_update: OnUpdate | None,
        poll_interval: float,
        idempotency_key: str | None,
    ) -> None:
        self.id = start if isinstance(start, str) else start.id
        self.current: Generation | None = None if isinstance(start, str) else start
        self.timeout = DEFAULT_WAIT_TIMEOUT if timeout is None else timeout
        self.deadline = time.monotonic() + self.timeout
        self.on_update = on_update
        self.poll_interval = poll_interval
        self.idempotency_key = idempotency_key
        self.holds: bool | None = None  # unknown until the first answer tells
        self.etag: str | None = None
        self.last_seen = self.current.model_dump_json() if self.current else ""
        # Resumed from an id with someone watching: the state as it is now comes first (a held
        # request would report nothing until the generation is done), then the held requests.
        self.read_now = self.current is None and on_update is not None
        self.hold = 0
        self.asked_at = 0.0
        if self.current and on_update:
            on_update(self.current)

    def done(self) -> Generation | None:
        return self.current if self.current and self.current.is_terminal else None

    def timed_out(self) -> WaitTimeoutError:
        return WaitTimeoutError(self.id, self.current, self.timeout, self.idempotency_key)

    def reads_events(self, use_events: bool | None) -> bool:
        """Whether to wait on the event stream: one connection for the whole wait, where held GETs
        ask again every 50 s; by default when the deadline is longer than one held request."""
        return self.timeout > MAX_HOLD_SECONDS if use_events is None else use_events

    def take(self, generation: Generation) -> Generation | None:
        """A state the event stream showed: reported when it changed; returned when terminal."""
        self.current = generation
        seen = generation.model_dump_json()
        if seen != self.last_seen and self.on_update:
            self.on_update(generation)
        self.last_seen = seen
        return self.done()

    def after_stream(self) -> None:
        """The stream could not serve: what it showed was reported, the held GETs take it from there."""
        self.read_now = self.read_now and self.current is None

    def next_request(self) -> Request:
        """The next GET, or WaitTimeoutError at the deadline."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise self.timed_out()
        self.hold = (
            0 if self.holds is False or self.read_now else max(1, min(MAX_HOLD_SECONDS, int(remaining)))
        )
        headers: dict[str, str] = {}
        if self.hold:
            headers["prefer"] = f"wait={self.hold}"
        if self.etag and self.current:
            headers["if-none-match"] = self.etag
        self.asked_at = time.monotonic()
        return Request(
            "GET",
            f"/generations/{quote(self.id, safe='')}",
            headers=headers,
            idempotency_key=None,
            timeout=self.hold + _HOLD_MARGIN if self.hold else None,
            pass_statuses=(304,),
        )

    def answered(self, response: Response) -> float | None:
        """Takes an answer in: None to ask again at once, else the seconds to sleep first."""
        if self.hold:
            self.holds = bool(_WAIT_APPLIED.search(response.headers.get("preference-applied", "")))
        changed = False
        if response.status == 200:
            self.current = Generation.model_validate(response.data)
            self.etag = response.headers.get("etag")
            seen = self.current.model_dump_json()
            changed = seen != self.last_seen
            if changed and self.on_update:
                self.on_update(self.current)
            self.last_seen = seen
        if self.done() or self.read_now:
            self.read_now = False
            return None
        # A held request that came back early with news is asked again at once; else pace the polls.
        held_long = self.holds is True and time.monotonic() - self.asked_at >= 1.0
        if self.holds is True and (held_long or changed):
            return None
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        delay = (
            retry_after
            if retry_after is not None
            else self.poll_interval + random.random() * self.poll_interval / 2
        )
        return max(0.0, min(delay, self.deadline - time.monotonic()))
