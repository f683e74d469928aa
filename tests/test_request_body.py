"""A model call's request body, on the wire and in memory, against a real loopback server: a retried call
sends the same bytes again (after an error status and after a connection lost before the answer), and
while the server holds a request unanswered, the client holds one copy of its body, the one being sent
(the HTTP client's request), and none once the call has returned."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator

import pytest
from httpd import accept_forever
from test_deadlines import ANSWER
from test_providers import FAST_RETRY, TOOLS, settings_for

from hermes_exp.model.client import ModelClient

BIG = 200_000  # characters of one message: no other block the agent's code holds is this large


class RecordingServer:
    """Answers the requests on each connection as `script` says, in order (an HTTP status, or "drop":
    close the connection without an answer; then 200 with a completion), and records each request's
    body and the blocks of at least BIG bytes allocated in hermes_exp/model/ that are alive while the
    request waits for its answer."""

    def __init__(self, script: list[str]) -> None:
        self.script = list(script)
        self.bodies: list[bytes] = []
        self.held: list[list[int]] = []  # per request: sizes of the agent's large blocks alive meanwhile
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        threading.Thread(target=accept_forever, args=(self._sock, self._answer_all), daemon=True).start()

    def _answer_all(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            while (body := _read_body(reader)) is not None:
                self.bodies.append(body)
                del body
                self.held.append(_agent_blocks())
                kind = self.script.pop(0) if self.script else "200"
                if kind == "drop":
                    return
                payload = json.dumps(ANSWER if kind == "200" else {"error": {"message": "busy"}}).encode()
                conn.sendall(b"HTTP/1.1 %s X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                             % (kind.encode(), len(payload)) + payload)

    def close(self) -> None:
        self._sock.close()


def _read_body(reader) -> bytes | None:
    length = 0
    if not reader.readline():
        return None
    while (line := reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return reader.read(length)


def _agent_blocks() -> list[int]:
    """Looked at again a few times: the client may not have dropped the copy it wrote yet."""
    for _ in range(20):
        snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, "*/hermes_exp/model/*")])
        held = [trace.size for trace in snapshot.traces if trace.size >= BIG]
        if not held:
            break
        time.sleep(0.01)
    return held


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start(1)
    try:
        yield
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("script", [["503"], ["drop"], ["500", "drop"]])
def test_a_retried_call_sends_the_same_body_and_only_the_copy_in_flight_is_held(traced, script) -> None:
    server = RecordingServer(script)
    try:
        settings = settings_for(*FAST_RETRY)
        client = ModelClient(settings["model"], settings["provider"], server.base_url, "sk-test")
        messages = [{"role": "user", "content": "x" * BIG}, {"role": "assistant", "content": "ok é"},
                    {"role": "user", "content": "again"}]
        reply = client.complete(messages, TOOLS)
    finally:
        server.close()
    assert reply.attempts == len(script) + 1
    first = json.loads(server.bodies[0])
    assert first["messages"] == messages and first["tools"] == TOOLS
    assert server.bodies == [server.bodies[0]] * (len(script) + 1)  # byte for byte, every attempt
    sent_copy = sys.getsizeof(server.bodies[0])  # the bytes object the HTTP client sends
    assert server.held == [[sent_copy]] * (len(script) + 1)
    assert _agent_blocks() == []  # the call returned: nothing of its body is left
