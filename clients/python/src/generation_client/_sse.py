"""Reading a text/event-stream body: the WHATWG parsing rules for the fields the event stream uses
(``data``, ``retry``; ``id`` is also in each event's JSON), and the decisions of one
``generations.events()`` iteration (what to ask, when it is over, how long to wait before
reconnecting), shared by the sync and async loops so that they cannot drift apart."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from ._core import Request, Settings, retry_delay
from .errors import ApiError, ConnectionError
from .types import GenerationEvent

# Only these end a line: str.splitlines() (and httpx's iter_lines) also split on U+2028, U+0085, ...,
# which JSON leaves unescaped inside strings, so a prompt holding one would cut an event in two.
_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class SseMessage:
    data: str | None
    #: The reconnection delay the server asks for, in milliseconds.
    retry: int | None


class SseParser:
    """Fed the decoded text as it arrives; gives the messages each piece completes."""

    def __init__(self) -> None:
        self._buffer = ""
        self._data: list[str] | None = None
        self._retry: int | None = None
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
            if self._data is None and self._retry is None:
                return None
            message = SseMessage(None if self._data is None else "\n".join(self._data), self._retry)
            self._data, self._retry = None, None
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
        return None


class EventsState:
    """One iteration over a generation's events: where it is (the last event id), whether the
    generation is over, and the wait before the next connection. A clean end of the stream before a
    terminal event is a drop (a proxy, a server shutting down): reconnected after the server's
    ``retry`` delay with Last-Event-ID. Failures (network, 429, 5xx) are retried ``max_retries`` times
    in a row with the client's backoff; any other refusal (401, 404, ...) is raised."""

    def __init__(self, settings: Settings, generation_id: str, last_event_id: int | None) -> None:
        self.settings = settings
        self.path = f"/generations/{quote(generation_id, safe='')}/events"
        self.last = last_event_id
        self.failures = 0
        self.reconnect = 1.0
        self.ended = False

    def request(self) -> Request:
        headers = {"accept": "text/event-stream"}
        if self.last is not None:
            headers["last-event-id"] = str(self.last)
        self.ended = False
        return Request("GET", self.path, headers=headers)

    def take(self, message: SseMessage) -> GenerationEvent | None:
        """The event a message holds (None for a message without data)."""
        if message.retry is not None:
            self.reconnect = message.retry / 1000
        if message.data is None:
            return None
        event = GenerationEvent.model_validate_json(message.data)
        self.last = event.id
        self.failures = 0
        self.ended = event.data.is_terminal
        return event

    def after_failure(self, error: ApiError | ConnectionError) -> float:
        """The seconds to wait before reconnecting; raises ``error`` when it is not worth another try."""
        self.failures += 1
        delay = retry_delay(error, self.failures - 1, self.settings.max_retries)
        if delay is None:
            raise error
        return delay
