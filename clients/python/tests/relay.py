"""A front between the client and the real API that breaks chosen requests, as a load balancer or a
network would: ``drop-answer`` lets the request through and, once the API has processed it and its
answer starts to come back, resets the client's connection instead; ``answer`` answers it itself
(a proxy's 503, a gateway's 429) and the API never sees it; ``cut-stream`` passes an event stream's
answer through up to the end of its ``after_events``-th event (whatever the API's writes held),
then resets the connection, as a proxy or a network dropping a long-lived stream would. HTTP/1.1
without pipelining: an answer belongs to the last request sent on its connection. Threads, not
asyncio, so that a blocking client in the test's own thread cannot stall it."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Literal

_REASONS = {
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
_METHODS = (b"GET ", b"POST ", b"PUT ", b"DELETE ", b"PATCH ", b"HEAD ")


@dataclass
class Rule:
    #: The request line starts with this, e.g. ``POST /v1/generations `` (the space ends the path).
    request_line: str
    kind: Literal["drop-answer", "answer", "cut-stream"]
    status: int = 503
    headers: dict[str, str] = field(default_factory=lambda: {})
    #: How many matching requests it applies to (then it is spent).
    times: int = 1
    #: cut-stream: the Server-Sent Events (messages with an ``id:``) let through before the cut.
    after_events: int = 1


@dataclass(frozen=True)
class Seen:
    line: str
    #: The header block, lower-cased.
    head: str
    at: float


def _reset(sock: socket.socket) -> None:
    """Close with RST, as a dying middlebox would, rather than a clean FIN. The shutdown wakes the
    other thread's recv on this socket: until it returns, the kernel keeps the socket open."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RD)
    sock.close()


class FaultyFront:
    def __init__(self, target: tuple[str, int], rules: list[Rule]) -> None:
        self.target = target
        self.rules = rules
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def remaining(self) -> list[int]:
        return [r.times for r in self.rules]

    def lines(self, prefix: str) -> list[Seen]:
        return [r for r in self.requests if r.line.startswith(prefix)]

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            cut = _Cut()
            threading.Thread(target=self._requests, args=(client, upstream, cut), daemon=True).start()
            threading.Thread(target=self._answers, args=(client, upstream, cut), daemon=True).start()

    def _match(self, chunk: bytes) -> Rule | None:
        if not chunk.startswith(_METHODS):
            return None
        head = chunk.split(b"\r\n\r\n", 1)[0].decode("latin-1")
        line = head.split("\r\n", 1)[0]
        with self._lock:
            self.requests.append(Seen(line, head.lower(), time.monotonic()))
            for rule in self.rules:
                if rule.times > 0 and line.startswith(rule.request_line):
                    rule.times -= 1
                    return rule
        return None

    def _requests(self, client: socket.socket, upstream: socket.socket, cut: _Cut) -> None:
        try:
            while chunk := client.recv(65536):
                rule = self._match(chunk)
                if rule and rule.kind == "answer":
                    code = "rate_limited" if rule.status == 429 else "service_unavailable"
                    body = json.dumps({"error": {"code": code, "message": "from the front"}}).encode()
                    headers = {
                        "content-type": "application/json",
                        "content-length": str(len(body)),
                        "connection": "close",
                        **rule.headers,
                    }
                    status = f"HTTP/1.1 {rule.status} {_REASONS.get(rule.status, 'Error')}\r\n"
                    text = status + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
                    client.sendall(text.encode() + body)
                    break
                if chunk.startswith(_METHODS):
                    cut.start(rule)  # a new request on this connection: its own rule, or none
                upstream.sendall(chunk)
        except OSError:
            pass
        finally:
            client.close()
            upstream.close()

    def _answers(self, client: socket.socket, upstream: socket.socket, cut: _Cut) -> None:
        try:
            while chunk := upstream.recv(65536):
                if cut.rule and cut.rule.kind == "drop-answer":
                    # The API has answered, so it has processed the request: the client never hears of it.
                    _reset(client)
                    break
                if cut.rule and cut.rule.kind == "cut-stream":
                    if cut.forward(client, chunk):
                        _reset(client)
                        break
                    continue
                client.sendall(chunk)
        except OSError:
            pass
        finally:
            client.close()
            upstream.close()


class _Cut:
    """One connection's rule, set when its request matched, and a cut-stream's progress."""

    def __init__(self) -> None:
        self.rule: Rule | None = None
        self.pending = b""
        self.events = 0

    def start(self, rule: Rule | None) -> None:
        self.rule, self.pending, self.events = rule, b"", 0

    def forward(self, client: socket.socket, chunk: bytes) -> bool:
        """Sends whole SSE messages until the rule's count of events is reached: True to cut now.
        A message ends with a blank line (JSON data never holds one); the chunked encoding's framing
        travels with the message it precedes."""
        assert self.rule is not None
        self.pending += chunk
        while (end := self.pending.find(b"\n\n")) >= 0:
            message, self.pending = self.pending[: end + 2], self.pending[end + 2 :]
            client.sendall(message)
            if b"\nid: " in b"\n" + message:
                self.events += 1
                if self.events >= self.rule.after_events:
                    return True
        return False
