"""Reading a text/event-stream body: the WHATWG parsing rules for the fields the event streams use
(``data``, ``retry``, ``id``, ``event``), and the decisions of one iteration over a stream (what to
ask, when it is over, how long to wait before reconnecting): ``generations.events()``
(EventsState) and the account's ``events()`` (AccountEventsState), shared by the sync and async
loops so that they cannot drift apart."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import quote

from ._core import Request, Settings, retry_delay
from .errors import ApiError, ConnectionError
from .types import AccountEvent, AccountEventList, BatchEvent, GenerationEvent

T = TypeVar("T")

# Only these end a line: str.splitlines() (and httpx's iter_lines) also split on U+2028, U+0085, ...,
# which JSON leaves unescaped inside strings, so a prompt holding one would cut an event in two.
_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class SseMessage:
    data: str | None
    #: The reconnection delay the server asks for, in milliseconds.
    retry: int | None
    #: The message's ``id`` field (an event id, or the account stream's cursor).
    id: str | None = None
    #: The message's ``event`` field (the event type).
    event: str | None = None


class SseParser:
    """Fed the decoded text as it arrives; gives the messages each piece completes."""

    def __init__(self) -> None:
        self._buffer = ""
        self._data: list[str] | None = None
        self._retry: int | None = None
        self._id: str | None = None
        self._event: str | None = None
        self._first = True

    def feed(self, text: str) -> list[SseMessage]:
        if self._first and text:
            self._first = False
            text = text.removeprefix("\ufeff")
        buffer = self._buffer + text
        messages: list[SseMessage] = []
        position = 0
        while match := _LINE_END.search(buffer, position):
            # A CR at the very end may be the first half of a CRLF still on its way.
            if match.group() == "\r" and match.end() == len(buffer):
                break
            message = self._line(buffer[position : match.start()])
            if message is not None:
                messages.append(message)
            position = match.end()
        self._buffer = buffer[position:]
        return messages

    def _line(self, line: str) -> SseMessage | None:
        if line == "":
            if self._data is None and self._retry is None and self._id is None:
                return None
            data = None if self._data is None else "\n".join(self._data)
            message = SseMessage(data, self._retry, self._id, self._event)
            self._data, self._retry, self._id, self._event = None, None, None, None
            return message
        if line.startswith(":"):
            return None  # a comment: the keep-alive
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data = [*(self._data or []), value]
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "event":
            self._event = value
        return None


class StreamState(Generic[T]):
    """One iteration over an event stream: where it is (the last event id, sent as Last-Event-ID),
    whether it is over, and the wait before the next connection. A clean end of the stream before
    its last event is a drop (a proxy, a server shutting down): reconnected after the server's
    ``retry`` delay with Last-Event-ID. Failures (network, 429, 5xx) are retried ``max_retries``
    times in a row with the client's backoff; any other refusal (401, 404, ...) is raised."""

    def __init__(self, settings: Settings, path: str, last: str | None) -> None:
        self.settings = settings
        self.path = path
        self.last: str | None = last
        self.failures = 0
        self.reconnect = 1.0
        self.ended = False

    def request(self) -> Request:
        headers = {"accept": "text/event-stream"}
        if self.last is not None:
            headers["last-event-id"] = self.last
        self.ended = False
        return Request("GET", self.path, headers=headers)

    def pin_request(self) -> Request | None:
        """A request to make before the first connection (None: none)."""
        return None

    def pinned(self, page: object) -> None:
        """Told the answer of ``pin_request``."""

    def opened(self) -> None:
        """A stream is open (its 2xx answer has come)."""

    def take(self, message: SseMessage) -> T | None:
        """The item a message holds (None for a message without data)."""
        if message.retry is not None:
            self.reconnect = message.retry / 1000
        if message.data is None:
            # As EventSource: an id without data still moves the place to resume from.
            if message.id is not None:
                self.last = message.id
            return None
        item = self.read(message)
        self.failures = 0
        return item

    def read(self, message: SseMessage) -> T:
        raise NotImplementedError

    def after_failure(self, error: ApiError | ConnectionError) -> float:
        """The seconds to wait before reconnecting; raises ``error`` when it is not worth another try."""
        self.failures += 1
        delay = retry_delay(error, self.failures - 1, self.settings.max_retries)
        if delay is None:
            raise error
        return delay


class EventsState(StreamState[GenerationEvent]):
    """A generation's events: over after the event that leaves it terminal."""

    def __init__(self, settings: Settings, generation_id: str, last_event_id: int | None) -> None:
        path = f"/generations/{quote(generation_id, safe='')}/events"
        super().__init__(settings, path, None if last_event_id is None else str(last_event_id))

    def read(self, message: SseMessage) -> GenerationEvent:
        event = GenerationEvent.model_validate_json(message.data or "")
        self.last = str(event.id)
        self.ended = event.data.is_terminal
        return event


class BatchEventsState(StreamState[BatchEvent]):
    """A batch's own events: over after its end event (batch.completed, canceled or expired)."""

    def __init__(self, settings: Settings, batch_id: str, last_event_id: int | None) -> None:
        path = f"/batches/{quote(batch_id, safe='')}/events"
        super().__init__(settings, path, None if last_event_id is None else str(last_event_id))

    def read(self, message: SseMessage) -> BatchEvent:
        event = BatchEvent.model_validate_json(message.data or "")
        self.last = str(event.id)
        self.ended = event.type in ("batch.completed", "batch.canceled", "batch.expired")
        return event


class AccountEventsState(StreamState[AccountEvent]):
    """The account's events (GET /v1/events): never over; the cursor (each message's ``id``) is what
    Last-Event-ID resumes after. A stream that opened starts the count of failures in a row again:
    it is meant to stay open for hours, through restarts of the API."""

    def __init__(
        self, settings: Settings, last_event_id: str | None, on_open: Callable[[], None] | None
    ) -> None:
        super().__init__(settings, "/events", last_event_id)
        self.on_open = on_open

    def opened(self) -> None:
        self.failures = 0
        if self.on_open is not None:
            self.on_open()

    def pin_request(self) -> Request | None:
        """Before the first connection without a cursor, the read that pins "from now on": the
        cursor of the account's newest event (one JSON read), so that a drop before the first event
        loses nothing either."""
        if self.last is not None:
            return None
        return Request("GET", self.path, query={"limit": 1})

    def pinned(self, page: object) -> None:
        self.last = AccountEventList.model_validate(page).next_cursor

    def read(self, message: SseMessage) -> AccountEvent:
        if message.id is not None:
            self.last = message.id
        return AccountEvent.streamed(self.last or "", message.data or "")
