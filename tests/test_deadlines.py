"""A model call's whole attempt ends at `model.timeout`, even when a real loopback server trickles a
valid answer a byte at a time (each read arrives well inside the HTTP client's per-read timeout)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from httpd import accept_forever
from test_providers import TOOLS, settings_for

from hermes_exp.model.client import ModelClient
from hermes_exp.errors import ProviderError

ANSWER = {"id": "x", "object": "chat.completion", "model": "mock", "created": 0,
          "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi " * 40}}],
          "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class TrickleServer:
    """Answers every request with a valid 200 completion, sent one byte every `gap` seconds."""

    def __init__(self, gap: float = 0.02) -> None:
        body = json.dumps(ANSWER).encode()
        self.response = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body)) + body
        self.gap = gap
        self.sent: list[int] = []  # bytes sent on each connection before it ended
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        self._stop = threading.Event()

    def serve(self) -> None:
        accept_forever(self._sock, self._trickle, self._stop)

    def _trickle(self, conn: socket.socket) -> None:
        sent = 0
        with conn:
            conn.recv(65536)  # the request (small enough for one read)
            try:
                for i in range(len(self.response)):
                    if self._stop.is_set():
                        break
                    conn.sendall(self.response[i:i + 1])
                    sent += 1
                    time.sleep(self.gap)
            except OSError:  # the client hung up
                pass
        self.sent.append(sent)


@pytest.fixture
def trickle() -> Iterator[TrickleServer]:
    server = TrickleServer()
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    yield server
    server._stop.set()
    thread.join(5)
    server._sock.close()


def test_a_trickling_answer_cannot_outlast_model_timeout(trickle: TrickleServer) -> None:
    settings = settings_for("model.timeout=0.5", "model.retry.max_attempts=2", "model.retry.backoff_seconds=0.01")
    client = ModelClient(settings["model"], settings["provider"], trickle.base_url, "sk-test")
    with pytest.raises(ProviderError, match="Timeout") as info:
        client.complete([{"role": "user", "content": "hi"}], TOOLS)
    assert info.value.transient and "gave up after 2 attempts" in str(info.value)
    # the whole answer takes ~9 s to trickle: both attempts were cut off long before it was sent
    deadline = time.monotonic() + 5
    while len(trickle.sent) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(trickle.sent) == 2 and all(n < len(trickle.response) for n in trickle.sent), trickle.sent
