"""The base of the tests' small local web servers: quiet, and one way to send a whole answer; and the
accept loop of the raw-socket ones."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any


def accept_forever(sock: socket.socket, handler: Callable[[socket.socket], object],
                   stop: threading.Event | None = None) -> None:
    """Hand each connection accepted on `sock` to `handler`, on a thread of its own, until `sock` is
    closed or `stop` is set (looked at every 0.1 s: no accept waits longer)."""
    if stop is not None:
        sock.settimeout(0.1)
    while stop is None or not stop.is_set():
        try:
            conn, _ = sock.accept()
        except TimeoutError:
            continue
        except OSError:  # closed
            return
        threading.Thread(target=handler, args=(conn,), daemon=True).start()


class QuietHandler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # quiet tests
        pass

    def _send(self, status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)
