"""The text/event-stream reader, fed as the network hands bytes over: in any pieces, with any of the
three line ends, and with text that other line splitters cut (U+2028 in a prompt)."""

from __future__ import annotations

import pytest

from generation_client._sse import SseMessage, SseParser

STREAM = (
    "\ufeffretry: 1000\n\n"
    "id: 1\nevent: generation.created\n"
    'data: {"prompt":"a\u2028b\u0085c"}\n\n'
    ": keep-alive\n\n"
    "data: first line\r\ndata:second line\r\n\r\n"
    "data\rretry: x\r\r"
    "id: cursor-7\n\n"
    "data: unfinished"
)
EXPECTED = [
    SseMessage(None, 1000),
    SseMessage('{"prompt":"a\u2028b\u0085c"}', None, "1", "generation.created"),
    SseMessage("first line\nsecond line", None),
    SseMessage("", None),
    # An id alone is a message too (EventSource moves its Last-Event-ID on it).
    SseMessage(None, None, "cursor-7"),
]


def feed_in(pieces: list[str]) -> list[SseMessage]:
    parser = SseParser()
    return [message for piece in pieces for message in parser.feed(piece)]


def test_a_whole_stream_gives_its_messages_and_keeps_the_unfinished_one_back() -> None:
    assert feed_in([STREAM]) == EXPECTED


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_any_split_into_pieces_gives_the_same_messages(size: int) -> None:
    pieces = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    assert feed_in(pieces) == EXPECTED


def test_a_crlf_split_between_two_pieces_is_one_line_end_not_two() -> None:
    # Read as two line ends, the CR would end the line and the LF would end the message early.
    assert feed_in(["data: a\r", "\ndata: b\r", "\n\r", "\n"]) == [SseMessage("a\nb", None)]
